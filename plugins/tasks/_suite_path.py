"""What the on-disk suite loaders (``clawgym:PATH``, ``pinchbench:PATH``) check first."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError


def suite_path(kind: str, argument: str | None, options: Mapping[str, Any],
               allowed: set[str]) -> Path:
    """The resolved path of ``kind:PATH``, after rejecting unknown loader options."""
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"unknown option(s) for {kind} suites: {', '.join(unknown)}",
                          hint=f"options: {', '.join(sorted(allowed))}")
    if not argument:
        raise ConfigError(f"the {kind} suite needs a path", hint=f"write {kind}:PATH")
    return Path(argument).expanduser().resolve()
