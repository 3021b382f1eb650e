"""``raw``: the output exactly as the tool produced it, under one hard cap.

The least processed view: stdout then stderr, no headers, no JSON, errors as plain text. Long
output is simply cut at :data:`CAP` characters with a short marker, as a bare terminal with a
scrollback limit would; the model gets no hint about how much was lost or where.
"""

from __future__ import annotations

from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.levels import FactorLevel, ObservationLevel
from harnessgrid.models import Action, FormatError, ToolResult
from harnessgrid.observations import clean, exit_code

#: The most characters of tool output shown; beyond it the text is cut with :data:`CUT`.
CAP = 10_000
CUT = "[output cut]"
EMPTY = "(no output)"


def _capped(text: str, cut: bool = False) -> str:
    if len(text) > CAP or cut:
        body = text[:CAP]
        return body + ("" if body.endswith("\n") or not body else "\n") + CUT
    return text


class RawObservation(ObservationLevel):
    """Verbatim output, one cap, errors as plain text."""

    name = "raw"
    description = "Output verbatim (stdout then stderr), cut at 10,000 characters."

    def format(self, action: Action, result: ToolResult) -> str:
        if result.error is not None:
            return clean(_capped(f"Error: {result.error}"))
        text = result.output
        if result.stderr:
            sep = "" if not text or text.endswith("\n") else "\n"
            text = f"{text}{sep}{result.stderr}"
        text = _capped(text, cut=result.truncated)
        tail = []
        if result.timed_out:
            tail.append("[timed out]")
        elif result.exit_code not in (None, 0):
            code = exit_code(result.exit_code)
            tail.append(f"[exit code {'?' if code is None else code}]")
        if tail:
            sep = "" if not text or text.endswith("\n") else "\n"
            text = f"{text}{sep}{' '.join(tail)}"
        return clean(text) if text else EMPTY

    def format_error(self, error: FormatError) -> str:
        return clean(_capped(f"Error: {error.message}"))


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield RawObservation
