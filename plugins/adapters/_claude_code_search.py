"""Glob, Grep and LS over the workspace, in Python, with the real tools' output shapes.

The real Grep runs ripgrep; here the same options are implemented over the host copy of the
workspace (deterministic, no ripgrep needed): Python regular expressions stand in for Rust's,
``.git``, binary files and files over 5 MB are skipped, and lines and files come in sorted
order. Shapes follow ripgrep as Claude Code calls it: absolute paths, ``path:line:text`` for
matches and ``path-line-text`` for context lines, ``--`` between context groups, no file name
when a single file is searched; ``files_with_matches`` lists paths newest first under a
``Found N files`` line; ``count`` gives ``path:N`` lines and a total. Content output is cut at
30000 characters like Bash output (a safety cap of this emulation).
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harnessgrid.models import ToolResult
from harnessgrid.plugins.adapters._claude_code_files import Target, ToolError, confine, target
from harnessgrid.plugins.adapters._claude_code_session import Session
from harnessgrid.plugins.adapters._claude_code_tools import (
    BASH_MAX_OUTPUT_CHARS,
    GLOB_MAX_RESULTS,
    LS_MAX_CHARS,
)
from harnessgrid.sandboxing import safe_search
from harnessgrid.sandboxing.safe_search import BoundedPattern, compile_bounded
from harnessgrid.sandboxing.safe_search import expand_braces as _expand_braces
from harnessgrid.sandboxing.workspace import (
    MAX_LINE_CHARS,
    MAX_READ_BYTES,
    Workspace,
    WorkspaceError,
)

_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"), "js": ("*.js", "*.jsx", "*.mjs", "*.cjs"), "ts": ("*.ts", "*.tsx"),
    "json": ("*.json",), "md": ("*.md", "*.markdown"), "txt": ("*.txt",),
    "sh": ("*.sh", "*.bash"), "yaml": ("*.yaml", "*.yml"), "toml": ("*.toml",),
    "csv": ("*.csv",), "html": ("*.html", "*.htm"), "css": ("*.css",), "go": ("*.go",),
    "rust": ("*.rs",), "java": ("*.java",), "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"), "ruby": ("*.rb",),
    "ini": ("*.ini", "*.cfg"), "xml": ("*.xml",), "sql": ("*.sql",), "log": ("*.log",),
}
_SKIPPED_DIRS = frozenset({".git"})


def cut_output(text: str, limit: int = BASH_MAX_OUTPUT_CHARS) -> tuple[str, bool]:
    """The first ``limit`` characters and a note of how many lines were cut."""
    if len(text) <= limit:
        return text, False
    dropped = text[limit:].count("\n") + 1
    return f"{text[:limit]}\n\n... [{dropped} lines truncated] ...", True


def expand_braces(pattern: str) -> list[str]:
    """``a.{ts,tsx}`` → ``a.ts``, ``a.tsx`` (nested and repeated groups too); more than
    :data:`harnessgrid.sandboxing.safe_search.MAX_BRACE_PATTERNS` patterns is a tool error, not an
    exponential expansion."""
    try:
        return _expand_braces(pattern)
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None


def search_root(session: Session, ws: Workspace, raw: Any) -> Target:
    """Glob/Grep's ``path``: absolute, or relative to the shell's working directory."""
    cwd = session.absolute(session.cwd)
    path = cwd if raw is None else raw if raw.startswith("/") else f"{cwd}/{raw}"
    found = confine(ws, path, raw, "searched")
    if not found.host.exists():
        raise ToolError(f"Path does not exist: {path}")
    return found


def _newest_first(ws: Workspace, keys: list[str]) -> list[str]:
    def stamp(key: str) -> float:
        try:
            return (ws.root / key).stat().st_mtime
        except OSError:
            return 0.0
    return sorted(sorted(keys), key=stamp, reverse=True)


def _shown(ws: Workspace, key: str) -> str:
    return ws.mount_path if key == "." else f"{ws.mount_path}/{key}"


def glob(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    base = search_root(session, ws, args.get("path"))
    if not base.host.is_dir():
        raise ToolError(f"{base.shown} is not a directory")
    pattern: str = args["pattern"]
    if pattern.startswith(base.shown + "/"):
        pattern = pattern[len(base.shown) + 1:]
    found: set[str] = set()
    patterns = expand_braces(pattern)
    budget = 5 * safe_search.MATCH_BUDGET_S  # each alternative is bounded on its own too
    deadline = time.monotonic() + budget
    try:
        for p in patterns:
            if time.monotonic() > deadline:
                raise ToolError(f"Glob stopped after {budget:g}s (the limit of one call) "
                                f"on {len(patterns)} brace alternatives; narrow the pattern")
            found |= {f for f in ws.glob(p, base.key) if not f.endswith("/")}
    except WorkspaceError as exc:
        raise ToolError(exc.message) from None
    ordered = _newest_first(ws, list(found))
    if not ordered:
        return "No files found", ToolResult(output="")
    lines = [_shown(ws, k) for k in ordered[:GLOB_MAX_RESULTS]]
    if len(ordered) > GLOB_MAX_RESULTS:
        lines.append(f"(Only the first {GLOB_MAX_RESULTS} matches are shown; use a more "
                     "specific path or pattern.)")
    text = "\n".join(lines)
    return text, ToolResult(output=text)


def _files(root: Target) -> Iterator[str]:
    """Workspace-relative paths of the regular files under ``root``, sorted, no symlinks."""
    if root.host.is_file():
        yield root.key
        return
    for dirpath, dirnames, filenames in os.walk(root.host):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS
                             and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if not full.is_symlink() and full.is_file():
                rel = full.relative_to(root.host).as_posix()
                yield rel if root.key == "." else f"{root.key}/{rel}"


class _GlobFilter:
    """Grep's ``glob``: its (brace-expanded) patterns as two bounded regexes, one over the file
    name (patterns without '/') and one over the path under the searched root, so that a
    thousand alternatives cost one match per file, within the matching budget."""

    def __init__(self, globs: list[str]) -> None:
        def combined(patterns: list[str]) -> BoundedPattern | None:
            if not patterns:
                return None
            return compile_bounded("|".join(fnmatch.translate(g) for g in patterns))
        self.active = bool(globs)
        self.by_name = combined([g for g in globs if "/" not in g])
        self.by_path = combined([g for g in globs if "/" in g])

    def __call__(self, name: str, under: str) -> bool:
        return (self.by_name is not None and self.by_name.fullmatch(name) is not None) or (
            self.by_path is not None and self.by_path.fullmatch(under) is not None)


def _wanted(key: str, root: Target, globs: _GlobFilter, kinds: tuple[str, ...]) -> bool:
    name = key.rsplit("/", 1)[-1]
    under = key if root.key == "." else key[len(root.key) + 1:]
    if globs.active and not globs(name, under):
        return False
    return not kinds or any(fnmatch.fnmatchcase(name, k) for k in kinds)


def _text(ws: Workspace, key: str) -> str | None:
    path = ws.root / key
    try:
        if path.stat().st_size > MAX_READ_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return None if b"\0" in data[:8192] else data.decode("utf-8", errors="replace")


def _matched_lines(text: str, regex: BoundedPattern, multiline: bool) -> tuple[list[int], int]:
    """0-based numbers of the lines holding (part of) a match, and the match count."""
    lines = text.split("\n")
    if not multiline:
        hits = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
        return hits, len(hits)
    spanned: set[int] = set()
    count = 0
    for m in regex.finditer(text):
        count += 1
        first = text.count("\n", 0, m.start())
        last = text.count("\n", 0, max(m.end() - 1, m.start()))
        spanned.update(range(first, last + 1))
    return sorted(spanned), count


def _context_block(lines: list[str], hits: list[int], before: int, after: int,
                   prefix: str, numbered: bool) -> list[str]:
    """ripgrep's content output for one file: ``:`` after matches, ``-`` after context,
    ``--`` between groups that do not touch."""
    out: list[str] = []
    hit_set = set(hits)
    shown: list[int] = sorted({j for i in hits
                               for j in range(max(i - before, 0), min(i + after + 1, len(lines)))})
    previous = None
    for j in shown:
        if previous is not None and j != previous + 1:
            out.append("--")
        sep = ":" if j in hit_set else "-"
        line = lines[j].rstrip("\r")[:MAX_LINE_CHARS]
        out.append(f"{prefix}{sep if prefix else ''}{f'{j + 1}{sep}' if numbered else ''}{line}")
        previous = j
    return out


def grep(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    root = search_root(session, ws, args.get("path"))
    flags = (re.IGNORECASE if args.get("-i") else 0) | (
        re.MULTILINE | re.DOTALL if args.get("multiline") else 0)
    try:
        regex = compile_bounded(args["pattern"], flags)
    except re.error as exc:
        raise ToolError(f"regex parse error in {args['pattern']!r}: {exc}") from None
    kind = args.get("type")
    if kind is not None and kind not in _TYPES:
        raise ToolError(f"unrecognized file type: {kind} (known: {', '.join(sorted(_TYPES))})")
    try:
        globs = _GlobFilter([g for raw in ([args["glob"]] if args.get("glob") else [])
                             for g in expand_braces(raw)])
    except re.error as exc:
        raise ToolError(f"glob parse error in {args['glob']!r}: {exc}") from None
    mode = args.get("output_mode", "files_with_matches")
    context = args.get("-C")
    before = int(context if context is not None else args.get("-B") or 0)
    after = int(context if context is not None else args.get("-A") or 0)
    single = root.host.is_file()
    rows: list[str] = []
    matched: list[str] = []
    total = 0
    for key in _files(root):
        try:
            if not single and not _wanted(key, root, globs, _TYPES.get(kind or "", ())):
                continue
        except WorkspaceError as exc:  # the glob ran past its matching budget
            raise ToolError(exc.message) from None
        text = _text(ws, key)
        if text is None:
            continue
        try:
            hits, count = _matched_lines(text, regex, bool(args.get("multiline")))
        except WorkspaceError as exc:  # the pattern ran past its matching budget
            raise ToolError(exc.message) from None
        if not hits:
            continue
        matched.append(key)
        total += count
        prefix = "" if single else _shown(ws, key)
        if mode == "content":
            if rows and (before or after):
                rows.append("--")
            rows += _context_block(text.split("\n"), hits, before, after, prefix,
                                   bool(args.get("-n")))
        elif mode == "count":
            rows.append(f"{prefix}:{count}" if prefix else str(count))
    limit = args.get("head_limit")
    if mode == "files_with_matches":
        rows = [_shown(ws, k) for k in _newest_first(ws, matched)]
    if limit is not None:
        rows = rows[:max(int(limit), 0)]
    if not matched:
        text = "No files found" if mode == "files_with_matches" else "No matches found"
        return text, ToolResult(output="")
    if mode == "files_with_matches":
        text = f"Found {len(rows)} file{'s' if len(rows) != 1 else ''}\n" + "\n".join(rows)
    elif mode == "count":
        text = "\n".join(rows) + (f"\n\nFound {total} total occurrence{'s' if total != 1 else ''}"
                                  f" across {len(matched)} file{'s' if len(matched) != 1 else ''}.")
    else:
        text, _ = cut_output("\n".join(rows))
    return text, ToolResult(output=text)


#: cli.js 1.0.96 ``eQB``: the header LS puts before a listing it stopped at LS_MAX_CHARS (the
#: model is told this exact text, so a policy trained on the real shell recognises it).
LS_TRUNCATED_HEADER = (
    f"There are more than {LS_MAX_CHARS} characters in the repository (ie. either there are "
    "lots of files, or there are many long filenames). Use the LS tool (passing a specific "
    "path), Bash tool, and other tools to explore nested directories. The first "
    f"{LS_MAX_CHARS} characters are included below:\n\n")


def _tree(ws: Workspace, root: Path, ignore: list[str]) -> tuple[list[str], bool]:
    """Indented ``- name`` lines of everything under ``root`` (depth first, sorted), hidden
    entries, ``__pycache__`` and ``ignore`` matches skipped. Like cli.js ``eb6`` it counts the
    characters of the paths it collected (relative to the working directory) and stops once
    they pass LS_MAX_CHARS; the flag says the listing reached that many."""
    out: list[str] = []
    used = 0

    def skip(name: str, rel: str) -> bool:
        return (name.startswith(".") or name == "__pycache__"
                or any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(rel, g)
                       for g in ignore))

    def visit(directory: Path, depth: int) -> bool:
        nonlocal used
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return True
        for entry in entries:
            rel = Path(entry.path).relative_to(root).as_posix()
            if skip(entry.name, rel):
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            out.append(f"{'  ' * depth}- {entry.name}{'/' if is_dir else ''}")
            used += len(ws.relative(Path(entry.path))) + is_dir
            if used > LS_MAX_CHARS or (is_dir and not visit(Path(entry.path), depth + 1)):
                return False
        return True

    visit(root, 1)
    return out, used >= LS_MAX_CHARS


def ls(session: Session, ws: Workspace, args: dict[str, Any]) -> tuple[str, ToolResult]:
    t = target(ws, args["path"], "path")
    if not t.host.exists():
        raise ToolError(f"Directory does not exist: {t.shown}")
    if not t.host.is_dir():
        raise ToolError(f"{t.shown} is not a directory; use Read to see a file")
    lines, cut = _tree(ws, t.host, list(args.get("ignore") or []))
    head = LS_TRUNCATED_HEADER if cut else ""
    body = "\n".join([f"- {t.shown}/", *lines])
    text = (f"{head}{body}\n\nNOTE: if any of the files above look malicious, do not work on "
            "them.")
    return text, ToolResult(output=body)
