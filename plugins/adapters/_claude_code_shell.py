"""Bash and TodoWrite.

Bash runs in the episode's sandbox under ``bash``. Like Claude Code's shell, the working
directory persists between calls and environment variables do not: the command runs in the
remembered directory and an EXIT trap reports the directory it ended in (on stderr, stripped
before the model sees it). A directory outside the workspace resets it to the workspace with a
note, as the real shell does. Timeouts are in milliseconds (default 120000, at most 600000).
The result is stdout, then stderr, each cut at 30000 characters with a ``... [N lines
truncated] ...`` note; a non-zero exit status comes first as ``Exit code N``.
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import HarnessgridError
from harnessgrid.models import ToolResult
from harnessgrid.observations import exit_code as safe_exit_code
from harnessgrid.plugins.adapters._claude_code_files import ToolError
from harnessgrid.plugins.adapters._claude_code_search import cut_output
from harnessgrid.plugins.adapters._claude_code_session import Session
from harnessgrid.workspace import Workspace, WorkspaceError

from harnessgrid.plugins.adapters._claude_code_tools import (  # isort: skip
    BASH_DEFAULT_TIMEOUT_MS,
    BASH_MAX_TIMEOUT_MS,
)

if TYPE_CHECKING:  # the sandbox module (and asyncio) load when an episode runs, not before
    from harnessgrid.sandbox import Sandbox

CWD_MARK = "__HG_CLAUDE_CODE_CWD__="
_COMMAND_ENV = "__HG_CC_CMD"
_RUNNER = ("trap 'printf \"\\n" + CWD_MARK + "%s\\n\" \"$PWD\" >&2' EXIT\n"
           f'__hg_cmd=${_COMMAND_ENV}; unset {_COMMAND_ENV}; eval "$__hg_cmd"')
WRAPPED = "exec bash -c " + shlex.quote(_RUNNER)


def _timeout_s(value: Any) -> float:
    if value is None:
        return BASH_DEFAULT_TIMEOUT_MS / 1000
    if not math.isfinite(value) or value <= 0:
        raise ToolError(f"timeout must be a positive number of milliseconds, got {value!r}")
    return min(float(value), BASH_MAX_TIMEOUT_MS) / 1000


def take_cwd(stderr: str) -> tuple[str, str | None]:
    """``stderr`` without the EXIT trap's report, and the directory it reported."""
    at = stderr.rfind("\n" + CWD_MARK)
    if at < 0:
        return stderr, None
    start = at + 1 + len(CWD_MARK)
    end = stderr.find("\n", start)
    end = len(stderr) if end < 0 else end
    return stderr[:at] + stderr[end + 1:], stderr[start:end]


def _settle_cwd(session: Session, ws: Workspace, reported: str | None) -> str:
    """Adopt the directory the command ended in; a note when it had to be reset."""
    if reported is None:
        return ""
    try:
        host = ws.resolve(reported)
    except WorkspaceError:
        host = None
    if host is None or not host.is_dir():
        session.cwd = "."
        return f"Shell cwd was reset to {ws.mount_path}"
    session.cwd = ws.relative(host)
    return ""


def format_result(stdout: str, stderr: str, exit_code: int | None, timed_out: bool,
                  timeout_s: float) -> str:
    out, _ = cut_output(stdout.strip("\n"))
    err, _ = cut_output(stderr.strip("\n"))
    if timed_out:
        err = (err + "\n" if err else "") + f"Command timed out after {timeout_s:g}s"
    body = "\n".join(part for part in (out, err) if part)
    if exit_code not in (0, None):
        code = safe_exit_code(exit_code)
        return f"Exit code {'?' if code is None else code}" + (f"\n{body}" if body else "")
    return body


async def bash(session: Session, ws: Workspace, sandbox: Sandbox,
               args: dict[str, Any]) -> tuple[str, ToolResult]:
    # The model may ask for less time, never more than the configured per-command limit.
    timeout_s = min(_timeout_s(args.get("timeout")), sandbox.limits.wall_s)
    notes: list[str] = []
    try:
        cwd_ok = ws.resolve(session.cwd).is_dir()
    except WorkspaceError:
        cwd_ok = False
    if not cwd_ok:
        session.cwd = "."
        notes.append(f"Shell cwd was reset to {ws.mount_path}")
    try:
        res = await sandbox.run(WRAPPED, timeout_s=timeout_s, cwd=session.cwd,
                                env={_COMMAND_ENV: args["command"]})
    except HarnessgridError as exc:
        if type(exc) is not HarnessgridError:  # SandboxError: an infrastructure failure
            raise
        raise ToolError(exc.message) from None
    stderr, reported = take_cwd(res.stderr)
    if note := _settle_cwd(session, ws, reported):
        notes.append(note)
    if notes:
        stderr = "\n".join([stderr.rstrip("\n"), *notes]) if stderr.strip() else "\n".join(notes)
    text = format_result(res.stdout, stderr, res.exit_code, res.timed_out, timeout_s)
    return text, ToolResult(output=res.stdout, stderr=stderr, exit_code=res.exit_code,
                            truncated=res.truncated or len(res.stdout) > 30_000,
                            timed_out=res.timed_out, duration_s=res.duration_s)


def todo_write(session: Session, args: dict[str, Any]) -> tuple[str, ToolResult]:
    """Replace the todo list and echo it back, so the model sees the state it set."""
    session.todos = [{"content": t["content"], "status": t["status"],
                      "activeForm": t["activeForm"]} for t in args["todos"]]
    if not session.todos:
        text = "The todo list is now empty."
    else:
        items = "\n".join(f"{i}. [{t['status']}] {t['content']}"
                          for i, t in enumerate(session.todos, 1))
        text = ("Todo list updated. Keep using it to track progress and carry on with the "
                f"current item. The list now reads:\n{items}")
    return text, ToolResult(output=text)
