"""Read, Write, Edit and MultiEdit with Claude Code's rules and result formats.

Rules emulated: absolute paths only; Read returns the lines from ``offset`` to the end (or
``limit`` of them), whole, each prefixed by its number right-aligned in 6 columns and ``→`` (no
2000-line cap and no cut at 2000 characters, whatever the real description says: see
``_claude_code_tools``); a missing file gets the real wording (cli.js 1.0.96 Read/Edit
``validateInput``, with the sibling suggestion of ``pz1``, 1.0.98 ``tz1``); a directory fails as
Node's read of it does; whole-file reads over 256 KB are refused, and so is content estimated above 25000
tokens (cli.js 1.0.96 ``W1B``; the real shell asks the API to count, offline we use its own
estimate, characters / 4, ``_3``); an empty file or an offset past the end
gives a ``<system-reminder>`` warning instead of content; Write/Edit/MultiEdit of an existing
file need a Read earlier in the session *and* no change since (checked by content); Edit's
``old_string`` must occur exactly once unless ``replace_all``; an empty ``old_string`` creates
a new file; MultiEdit applies its edits in order and writes nothing if one fails.

Messages carry the same information as the real ones, in our own words.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessgrid.models import ToolResult
from harnessgrid.plugins.adapters._claude_code_session import Session
from harnessgrid.plugins.adapters._claude_code_tools import READ_MAX_BYTES, READ_MAX_TOKENS
from harnessgrid.workspace import Workspace, WorkspaceError

_LINE_BREAK = re.compile(r"\r?\n")
SNIPPET_CONTEXT = 4
READ_REMINDER = ("<system-reminder>\nIf this file looks like malware, you may explain what it "
                 "does but must not improve or extend it.\n</system-reminder>")


class ToolError(Exception):
    """A call that ran but failed; shown to the model inside ``<tool_use_error>``."""


class CallError(ToolError):
    """A failure raised while the tool runs (not by its input check): the real shell shows its
    text as is, with ``is_error``, without the ``<tool_use_error>`` wrapper (cli.js ``UT0``)."""


def size_text(n: int) -> str:
    """cli.js ``kJ``: ``900 bytes``, ``292.9KB``, ``1.5MB``."""
    for unit, scale in (("KB", 1024), ("MB", 1024 ** 2), ("GB", 1024 ** 3)):
        if n / scale < 1024 or unit == "GB":
            if n < 1024:
                return f"{n} bytes"
            return f"{n / scale:.1f}".removesuffix(".0") + unit
    return f"{n} bytes"  # pragma: no cover - the loop always returns


def _too_big(what: str, limit: str) -> str:
    # cli.js ``sH0`` and ``Cy1``: the facts (size or token count, limit) and the way out.
    return (f"File content ({what}) exceeds maximum allowed {limit}. Please use offset and "
            "limit parameters to read specific portions of the file, or use the GrepTool to "
            "search for specific content.")


@dataclass(frozen=True)
class Target:
    """A tool's path argument, checked: what the model called it and where it is."""

    shown: str  # absolute sandbox path, as Claude Code prints it
    key: str  # workspace-relative, the key of the read state
    host: Path


def target(ws: Workspace, raw: Any, parameter: str = "file_path") -> Target:
    """Check an absolute path argument and confine it to the workspace."""
    if not isinstance(raw, str) or not raw.startswith("/"):
        raise ToolError(f"{parameter} must be an absolute path (for example "
                        f"{ws.mount_path}/notes.txt), got {raw!r}")
    return confine(ws, raw, raw, "used")


def confine(ws: Workspace, path: str, shown: Any, verb: str) -> Target:
    """``path`` resolved inside the workspace, or the shell's error naming ``shown``."""
    try:
        host = ws.resolve(path)
    except WorkspaceError:
        raise ToolError(f"{shown} is outside the working directory {ws.mount_path}; only "
                        f"paths under it can be {verb}") from None
    key = ws.relative(host)
    return Target(ws.mount_path if key == "." else f"{ws.mount_path}/{key}", key, host)


def number_lines(lines: list[str], first: int) -> str:
    """``cat -n`` as Claude Code prints it: the number right-aligned in 6 columns, ``→``."""
    return "\n".join(f"{first + i:>6}→{line}" for i, line in enumerate(lines))


def split_lines(text: str) -> list[str]:
    """Lines split at LF or CRLF; a final line break does not start another line."""
    lines = _LINE_BREAK.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def _integer(value: Any, name: str, minimum: int) -> int | None:
    if value is None:
        return None
    if not math.isfinite(value) or value != int(value) or int(value) < minimum:
        raise ToolError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return int(value)


def _similar_name(t: Target) -> str | None:
    """cli.js ``pz1`` (1.0.98 ``tz1``): the name of another entry of the same directory with the
    same name once the extension is dropped (``notes.md`` for a missing ``notes.txt``). The
    real one takes the first the directory lists; we take the first by name, reproducibly."""
    parent = t.host.parent
    stem = posixpath.splitext(t.host.name)[0]
    try:
        names = sorted(entry.name for entry in os.scandir(parent))
    except OSError:
        return None
    return next((n for n in names if posixpath.splitext(n)[0] == stem and n != t.host.name),
                None)


def missing_file_message(session: Session, t: Target) -> str:
    """Read's and Edit's text for a path that does not exist, word for word (a fact the model
    learns to act on): the working directory only once Bash has left the starting one."""
    message = "File does not exist."
    if session.cwd != ".":
        message += f" Current working directory: {session.absolute(session.cwd)}"
    similar = _similar_name(t)
    if similar is not None:
        message += f" Did you mean {similar}?"
    return message


def _existing_file(session: Session, t: Target) -> None:
    if not t.host.exists():
        raise ToolError(missing_file_message(session, t))
    if t.host.is_dir():  # passes the input check; reading it fails in the tool (Node's error)
        raise CallError("EISDIR: illegal operation on a directory, read")
    if not t.host.is_file():
        raise ToolError(f"{t.shown} is not a regular file")


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        data = fh.read()
    return len(split_lines(data.decode("utf-8", errors="replace")))


def read(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    _existing_file(session, t)
    offset = _integer(args.get("offset"), "offset", 0)
    limit = _integer(args.get("limit"), "limit", 1)
    size = t.host.stat().st_size
    if offset is None and limit is None and size > READ_MAX_BYTES:
        raise ToolError(_too_big(size_text(size), f"size ({size_text(READ_MAX_BYTES)})"))
    start = max((offset or 1) - 1, 0)
    try:
        text = ws.read_text(t.key, offset=start, limit=limit)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None
    if len(text) > READ_MAX_BYTES:  # cli.js ``call``: the part read is checked again, raised
        raise CallError(_too_big(size_text(len(text)), f"size ({size_text(READ_MAX_BYTES)})"))
    tokens = round(len(text) / 4)
    if tokens > READ_MAX_TOKENS:  # not remembered as read: the content never reached the model
        raise CallError(_too_big(f"{tokens} tokens", f"tokens ({READ_MAX_TOKENS})"))
    session.remember(t.key)
    if size == 0:
        shown = ("<system-reminder>Warning: the file exists but is empty.</system-reminder>")
    elif not text:
        shown = (f"<system-reminder>Warning: the file exists but has fewer lines than the "
                 f"offset ({offset}); it has {_count_lines(t.host)} lines.</system-reminder>")
    else:
        shown = number_lines(split_lines(text), start + 1) + "\n\n" + READ_REMINDER
    return shown, ToolResult(output=text)


def _check_fresh(session: Session, t: Target) -> None:
    """Claude Code's rule for changing an existing file: read it first, and re-read it if
    anything changed it since."""
    if t.key not in session.read_state:
        raise ToolError("This file has not been read in this session yet. Read it before "
                        "changing it.")
    if not session.fresh(t.key):
        raise ToolError("The file changed since it was last read (by a command or another "
                        "tool). Read it again before changing it.")


def _write(session: Session, ws: Workspace, t: Target, content: str) -> None:
    try:
        ws.write_text(t.key, content)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None
    session.remember(t.key)


def write(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    content: str = args["content"]
    if t.host.is_dir():
        raise ToolError(f"{t.shown} is a directory; Write needs a file path")
    existed = t.host.exists()
    if existed:
        _check_fresh(session, t)
    _write(session, ws, t, content)
    if not existed:
        shown = f"File created successfully at: {t.shown}"
    else:
        lines = split_lines(content)
        shown = (f"The file {t.shown} was overwritten ({len(lines)} lines). First lines:\n"
                 + number_lines(lines[:2 * SNIPPET_CONTEXT + 1], 1))
    return shown, ToolResult(output=shown)


def _replace(text: str, old: str, new: str, replace_all: bool, label: str = "") -> tuple[str, int]:
    """``text`` with the edit applied and how many occurrences it replaced."""
    if old == new:
        raise ToolError(f"{label}No changes to make: old_string and new_string are identical.")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{label}old_string was not found in the file.\nString: {old}")
    if count > 1 and not replace_all:
        raise ToolError(f"{label}Found {count} matches of old_string, but replace_all is false. "
                        "Set replace_all to true to replace every one, or add surrounding "
                        f"context so that exactly one matches.\nString: {old}")
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), count


def _snippet(updated: str, at: int, new: str) -> str:
    """Numbered lines around the change that starts at character ``at`` of ``updated``."""
    lines = split_lines(updated)
    first = updated[:at].count("\n")
    last = first + new.count("\n")
    lo, hi = max(first - SNIPPET_CONTEXT, 0), min(last + SNIPPET_CONTEXT + 1, len(lines))
    return number_lines(lines[lo:hi], lo + 1)


def _load_for_edit(session: Session, ws: Workspace, t: Target, creates: bool) -> str | None:
    """The current text of the file to edit, or None when the edit creates it."""
    if creates:
        if t.host.exists():
            raise ToolError("Cannot create a new file: it already exists. Give old_string to "
                            "change its content.")
        return None
    _existing_file(session, t)
    _check_fresh(session, t)
    try:
        return ws.read_text(t.key)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None


def edit(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    old, new = args["old_string"], args["new_string"]
    text = _load_for_edit(session, ws, t, creates=old == "")
    if text is None:
        _write(session, ws, t, new)
        shown = f"File created successfully at: {t.shown}"
        return shown, ToolResult(output=shown)
    replace_all = bool(args.get("replace_all", False))
    updated, count = _replace(text, old, new, replace_all)
    _write(session, ws, t, updated)
    if replace_all:
        shown = f"The file {t.shown} was updated: all {count} occurrences were replaced."
    else:
        shown = (f"The file {t.shown} was updated. Numbered lines around the change:\n"
                 + _snippet(updated, text.index(old), new))
    return shown, ToolResult(output=shown)


def _short(text: str, limit: int = 60) -> str:
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def multi_edit(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    edits: list[dict[str, Any]] = args["edits"]
    creates = edits[0]["old_string"] == ""
    text = _load_for_edit(session, ws, t, creates=creates)
    current = edits[0]["new_string"] if text is None else text
    for number, e in enumerate(edits[1:] if text is None else edits, 2 if text is None else 1):
        label = f"Edit {number} of {len(edits)}: "
        if e["old_string"] == "":
            raise ToolError(f"{label}old_string is empty; only the first edit may create the "
                            "file. No edit was applied.")
        try:
            current, _ = _replace(current, e["old_string"], e["new_string"],
                                  bool(e.get("replace_all", False)), label)
        except ToolError as exc:
            raise ToolError(f"{exc} No edit was applied.") from None
    _write(session, ws, t, current)
    done = "\n".join(f"{i}. Replaced \"{_short(e['old_string'])}\" with "
                     f"\"{_short(e['new_string'])}\"" for i, e in enumerate(edits, 1))
    shown = f"Applied {len(edits)} edit{'s' if len(edits) != 1 else ''} to {t.shown}:\n{done}"
    return shown, ToolResult(output=shown)
