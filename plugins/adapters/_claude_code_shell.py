"""Bash and TodoWrite.

Bash runs in the episode's sandbox under ``/bin/bash``, which names itself so in its messages. Like Claude Code's shell, the working
directory persists between calls and environment variables do not: the command runs in the
remembered directory and an EXIT trap reports the directory it ended in (on stderr, stripped
before the model sees it). A directory outside the workspace resets it to the workspace with a
note, as the real shell does. Timeouts are in milliseconds (default 120000, at most 600000).

Results follow Claude Code 1.0.96's ``cli.js`` (symbols named where used): a command that
succeeds shows stdout then stderr, cut at 30000 characters with a ``... [N lines truncated] ...``
note; a command that fails is a tool error whose text is stderr then stdout, with no exit-code
line, capped at 10000 characters with the middle elided. Exit status 1 of ``grep``, ``rg``,
``find``, ``diff``, ``test`` and ``[`` is an answer, not a failure. ``run_in_background`` is
accepted; the command runs to completion (no BashOutput/KillBash here).

The command reaches bash through a here-document on fd 3, not argv or the environment, so a
command over the kernel's 128 KiB limit for one argument still runs (the sandbox sources long
scripts from an in-memory file).
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import HarnessgridError
from harnessgrid.models import ToolResult
from harnessgrid.plugins.adapters._claude_code_files import ToolError
from harnessgrid.plugins.adapters._claude_code_search import cut_output
from harnessgrid.plugins.adapters._claude_code_session import Session
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError

from harnessgrid.plugins.adapters._claude_code_tools import (  # isort: skip
    BASH_DEFAULT_TIMEOUT_MS,
    BASH_MAX_TIMEOUT_MS,
)

if TYPE_CHECKING:  # the sandbox module (and asyncio) load when an episode runs, not before
    from harnessgrid.sandboxing.sandbox import HostTools, Sandbox

CWD_MARK = "__HG_CLAUDE_CODE_CWD__="
# The command arrives on fd 3 (a here-document); read whole, fd closed, then evaluated, so it
# sees the same stdin, argv and environment as before and no size limit of argv or env applies.
# Bash's messages must read as the real shell's (``/bin/bash: line 1: x: command not found``):
# cli.js spawns ``/bin/bash -c -l "... && eval <command quoted> < /dev/null && ..."`` on one
# line, so $0 is ``/bin/bash`` and bash numbers the eval'd lines from the line the quoted
# command *ends* on; the runner is one line and evals the command behind as many line breaks
# as the command has, less one, which numbers every line as the real shell does.
_RUNNER = ("trap 'printf \"\\n" + CWD_MARK + "%s\\n\" \"$PWD\" >&2' EXIT; "
           "IFS= read -r -d '' __hg_cmd <&3; exec 3<&-; __hg_n=${__hg_cmd//[!$'\\n']/}; "
           "eval \"${__hg_n%$'\\n'}$__hg_cmd\"")
_HEREDOC_END = "__HG_CC_COMMAND_END"

#: cli.js 1.0.96, the exit-code interpreters ``Ij6`` (looked up by ``Wj6`` on the first word of
#: the last pipeline stage, ``Jj6``): for these, exit 1 is an answer and only >= 2 an error.
EXIT_ONE_IS_AN_ANSWER = frozenset({"grep", "rg", "find", "diff", "test", "["})
#: cli.js ``UT0``: a failed tool's text over 1e4 characters keeps the first and last 5000.
ERROR_MAX_CHARS = 10_000
#: cli.js: the exit code a timed-out command reports (``Nr2``).
TIMEOUT_EXIT_CODE = 143
_SANDBOX_TIMEOUT_NOTE = "[sandbox] command killed: it ran longer than"


def wrapped(command: str) -> str:
    """The sandbox script that runs ``command`` under bash with the cwd-reporting trap."""
    end = _HEREDOC_END
    while end in command:  # a delimiter line the command cannot contain
        end += "_"
    return f"exec /bin/bash -c {shlex.quote(_RUNNER)} 3<<'{end}'\n{command}\n{end}\n"


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


def is_error(command: str, exit_code: int | None) -> bool:
    """cli.js ``h1B``: whether an exit status is a failure, judged by the last pipeline stage's
    first word (``a | grep x`` exiting 1 found nothing; that is not an error)."""
    if exit_code in (0, None):
        return False
    words = (command.split("|")[-1].strip() or command).split()
    first = words[0] if words else ""
    return exit_code >= 2 if first in EXIT_ONE_IS_AN_ANSWER else True


def cap_error(text: str) -> str:
    """cli.js ``UT0``: error text longer than 10000 characters keeps 5000 at each end."""
    if len(text) <= ERROR_MAX_CHARS:
        return text
    half = ERROR_MAX_CHARS // 2
    return (f"{text[:half]}\n\n... [{len(text) - ERROR_MAX_CHARS} characters truncated] ..."
            f"\n\n{text[-half:]}")


def duration(ms: float) -> str:
    """cli.js ``Lh``: ``45s``, ``2.5s``, ``2m 0.0s``, ``1h 0m 0.0s``."""
    if ms < 60_000:
        seconds = f"{ms / 1000:.1f}"
        return (seconds[:-2] if seconds.endswith(".0") else seconds) + "s"
    hours, minutes = int(ms // 3_600_000), int(ms % 3_600_000 // 60_000)
    rest = f"{ms % 60_000 / 1000:.1f}s"
    return f"{hours}h {minutes}m {rest}" if hours else f"{minutes}m {rest}"


def format_result(stdout: str, stderr: str, failed: bool) -> str:
    """The tool result text: on success stdout then stderr (cut at 30000 characters, cli.js
    ``VM``), on failure stderr then stdout (capped by :func:`cap_error`, cli.js ``bM5``)."""
    if failed:
        return cap_error("\n".join(p for p in (stderr, stdout) if p).strip() or "Error")
    both, _ = cut_output(stdout.rstrip() + "\n" + stderr.rstrip() + "\n")
    return both.lstrip("\n").rstrip()


def format_result_v2(stdout: str, stderr: str, failed: bool, exit_code: int) -> str:
    """2.x: a failure is ``Exit code N``, then stdout, then stderr; a success with no output
    says so."""
    if failed:
        # a process's status fits in a byte; a sandbox that reports more (a hostile one) is
        # shown the byte a real process would have left
        code = exit_code if -255 <= exit_code <= 255 else exit_code & 0xFF
        parts = (f"Exit code {code}", stdout.strip("\n"), stderr.strip("\n"))
        return cap_error("\n".join(p for p in parts if p))
    return format_result(stdout, stderr, False) or "(Bash completed with no output)"


async def bash(session: Session, ws: Workspace, sandbox: Sandbox, args: dict[str, Any],
               host_tools: HostTools | None = None,
               v2: bool = False) -> tuple[str, ToolResult, bool]:
    """Run the command; its text, its record, and whether Claude Code counts it failed.
    ``host_tools``: an embedding session's product tools, commands inside the sandbox;
    ``v2``: 2.x's failure text."""
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
        # host_tools only when there are some: outside sessions the call is as it always was
        extra: dict[str, Any] = {} if host_tools is None else {"host_tools": host_tools}
        res = await sandbox.run(wrapped(args["command"]), timeout_s=timeout_s, cwd=session.cwd,
                                **extra)
    except HarnessgridError as exc:
        if type(exc) is not HarnessgridError:  # SandboxError: an infrastructure failure
            raise
        raise ToolError(exc.message) from None
    stderr, reported = take_cwd(res.stderr)
    if note := _settle_cwd(session, ws, reported):
        notes.append(note)
    exit_code = TIMEOUT_EXIT_CODE if res.timed_out else res.exit_code
    if res.timed_out:  # cli.js: the timeout note leads stderr, joined by a space; it replaces
        # the sandbox's own note saying the same
        stderr = "\n".join(line for line in stderr.split("\n")
                           if not line.startswith(_SANDBOX_TIMEOUT_NOTE)).strip("\n")
        stderr = " ".join(p for p in (f"Command timed out after {duration(timeout_s * 1000)}",
                                      stderr) if p)
    # No exit code: the sandbox killed the command (a limit), which the real shell reports as a
    # signal's non-zero status.
    failed = res.timed_out or exit_code is None or is_error(args["command"], exit_code)
    if notes and not failed:  # cli.js ``_j1``: the note follows the output
        stderr = "\n".join([stderr.strip(), *notes]) if stderr.strip() else "\n".join(notes)
    text = (format_result_v2(res.stdout, stderr, failed,
                             TIMEOUT_EXIT_CODE if exit_code is None else exit_code) if v2
            else format_result(res.stdout, stderr, failed))
    return text, ToolResult(output=res.stdout, stderr=stderr, exit_code=res.exit_code,
                            truncated=res.truncated or len(res.stdout) > 30_000,
                            timed_out=res.timed_out, duration_s=res.duration_s), failed


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
