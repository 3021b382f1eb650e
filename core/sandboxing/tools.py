"""Executing abstract actions against an episode's workspace and sandbox.

File actions act on the host copy of the workspace through :class:`Workspace` (every path
confined to it); ``shell`` runs in the episode's bubblewrap sandbox. A mistake by the agent (no
such file, path outside the workspace, ``old`` text not found) becomes ``ToolResult.error``; a
failure of the sandbox itself raises :class:`SandboxError` so the episode is marked as an
infrastructure failure instead of being scored.

In a session (an :class:`Environment` with hooks) every way of acting this module hands a
harness passes the product's approval first: :func:`execute`, and the ``workspace`` and
``sandbox`` of the environment, which are then views that ask
:func:`~harnessgrid.sandboxing.tool_hooks.approval` before each operation that reads, writes or
runs (see :mod:`harnessgrid.sandboxing.tool_hooks`, "Approval in one place").
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.models import Action, ToolResult
from harnessgrid.sandboxing.sandbox import CommandResult, HostTools, Sandbox
from harnessgrid.sandboxing.tool_hooks import (
    Denied,
    approval,
    approval_sync,
    denied_result,
    note_result,
)
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError
from harnessgrid.timing import tool_span

if TYPE_CHECKING:
    from harnessgrid.sandboxing.tool_hooks import ToolHooks

_T = TypeVar("_T")
MAX_LIST_ENTRIES = 500
MAX_SEARCH_RESULTS = 200
#: The exit code of a command the approval callback denied (a shell's "permission denied").
DENIED_EXIT_CODE = 126


class ApprovalDenied(WorkspaceError):
    """A workspace operation the product's approval callback denied; it did not happen."""


class Environment:
    """Where an episode's actions take effect: its ``workspace``, its ``sandbox`` and, in a
    session (or an episode run with ``on_tool_call``), its ``hooks`` (approvals, product tools,
    events: :mod:`harnessgrid.sandboxing.tool_hooks`; None in training and evaluation
    episodes).

    With hooks, ``workspace`` and ``sandbox`` are views of the real ones whose every file
    operation and command passes the approval callback first (:class:`ApprovedWorkspace`,
    :class:`ApprovedSandbox`): whichever documented way a harness acts, the product is asked.
    """

    def __init__(self, workspace: Workspace, sandbox: Sandbox,
                 hooks: ToolHooks | None = None, *, show_durations: bool = False) -> None:
        self._workspace = workspace
        self._sandbox = sandbox
        self.hooks = hooks
        #: Whether the model may be told how long actions took (``EpisodeLimits.durations``;
        #: see :meth:`shown`).
        self.show_durations = show_durations

    def __repr__(self) -> str:
        return (f"Environment(workspace={self._workspace!r}, sandbox={self._sandbox!r}, "
                f"hooks={self.hooks!r})")

    @property
    def workspace(self) -> Workspace:
        if self.hooks is None:
            return self._workspace
        return cast(Workspace, ApprovedWorkspace(self._workspace, self))

    @property
    def sandbox(self) -> Sandbox:
        if self.hooks is None:
            return self._sandbox
        return cast(Sandbox, ApprovedSandbox(self._sandbox, self))

    def shown(self, result: ToolResult) -> ToolResult:
        """``result`` as the model may be told it: what a harness formats into an observation.
        Its ``duration_s`` is NaN (unknown) unless the episode shows durations: a wall-clock
        time in the prompt depends on the machine's load, and the run would not repeat. The
        trajectory keeps the measured result."""
        if self.show_durations or math.isnan(result.duration_s):
            return result
        return result.model_copy(update={"duration_s": math.nan})

    def host_tools(self) -> HostTools | None:
        """The product tools as commands inside the sandbox, or None without any."""
        hooks = self.hooks
        if hooks is None or not hooks.product_tools:
            return None
        from harnessgrid.sandboxing.tool_hooks import sandbox_tool_call

        async def handler(name: str, arguments: dict[str, object]) -> tuple[bool, str]:
            return await sandbox_tool_call(self, name, dict(arguments))

        return HostTools({n: t.description for n, t in hooks.product_tools.items()}, handler)


class _View:
    """Forwards everything but the operations it checks to the real object."""

    def __init__(self, real: Any, env: Environment) -> None:
        self._real = real
        self._env = env

    def __getattr__(self, name: str) -> Any:
        if name in ("_real", "_env"):  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self._real, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._real!r})"


def _action(kind: str, args: Mapping[str, Any]) -> Action:
    """The abstract action a primitive performs, as the callback is asked about it (a value
    that is not text shown as text: the real operation refuses it with its own error)."""
    return Action.of(kind, **{k: v if isinstance(v, str) else repr(v)  # type: ignore[arg-type]
                              for k, v in args.items()})


def _approved_args(checked: Action | Denied, action: Action,
                   args: dict[str, Any]) -> dict[str, Any]:
    """The arguments to run with: the primitive's own (exactly as given: ``action`` shows them
    cleaned for the callback), or the callback's modification of them."""
    if isinstance(checked, Denied):
        raise ApprovalDenied(f"denied: {checked.reason}")
    return args if checked is action else {**args, **checked.args}


class ApprovedWorkspace(_View):
    """A session's :class:`Workspace` as a harness sees it: each operation that reads or
    changes files is approved first as the abstract action it is (``read``, ``write``,
    ``edit``, ``list``, ``search``); a denied one raises :class:`ApprovalDenied`. Path helpers
    (``resolve``, ``relative``, ``sandbox_path``, ``root``, ``mount_path``) are not checked:
    they read or write nothing."""

    _real: Workspace

    def _run(self, kind: str, args: dict[str, Any], run: Callable[..., _T]) -> _T:
        action = _action(kind, args)
        with approval_sync(self._env, action) as checked:
            return run(**_approved_args(checked, action, args))

    def exists(self, path: str) -> bool:
        return self._run("list", {"path": path}, self._real.exists)

    def read_bytes(self, path: str) -> bytes:
        return self._run("read", {"path": path}, self._real.read_bytes)

    def read_text(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        return self._run("read", {"path": path},
                         lambda path: self._real.read_text(path, offset, limit))

    def write_text(self, path: str, content: str) -> None:
        self._run("write", {"path": path, "content": content}, self._real.write_text)

    def write_bytes(self, path: str, data: bytes) -> None:
        shown = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data

        def write(path: str, content: str) -> None:
            changed = content != shown  # the callback's text, else the bytes as given
            self._real.write_bytes(path, content.encode() if changed else data)

        self._run("write", {"path": path, "content": shown}, write)

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        return self._run("edit", {"path": path, "old": old, "new": new},
                         lambda path, old, new: self._real.edit(path, old, new,
                                                                replace_all=replace_all))

    def list_dir(self, path: str = ".") -> list[str]:
        return self._run("list", {"path": path}, self._real.list_dir)

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        return self._run("list", {"path": path},
                         lambda path: self._real.glob(pattern, path))

    def search(self, pattern: str, path: str = ".", **options: Any) -> list[
            tuple[str, int, str]]:
        return self._run("search", {"pattern": pattern, "path": path},
                         lambda pattern, path: self._real.search(pattern, path, **options))

    def snapshot_files(self) -> dict[str, bytes]:
        return self._run("read", {"path": "."}, lambda path: self._real.snapshot_files())


def denied_command(denied: Denied) -> CommandResult:
    """A command the approval callback denied, as a shell reports a refused command."""
    return CommandResult(stdout="", stderr=f"denied: {denied.reason}\n",
                         exit_code=DENIED_EXIT_CODE, timed_out=False, truncated=False,
                         duration_s=0.0)


class ApprovedSandbox(_View):
    """A session's :class:`Sandbox` as a harness sees it: each command is approved first as a
    ``shell`` action (a denied one does not run: :func:`denied_command`); its ``workspace`` is
    the approved view too."""

    _real: Sandbox

    @property
    def workspace(self) -> Workspace:
        return self._env.workspace

    async def run(self, command: str, *, timeout_s: float | None = None,
                  cwd: str | None = None, env: Mapping[str, str] | None = None,
                  host_tools: HostTools | None = None) -> CommandResult:
        action = _action("shell", {"command": command})
        async with approval(self._env, action) as checked:
            if isinstance(checked, Denied):
                return denied_command(checked)
            run = command if checked is action else checked.args["command"]
            return await self._real.run(run, timeout_s=timeout_s, cwd=cwd, env=env,
                                        host_tools=host_tools)

    def run_sync(self, command: str, *, timeout_s: float | None = None,
                 cwd: str | None = None, env: Mapping[str, str] | None = None,
                 host_tools: HostTools | None = None) -> CommandResult:
        action = _action("shell", {"command": command})
        with approval_sync(self._env, action) as checked:
            if isinstance(checked, Denied):
                return denied_command(checked)
            run = command if checked is action else checked.args["command"]
            return self._real.run_sync(run, timeout_s=timeout_s, cwd=cwd, env=env,
                                       host_tools=host_tools)


async def execute(action: Action, env: Environment) -> ToolResult:
    """Run one abstract action and report what happened; its host-side time (the sandbox round
    trip included) goes to the turn's ``tools_s`` (:mod:`harnessgrid.timing`). In a session
    the action is approved first (:func:`~harnessgrid.sandboxing.tool_hooks.approval`); a
    denied one does not run and reports :func:`~harnessgrid.sandboxing.tool_hooks.denied_result`."""
    with tool_span() as span:
        async with approval(env, action) as checked:
            if isinstance(checked, Denied):
                result = denied_result(checked)
            else:
                result = await _execute(checked, env)
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
