"""``structured``: every result as one JSON object with fixed keys.

``{"ok", "exit_code", "stdout", "stderr", "truncated", "error"}`` in that order, so a policy can
read status without parsing prose. Each long text field keeps its first and last
:data:`HEAD`/:data:`TAIL` characters with a marker saying how many were dropped in between, and
``truncated`` is true whenever anything was cut (here or already by the sandbox).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.levels import FactorLevel, ObservationLevel
from harnessgrid.models import Action, FormatError, ToolResult
from harnessgrid.observations import clean, exit_code, head_tail

HEAD = 2_000
TAIL = 2_000
KEYS = ("ok", "exit_code", "stdout", "stderr", "truncated", "error")


def _field(text: str) -> tuple[str, bool]:
    """A text field cut head+tail, and whether it was cut."""
    head, tail, dropped = head_tail(clean(text), HEAD, TAIL)
    if not dropped:
        return head, False
    return f"{head}\n[... {dropped:,} chars dropped ...]\n{tail}", True


def _dump(values: dict[str, Any]) -> str:
    return json.dumps({k: values[k] for k in KEYS}, ensure_ascii=False)


class StructuredObservation(ObservationLevel):
    """One JSON object per result, long fields cut head + tail."""

    name = "structured"
    description = ("JSON {ok, exit_code, stdout, stderr, truncated, error}; long fields cut "
                   "to 2,000 + 2,000 chars.")

    def format(self, action: Action, result: ToolResult) -> str:
        stdout, cut_out = _field(result.output)
        stderr, cut_err = _field(result.stderr)
        error: str | None = None
        cut_error = False
        if result.error is not None:
            error, cut_error = _field(result.error)
        elif result.timed_out:
            error = "timed out: the command was stopped before it finished"
        return _dump({
            "ok": result.ok,
            "exit_code": exit_code(result.exit_code),
            "stdout": stdout,
            "stderr": stderr,
            "truncated": result.truncated or cut_out or cut_err or cut_error,
            "error": error,
        })

    def format_error(self, error: FormatError) -> str:
        message, cut = _field(error.message)
        return _dump({"ok": False, "exit_code": None, "stdout": "", "stderr": "",
                      "truncated": cut, "error": f"invalid tool call: {message}"})


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield StructuredObservation
