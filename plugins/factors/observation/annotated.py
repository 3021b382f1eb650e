"""``annotated``: a one-line status header, then a body made for reading, then hints.

The header says whether the call worked, how long it took, how big the output was and which
part is shown (``lines 1-40 of 40``), so a policy trained here learns to check status first.
File reads come back line-numbered; long output keeps its first and last lines under a budget;
common failures (missing file, unknown command, permission, timeout, an edit whose old text is
not in the file) get a one-line hint on what to try next.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from harnessgrid import hookimpl
from harnessgrid.levels import FactorLevel, ObservationLevel
from harnessgrid.models import Action, FormatError, ToolResult
from harnessgrid.observations import (
    action_label,
    clean,
    exit_code,
    head_tail,
    one_line,
)

LINE_CAP = 500  # characters shown of one line
MAIN_LINES, MAIN_BUDGET = 400, 10_000  # stdout / file text
ERR_LINES, ERR_BUDGET = 60, 3_000  # stderr
ERROR_CAP = 2_000  # a tool error message

_HINT_TABLE: tuple[tuple[str, str], ...] = (
    (r"does not exist|no such file or directory|cannot access",
     "check the path: list the directory that should hold it to see the exact names"),
    (r"command not found",
     ("command not found: check its spelling, or use a program that is installed "
      "(python3, sed, awk, grep, find)")),
    (r"permission denied|read-only file system|operation not permitted",
     "permission denied: only the workspace is writable; keep your files inside it"),
    (r"text to replace was not found|old text found 0 times",
     ("the old text must match the file exactly: read the file again and copy the current "
      "text, spaces and line breaks included")),
    (r"occurs \d+ times|found \d+ times, expected 1",
     "the old text is not unique: include more of the surrounding lines"),
    (r"is a directory",
     "that path is a directory: list it instead of reading or writing it"),
    (r"not a valid regular expression",
     "escape regular-expression characters such as ( [ . * + ? with a backslash"),
    (r"outside the workspace|climbs out of the workspace",
     "use paths relative to the workspace"),
)
_HINTS = tuple((re.compile(pattern, re.IGNORECASE), hint) for pattern, hint in _HINT_TABLE)
_TIMEOUT_HINT = ("the command ran out of time: make it faster (less input, fewer iterations) or "
                 "split the work into several shorter commands")


def _status(result: ToolResult) -> str:
    if result.timed_out:
        return "timed out"
    if result.error is not None:
        return "failed"
    code = exit_code(result.exit_code)
    if result.exit_code not in (None, 0):
        return f"failed, exit {'?' if code is None else code}"
    return "ok"


def _timing(seconds: float) -> list[str]:
    """The header's time field: none when the time is not known (NaN: the episode hides
    durations, ``EpisodeLimits.durations``); ``?s`` for a clock's nonsense (negative, huge)
    rather than a 300-digit number."""
    if math.isnan(seconds):
        return []
    return [f"{seconds:.2f}s" if math.isfinite(seconds) and 0 <= seconds < 1e7 else "?s"]


def _lines(text: str) -> list[str]:
    """Lines of ``text``; a final newline ends the last line rather than starting a new one."""
    if not text:
        return []
    parts = text.split("\n")
    return parts[:-1] if parts[-1] == "" else parts


def _cut_line(line: str) -> str:
    if len(line) <= LINE_CAP:
        return line
    return f"{line[:LINE_CAP]} ... [+{len(line) - LINE_CAP:,} chars]"


def _window(lines: list[str], max_lines: int, budget: int) -> tuple[int, int]:
    """``(h, t)``: show ``lines[:h]`` and ``lines[t:]``; everything when it fits."""
    n = len(lines)
    if n <= max_lines and sum(len(_cut_line(x)) + 1 for x in lines) <= budget:
        return n, n
    head, used = 0, 0
    while head < n and head < max_lines * 2 // 3:
        cost = len(_cut_line(lines[head])) + 1
        if used + cost > budget * 2 // 3:
            break
        head, used = head + 1, used + cost
    tail, used = n, 0
    while tail > head and n - tail < max_lines // 3:
        cost = len(_cut_line(lines[tail - 1])) + 1
        if used + cost > budget // 3:
            break
        tail, used = tail - 1, used + cost
    return head, tail


def _shown(h: int, t: int, n: int, unit: str = "lines") -> str:
    if n == 0:
        return f"0 {unit}"
    if h == t == n:
        return f"{unit} 1-{n} of {n}"
    if t == n:
        return f"{unit} 1-{h} of {n}"
    first = f"1-{h} and " if h else ""
    return f"{unit} {first}{t + 1}-{n} of {n}"


def _numbered(lines: list[str], h: int, t: int) -> str:
    width = len(str(len(lines)))
    row = [f"{i + 1:>{width}}| {_cut_line(lines[i])}" for i in range(h)]
    if t > h:
        row.append(f"{'':>{width}}  ... {t - h:,} lines not shown ...")
    row += [f"{i + 1:>{width}}| {_cut_line(lines[i])}" for i in range(t, len(lines))]
    return "\n".join(row)


def _plain(lines: list[str], h: int, t: int) -> str:
    row = [_cut_line(x) for x in lines[:h]]
    if t > h:
        row.append(f"... {t - h:,} lines not shown ...")
    row += [_cut_line(x) for x in lines[t:]]
    return "\n".join(row)


def _hints(result: ToolResult) -> list[str]:
    text = f"{result.error or ''}\n{result.stderr[-ERR_BUDGET:]}"
    found = [_TIMEOUT_HINT] if result.timed_out else []
    if result.exit_code == 127 and "command not found" not in text:
        text += "\ncommand not found"
    found += [hint for pattern, hint in _HINTS if pattern.search(text)]
    return [f"hint: {h}" for h in found[:2]]


class AnnotatedObservation(ObservationLevel):
    """Header line, readable body (numbered for file reads), hints on common errors."""

    name = "annotated"
    description = ("One-line status header, line-numbered file views, head/tail of long output "
                   "and hints on common errors.")

    def format(self, action: Action, result: ToolResult) -> str:
        status, label = _status(result), action_label(action)
        timing = _timing(result.duration_s)
        if result.error is not None:
            error, _, dropped = head_tail(result.error, ERROR_CAP, 0)
            body = f"error: {error}" + (f" ... [+{dropped:,} chars]" if dropped else "")
            header = " | ".join([f"[{status}] {label}", *timing])
            return clean("\n".join([header, body, *_hints(result)]))
        out, err = _lines(result.output), _lines(result.stderr)
        size = f"{len(result.output) + len(result.stderr):,} chars"
        h, t = _window(out, MAIN_LINES, MAIN_BUDGET)
        unit = {"list": "entries", "search": "matches"}.get(action.kind, "lines")
        if action.kind == "search" and result.output == "no matches":
            shown = "0 matches"
        else:
            shown = _shown(h, t, len(out), unit)
        parts = []
        if action.kind == "read" and result.exit_code in (None, 0):
            parts.append(_numbered(out, h, t) if out else "(empty file)")
        elif out:
            parts.append(_plain(out, h, t))
        if err:
            eh, et = _window(err, ERR_LINES, ERR_BUDGET)
            shown += f"; stderr {_shown(eh, et, len(err))}"
            parts.append("--- stderr ---\n" + _plain(err, eh, et))
        if not parts:
            parts.append("(no output)")
        if result.truncated:
            shown += "; output was cut by the sandbox"
        if (h, t) != (len(out), len(out)) and action.kind == "read":
            parts.append(f"[file continues: print other lines with sed -n 'FROM,TOp' "
                         f"{one_line(action.args['path'], 100)}]")
        header = " | ".join([f"[{status}] {label}", *timing, size, shown])
        return clean("\n".join([header, *parts, *_hints(result)]))

    def format_error(self, error: FormatError) -> str:
        message, _, dropped = head_tail(error.message, ERROR_CAP, 0)
        more = f" ... [+{dropped:,} chars]" if dropped else ""
        return clean(f"[format error] the call could not be understood, so it was not run\n"
                     f"{message}{more}\n"
                     "hint: correct the call as described above and send it again")


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield AnnotatedObservation
