"""Executing abstract actions against an episode's workspace and sandbox.

File actions act on the host copy of the workspace through :class:`Workspace` (every path
confined to it); ``shell`` runs in the episode's bubblewrap sandbox. A mistake by the agent (no
such file, path outside the workspace, ``old`` text not found) becomes ``ToolResult.error``; a
failure of the sandbox itself raises :class:`SandboxError` so the episode is marked as an
infrastructure failure instead of being scored.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.models import Action, ToolResult
from harnessgrid.sandboxing.sandbox import HostTools, Sandbox
from harnessgrid.sandboxing.tool_hooks import note_result
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.timing import tool_span

if TYPE_CHECKING:
    from harnessgrid.sandboxing.tool_hooks import ToolHooks

MAX_LIST_ENTRIES = 500
MAX_SEARCH_RESULTS = 200


@dataclass
class Environment:
    """Where an episode's actions take effect."""

    workspace: Workspace
    sandbox: Sandbox
    hooks: ToolHooks | None = None
    """A session's approvals, product tools and event sink
    (:mod:`harnessgrid.sandboxing.tool_hooks`); None in training and evaluation episodes."""

    def host_tools(self) -> HostTools | None:
        """The product tools as commands inside the sandbox, or None without any."""
        hooks = self.hooks
        if hooks is None or not hooks.product_tools:
            return None
        from harnessgrid.sandboxing.tool_hooks import sandbox_tool_call

        async def handler(name: str, arguments: dict[str, object]) -> tuple[bool, str]:
            return await sandbox_tool_call(self, name, dict(arguments))

        return HostTools({n: t.description for n, t in hooks.product_tools.items()}, handler)


async def execute(action: Action, env: Environment) -> ToolResult:
    """Run one abstract action and report what happened; its host-side time (the sandbox round
    trip included) goes to the turn's ``tools_s`` (:mod:`harnessgrid.timing`)."""
    with tool_span() as span:
        result = await _execute(action, env)
        span.floor = result.duration_s  # the least it took: the rest may be loop wait
    note_result(env, result)  # a session's tool_result event says whether it went well
    return result


async def _execute(action: Action, env: Environment) -> ToolResult:
    start = time.perf_counter()
    try:
        if action.kind == "shell":
            return await _shell(action.args["command"], env)
        if action.kind == "tool":
            from harnessgrid.sandboxing.tool_hooks import run_product_tool

            return await run_product_tool(env, action.args["name"], action.args["arguments"])
        output = _file_action_total(action, env.workspace)
    except SandboxError:
        raise
    except HarnessgridError as exc:
        # The hint ("list the directory first") helps an agent as much as a user.
        error = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        return ToolResult(error=error, duration_s=time.perf_counter() - start)
    return ToolResult(output=output, duration_s=time.perf_counter() - start)


def _file_action_total(action: Action, ws: Workspace) -> str:
    """:func:`_file_action`, with what the workspace's checks let through and the OS refuses
    (a 5,000-character name, a NUL byte) reported as the agent's mistake, like any other bad
    path: an observation, never a crashed episode. Only the OS's reason is given: the host
    path of the workspace is none of the agent's business."""
    try:
        return _file_action(action, ws)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        main = next(iter(action.args.values()), "")
        raise HarnessgridError(f"cannot {action.kind} {main[:200]!r}: {reason[:200]}") from None


async def _shell(command: str, env: Environment) -> ToolResult:
    tools = env.host_tools()
    res = await (env.sandbox.run(command) if tools is None
                 else env.sandbox.run(command, host_tools=tools))
    return ToolResult(output=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                      truncated=res.truncated, timed_out=res.timed_out,
                      duration_s=res.duration_s)


def _file_action(action: Action, ws: Workspace) -> str:
    a = action.args
    match action.kind:
        case "read":
            return ws.read_text(a["path"])
        case "write":
            ws.write_text(a["path"], a["content"])
            return f"wrote {len(a['content'].encode())} bytes to {a['path']}"
        case "edit":
            n = ws.edit(a["path"], a["old"], a["new"])
            return f"replaced {n} occurrence{'s' if n != 1 else ''} in {a['path']}"
        case "list":
            entries = ws.list_dir(a["path"])
            more = len(entries) - MAX_LIST_ENTRIES
            shown = "\n".join(entries[:MAX_LIST_ENTRIES])
            return shown + (f"\n... {more} more entries" if more > 0 else "")
        case "search":
            hits = ws.search(a["pattern"], a["path"], max_results=MAX_SEARCH_RESULTS + 1)
            lines = [f"{f}:{n}:{text}" for f, n, text in hits[:MAX_SEARCH_RESULTS]]
            if len(hits) > MAX_SEARCH_RESULTS:
                lines.append("... more matches; narrow the pattern or path")
            return "\n".join(lines) if lines else "no matches"
        case "finish":
            return a["message"]
    raise AssertionError(f"unhandled action kind {action.kind}")


def as_shell(action: Action) -> Action:
    """The same effect as a shell command, for interfaces with a single shell tool
    (``bash_only``) and for the oracle acting through them."""
    a = action.args
    q = shlex.quote
    match action.kind:
        case "shell" | "finish":
            return action
        case "read":
            cmd = f"cat {q(a['path'])}"
        case "write":
            cmd = (f"mkdir -p \"$(dirname {q(a['path'])})\" && "
                   f"printf '%s' {q(a['content'])} > {q(a['path'])}")
        case "edit":
            script = ("import sys,pathlib;p=pathlib.Path(sys.argv[1]);t=p.read_text();"
                      "n=t.count(sys.argv[2]);"
                      "sys.exit('old text found %d times, expected 1' % n) if n!=1 else "
                      "p.write_text(t.replace(sys.argv[2],sys.argv[3]))")
            cmd = f"python3 -c {q(script)} {q(a['path'])} {q(a['old'])} {q(a['new'])}"
        case "list":
            cmd = f"ls -1Ap {q(a['path'])}"
        case "search":
            cmd = f"grep -rnE -- {q(a['pattern'])} {q(a['path'])}"
        case "tool":  # a product tool is a command calling back to the host (HostTools)
            cmd = f"{a['name']} {q(a['arguments'])}"
        case _:
            raise AssertionError(f"unhandled action kind {action.kind}")
    return Action.of("shell", command=cmd)
