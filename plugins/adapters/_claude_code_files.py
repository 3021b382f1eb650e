"""Read, Write, Edit and MultiEdit with Claude Code's rules and result formats.

Rules emulated: absolute paths only; Read returns the lines from ``offset`` to the end (or
``limit`` of them), whole, each prefixed by its number right-aligned in 6 columns and ``→``
(cli.js ``vy``; lines are what ``split(/\r?\n/)`` gives, so the empty line after a final line
break is numbered too, and a part that is empty gets the "shorter than the provided offset"
warning, as cli.js ``vVA`` does; no 2000-line cap and no cut at 2000 characters, whatever the
real description says: see ``_claude_code_tools``); a missing file gets the real wording (cli.js 1.0.96 Read/Edit
``validateInput``, with the sibling suggestion of ``pz1``, 1.0.98 ``tz1``); a directory fails as
Node's read of it does; whole-file reads over 256 KB are refused, and so is content estimated above 25000
tokens (cli.js 1.0.96 ``W1B``; the real shell asks the API to count, offline we use its own
estimate, characters / 4, ``_3``); an empty file or an offset past the end
gives a ``<system-reminder>`` warning instead of content (the real text); Write/Edit/MultiEdit
of an existing file need a Read earlier in the session *and* no change since (checked by content); Edit's
``old_string`` must occur exactly once unless ``replace_all``; an empty ``old_string`` creates
a new file; MultiEdit applies its edits in order and writes nothing if one fails.

Result texts are the real ones (cli.js 1.0.98 ``mapToolResultToToolResultBlockParam`` of Read,
Write, Edit, MultiEdit; checked against recorded outputs of the CLI in
``tests/fixtures/claude_code/outputs-1.0.98.json``); input-check errors carry the same
information as the real ones, in our own words.
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
from harnessgrid.plugins.adapters._js import js_len, js_prefix
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError

_LINE_BREAK = re.compile(r"\r?\n")
SNIPPET_CONTEXT = 4  # cli.js ``z0B``: lines shown before and after an edit
WRITE_MAX_LINES = 16_000  # cli.js ``gPB``: an overwrite shows at most this many lines
#: cli.js ``cF5``, appended where an overwritten file's listing is cut.
CLIPPED = ("<response clipped><NOTE>To save on context only part of this file has been shown to "
           "you. You should retry this tool after you have searched inside the file with Grep in "
           "order to find the line numbers of what you are looking for.</NOTE>")
#: cli.js result headers (the model reads what follows them as ``cat -n`` output).
UPDATED = "The file {} has been updated. Here's the result of running `cat -n` on a snippet of \
the edited file:\n"
#: 2.x (2.1.332): what Write and Edit add after their result, and the empty-file warning.
CURRENT = " (file state is current in your context \u2014 no need to Read it back)"
EMPTY_V2 = "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
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


def number_lines(content: str, first: int) -> str:
    """cli.js ``vy``: ``cat -n`` as Claude Code prints it, the number right-aligned in 6
    columns and ``→``; every piece ``split(/\r?\n/)`` gives is a line (an empty last one too),
    and empty content is empty."""
    if not content:
        return ""
    return "\n".join(f"{first + i:>6}→{line}" for i, line in enumerate(_LINE_BREAK.split(content)))


def number_lines_v2(content: str, first: int) -> str:
    """2.x's numbering: the number, a tab, the line (no padding, no arrow); as in 1.x every
    piece of the split is a line."""
    if not content:
        return ""
    return "\n".join(f"{first + i}\t{line}" for i, line in enumerate(_LINE_BREAK.split(content)))


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


def missing_file_message(session: Session, t: Target, v2: bool = False) -> str:
    """Read's and Edit's text for a path that does not exist, word for word (a fact the model
    learns to act on): the working directory only once Bash has left the starting one (2.x:
    always, in its own words)."""
    message = "File does not exist."
    if v2:
        message += f" Note: your current working directory is {session.absolute(session.cwd)}."
    elif session.cwd != ".":
        message += f" Current working directory: {session.absolute(session.cwd)}"
    similar = _similar_name(t)
    if similar is not None:
        message += f" Did you mean {similar}?"
    return message


def _existing_file(session: Session, t: Target, v2: bool = False) -> None:
    if not t.host.exists():  # 2.x: a failure of the tool, shown bare
        error = CallError if v2 else ToolError
        raise error(missing_file_message(session, t, v2))
    if t.host.is_dir():  # passes the input check; reading it fails in the tool (Node's error)
        raise CallError("EISDIR: illegal operation on a directory, read"
                        + (f" '{t.shown}'" if v2 else ""))
    if not t.host.is_file():
        raise ToolError(f"{t.shown} is not a regular file")


def _count_lines(path: Path) -> int:
    """cli.js ``vVA``'s ``totalLines``: the pieces of ``split(/\r?\n/)`` (an empty file has 1)."""
    with open(path, "rb") as fh:
        data = fh.read()
    return len(_LINE_BREAK.split(data.decode("utf-8", errors="replace")))


def read(session: Session, ws: Workspace, args: dict[str, Any],
         v2: bool = False) -> tuple[str, ToolResult]:
    """Read, as 1.0.96/1.0.98 or (``v2``) 2.x: tab numbering, its empty-file warning, and
    ``allow_large`` lifting the size and token limits (``pages`` only matters for PDFs, which
    are not emulated: on a text file it changes nothing, as in 2.1.332)."""
    t = target(ws, args["file_path"])
    _existing_file(session, t, v2)
    large = v2 and bool(args.get("allow_large"))
    offset = _integer(args.get("offset"), "offset", 0)
    limit = _integer(args.get("limit"), "limit", 1)
    size = t.host.stat().st_size
    if offset is None and limit is None and size > READ_MAX_BYTES and not large:
        raise ToolError(_too_big(size_text(size), f"size ({size_text(READ_MAX_BYTES)})"))
    first = 1 if offset is None else offset  # cli.js: offset 0 reads from 0 and numbers from 0
    start = max(first - 1, 0)
    try:
        text = ws.read_text(t.key, offset=start, limit=limit)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None
    if limit is not None:  # cli.js ``vVA``: ``limit`` pieces of the split, without the break
        # that ended the last one (the workspace keeps line breaks)
        pieces = _LINE_BREAK.split(text)
        if len(pieces) > limit:
            text = "\n".join(pieces[:limit])
    if len(text) > READ_MAX_BYTES and not large:  # cli.js ``call``: the part read is checked again, raised
        raise CallError(_too_big(size_text(len(text)), f"size ({size_text(READ_MAX_BYTES)})"))
    tokens = round(len(text) / 4)
    if tokens > READ_MAX_TOKENS and not large:  # not remembered as read: the content never reached the model
        raise CallError(_too_big(f"{tokens} tokens", f"tokens ({READ_MAX_TOKENS})"))
    session.remember(t.key)
    if v2 and not text and first <= 1 and t.host.stat().st_size == 0:
        shown = EMPTY_V2
    elif not text:  # cli.js: also for an empty file (its split has one line, "")
        shown = (f"<system-reminder>Warning: the file exists but is shorter than the provided "
                 f"offset ({first}). The file has {_count_lines(t.host)} lines."
                 "</system-reminder>")
    elif v2:
        shown = number_lines_v2(text, first)
    else:
        shown = number_lines(text, first) + "\n\n" + READ_REMINDER
    return shown, ToolResult(output=text)


#: 2.x's refusal of a change to a file not read yet (recorded for NotebookEdit, which shares
#: the rule with Write and Edit).
NOT_READ_V2 = "File has not been read yet. Read it first before writing to it."


def _check_fresh(session: Session, t: Target, v2: bool = False) -> None:
    """Claude Code's rule for changing an existing file: read it first, and re-read it if
    anything changed it since."""
    if t.key not in session.read_state:
        raise ToolError(NOT_READ_V2 if v2 else "This file has not been read in this session "
                        "yet. Read it before changing it.")
    if not session.fresh(t.key):
        raise ToolError("The file changed since it was last read (by a command or another "
                        "tool). Read it again before changing it.")


def _write(session: Session, ws: Workspace, t: Target, content: str) -> None:
    try:
        ws.write_text(t.key, content)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None
    session.remember(t.key)


def write(session: Session, ws: Workspace, args: dict[str, Any],
          v2: bool = False) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    content: str = args["content"]
    if t.host.is_dir():
        raise ToolError(f"{t.shown} is a directory; Write needs a file path")
    existed = t.host.exists()
    if existed:
        _check_fresh(session, t, v2)
    _write(session, ws, t, content)
    if v2:  # 2.x lists nothing back: the model's context already has the content
        shown = (f"File created successfully at: {t.shown}" if not existed
                 else f"The file {t.shown} has been updated successfully.") + CURRENT
    elif not existed:
        shown = f"File created successfully at: {t.shown}"
    else:  # cli.js Write ``update``: the whole new content, cut at 16000 lines
        lines = _LINE_BREAK.split(content)
        listed = ("\n".join(lines[:WRITE_MAX_LINES]) + CLIPPED if len(lines) > WRITE_MAX_LINES
                  else content)
        shown = UPDATED.format(t.shown) + number_lines(listed, 1)
    return shown, ToolResult(output=shown)


def _apply(text: str, old: str, new: str, replace_all: bool) -> str:
    """The edit, exactly as asked. (cli.js ``K0B`` also takes the line break after a deleted
    passage that is a whole line; not emulated: the oracle's edits must leave exactly the
    file they intend.)"""
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def _replace(text: str, old: str, new: str, replace_all: bool, label: str = "",
             v2: bool = False) -> tuple[str, int]:
    """``text`` with the edit applied and how many occurrences it replaced."""
    if old == new:
        raise ToolError(f"{label}No changes to make: old_string and new_string are "
                        + ("exactly the same." if v2 else "identical."))
    count = text.count(old)
    if count == 0:
        found = "String to replace not found in file." if v2 else (
            "old_string was not found in the file.")
        raise ToolError(f"{label}{found}\nString: {old}")
    if count > 1 and not replace_all and v2:
        raise ToolError(f"Found {count} matches of the string to replace, but replace_all is "
                        "false. To replace all occurrences, set replace_all to true. To replace "
                        "only one occurrence, please provide more context to uniquely identify "
                        f"the instance.\nString: {old}")
    if count > 1 and not replace_all:
        raise ToolError(f"{label}Found {count} matches of old_string, but replace_all is false. "
                        "Set replace_all to true to replace every one, or add surrounding "
                        f"context so that exactly one matches.\nString: {old}")
    return _apply(text, old, new, replace_all), count


def _snippet(original: str, old: str, new: str) -> str:
    """cli.js ``z0B``: the edited file's lines from 4 before the change to 4 after the new
    text's lines (counted from where the change starts), numbered."""
    first = len(_LINE_BREAK.split(original.split(old, 1)[0])) - 1
    lines = _LINE_BREAK.split(_apply(original, old, new, False))
    lo = max(0, first - SNIPPET_CONTEXT)
    hi = first + SNIPPET_CONTEXT + len(_LINE_BREAK.split(new))
    return number_lines("\n".join(lines[lo:hi]), lo + 1)


def _load_for_edit(session: Session, ws: Workspace, t: Target, creates: bool,
                   v2: bool = False) -> str | None:
    """The current text of the file to edit, or None when the edit creates it."""
    if creates:
        if t.host.exists():
            raise ToolError("Cannot create a new file: it already exists. Give old_string to "
                            "change its content.")
        return None
    _existing_file(session, t, v2)
    _check_fresh(session, t, v2)
    try:
        return ws.read_text(t.key)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None


def edit(session: Session, ws: Workspace, args: dict[str, Any],
         v2: bool = False) -> tuple[str, ToolResult]:
    t = target(ws, args["file_path"])
    old, new = args["old_string"], args["new_string"]
    text = _load_for_edit(session, ws, t, creates=old == "", v2=v2)
    if text is None:
        _write(session, ws, t, new)
        shown = f"File created successfully at: {t.shown}" + (CURRENT if v2 else "")
        return shown, ToolResult(output=shown)
    replace_all = bool(args.get("replace_all", False))
    updated, _ = _replace(text, old, new, replace_all, v2=v2)
    _write(session, ws, t, updated)
    if v2:
        shown = f"The file {t.shown} has been updated" + (
            ". All occurrences were successfully replaced." if replace_all
            else " successfully.") + CURRENT
    elif replace_all:  # cli.js Edit's result texts
        shown = (f"The file {t.shown} has been updated. All occurrences of '{old}' were "
                 f"successfully replaced with '{new}'.")
    else:
        shown = UPDATED.format(t.shown) + _snippet(text, old, new)
    return shown, ToolResult(output=shown)


def _short(text: str, limit: int = 50) -> str:
    """cli.js MultiEdit's excerpt: the first 50 UTF-16 units, ``...`` when there were more."""
    return js_prefix(text, limit) + ("..." if js_len(text) > limit else "")


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
