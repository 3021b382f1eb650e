"""OpenClaw 2026.9.6's tools as the model sees them: all 54 that ``createOpenClawCodingTools()``
builds for a plain ``openclaw agent`` session, with the recorded schemas
(:mod:`._openclaw_recorded_2026_9_6`) and harnessgrid's descriptions
(:mod:`._openclaw_descriptions`).

Workspace tools run against the harnessgrid workspace: ``ls``, ``read``, ``write``, ``edit``
(an ``edits`` array), ``apply_patch``, ``exec`` and ``process`` (those two through the 2026.2.26
code of :mod:`._openclaw_tools`, whose sessions behave the same). Result texts follow
``tests/fixtures/openclaw/outputs-2026.9.6.json``. What a tool throws reaches the model as
OpenClaw's ``{status, tool, error}`` JSON (:func:`._openclaw_tools.thrown_text`, unchanged in
2026.9.6); a command that fails (not found, timed out) is a normal result in 2026.9.6, no longer
a thrown one.

Every other tool needs what a sandboxed task lacks (a gateway, a chat channel, a paired device,
web access, other sessions and agents): each answers any call that passes the schema check with
the answer the real tool gave in the recording, where no gateway ran (``ANSWERS``), and
harnessgrid records the call as an error (the tool did nothing).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

from harnessgrid.episode import EpisodeState
from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.models import Action, ToolCall, ToolResult, ToolSpec
from harnessgrid.plugins.adapters import _openclaw_recorded_2026_9_6 as recorded
from harnessgrid.plugins.adapters._openclaw_descriptions import SUMMARIES, with_descriptions
from harnessgrid.plugins.adapters._openclaw_tools import (
    CallOutcome,
    ExecLimits,
    _exec,
    _Failure,
    _process,
    thrown_text,
)
from harnessgrid.sandboxing.tools import Environment

WORKSPACE_TOOLS = ("ls", "read", "edit", "write", "apply_patch", "exec", "process")
SCHEMAS: dict[str, dict[str, Any]] = {
    name: with_descriptions(name, recorded.SCHEMAS[name], recorded.DESCRIBED[name])
    for name in recorded.TOOL_ORDER}
#: Where the recorded answers' ``{home}`` points: the sandbox user's home.
HOME = "/root"
READ_MAX_LINES = 2000
READ_MAX_BYTES = 50 * 1024
LS_DEFAULT_LIMIT = 500
#: Our words after a timed-out command's reason (OpenClaw adds advice on retrying safely).
TIMEOUT_ADVICE = ("The command was stopped; anything it changed before that may have happened. "
                  "Check the state before running it again, with a longer timeoutSeconds only "
                  "if it is safe to repeat, or run long jobs with background=true.")


def tool_specs() -> list[ToolSpec]:
    return [ToolSpec(name=name, description=SUMMARIES[name] + ".", parameters=SCHEMAS[name])
            for name in recorded.TOOL_ORDER]


def prompt_listing() -> list[tuple[str, str | None]]:
    """``(name, summary or None)`` in the prompt's recorded order and layout."""
    return [(name, SUMMARIES[name] if has_summary else None)
            for name, has_summary in recorded.PROMPT["tool_listing"]]


def describe(name: str, a: Mapping[str, Any]) -> Action:
    """The abstract action of a schema-valid call (before it runs; see :func:`run_call` for
    edits, recorded as the write of their result)."""
    match name:
        case "read":
            return Action.of("read", path=a["path"])
        case "write":
            return Action.of("write", path=a["path"], content=a["content"])
        case "edit" if len(a["edits"]) == 1:
            return Action.of("edit", path=a["path"], old=a["edits"][0]["oldText"],
                             new=a["edits"][0]["newText"])
        case "ls":
            return Action.of("list", path=a.get("path") or ".")
        case "exec":
            return Action.of("shell", command=a["command"])
    # no abstract counterpart: a shell no-op that names the call, so replaying it changes
    # nothing (apply_patch, process, the unavailable tools)
    target = f" {a['sessionId']}" if isinstance(a.get("sessionId"), str) else ""
    action = a.get("action") if isinstance(a.get("action"), str) else ""
    return Action.of("shell", command=f": {name} {action}{target}".rstrip())


# ------------------------------------------------------------------------------- file tools


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _read(args: Mapping[str, Any], env: Environment) -> str:
    path: str = args["path"]
    if not env.workspace.exists(path):
        if args.get("optional") is True:
            return f"Optional file not found: {path}."
        raise _Failure(f"File not found: {env.workspace.sandbox_path(path)}.")
    text = env.workspace.read_text(path)
    lines = _lines(text)
    offset = int(args.get("offset") or 1)
    if offset > max(len(lines), 1):
        return (f"Offset {offset} is beyond end of file ({len(lines)} lines total). Retry "
                f"with offset <= {len(lines)}.")
    raw_limit = args.get("limit")
    limit = (math.floor(raw_limit) if isinstance(raw_limit, int | float)
             and not isinstance(raw_limit, bool) and math.isfinite(raw_limit)
             and raw_limit >= 1 else None)
    shown: list[str] = []
    used = 0
    for line in lines[offset - 1:]:
        full = len(shown) == (limit or READ_MAX_LINES)
        if full or (shown and used + len(line.encode()) + 1 > READ_MAX_BYTES):
            break
        shown.append(line)
        used += len(line.encode()) + 1
    cursor = int(args.get("cursor") or 0)
    if shown and cursor:
        shown[0] = shown[0][cursor:]
    end = offset - 1 + len(shown)
    body = "\n".join(shown) + ("\n" if end < len(lines) or text.endswith("\n") else "")
    if end >= len(lines):
        return body
    if limit is not None and len(shown) == limit:
        return f"{body}\n[{len(lines) - end} more lines in file. Use offset={end + 1} to continue.]"
    return f"{body}\n[Showing lines {offset}-{end} of {len(lines)}. Use offset={end + 1} to continue.]"


def _write(args: Mapping[str, Any], env: Environment) -> str:
    env.workspace.write_text(args["path"], args["content"])
    # 2026.9.6 counts UTF-8 bytes (2026.2.26 counted UTF-16 units)
    return f"Successfully wrote {len(args['content'].encode())} bytes to {args['path']}"


def _edit(args: Mapping[str, Any], env: Environment) -> str:
    path: str = args["path"]
    if not env.workspace.exists(path):
        raise _Failure(f"Could not edit file: {path}. Error code: ENOENT.")
    text = env.workspace.read_text(path)
    spans: list[tuple[int, int, str]] = []
    for edit in args["edits"]:
        old = edit["oldText"]
        count = text.count(old) if old else 0
        if count == 0:
            raise _Failure(f"Could not find the exact text in {path}. The old text must match "
                           "exactly including all whitespace and newlines.\nCurrent file "
                           f"contents:\n{text}")
        if count > 1:
            raise _Failure(f"Found {count} occurrences of the text in {path}. The text must be "
                           "unique. Please provide more context to make it unique.")
        start = text.index(old)
        spans.append((start, start + len(old), edit["newText"]))
    spans.sort()
    if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
        raise _Failure(f"Edits overlap in {path}; merge them into one edit.")
    for start, end, new in reversed(spans):
        text = text[:start] + new + text[end:]
    env.workspace.write_text(path, text)
    return f"Successfully replaced {len(spans)} block(s) in {path}."


def _ls(args: Mapping[str, Any], env: Environment) -> str:
    path: str = args.get("path") or "."
    target = env.workspace.resolve(path)
    if not target.exists():
        raise _Failure(f"ENOENT: no such file or directory, scandir "
                       f"'{env.workspace.sandbox_path(path)}'")
    if not target.is_dir():
        raise _Failure(f"ENOTDIR: not a directory, scandir '{env.workspace.sandbox_path(path)}'")
    names = env.workspace.list_dir(path)
    after = args.get("after")
    if isinstance(after, str) and after:
        names = [n for n in names if n.rstrip("/") > after]
    raw = args.get("limit")
    limit = (max(1, math.floor(raw)) if isinstance(raw, int | float) and not isinstance(raw, bool)
             and math.isfinite(raw) else LS_DEFAULT_LIMIT)
    if not names:
        return "(empty directory)"
    page = names[:limit]
    text = "\n".join(_js_string(n) for n in page)
    if len(names) > limit:
        text += (f'\n\n[More entries. Continue with the same path and '
                 f'after={_js_string(page[-1].rstrip("/"))}.]')
    return text


def _js_string(text: str) -> str:
    """``JSON.stringify`` of a string (non-ASCII kept)."""
    return json.dumps(text, ensure_ascii=False)


# ------------------------------------------------------------------------------ apply_patch


def _apply_patch(args: Mapping[str, Any], env: Environment) -> str:
    """The ``*** Begin Patch`` format: Add File (``+`` lines), Delete File, Update File
    (optionally ``*** Move to:``, then ``@@`` chunks of `` ``/``-``/``+`` lines)."""
    lines = args["input"].strip().split("\n")
    if lines[0].strip() != "*** Begin Patch":
        raise _Failure("The first line of the patch must be '*** Begin Patch'")
    if lines[-1].strip() != "*** End Patch":
        raise _Failure("The last line of the patch must be '*** End Patch'")
    done: list[str] = []
    writes: list[tuple[str, str | None]] = []  # applied only once every hunk checked out
    i = 1
    while i < len(lines) - 1:
        line = lines[i]
        if line.startswith("*** Add File: "):
            path, i = line.removeprefix("*** Add File: ").strip(), i + 1
            body = []
            while i < len(lines) - 1 and lines[i].startswith("+"):
                body.append(lines[i][1:])
                i += 1
            writes.append((path, "".join(f"{b}\n" for b in body)))
            done.append(f"A {path}")
        elif line.startswith("*** Delete File: "):
            path, i = line.removeprefix("*** Delete File: ").strip(), i + 1
            if not env.workspace.exists(path):
                raise _Failure(f"Failed to delete file {env.workspace.sandbox_path(path)}")
            writes.append((path, None))
            done.append(f"D {path}")
        elif line.startswith("*** Update File: "):
            path, i = line.removeprefix("*** Update File: ").strip(), i + 1
            target = path
            if i < len(lines) - 1 and lines[i].startswith("*** Move to: "):
                target, i = lines[i].removeprefix("*** Move to: ").strip(), i + 1
            chunk_end = i
            while chunk_end < len(lines) - 1 and not lines[chunk_end].startswith("*** "):
                chunk_end += 1
            writes.append((target, _updated(path, lines[i:chunk_end], env)))
            if target != path:
                writes.append((path, None))
            done.append(f"M {target}")
            i = chunk_end
            if i < len(lines) - 1 and lines[i].strip() == "*** End of File":
                i += 1
        elif not line.strip():
            i += 1
        else:
            raise _Failure(f"'{line}' is not a valid hunk header. Valid hunk headers: "
                           "'*** Add File: {path}', '*** Delete File: {path}', "
                           "'*** Update File: {path}'")
    for path, content in writes:
        if content is None:
            env.workspace.resolve(path).unlink()
        else:
            env.workspace.write_text(path, content)
    return "Success. Updated the following files:\n" + "\n".join(done)


def _updated(path: str, chunk_lines: list[str], env: Environment) -> str:
    if not env.workspace.exists(path):
        raise _Failure(f"Failed to read file to update {env.workspace.sandbox_path(path)}")
    text = env.workspace.read_text(path)
    lines = _lines(text)
    cursor = 0
    chunks: list[list[str]] = [[]]
    for line in chunk_lines:
        if line.startswith("@@"):
            chunks.append([])
        else:
            chunks[-1].append(line)
    for chunk in (c for c in chunks if c):
        old = [ln[1:] for ln in chunk if ln[:1] in (" ", "-", "")]
        new = [ln[1:] for ln in chunk if ln[:1] in (" ", "+", "")]
        at = next((k for k in range(cursor, len(lines) - len(old) + 1)
                   if lines[k:k + len(old)] == old), None)
        if at is None:
            raise _Failure(f"Failed to find expected lines in "
                           f"{env.workspace.sandbox_path(path)}:\n" + "\n".join(old))
        lines[at:at + len(old)] = new
        cursor = at + len(new)
    return "".join(f"{ln}\n" for ln in lines)


# ------------------------------------------------------------------------- exec and process


async def _run_exec(args: Mapping[str, Any], env: Environment, state: EpisodeState,
                    limits: ExecLimits) -> tuple[str, ToolResult]:
    """2026.2.26's exec under 2026.9.6's names (``timeoutSeconds``, ``host: auto``); a failed
    command is a normal result now, a timed-out one followed by our advice."""
    legacy = {k: v for k, v in args.items() if k not in ("timeoutSeconds", "title")}
    if isinstance(args.get("timeoutSeconds"), int | float):
        legacy["timeout"] = args["timeoutSeconds"]
    if legacy.get("host") == "auto":
        del legacy["host"]
    text, _, result = await _exec(legacy, env, state, limits)
    if result.timed_out and result.error:
        text = f"{text.removesuffix(result.error)}{result.error}.\n\n{TIMEOUT_ADVICE}"
    return text, result


def _unavailable(name: str, state: EpisodeState, call_id: str) -> str:
    answer = recorded.ANSWERS.get(name)
    if answer is None:  # its recorded answer depended on the recording machine
        return thrown_text(name, f"{name} is not available in this sandbox.")
    text: str = answer["text"].replace("{home}", HOME)
    pieces = text.split("{uuid}")
    # one fresh id per placeholder, the same on every replay of the episode
    ids = [str(uuid.UUID(bytes=hashlib.sha256(f"{state.episode_id}:{call_id}:{n}".encode())
                         .digest()[:16], version=4)) for n in range(len(pieces) - 1)]
    return "".join(p + i for p, i in zip(pieces, [*ids, ""], strict=True))


_FILE_TOOLS = {"read": _read, "write": _write, "edit": _edit, "ls": _ls,
               "apply_patch": _apply_patch}


async def run_call(call: ToolCall, env: Environment, state: EpisodeState,
                   limits: ExecLimits) -> CallOutcome:
    """Execute one call that passed the schema check."""
    args = call.arguments
    action = describe(call.name, args)
    if call.name not in WORKSPACE_TOOLS:
        text = _unavailable(call.name, state, call.id)
        return CallOutcome(text=text, action=action, result=ToolResult(
            output=text, error=f"{call.name} needs a service the sandbox does not have"))
    try:
        if call.name == "exec":
            text, result = await _run_exec(args, env, state, limits)
        elif call.name == "process":
            text, _, result = await _process(args, env, state, limits)
        else:
            text = _FILE_TOOLS[call.name](args, env)
            result = ToolResult(output=text)
            if call.name == "edit" and len(args["edits"]) > 1:  # replayable as its result
                action = Action.of("write", path=args["path"],
                                   content=env.workspace.read_text(args["path"]))
    except SandboxError:
        raise
    except (HarnessgridError, _Failure) as exc:
        message = exc.message if isinstance(exc, HarnessgridError) else str(exc)
        return CallOutcome(text=thrown_text(call.name, message), action=action,
                           result=ToolResult(error=message))
    return CallOutcome(text=text, action=action, result=result)
