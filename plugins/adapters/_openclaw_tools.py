"""OpenClaw's coding tools as the model sees them: ``read``, ``write``, ``edit``, ``exec`` and
``process`` (schemas, argument checks, result text), executed against a harnessgrid workspace.

The facts follow OpenClaw v2026.2.26 with pi-coding-agent 0.55.1 (see
:mod:`harnessgrid.plugins.adapters.openclaw`); the parameter schemas equal
``tests/fixtures/openclaw/tool_schemas-2026.2.26.json``, captured from the npm packages by
``scripts/adapter_schemas.py --openclaw``. Symbols named below are from OpenClaw's
``dist/pi-embedded-*.js`` unless said otherwise. Descriptions are harnessgrid's own; result
*formats* and error texts a model learns to read are kept.

read/write/edit accept Claude-style aliases (``file_path``, ``old_string``, ``new_string``)
and their schemas require none of the renamed fields (``patchToolSchemaForClaudeCompatibility``):
presence is checked when the tool runs, with OpenClaw's error (``assertRequiredParams``). A
``read`` without ``limit`` gathers up to 8 pages (``executeReadWithAdaptivePaging``).

What a tool throws reaches the model as OpenClaw's ``toToolDefinitions`` (which wraps every
tool, core and plugin alike) turns it into a result: a normal one, not ``isError``, whose text
is ``JSON.stringify({status: "error", tool, error: message}, null, 2)`` (:func:`thrown_text`).
Thrown are: missing parameters, read/write/edit failures (missing file, text not found, path
outside the workspace), exec's refusals and a command that *failed* (exit code 126 or 127, a
timeout, a signal: its output, a blank line, then the reason), and a blocked call. A command
that merely exits non-zero completes normally ("(Command exited with code N)"). Only a call
that fails the schema check (pi-agent-core's ``validateToolArguments``, before the tool runs)
or names no tool is an ``isError`` result, with the bare message.

Background exec sessions are emulated. The sandbox ends every process a command leaves behind,
so a session cannot outlive its ``exec`` call: a backgrounded command (``background: true``, or
a run longer than ``yieldMs``) runs to completion within its timeout, the model is told it is
"still running", and the finished output is kept as a session that ``process`` treats exactly as
OpenClaw treats a session that has since exited (stdin actions find no active session).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harnessgrid import safe_json
from harnessgrid.episode import EpisodeState
from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.models import Action, ToolCall, ToolResult, ToolSpec
from harnessgrid.observations import exit_code as safe_exit_code
from harnessgrid.plugins.adapters._js import js_len, js_suffix
from harnessgrid.sandboxing.tools import Environment

READ_MAX_LINES = 2000
READ_MAX_BYTES = 50 * 1024
#: ``MAX_ADAPTIVE_READ_PAGES``; the aggregate's byte cap is ``resolveAdaptiveReadMaxBytes``:
#: 20% of the model's context window at 4 characters a token, clamped to [50 KB, 512 KB].
READ_MAX_PAGES = 8
READ_MAX_AGGREGATE_BYTES = 512 * 1024
EXEC_MAX_OUTPUT_CHARS = 200_000
"""OpenClaw keeps this many characters of a command's output (the tail)."""
EXEC_DEFAULT_YIELD_MS = 10_000
EXEC_YIELD_MS_RANGE = (10, 120_000)  # createExecTool: clampWithDefault(yieldMs, 1e4, 10, 12e4)
SESSION_TAIL_CHARS = 2_000  # a finished session's ``tail`` (what poll shows)
LOG_TAIL_LINES = 200  # DEFAULT_LOG_TAIL_LINES
SESSIONS_KEY = "openclaw.sessions"
WINDOW_KEY = "openclaw.window_tokens"
PROCESS_ACTIONS = ("list", "poll", "log", "write", "send-keys", "submit", "paste", "kill",
                   "clear", "remove")
_RETRY = " Supply correct parameters before retrying."  # RETRY_GUIDANCE_SUFFIX

_NUMBER = {"type": "number"}
_STRING = {"type": "string"}


def _d(schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {**schema, "description": text}


_PATH = _d(_STRING, "File path (workspace-relative or absolute).")
_OLD_TEXT = _d(_STRING, "Exact passage to replace (one match).")
_NEW_TEXT = _d(_STRING, "Replacement text.")
#: Property order and shapes as the model sees them (see the fixture); descriptions ours and
#: short, on the properties that carry one in the real schema (all but ``env``; the fixture's
#: ``described`` lists them). An alias is the original's schema, description included, as
#: ``patchToolSchemaForClaudeCompatibility`` copies it.
SCHEMAS: dict[str, dict[str, Any]] = {
    "read": {"type": "object", "required": [], "properties": {
        "path": _PATH,
        "offset": _d(_NUMBER, "First line (1-based)."),
        "limit": _d(_NUMBER, "Most lines to show."),
        "file_path": _PATH}},
    "write": {"type": "object", "required": ["content"], "properties": {
        "path": _PATH,
        "content": _d(_STRING, "The complete new content."),
        "file_path": _PATH}},
    "edit": {"type": "object", "required": [], "properties": {
        "path": _PATH,
        "oldText": _OLD_TEXT,
        "newText": _NEW_TEXT,
        "file_path": _PATH, "old_string": _OLD_TEXT, "new_string": _NEW_TEXT}},
    "exec": {"type": "object", "required": ["command"], "properties": {
        "command": _d(_STRING, "Shell command line."),
        "workdir": _d(_STRING, "Directory to run in."),
        "env": {"type": "object", "patternProperties": {"^(.*)$": _STRING}},
        "yieldMs": _d(_NUMBER, "Background after this many ms (default 10000)."),
        "background": _d({"type": "boolean"}, "Background at once."),
        "timeout": _d(_NUMBER, "Kill after this many seconds."),
        "pty": _d({"type": "boolean"}, "Use a pseudo-terminal."),
        "elevated": _d({"type": "boolean"}, "Elevated rights, where allowed."),
        "host": _d(_STRING, "sandbox, gateway or node."),
        "security": _d(_STRING, "deny, allowlist or full."),
        "ask": _d(_STRING, "off, on-miss or always."),
        "node": _d(_STRING, "Node for host=node.")}},
    "process": {"type": "object", "required": ["action"], "properties": {
        "action": _d(_STRING, "|".join(PROCESS_ACTIONS)),
        "sessionId": _d(_STRING, "Session id (not for list)."),
        "data": _d(_STRING, "write: stdin data."),
        "keys": _d({"type": "array", "items": _STRING}, "send-keys: key tokens."),
        "hex": _d({"type": "array", "items": _STRING}, "send-keys: hex bytes."),
        "literal": _d(_STRING, "send-keys: literal text."),
        "text": _d(_STRING, "paste: text."),
        "bracketed": _d({"type": "boolean"}, "paste: in bracketed mode."),
        "eof": _d({"type": "boolean"}, "write: then close stdin."),
        "offset": _d(_NUMBER, "log: first line (0-based)."),
        "limit": _d(_NUMBER, "log: line count."),
        "timeout": _d({"type": "number", "minimum": 0}, "poll: wait up to this many ms.")}},
}
#: ``CLAUDE_PARAM_GROUPS``: what must be present when the tool runs (one key of each group,
#: a non-blank string unless empty is allowed), and how the error names it.
_REQUIRED: dict[str, list[tuple[tuple[str, ...], str, bool]]] = {
    "read": [(("path", "file_path"), "path (path or file_path)", False)],
    "write": [(("path", "file_path"), "path (path or file_path)", False),
              (("content",), "content", False)],
    "edit": [(("path", "file_path"), "path (path or file_path)", False),
             (("oldText", "old_string"), "oldText (oldText or old_string)", False),
             (("newText", "new_string"), "newText (newText or new_string)", True)],
}
_ALIASES = (("file_path", "path"), ("old_string", "oldText"), ("new_string", "newText"))


def normalize(args: Mapping[str, Any]) -> dict[str, Any]:
    """``normalizeToolParams``: an alias becomes the real name unless that is given too."""
    out = dict(args)
    for alias, real in _ALIASES:
        if alias in out and real not in out:
            out[real] = out.pop(alias)
    return out


def missing_parameters(tool: str, args: Mapping[str, Any]) -> str | None:
    """``assertRequiredParams``: OpenClaw's error for absent (or blank) required values."""
    missing = [label for keys, label, allow_empty in _REQUIRED.get(tool, [])
               if not any(isinstance(args.get(k), str) and (allow_empty or args[k].strip())
                          for k in keys)]
    if not missing:
        return None
    noun = "parameter" if len(missing) == 1 else "parameters"
    return f"Missing required {noun}: {', '.join(missing)}.{_RETRY}"


SUMMARIES: dict[str, str] = {
    "read": "Show a file's text, at most 2000 lines or 50 KB per call",
    "write": "Create a file or replace everything in it",
    "edit": "Swap one exact passage of a file for new text",
    "exec": "Run a shell command in the workspace, optionally in the background",
    "process": "Look after background exec sessions (list, poll, log, write, kill, ...)",
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


#: ``TOOL_NAME_ALIASES`` of ``normalizeToolName``: names that stand for a core tool.
TOOL_NAME_ALIASES = {"bash": "exec", "apply-patch": "apply_patch"}
_THROWN_KEYS = ("status", "tool", "error")


def _error_message(message: str) -> str:
    """``describeToolExecutionError`` of ``new Error(message)``: the message, or what
    ``String(err)`` gives when it is blank."""
    if message.strip():
        return message
    return f"Error: {message}" if message else "Error"


def thrown_text(tool: str, message: str) -> str:
    """What the model reads when tool ``tool`` throws ``message`` (or its call is blocked):
    ``toToolDefinitions``' catch, ``jsonResult({status: "error", tool: normalizeToolName(name),
    error})``, as ``JSON.stringify(payload, null, 2)`` prints it (non-ASCII unescaped)."""
    name = tool.strip().lower()
    payload = {"status": "error", "tool": TOOL_NAME_ALIASES.get(name, name),
               "error": _error_message(message)}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def thrown_payload(text: str) -> dict[str, str] | None:
    """The ``{status, tool, error}`` payload if ``text`` is a :func:`thrown_text`, else None
    (what the session file records as the result's ``details``). Never raises: ``text`` may
    be any tool output (a command can print that prefix and then anything)."""
    if not text.startswith('{\n  "status": "error",'):
        return None
    try:
        value = safe_json.loads(text)
    except safe_json.JSONError:
        return None
    if not isinstance(value, dict) or tuple(value) != _THROWN_KEYS or not all(
            isinstance(v, str) for v in value.values()):
        return None
    return value


@dataclass(frozen=True)
class CallOutcome:
    """One executed call: what the model reads back (never an ``isError`` result: a thrown
    error is :func:`thrown_text`), and the abstract action and result harnessgrid records
    (``result.error`` set when the tool threw)."""

    text: str
    action: Action
    result: ToolResult


def check_arguments(call: ToolCall, plugins: Mapping[str, dict[str, Any]] | None = None,
                    core: Mapping[str, dict[str, Any]] = SCHEMAS) -> str | None:
    """Why ``call`` cannot run (unknown tool, undecodable or schema-violating arguments), or
    None. The message lists each violation with its field, then the arguments received.
    ``plugins``: the parameter schemas of plugin tools (an embedding product's tools), checked
    like the core tools'; ``core``: the release's core tools (default 2026.2.26's)."""
    schemas = {**core, **(plugins or {})}
    if call.name not in schemas:
        return f"Tool {call.name!r} does not exist. Available tools: {', '.join(schemas)}."
    if call.parse_error is not None:
        raw = (call.raw_arguments or "")[:300]
        return (f"The arguments of the {call.name} call are not valid JSON "
                f"({call.parse_error}): {raw}")
    import jsonschema  # here, not at import: loading plugins must stay cheap (50 ms)

    validator = jsonschema.Draft202012Validator(schemas[call.name])
    problems = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.path))
    if not problems:
        return None
    lines = [f"  - {'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in problems]
    return (f"Invalid arguments for tool {call.name!r}:\n" + "\n".join(lines)
            + f"\n\nArguments received:\n{json.dumps(call.arguments, indent=2)[:2000]}")


def describe(name: str, a: Mapping[str, Any]) -> Action:
    """The abstract action a valid call (arguments normalized) stands for. ``process`` has no
    abstract counterpart; it is recorded as a shell no-op (``: process poll ID``) so replaying
    it changes nothing; so is a call that failed its presence check."""
    match name:
        case "read" if "path" in a:
            return Action.of("read", path=a["path"])
        case "write" if "path" in a and "content" in a:
            return Action.of("write", path=a["path"], content=a["content"])
        case "edit" if {"path", "oldText", "newText"} <= set(a):
            return Action.of("edit", path=a["path"], old=a["oldText"], new=a["newText"])
        case "exec":
            return Action.of("shell", command=a["command"])
    target = f" {a['sessionId']}" if isinstance(a.get("sessionId"), str) else ""
    return Action.of("shell", command=f": {name} {a.get('action', '')}{target}".rstrip())


@dataclass(frozen=True)
class ExecLimits:
    """How long ``exec`` may run: OpenClaw's 1800 s default is longer than an episode, so a
    call without ``timeout`` (or with NaN, infinity, zero or a negative one) gets the sandbox's
    per-command limit, and an explicit one may shorten it, never lengthen it (nor exceed
    ``max_timeout_s``)."""

    max_timeout_s: float = 600.0


async def run_call(call: ToolCall, env: Environment, state: EpisodeState,
                   limits: ExecLimits) -> CallOutcome:
    """Execute one call that passed :func:`check_arguments`: aliases resolved, presence
    checked (thrown, as OpenClaw's ``assertRequiredParams`` does), then the tool. Whatever
    the tool throws becomes :func:`thrown_text`; the record keeps the message as its error."""
    args = normalize(call.arguments)
    missing = missing_parameters(call.name, args)
    action = describe(call.name, args if missing is None else {})
    if missing is not None:
        return CallOutcome(text=thrown_text(call.name, missing), action=action,
                           result=ToolResult(error=missing))
    handler: Callable[..., Any] = _HANDLERS[call.name]
    try:
        if call.name in ("exec", "process"):
            text, threw, result = await handler(args, env, state, limits)
        elif call.name == "read":
            text = handler(args, env, _read_cap(state))
            threw, result = False, ToolResult(output=text)
        else:
            text = handler(args, env)
            threw, result = False, ToolResult(output=text)
    except SandboxError:
        raise
    except (HarnessgridError, _Failure) as exc:
        text = exc.message if isinstance(exc, HarnessgridError) else str(exc)
        threw, result = True, ToolResult(error=text)
    return CallOutcome(text=thrown_text(call.name, text) if threw else text, action=action,
                       result=result)


def _read_cap(state: EpisodeState) -> int:
    """``resolveAdaptiveReadMaxBytes`` for the episode's context window (50 KB unknown)."""
    window = state.scratch.get(WINDOW_KEY)
    if not isinstance(window, int) or window <= 0:
        return READ_MAX_BYTES
    return max(READ_MAX_BYTES, min(int(window * 4 * 0.2), READ_MAX_AGGREGATE_BYTES))


class _Failure(Exception):
    """A tool ran and failed; its message is what the model reads."""


def _int(value: Any) -> int | None:
    return None if value is None else math.floor(value)


# ---------------------------------------------------------------------------------- file tools


def _size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    return f"{n / 1024:.1f}KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f}MB"


def _cap_size(n: int) -> str:
    """``formatBytes`` (the aggregate cap's note): whole KB, MB with one decimal."""
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:.1f}MB"
    return f"{round(n / 1024)}KB" if n >= 1024 else f"{n}B"


def _js_number(value: Any) -> str:
    """A number as JavaScript prints it in a template string (``5``, ``2.5``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class _Page:
    text: str
    shown: int  # lines shown; 0 when the first line alone was over the byte limit
    cut: bool  # stopped by the 2000-line or 50 KB limit (a continuation note ends ``text``)


def _read_page(path: str, lines: list[str], offset: Any, limit: int | None) -> _Page:
    """One call of pi-coding-agent's read (``dist/core/tools/read.js``): whole lines up to 2000
    lines / 50 KB from ``offset``, then a note saying how to continue."""
    start = max(1, _int(offset) or 1) if offset else 1
    if start > len(lines):
        raise _Failure(f"Offset {_js_number(offset)} is beyond end of file ({len(lines)} lines "
                       "total)")
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
        return _Page(f"[Line {start} is {_size(len(wanted[0].encode()))}, exceeds "
                     f"{_size(READ_MAX_BYTES)} limit. Use bash: sed -n '{start}p' {path} | "
                     f"head -c {READ_MAX_BYTES}]", 0, True)
    text = "\n".join(shown)
    end = start + len(shown) - 1
    if cut_by == "lines":
        return _Page(f"{text}\n\n[Showing lines {start}-{end} of {len(lines)}. Use "
                     f"offset={end + 1} to continue.]", len(shown), True)
    if cut_by == "bytes":
        return _Page(f"{text}\n\n[Showing lines {start}-{end} of {len(lines)} "
                     f"({_size(READ_MAX_BYTES)} limit). Use offset={end + 1} to continue.]",
                     len(shown), True)
    if limit is not None and end < len(lines):
        return _Page(f"{text}\n\n[{len(lines) - end} more lines in file. Use offset={end + 1} "
                     "to continue.]", len(shown), False)
    return _Page(text, len(shown), False)


def _read(args: Mapping[str, Any], env: Environment, max_bytes: int = READ_MAX_BYTES) -> str:
    """read: with a positive ``limit`` one page; without, ``executeReadWithAdaptivePaging``:
    pages joined (their continuation notes dropped) while they fit ``max_bytes``, at most 8,
    and a note where the aggregate was capped."""
    path: str = args["path"]
    if not env.workspace.exists(path):  # pi's read: fs.access throws Node's ENOENT error
        raise _Failure("ENOENT: no such file or directory, access "
                       f"'{env.workspace.sandbox_path(path)}'")
    lines = env.workspace.read_text(path).split("\n")
    limit = args.get("limit")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and math.isfinite(
            limit) and limit > 0:
        return _read_page(path, lines, args.get("offset"), _int(limit)).text
    raw = args.get("offset")
    offset = math.floor(raw) if isinstance(raw, int | float) and not isinstance(
        raw, bool) and math.isfinite(raw) and raw > 0 else 1
    text, used, capped_at = "", 0, None
    for page_no in range(READ_MAX_PAGES):
        page = _read_page(path, lines, offset, None)
        more = page.cut and page.shown > 0 and page_no < READ_MAX_PAGES - 1
        body = page.text[:page.text.rfind("\n\n[")] if more else page.text
        piece = ("\n\n" if text else "") + body
        if text and used + len(piece.encode()) > max_bytes:
            capped_at = offset
            break
        text, used = text + piece, used + len(piece.encode())
        if not more:
            return text
        offset += page.shown
        if used >= max_bytes:
            capped_at = offset
            break
    if capped_at is not None:
        text += (f"\n\n[Read output capped at {_cap_size(max_bytes)} for this call. Use "
                 f"offset={capped_at} to continue.]")
    return text


def _write(args: Mapping[str, Any], env: Environment) -> str:
    env.workspace.write_text(args["path"], args["content"])
    # pi's write.js counts ``content.length``: UTF-16 units, not bytes ("😀" counts 2, "é" 1)
    return f"Successfully wrote {js_len(args['content'])} bytes to {args['path']}"


def _edit(args: Mapping[str, Any], env: Environment) -> str:
    path, old, new = args["path"], args["oldText"], args["newText"]
    if not env.workspace.exists(path):  # pi's edit.js texts, here and below
        raise _Failure(f"File not found: {path}")
    text = env.workspace.read_text(path)
    count = text.count(old) if old else 0
    if count == 0:
        raise _Failure(f"Could not find the exact text in {path}. The old text must match "
                       "exactly including all whitespace and newlines.")
    if count > 1:
        raise _Failure(f"Found {count} occurrences of the text in {path}. The text must be "
                       "unique. Please provide more context to make it unique.")
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
    # ``trimWithCap``: the cap counts as JavaScript does (UTF-16 units)
    cut = js_len(text) - EXEC_MAX_OUTPUT_CHARS
    if cut <= 0:
        return text, False
    return (f"[... {cut} earlier characters of output dropped ...]\n"
            + js_suffix(text, EXEC_MAX_OUTPUT_CHARS), True)


def _failure_reason(exit_code: int | None, killed: str | None, timed_out: bool,
                    timeout: float) -> str | None:
    """Why a finished command counts as failed in OpenClaw (None: it completed, whatever its
    exit code)."""
    if timed_out:
        return f"Command timed out after {_js_number(timeout)} seconds"
    if exit_code is None:  # the sandbox's own note on why ends the output
        return "Command aborted by signal SIGKILL"
    if killed in ("cpu", "file_size"):
        return f"Command aborted by signal {'SIGXCPU' if killed == 'cpu' else 'SIGXFSZ'}"
    if exit_code == 126:
        return "Command not executable (permission denied)"
    if exit_code == 127:
        return "Command not found"
    return None


def _refusal(args: Mapping[str, Any]) -> str | None:
    """What OpenClaw's exec refuses under its default configuration (elevated mode off, host
    ``sandbox`` without a sandbox runtime: the shell runs where the gateway runs). ``security``,
    ``ask`` and ``node`` change nothing there (they apply to gateway/node hosts), so they are
    accepted; ``pty`` is accepted and the command runs without a terminal (see module doc)."""
    if args.get("elevated") is True:  # createExecTool: the "elevated is not available" error
        return "\n".join([
            "elevated is not available right now (runtime=direct).",
            "Failing gates: enabled (tools.elevated.enabled / "
            "agents.list[].tools.elevated.enabled)",
            "Fix-it keys:", "- tools.elevated.enabled", "- tools.elevated.allowFrom.<provider>",
            "- agents.list[].tools.elevated.enabled",
            "- agents.list[].tools.elevated.allowFrom.<provider>"])
    host = args.get("host")
    requested = host.strip().lower() if isinstance(host, str) else ""
    if requested in ("gateway", "node"):
        return (f"exec host not allowed (requested {requested}; configure "
                "tools.exec.host=sandbox to allow).")
    if requested == "sandbox":
        return ("exec host=sandbox is configured, but sandbox runtime is unavailable for this "
                "session.\nEnable sandbox mode (`agents.defaults.sandbox.mode=\"non-main\"` or "
                "`\"all\"`) or set tools.exec.host to \"gateway\"/\"node\".")
    return None


def yield_window_ms(args: Mapping[str, Any]) -> float:
    """How long exec waits before backgrounding: 0 with ``background``, else ``yieldMs``
    clamped to [10, 120000] (10000 when absent or not a finite number)."""
    if args.get("background") is True:
        return 0
    value = args.get("yieldMs")
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return EXEC_DEFAULT_YIELD_MS
    low, high = EXEC_YIELD_MS_RANGE
    return min(max(float(value), low), high)


async def _exec(args: Mapping[str, Any], env: Environment, state: EpisodeState,
                limits: ExecLimits) -> tuple[str, bool, ToolResult]:
    command: str = args["command"]
    refused = _refusal(args)
    if refused is not None:
        raise _Failure(refused)
    requested = args.get("timeout")
    configured = env.sandbox.limits.wall_s
    # Clamped to the configured limit: NaN, inf, negatives and larger values cannot lift it.
    timeout = (configured if not isinstance(requested, int | float)
               or isinstance(requested, bool) or not math.isfinite(requested) or requested <= 0
               else min(float(requested), limits.max_timeout_s, configured))
    extra_env = args.get("env") if isinstance(args.get("env"), dict) else None
    # One output stream, in the order it was written (OpenClaw aggregates stdout and stderr as
    # they arrive): stderr joins stdout at the shell; what stays on stderr is the sandbox's.
    # An embedding session's product tools are commands here too (none outside sessions).
    tools = env.host_tools()
    host: dict[str, Any] = {} if tools is None else {"host_tools": tools}
    # On the command's first line, so the shell's messages keep its line numbers
    # ("bash: line 1: ..."), as under OpenClaw's ``$SHELL -c``.
    res = await env.sandbox.run("exec 2>&1; " + command, timeout_s=timeout,
                                cwd=args.get("workdir"), env=extra_env, **host)
    output, cut = _aggregate(res.stdout, res.stderr)
    reason = _failure_reason(res.exit_code, res.killed, res.timed_out, timeout)
    result = ToolResult(output=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                        timed_out=res.timed_out, truncated=res.truncated or cut,
                        duration_s=res.duration_s)
    if res.duration_s * 1000 >= yield_window_ms(args):
        sessions = _sessions(state)
        sid = _new_session_id(state, len(sessions))
        pid = 4000 + 37 * len(sessions)
        sessions[sid] = {"command": command, "pid": pid, "output": output,
                         "exit_code": res.exit_code, "failed": reason is not None,
                         "duration_s": res.duration_s, "killed": res.killed}
        text = (f"Command still running (session {sid}, pid {pid}). Use process "
                "(list/poll/log/write/kill/clear/remove) for follow-up.")
        return text, False, result.model_copy(update={"output": text, "stderr": "",
                                                      "exit_code": None})
    if reason is not None:  # runExecProcess: the output, a blank line, the reason; thrown
        text = f"{output}\n\n{reason}" if output else reason
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


def _log_slice(text: str, offset: Any, limit: Any) -> tuple[str, int]:
    """``sliceLogLines`` with ``resolveLogSliceWindow``: the last 200 lines by default, the
    last ``limit`` lines without ``offset``, else ``limit`` lines from ``offset``."""
    lines = text.replace("\r\n", "\n").split("\n") if text else []
    if lines and lines[-1] == "":
        lines.pop()
    def finite(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)

    if offset is None and limit is None:
        limit = LOG_TAIL_LINES
    start = max(0, math.floor(offset)) if finite(offset) else 0
    if limit is not None and offset is None:
        start = max(len(lines) - max(0, math.floor(limit)), 0) if finite(limit) else 0
    end = start + max(0, math.floor(limit)) if finite(limit) else None
    return "\n".join(lines[start:end]), len(lines)


async def _process(args: Mapping[str, Any], env: Environment, state: EpisodeState,
                   limits: ExecLimits) -> tuple[str, bool, ToolResult]:
    """``createProcessTool`` against the emulated sessions, which have all exited: every
    action's text is OpenClaw's for an exited session (none of them is an ``isError``)."""
    sessions = _sessions(state)
    action: str = args["action"]

    def done(text: str, **update: Any) -> tuple[str, bool, ToolResult]:
        return text, False, ToolResult(output=text, **update)

    if action == "list":
        # The runtime column only where the episode shows durations (EpisodeLimits.durations):
        # a measured time in the prompt would keep the run from repeating.
        rows = [f"{sid} {'failed' if s['failed'] else 'completed':<9} "
                + (f"{_duration(s['duration_s'])} " if env.show_durations else "")
                + f":: {s['command'].splitlines()[0][:60]}"
                for sid, s in reversed(sessions.items())]  # newest first
        return done("\n".join(rows) or "No running or recent sessions.")
    sid = args.get("sessionId")
    if not sid:
        return done("sessionId is required for this action.")
    s = sessions.get(sid)
    if action in ("write", "send-keys", "submit", "paste", "kill"):
        return done(f"No active session found for {sid}")  # no session is still running
    if action == "poll":
        if s is None:
            return done(f"No session found for {sid}")
        tail = js_suffix(s["output"], SESSION_TAIL_CHARS)  # ``tail``: JS string units
        return done(f"{tail or '(no output recorded)'}\n\n{_status_line(s)}",
                    exit_code=s["exit_code"])
    if action == "log":
        if s is None:
            return done(f"No session found for {sid}")
        default = args.get("offset") is None and args.get("limit") is None
        text, total = _log_slice(s["output"], args.get("offset"), args.get("limit"))
        note = (f"\n\n[showing last {LOG_TAIL_LINES} of {total} lines; pass offset/limit to "
                "page]") if default and total > LOG_TAIL_LINES else ""
        return done((text or "(no output recorded)") + note, exit_code=s["exit_code"])
    if action == "clear":
        if s is None:
            return done(f"No finished session found for {sid}")
        del sessions[sid]
        return done(f"Cleared session {sid}.")
    if action == "remove":
        if s is None:
            return done(f"No session found for {sid}")
        del sessions[sid]
        return done(f"Removed session {sid}.")
    return done(f"Unknown action {action}")


_HANDLERS: dict[str, Callable[..., Any]] = {"read": _read, "write": _write, "edit": _edit,
                                            "exec": _exec, "process": _process}
