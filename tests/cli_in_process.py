"""The real ``harnessgrid`` entry point, called in-process (a subprocess per call costs about
half a second of imports): for tests that run many CLI commands."""

from __future__ import annotations

import sys

import pytest


def hg_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *args: str) -> tuple[int, str, str]:
    """``harnessgrid ARGS``: (exit code, stdout, stderr)."""
    from harnessgrid.cli import main

    monkeypatch.setattr(sys, "argv", ["harnessgrid", *args])
    capsys.readouterr()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
