"""OpenClaw's coding tools as the model sees them: ``read``, ``write``, ``edit``, ``exec`` and
``process`` (schemas, argument checks, result text), executed against a harnessgrid workspace.

The facts follow OpenClaw v2026.2.26 (see :mod:`harnessgrid.plugins.adapters.openclaw`); the
wording of descriptions and of harness-written errors is harnessgrid's own. Result *formats* a
model learns to read are kept: the read continuation notes, ``(Command exited with code N)``,
``(no output)``, ``Command still running (session ID, pid N)``, ``Process exited with code N.``.

Background exec sessions are emulated. The sandbox ends every process a command leaves behind,
so a session cannot outlive its ``exec`` call: a backgrounded command (``background: true``, or
a run longer than ``yieldMs``) runs to completion within its timeout, the model is told it is
"still running", and the finished output is kept as a session that ``process`` lists, polls and
logs exactly as OpenClaw would show a session that has since exited.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harnessgrid.episode import EpisodeState
from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.models import Action, ToolCall, ToolResult, ToolSpec
from harnessgrid.observations import exit_code as safe_exit_code
from harnessgrid.tools import Environment

READ_MAX_LINES = 2000
READ_MAX_BYTES = 50 * 1024
EXEC_MAX_OUTPUT_CHARS = 200_000
"""OpenClaw keeps this many characters of a command's output (the tail)."""
EXEC_DEFAULT_YIELD_MS = 10_000
SESSIONS_KEY = "openclaw.sessions"
PROCESS_ACTIONS = ("list", "poll", "log", "kill")

_NUMBER = {"type": "number"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "read": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "File to read, relative to the workspace or "
                 "absolute."},
        "offset": {**_NUMBER, "description": "First line to show (1-based)."},
        "limit": {**_NUMBER, "description": "How many lines to show at most."}}},
    "write": {"type": "object", "required": ["path", "content"], "properties": {
        "path": {"type": "string", "description": "File to create or replace."},
        "content": {"type": "string", "description": "The complete new content."}}},
    "edit": {"type": "object", "required": ["path", "oldText", "newText"], "properties": {
        "path": {"type": "string", "description": "File to change."},
        "oldText": {"type": "string", "description": "Passage to replace; must occur exactly "
                    "once, whitespace included."},
        "newText": {"type": "string", "description": "Text to put in its place."}}},
    "exec": {"type": "object", "required": ["command"], "properties": {
        "command": {"type": "string", "description": "Shell command line."},
        "workdir": {"type": "string", "description": "Directory to run in (default: the "
                    "workspace)."},
        "timeout": {**_NUMBER, "description": "Seconds before the command is killed."},
        "background": {"type": "boolean", "description": "Return at once with a session id "
                       "for process."},
        "yieldMs": {**_NUMBER, "description": "Milliseconds after which a running command "
                    "is moved to the background (default 10000)."}}},
    "process": {"type": "object", "required": ["action"], "properties": {
        "action": {"type": "string", "enum": list(PROCESS_ACTIONS),
                   "description": "list | poll | log | kill"},
        "sessionId": {"type": "string", "description": "Session id from exec (not for list)."},
        "offset": {**_NUMBER, "description": "log: first line (0-based)."},
        "limit": {**_NUMBER, "description": "log: how many lines (the last ones when offset "
                  "is left out)."}}},
}
SUMMARIES: dict[str, str] = {
    "read": "Show a file's text, at most 2000 lines or 50 KB per call",
    "write": "Create a file or replace everything in it",
    "edit": "Swap one exact passage of a file for new text",
    "exec": "Run a shell command in the workspace, optionally in the background",
    "process": "Look after background exec sessions (list, poll, log, kill)",
}
_DETAILS: dict[str, str] = {
    "read": " Long files come back in pages; the note at the end says which offset comes next.",
    "write": " Parent directories are created as needed.",
    "edit": " Fails when the passage is missing or occurs more than once.",
    "exec": (" Output over 200,000 characters keeps only its end. Commands running longer than "
             "yieldMs continue as a background session."),
    "process": " Sessions come from exec calls that went to the background.",
}


def tool_specs() -> list[ToolSpec]:
    return [ToolSpec(name=n, description=SUMMARIES[n] + "." + _DETAILS[n], parameters=s)
            for n, s in SCHEMAS.items()]


@dataclass(frozen=True)
class CallOutcome:
    """One executed call: what the model reads back, whether OpenClaw would flag it as an
    error, and the abstract action and result harnessgrid records."""

    text: str
    is_error: bool
    action: Action
    result: ToolResult


def check_arguments(call: ToolCall) -> str | None:
    """Why ``call`` cannot run (unknown tool, undecodable or schema-violating arguments), or
    None. The message lists each violation with its field, then the arguments received."""
    if call.name not in SCHEMAS:
        return f"Tool {call.name!r} does not exist. Available tools: {', '.join(SCHEMAS)}."
    if call.parse_error is not None:
        raw = (call.raw_arguments or "")[:300]
        return (f"The arguments of the {call.name} call are not valid JSON "
                f"({call.parse_error}): {raw}")
    import jsonschema  # here, not at import: loading plugins must stay cheap (50 ms)

    validator = jsonschema.Draft202012Validator(SCHEMAS[call.name])
    problems = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.path))
    if not problems:
        return None
    lines = [f"  - {'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in problems]
    return (f"Invalid arguments for tool {call.name!r}:\n" + "\n".join(lines)
            + f"\n\nArguments received:\n{json.dumps(call.arguments, indent=2)[:2000]}")


def describe(call: ToolCall) -> Action:
    """The abstract action a valid call stands for. ``process`` has no abstract counterpart;
    it is recorded as a shell no-op (``: process poll ID``) so replaying it changes nothing."""
    a = call.arguments
    match call.name:
        case "read":
            return Action.of("read", path=a["path"])
        case "write":
            return Action.of("write", path=a["path"], content=a["content"])
        case "edit":
            return Action.of("edit", path=a["path"], old=a["oldText"], new=a["newText"])
        case "exec":
            return Action.of("shell", command=a["command"])
    target = f" {a['sessionId']}" if isinstance(a.get("sessionId"), str) else ""
    return Action.of("shell", command=f": process {a['action']}{target}")


@dataclass(frozen=True)
class ExecLimits:
    """How long ``exec`` may run: OpenClaw's 1800 s default is longer than an episode, so a
    call without ``timeout`` (or with NaN, infinity, zero or a negative one) gets the sandbox's
    per-command limit, and an explicit one may shorten it, never lengthen it (nor exceed
    ``max_timeout_s``)."""

    max_timeout_s: float = 600.0


async def run_call(call: ToolCall, env: Environment, state: EpisodeState,
                   limits: ExecLimits) -> CallOutcome:
    """Execute one valid call (see :func:`check_arguments`)."""
    action = describe(call)
    handler: Callable[..., Any] = _HANDLERS[call.name]
    try:
        if call.name in ("exec", "process"):
            text, is_error, result = await handler(call.arguments, env, state, limits)
        else:
            text = handler(call.arguments, env)
            is_error, result = False, ToolResult(output=text)
    except SandboxError:
        raise
    except (HarnessgridError, _Failure) as exc:
        text = exc.message if isinstance(exc, HarnessgridError) else str(exc)
        is_error, result = True, ToolResult(error=text)
    return CallOutcome(text=text, is_error=is_error, action=action, result=result)


class _Failure(Exception):
    """A tool ran and failed; its message is what the model reads."""


def _int(value: Any) -> int | None:
    return None if value is None else math.floor(value)


# ---------------------------------------------------------------------------------- file tools


def _size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    return f"{n / 1024:.1f}KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f}MB"


def _read(args: Mapping[str, Any], env: Environment) -> str:
    """A page of the file: whole lines up to 2000 lines / 50 KB, then a note saying how to
    continue (OpenClaw's formats)."""
    path: str = args["path"]
    lines = env.workspace.read_text(path).split("\n")
    offset, limit = _int(args.get("offset")), _int(args.get("limit"))
    start = max(1, offset or 1)
    if start > len(lines):
        raise _Failure(f"Offset {start} is past the end of {path} ({len(lines)} lines).")
    wanted = lines[start - 1:] if limit is None else lines[start - 1:start - 1 + max(0, limit)]
    shown: list[str] = []
    used = 0
    cut_by = None
    for line in wanted:
        size = len(line.encode()) + (1 if shown else 0)
        if len(shown) == READ_MAX_LINES:
            cut_by = "lines"
            break
        if used + size > READ_MAX_BYTES:
            cut_by = "bytes"
            break
        shown.append(line)
        used += size
    if cut_by == "bytes" and not shown:
        return (f"[Line {start} is {_size(len(wanted[0].encode()))}, exceeds "
                f"{_size(READ_MAX_BYTES)} limit. Use bash: sed -n '{start}p' {path} | "
                f"head -c {READ_MAX_BYTES}]")
    text = "\n".join(shown)
    end = start + len(shown) - 1
    if cut_by == "lines":
        return f"{text}\n\n[Showing lines {start}-{end} of {len(lines)}. Use offset={end + 1} to continue.]"
    if cut_by == "bytes":
        return (f"{text}\n\n[Showing lines {start}-{end} of {len(lines)} "
                f"({_size(READ_MAX_BYTES)} limit). Use offset={end + 1} to continue.]")
    if limit is not None and end < len(lines):
        return f"{text}\n\n[{len(lines) - end} more lines in file. Use offset={end + 1} to continue.]"
    return text


def _write(args: Mapping[str, Any], env: Environment) -> str:
    env.workspace.write_text(args["path"], args["content"])
    return f"Successfully wrote {len(args['content'])} bytes to {args['path']}"


def _edit(args: Mapping[str, Any], env: Environment) -> str:
    path, old, new = args["path"], args["oldText"], args["newText"]
    text = env.workspace.read_text(path)
    count = text.count(old) if old else 0
    if count == 0:
        raise _Failure(f"oldText was not found in {path}. It must match the file exactly, "
                       "whitespace and line breaks included; read the file again and copy it.")
    if count > 1:
        raise _Failure(f"oldText occurs {count} times in {path}, but an edit needs exactly "
                       "one match. Include more surrounding lines to make it unique.")
    env.workspace.write_text(path, text.replace(old, new, 1))
    return f"Successfully replaced text in {path}."


# ------------------------------------------------------------------------- exec and process

_ADJECTIVES = ("amber", "brisk", "calm", "dusty", "eager", "faint", "gentle", "hazy", "keen",
               "lucky", "mild", "nimble", "quiet", "rapid", "swift", "tidy")
_NOUNS = ("bloom", "brook", "canyon", "coral", "dune", "ember", "falcon", "harbor", "meadow",
          "otter", "pine", "river", "shell", "summit", "tide", "willow")


def _sessions(state: EpisodeState) -> dict[str, dict[str, Any]]:
    sessions: dict[str, dict[str, Any]] = state.scratch.setdefault(SESSIONS_KEY, {})
    return sessions


def _new_session_id(state: EpisodeState, n: int) -> str:
    """OpenClaw-style ``adjective-noun`` ids, deterministic per episode."""
    seed = int(hashlib.sha256(state.episode_id.encode()).hexdigest()[:8], 16)
    word = f"{_ADJECTIVES[(seed + 5 * n) % 16]}-{_NOUNS[(seed // 16 + 3 * n) % 16]}"
    return word if word not in _sessions(state) else f"{word}-{n}"


def _aggregate(stdout: str, stderr: str) -> tuple[str, bool]:
    text = (stdout + ("\n" if stdout and stderr and not stdout.endswith("\n") else "")
            + stderr).strip()
    if len(text) <= EXEC_MAX_OUTPUT_CHARS:
        return text, False
    cut = len(text) - EXEC_MAX_OUTPUT_CHARS
    return f"[... {cut} earlier characters of output dropped ...]\n" + text[-EXEC_MAX_OUTPUT_CHARS:], True


def _failure_reason(exit_code: int | None, killed: str | None, timed_out: bool,
                    timeout: float) -> str | None:
    """Why a finished command counts as failed in OpenClaw (None: it completed, whatever its
    exit code)."""
    if timed_out:
        return (f"Command timed out after {timeout:g} seconds. If it needs longer, run it "
                f"again with a larger timeout (e.g. exec timeout=300).")
    if exit_code is None:
        return f"Command aborted by signal SIGKILL ({killed or 'killed by the sandbox'})"
    if killed in ("cpu", "file_size"):
        return f"Command aborted by signal {'SIGXCPU' if killed == 'cpu' else 'SIGXFSZ'}"
    if exit_code == 126:
        return "Command not executable (permission denied)"
    if exit_code == 127:
        return "Command not found"
    return None


async def _exec(args: Mapping[str, Any], env: Environment, state: EpisodeState,
                limits: ExecLimits) -> tuple[str, bool, ToolResult]:
    command: str = args["command"]
    requested = args.get("timeout")
    configured = env.sandbox.limits.wall_s
    # Clamped to the configured limit: NaN, inf, negatives and larger values cannot lift it.
    timeout = (configured if not isinstance(requested, int | float)
               or isinstance(requested, bool) or not math.isfinite(requested) or requested <= 0
               else min(float(requested), limits.max_timeout_s, configured))
    res = await env.sandbox.run(command, timeout_s=timeout, cwd=args.get("workdir"))
    output, cut = _aggregate(res.stdout, res.stderr)
    reason = _failure_reason(res.exit_code, res.killed, res.timed_out, timeout)
    yield_ms = args.get("yieldMs", EXEC_DEFAULT_YIELD_MS)
    result = ToolResult(output=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                        timed_out=res.timed_out, truncated=res.truncated or cut,
                        duration_s=res.duration_s)
    if args.get("background") or res.duration_s * 1000 >= yield_ms:
        sessions = _sessions(state)
        sid = _new_session_id(state, len(sessions))
        pid = 4000 + 37 * len(sessions)
        sessions[sid] = {"command": command, "pid": pid, "output": output, "read": 0,
                         "exit_code": res.exit_code, "failed": reason is not None,
                         "duration_s": res.duration_s, "killed": res.killed}
        text = (f"Command still running (session {sid}, pid {pid}). "
                "Use process (list/poll/log/kill) for follow-up.")
        return text, False, result.model_copy(update={"output": text, "stderr": "",
                                                      "exit_code": None})
    if reason is not None:
        text = f"{output}\n\n{reason}".strip()
        return text, True, result.model_copy(update={"error": reason})
    code = res.exit_code or 0
    shown = safe_exit_code(code)  # None for a code no process returns: formatting stays total
    text = (output + (f"\n\n(Command exited with code {'?' if shown is None else shown})"
                      if code else "")).strip()
    return text or "(no output)", False, result


def _status_line(s: Mapping[str, Any]) -> str:
    if s["exit_code"] is None:
        return "Process exited with signal SIGKILL."
    code = safe_exit_code(s["exit_code"])
    return f"Process exited with code {'?' if code is None else code}."


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


async def _process(args: Mapping[str, Any], env: Environment, state: EpisodeState,
                   limits: ExecLimits) -> tuple[str, bool, ToolResult]:
    sessions = _sessions(state)
    action: str = args["action"]
    if action == "list":
        rows = [f"{sid} {'failed' if s['failed'] else 'completed':<9} "
                f"{_duration(s['duration_s'])} :: {s['command'].splitlines()[0][:60]}"
                for sid, s in sessions.items()]
        text = "\n".join(rows) or "No running or recent sessions."
        return text, False, ToolResult(output=text)
    sid = args.get("sessionId")
    if not sid:
        raise _Failure(f"process {action} needs a sessionId; `process list` shows them.")
    if sid not in sessions:
        raise _Failure(f"No session named {sid!r}. Known sessions: "
                       f"{', '.join(sessions) or 'none'}.")
    s = sessions[sid]
    if action == "kill":
        raise _Failure(f"Session {sid} has already exited; there is nothing to kill.")
    if action == "poll":
        fresh = s["output"][s["read"]:]
        s["read"] = len(s["output"])
        text = f"{fresh or '(no new output)'}\n\n{_status_line(s)}"
    else:
        lines = s["output"].split("\n") if s["output"] else []
        offset, limit = _int(args.get("offset")), _int(args.get("limit"))
        if offset is None and limit is not None:
            lines = lines[-limit:] if limit > 0 else []
        elif offset is not None:
            lines = lines[offset:] if limit is None else lines[offset:offset + limit]
        text = "\n".join(lines) or "(no output yet)"
    return text, False, ToolResult(output=text, exit_code=s["exit_code"])


_HANDLERS: dict[str, Callable[..., Any]] = {"read": _read, "write": _write, "edit": _edit,
                                            "exec": _exec, "process": _process}
