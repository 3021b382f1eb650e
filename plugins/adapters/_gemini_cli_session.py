"""Gemini CLI emulation: what one episode's CLI process remembers, and the answer shape.

A tool's answer is the functionResponse the CLI sends back (:class:`Answer`): ``{"output":
text}`` on success, ``{"error": text}`` on failure. Paths are shown absolute (under the mount
path); relative ones resolve against the project root; one that leaves the workspace is refused
with the CLI's words (``Path not in workspace: ...``).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from harnessgrid.models import ToolResult
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError


@dataclass
class Answer:
    """One functionResponse: ``text`` under ``output`` (``ok``) or ``error``; ``result``
    is what the episode records of it."""

    text: str
    ok: bool
    result: ToolResult


@dataclass
class Session:
    """What one episode's CLI process remembers."""

    mount_path: str
    temp_dir: str
    session_id: str = "00000000-0000-0000-0000-000000000000"
    plan_mode: bool = False
    # the sandbox reports no process ids: a counter stands in, as wide as a typical pid
    next_pgid: int = 20_000
    #: Plan files by absolute path: the plans folder is outside the workspace (and the
    #: sandbox), so they live here.
    plans: dict[str, str] = field(default_factory=dict)
    #: Tool results masked so far (history index -> the masked text), see
    #: ``_gemini_cli_masking``.
    masked: dict[int, str] = field(default_factory=dict)

    @property
    def plans_dir(self) -> str:
        return f"{self.temp_dir}/{self.session_id}/plans"

    def absolute(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.mount_path, path))

    def relative(self, path: str) -> str:
        rel = posixpath.relpath(self.absolute(path), self.mount_path)
        return "." if rel == "." else rel


def ok(text: str) -> Answer:
    return Answer(text, True, ToolResult(output=text))


def fail(text: str) -> Answer:
    return Answer(text, False, ToolResult(error=text))


def outside(session: Session, path: str) -> Answer:
    return fail(f'Path not in workspace: Attempted path "{path}" resolves outside the allowed '
                f"workspace directories: {session.mount_path} or the project temp directory: "
                f"{session.temp_dir}")


def target(session: Session, ws: Workspace, path: str) -> tuple[str, Any] | Answer:
    """``path`` absolute, and its host path; the refusal when it leaves the workspace."""
    shown = session.absolute(path)
    try:
        return shown, ws.resolve(shown)
    except WorkspaceError:
        return outside(session, path)


def saved_output_name(tool: str, call_id: str) -> str:
    """The stem of the file the CLI saves a whole tool output in: its own id of the call is
    ``<tool>__<the model's id>`` (recorded), made file-safe (``sanitizeFilenamePart``)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", f"{tool}__{call_id}").lower()
