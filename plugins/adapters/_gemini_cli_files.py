"""Gemini CLI's file tools: read_file, write_file, replace, list_directory, glob and
grep_search, against a harnessgrid workspace.

Result texts follow ``@google/gemini-cli`` 0.61.0's bundle (``chunk-*.js``; the functions
named below) and ``tests/fixtures/gemini_cli/outputs-0.61.0.json``. grep_search is the CLI's
own ``GrepTool`` (what runs when no trusted system ``rg`` exists; the package ships none): every
one of its strategies ignores case.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from harnessgrid.plugins.adapters._gemini_cli_session import (
    Answer,
    Session,
    fail,
    ok,
    target,
)
from harnessgrid.plugins.adapters._js import js_len, js_prefix
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError

MAX_FILE_MB = 20  # MAX_FILE_SIZE_MB
MAX_LINES = 2000  # DEFAULT_MAX_LINES_TEXT_FILE
MAX_LINE_CHARS = 2000  # MAX_LINE_LENGTH_TEXT_FILE
GREP_DEFAULT_MAX_MATCHES = 100
GREP_SCAN_LIMIT = 100_000  # lines scanned before the filters (a bound, not the CLI's)
SNIPPET_CONTEXT = 5  # getDiffContextSnippet's context lines


def read_file(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    """``processSingleFileContent`` for text files, and ``ReadFileTool``'s truncation note."""
    found = target(session, ws, args["file_path"])
    if isinstance(found, Answer):
        return found
    shown, host = found
    if not host.exists():
        return fail(f"File not found: {shown}")
    if host.is_dir():
        return fail(f"Path is a directory, not a file: {shown}")
    size_mb = host.stat().st_size / (1024 * 1024)
    if size_mb > MAX_FILE_MB:
        return fail(f"File size exceeds the {MAX_FILE_MB}MB limit: {shown} ({size_mb:.2f}MB)")
    data = host.read_bytes()
    if b"\0" in data[:4096]:
        return ok(f"Cannot display content of binary file: {session.relative(shown)}")
    lines = re.split(r"\r?\n", data.decode("utf-8", errors="replace"))
    start, end = args.get("start_line"), args.get("end_line")
    first = start - 1 if start else 0
    if start is None and end is None:
        last = min(MAX_LINES, len(lines))
    else:
        last = min(end, len(lines)) if end else min(first + MAX_LINES, len(lines))
    first = min(first, len(lines))
    shortened = [js_prefix(line, MAX_LINE_CHARS) + "... [truncated]"
                 if js_len(line) > MAX_LINE_CHARS else line for line in lines[first:last]]
    body = "\n".join(shortened)
    if first > 0 or last < len(lines) or shortened != lines[first:last]:
        body = (f"\nIMPORTANT: The file content has been truncated.\n"
                f"Status: Showing lines {first + 1}-{last} of {len(lines)} total lines.\n"
                "Action: To read more of the file, you can use the 'start_line' and 'end_line' "
                "parameters in a subsequent 'read_file' call. For example, to read the next "
                f"section of the file, use start_line: {last + 1}.\n\n"
                f"--- FILE CONTENT (truncated) ---\n{body}")
    return ok(body)


def snippet(old: str, new: str) -> str:
    """``getDiffContextSnippet``: the changed lines of ``new`` with five lines around them
    (found with difflib where the CLI uses jsdiff: the same regions unless a change could be
    aligned two ways)."""
    if not old:
        return new
    import difflib

    old_lines, new_lines = re.split(r"\r?\n", old), re.split(r"\r?\n", new)
    ranges = [(j1, j2) for tag, _i1, _i2, j1, j2 in
              difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes()
              if tag != "equal"]
    if not ranges:
        return new
    merged: list[list[int]] = []
    for j1, j2 in ranges:
        start, stop = max(0, j1 - SNIPPET_CONTEXT), min(len(new_lines), j2 + SNIPPET_CONTEXT)
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    parts: list[str] = []
    last = 0
    for start, stop in merged:
        if start > last:
            parts.append("...")
        parts.append("\n".join(new_lines[start:stop]))
        last = stop
    if last < len(new_lines):
        parts.append("...")
    return "\n".join(parts)


def write_file(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    found = target(session, ws, args["file_path"])
    if isinstance(found, Answer):
        return found
    shown, host = found
    if host.is_dir():
        return fail(f"Path is a directory, not a file: {shown}")
    old = host.read_text(errors="replace") if host.exists() else None
    ws.write_text(shown, args["content"])
    return ok(written(shown, old, args["content"]))


def written(path: str, old: str | None, new: str) -> str:
    """write_file's answer: what happened to ``path`` (``old`` is None: it is new) and the
    changed region."""
    head = (f"Successfully created and wrote to new file: {path}." if old is None
            else f"Successfully overwrote file: {path}.")
    return f"{head} Here is the updated code:\n{snippet(old or '', new)}"


def replace(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    """``EditTool``'s exact match (``calculateEdit``; its errors name ``file_path`` as given,
    ``getErrorReplaceResult``)."""
    found = target(session, ws, args["file_path"])
    if isinstance(found, Answer):
        return found
    shown, host = found
    given, old_string, new_string = args["file_path"], args["old_string"], args["new_string"]
    if not host.exists():
        if old_string:
            return fail(f"File not found: {shown}")
        ws.write_text(shown, new_string)
        return ok(f"Created new file: {shown} with provided content. Here is the updated "
                  f"code:\n{new_string}")
    if not old_string:
        return fail(f"File already exists, cannot create: {shown}")
    current = host.read_text(errors="replace")
    count = current.count(old_string)
    if count == 0:
        return fail(f"Could not find an exact match for 'old_string' in '{given}'. If previous "
                    "edits modified the file or you are modifying lines outside your recent "
                    "read window, please use ReadFile to inspect the target lines before "
                    "retrying with an exact 'old_string'.")
    if count > 1 and not args.get("allow_multiple"):
        return fail(f"Failed to edit, Expected 1 occurrence but found {count} for old_string in "
                    f"file: {given}. If you intended to replace multiple occurrences, set "
                    "'allow_multiple' to true.")
    if old_string == new_string:
        return fail("No changes to apply. The old_string and new_string are identical in file: "
                    f"{given}")
    updated = current.replace(old_string, new_string, -1 if args.get("allow_multiple") else 1)
    ws.write_text(shown, updated)
    return ok(f"Successfully modified file: {shown} ({count} replacements). Here is the updated "
              f"code:\n{snippet(current, updated)}")


def list_directory(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    found = target(session, ws, args["dir_path"])
    if isinstance(found, Answer):
        return found
    shown, host = found
    if not host.exists():
        return fail(f"Error listing directory: ENOENT: no such file or directory, stat '{shown}'")
    if not host.is_dir():
        return fail(f"Error: Path is not a directory: {shown}")
    import fnmatch

    ignore = args.get("ignore") or []
    entries = [e for e in host.iterdir()
               if not any(fnmatch.fnmatch(e.name, pattern) for pattern in ignore)]
    if not entries:
        return ok(f"Directory {shown} is empty.")
    entries.sort(key=lambda e: (not e.is_dir(), e.name.casefold(), e.name))  # localeCompare
    listing = "\n".join(f"[DIR] {e.name}" if e.is_dir() else f"{e.name} ({e.stat().st_size} "
                        "bytes)" for e in entries)
    return ok(f"Directory listing for {shown}:\n{listing}")


def _glob_regex(pattern: str) -> str:
    """A glob (``**``, ``*``, ``?``, ``[...]``, ``{a,b}``) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        ch = pattern[i]
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if ch == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            out, i = out + "[" + pattern[i + 1:end].replace("!", "^", 1) + "]", end + 1
            continue
        out += {"*": "[^/]*", "?": "[^/]", "{": "(?:", "}": ")", ",": "|"}.get(
            ch, re.escape(ch))
        i += 1
    return out


def glob(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    found = target(session, ws, args.get("dir_path") or ".")
    if isinstance(found, Answer):
        return found
    shown, _ = found
    pattern = args["pattern"]
    flags = 0 if args.get("case_sensitive") else re.IGNORECASE  # the CLI's default: ignore
    try:
        matcher = re.compile(_glob_regex(pattern), flags)
        base = session.relative(shown)
        keys = [k for k in ws.glob("**", shown) if not k.endswith("/")
                and matcher.fullmatch(posixpath.relpath(k, base))]
    except (WorkspaceError, re.error) as exc:
        return fail(exc.message if isinstance(exc, WorkspaceError) else str(exc))
    if not keys:
        return ok(f'No files found matching pattern "{pattern}" within {shown}')
    keys.sort(key=lambda k: -ws.resolve(k).stat().st_mtime_ns)
    paths = "\n".join(session.absolute(k) for k in keys)
    text = (f'Found {len(keys)} file(s) matching "{pattern}" within {shown}, sorted by '
            f"modification time (newest first):\n{paths}")
    return ok(text)


def _hits(ws: Workspace, shown: str, args: dict[str, Any], limit: int) -> list[
        tuple[str, int, str]]:
    """The matching lines, filtered as the arguments ask and cut at ``limit``. Every
    strategy of the tool (git grep, grep, its own scan) ignores case."""
    import fnmatch

    include, per_file = args.get("include_pattern"), args.get("max_matches_per_file")
    exclude = (re.compile(args["exclude_pattern"], re.IGNORECASE)
               if args.get("exclude_pattern") else None)
    counts: dict[str, int] = {}
    kept = []
    for key, number, line in ws.search(args["pattern"], shown, ignore_case=True,
                                       max_results=GREP_SCAN_LIMIT):
        if include and not (fnmatch.fnmatch(posixpath.basename(key), include)
                            or fnmatch.fnmatch(key, include)):
            continue
        if exclude is not None and exclude.search(line):
            continue
        counts[key] = counts.get(key, 0) + 1
        if per_file and counts[key] > per_file:
            continue
        kept.append((key, number, line))
        if len(kept) >= limit:
            break
    return kept


def grep_search(session: Session, ws: Workspace, args: dict[str, Any]) -> Answer:
    """``GrepTool`` and ``formatGrepResults`` (with ``enrichWithAutoContext``)."""
    where = args.get("dir_path")
    found = target(session, ws, where or ".")
    if isinstance(found, Answer):
        return found
    shown, _ = found
    limit = args.get("total_max_matches") or GREP_DEFAULT_MAX_MATCHES
    try:
        hits = _hits(ws, shown, args, limit)
    except (WorkspaceError, re.error) as exc:
        return fail(exc.message if isinstance(exc, WorkspaceError) else str(exc))
    include = args.get("include_pattern")
    location = f'in path "{where}"' if where else "in the workspace directory"
    filter_note = f' (filter: "{include}")' if include else ""
    pattern = args["pattern"]
    if not hits:
        return ok(f'No matches found for pattern "{pattern}" {location}{filter_note}.')
    base = session.relative(shown)
    by_file: dict[str, dict[int, tuple[str, bool]]] = {}
    for key, number, line in hits:
        by_file.setdefault(key, {})[number] = (line, False)
    if args.get("names_only"):
        names = sorted(posixpath.relpath(k, base) for k in by_file)
        text = (f'Found {len(names)} files with matches for pattern "{pattern}" '
                f"{location}{filter_note}:\n" + "\n".join(names)).strip()
        return ok(text)
    if len(hits) <= 3:  # few matches: lines around them come along
        around = 50 if len(hits) == 1 else 15
        for key, lines in by_file.items():
            text_lines = ws.resolve(key).read_text(errors="replace").split("\n")
            for number in list(lines):
                for n in range(max(1, number - around), min(len(text_lines), number + around)
                               + 1):
                    lines.setdefault(n, (text_lines[n - 1], True))
    term = "match" if len(hits) == 1 else "matches"
    limited = (f" (results limited to {limit} matches for performance)"
               if len(hits) >= limit else "")
    out = f'Found {len(hits)} {term} for pattern "{pattern}" {location}{filter_note}{limited}:\n---\n'
    for key, lines in by_file.items():
        out += f"File: {posixpath.relpath(key, base)}\n"
        for number in sorted(lines):
            line, context = lines[number]
            line = line.rstrip()
            if js_len(line) > MAX_LINE_CHARS:
                line = js_prefix(line, MAX_LINE_CHARS) + "... [truncated]"
            out += f"L{number}{'-' if context else ':'} {line}\n"
        out += "---\n"
    return ok(out.strip())
