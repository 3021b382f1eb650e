"""Micro ``observation`` levels: three short, deterministic layouts of the same result.

- ``micro_plain``: the output as it is (stdout then stderr), ``[exit N]`` on failure, errors
  as ``error: ...``; cut at :data:`CAP` characters;
- ``micro_record``: one compact JSON object, ``{"ok":true,"out":"..."}`` or
  ``{"ok":false,"code":1,"out":"...","err":"..."}``;
- ``micro_lines``: a one-line header (``# read a.txt: ok, 2 lines``), then the body, file
  reads with line numbers (``1| hello``).

No timings or sizes that vary between runs are shown, so the same episode always renders the
same text (which also keeps a tokenizer trained on these texts stable).
"""

from __future__ import annotations

import json

from harnessgrid.levels import ObservationLevel
from harnessgrid.models import Action, FormatError, ToolResult

from ._text import cap, clean, exit_text, one_line

#: The most characters of one text field shown; the rest is cut with a ``…(+N)`` marker.
CAP = 400
_MAIN = {"read": "path", "write": "path", "edit": "path", "list": "path",
         "search": "pattern", "shell": "command", "finish": "message"}


def _combined(result: ToolResult) -> str:
    text = result.output
    if result.stderr:
        text += ("" if not text or text.endswith("\n") else "\n") + result.stderr
    return text


class MicroPlain(ObservationLevel):
    """Verbatim output, a short failure marker, one cap."""

    name = "micro_plain"
    description = "Output verbatim (stdout then stderr), [exit N] on failure, cut at 400 chars."

    def format(self, action: Action, result: ToolResult) -> str:
        if result.error is not None:
            return clean(cap(f"error: {result.error}", CAP))
        text = cap(_combined(result), CAP).rstrip("\n")
        if result.timed_out:
            text += "\n[timed out]"
        elif result.exit_code not in (None, 0):
            text += f"\n[exit {exit_text(result.exit_code)}]"
        return clean(text.strip("\n")) or "(empty)"

    def format_error(self, error: FormatError) -> str:
        return clean(cap(f"error: {error.message}", CAP))


class MicroRecord(ObservationLevel):
    """One compact JSON object per result."""

    name = "micro_record"
    description = 'Compact JSON: {"ok":true,"out":...} or {"ok":false,"code":N,"err":...}.'

    def format(self, action: Action, result: ToolResult) -> str:
        out: dict[str, object] = {"ok": result.ok}
        if result.exit_code not in (None, 0):
            code = exit_text(result.exit_code)
            out["code"] = int(code) if code != "?" else code
        if result.output:
            out["out"] = cap(clean(result.output), CAP)
        err = result.error if result.error is not None else result.stderr
        if result.timed_out:
            err = (err + "\n" if err else "") + "timed out"
        if err:
            out["err"] = cap(clean(err), CAP)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))

    def format_error(self, error: FormatError) -> str:
        return json.dumps({"ok": False, "err": cap(clean(error.message), CAP)},
                          ensure_ascii=False, separators=(",", ":"))


class MicroLines(ObservationLevel):
    """A status header, then the body; file reads with numbered lines."""

    name = "micro_lines"
    description = "Header '# read a.txt: ok, 2 lines', then the body; file reads line-numbered."

    def format(self, action: Action, result: ToolResult) -> str:
        label = f"{action.kind} {one_line(action.args[_MAIN[action.kind]], 40)}".rstrip()
        if result.error is not None:
            return clean(f"# {label}: failed\n{cap(result.error, CAP)}")
        if result.timed_out:
            status = "timed out"
        elif result.exit_code not in (None, 0):
            status = f"exit {exit_text(result.exit_code)}"
        else:
            status = "ok"
        body = cap(_combined(result), CAP).rstrip("\n")
        if action.kind == "read" and status == "ok":
            lines = body.split("\n") if body else []
            count = f"{len(lines)} line{'' if len(lines) == 1 else 's'}"
            shown = "\n".join(f"{i}| {line}" for i, line in enumerate(lines, 1))
            return clean(f"# {label}: {status}, {count}" + (f"\n{shown}" if shown else ""))
        return clean(f"# {label}: {status}" + (f"\n{body}" if body else ""))

    def format_error(self, error: FormatError) -> str:
        return clean(f"# rejected: {cap(error.message, CAP)}")


#: In level order (index 0, 1, 2 of the micro space).
LEVELS: tuple[type[ObservationLevel], ...] = (MicroPlain, MicroRecord, MicroLines)
