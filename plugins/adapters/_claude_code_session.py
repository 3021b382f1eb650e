"""Per-episode state of the Claude Code emulation, and how ``render_action`` finds it.

Claude Code remembers, per session, which files were read (and what they looked like then),
the shell's working directory and the todo list. That state lives in
``EpisodeState.scratch[SCRATCH_KEY]`` as a :class:`Session`, so one harness object serves any
number of concurrent episodes.

The scripted oracle must obey the read-before-write rule exactly when Claude Code would
enforce it, so ``render_action(action, call_id, state)`` reads the session of the episode it
is given (:func:`find_session`), as ``to_action(call, state)`` does for the mount path; the
harness keeps no "current episode" of its own. Without a state they render and parse for a
fresh session at ``/workspace``.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from harnessgrid.episode import ContextBudget, EpisodeState

SCRATCH_KEY = "claude_code"

TodoItem = dict[str, str]


@dataclass
class Session:
    """What Claude Code keeps between tool calls of one session.

    ``read_state`` maps a workspace-relative path to the fingerprint the file had when it was
    last read (or written by Write/Edit): Write/Edit of an existing file is refused unless the
    entry exists and still matches (Claude Code's "read first" and "modified since read"
    rules). ``cwd`` is the persistent Bash working directory, workspace-relative.
    """

    mount_path: str
    initial_files: frozenset[str] = frozenset()
    memory: str = ""  # the context <system-reminder> (CLAUDE.md, reminders), re-sent after compaction
    read_state: dict[str, str] = field(default_factory=dict)
    todos: list[TodoItem] = field(default_factory=list)
    cwd: str = "."
    workspace: Workspace | None = None  # known from the first step() on
    budget: ContextBudget | None = None  # the runtime's budget, remembered by view()
    head: int = 1  # leading messages always in view: the system prompt (2.x: its three blocks)
    boundary: int = 1  # history index where the model's view resumes after the system prompt
    loaded: set[str] = field(default_factory=set)  # 2.x: deferred tools ToolSearch loaded
    listing: str = ""  # 2.x: the system-role message, sent again after a compaction
    compactions: int = 0
    compacted_tokens: int = 0  # size of the view right after the last compaction
    summary_fallbacks: int = 0  # policy-written summaries that failed and were replaced

    # --------------------------------------------------------------- paths

    def absolute(self, path: str) -> str:
        """A tool path as Claude Code writes it: absolute, under the mount path."""
        if path.startswith("/"):
            return posixpath.normpath(path)
        rel = posixpath.normpath(path)
        return self.mount_path if rel == "." else f"{self.mount_path}/{rel}"

    def relative(self, path: str) -> str:
        """The workspace-relative form of an absolute path under the mount ('.' for the root);
        other paths come back normalised but unchanged."""
        norm = posixpath.normpath(path)
        if norm == self.mount_path:
            return "."
        if norm.startswith(self.mount_path + "/"):
            return norm[len(self.mount_path) + 1:]
        return norm

    # --------------------------------------------------------------- read-before-write rule

    def exists(self, rel: str) -> bool:
        """Whether a workspace file exists now (before the first step: in the task's files)."""
        if self.workspace is None:
            return rel in self.initial_files
        try:
            return self.workspace.resolve(rel).is_file()
        except WorkspaceError:
            return False

    def fresh(self, rel: str) -> bool:
        """Whether ``rel`` was read and has not changed since."""
        seen = self.read_state.get(rel)
        if seen is None or self.workspace is None:
            return False
        try:
            return seen == fingerprint(self.workspace.resolve(rel))
        except (OSError, WorkspaceError):
            return False

    def needs_read(self, rel: str) -> bool:
        """Whether Write/Edit of ``rel`` would be refused for want of a fresh Read."""
        return self.exists(rel) and not self.fresh(rel)

    def remember(self, rel: str) -> None:
        """Record the current content of ``rel`` as read (after Read, Write or Edit)."""
        if self.workspace is not None:
            self.read_state[rel] = fingerprint(self.workspace.resolve(rel))


def fingerprint(path: Path) -> str:
    """SHA-256 of a file's bytes. Content, not mtime: a rewrite within the same clock tick
    still counts as a modification, and a no-op ``touch`` does not."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def session_of(state: EpisodeState) -> Session:
    """The episode's session (created by ``ClaudeCodeHarness.start``)."""
    value = find_session(state)
    if value is None:
        raise TypeError("this episode was not started by ClaudeCodeHarness.start()")
    return value


def find_session(state: EpisodeState | None) -> Session | None:
    """The session of ``state``, if it is a Claude Code episode's (None for no state)."""
    value: Any = state.scratch.get(SCRATCH_KEY) if state is not None else None
    return value if isinstance(value, Session) else None
