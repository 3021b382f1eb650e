"""Gemini CLI's run_shell_command in the episode's sandbox.

Every command runs from the project root (or ``dir_path``) with ``bash -c``, stdout and stderr
merged as the CLI's pty merges them; the answer (``ShellToolInvocation.execute`` in the bundle)
is wrapped in ``<untrusted_context>`` (``wrapUntrusted``) and cut past 40000 characters
(``formatTruncatedToolOutput``).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import HarnessgridError
from harnessgrid.models import ToolResult
from harnessgrid.observations import exit_code
from harnessgrid.plugins.adapters._gemini_cli_session import (
    Answer,
    Session,
    fail,
    saved_output_name,
    target,
)
from harnessgrid.plugins.adapters._js import js_len, js_prefix, js_suffix
from harnessgrid.sandboxing.workspace import Workspace

if TYPE_CHECKING:
    from harnessgrid.sandboxing.sandbox import Sandbox

SHELL_OUTPUT_LIMIT = 40_000  # DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
#: The shell the CLI names in bash's messages, and the lines its wrapper puts before the
#: command (bash reports the first line of a one-line command as ``line 4``).
SHELL_NAME = "/usr/bin/bash"
_WRAPPER_LINES = 3


async def run_shell_command(session: Session, ws: Workspace, sandbox: Sandbox,
                            args: dict[str, Any], call_id: str) -> Answer:
    """``ShellToolInvocation.execute``: ``Output:``, ``Exit Code:`` when not 0, the PGID; a
    command the sandbox stopped is reported as the CLI reports its timeout."""
    where = args.get("dir_path") or "."
    found = target(session, ws, where)
    if isinstance(found, Answer):
        return found
    shown, host = found
    if not host.is_dir():  # the spawn itself fails in a missing directory
        return fail(f"spawn {SHELL_NAME} ENOENT")
    script = "\n" * _WRAPPER_LINES + args["command"]
    command = f"exec 2>&1; exec bash -c {shlex.quote(script)} {SHELL_NAME}"
    try:
        res = await sandbox.run(command, cwd=shown)
    except HarnessgridError as exc:
        if type(exc) is not HarnessgridError:  # an infrastructure failure
            raise
        return fail(exc.message)
    output = (res.stdout + res.stderr).rstrip("\n")
    if res.timed_out:
        minutes = sandbox.limits.wall_s / 60
        body = (f"Command was automatically cancelled because it exceeded the timeout of "
                f"{minutes:.1f} minutes without output.")
        body += (f" Below is the output before it was cancelled:\n{output}" if output.strip()
                 else " There was no output before it was cancelled.")
    else:
        parts = [f"Output: {output or '(empty)'}"]
        code = exit_code(res.exit_code)
        if code is None:  # the sandbox killed it (a limit): the CLI sees a signal
            parts.append("Signal: SIGKILL")
        elif code != 0:
            parts.append(f"Exit Code: {code}")
        session.next_pgid += 1
        parts.append(f"Process Group PGID: {session.next_pgid}")
        body = "\n".join(parts)
    text = _cut(session, wrap_untrusted(body), call_id)
    record = ToolResult(output=res.stdout, stderr=res.stderr, exit_code=exit_code(res.exit_code),
                        timed_out=res.timed_out, truncated=res.truncated,
                        duration_s=res.duration_s)
    return Answer(text, True, record)  # a failed command is an output, not an error


def _cut(session: Session, text: str, call_id: str) -> str:
    """``formatTruncatedToolOutput``: a shell answer over 40000 characters (UTF-16 units, as
    JavaScript counts) keeps its first fifth and the rest from its end, naming the file the
    CLI saves the whole in (its temp folder, outside the workspace: the emulation saves
    nothing)."""
    size = js_len(text)
    if size <= SHELL_OUTPUT_LIMIT:
        return text
    head = SHELL_OUTPUT_LIMIT // 5
    tail = SHELL_OUTPUT_LIMIT - head
    saved = (f"{session.temp_dir}/tool-outputs/session-{session.session_id}/"
             f"{saved_output_name('run_shell_command', call_id)}.txt")
    return (f"Output too large. Showing first {head:,} and last {tail:,} characters. For full "
            f"output see: {saved}\n{js_prefix(text, head)}\n\n... [{size - head - tail:,} "
            f"characters omitted] ...\n\n{js_suffix(text, tail)}")


def wrap_untrusted(text: str) -> str:
    escaped = text.replace("</untrusted_context>", "&lt;/untrusted_context&gt;")
    return f"<untrusted_context>\n{escaped}\n</untrusted_context>"
