"""What an episode's workspace starts with, read from the task before the workspace exists: the
shells put the project's memory files (``CLAUDE.md``, ``GEMINI.md``, OpenClaw's bootstrap files)
and its file list into the first prompt. Task files override the source folder, as in
:meth:`harnessgrid.sandboxing.workspace.Workspace.create`."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.tasks import Task


def _relative(task: Task, key: str) -> str:
    return posixpath.normpath(key.removeprefix(task.mount_path + "/"))


def initial_paths(task: Task) -> frozenset[str]:
    """Workspace-relative paths of the files an episode starts with."""
    found = {_relative(task, key) for key in task.files}
    if task.source_dir is not None and task.source_dir.is_dir():
        found |= {p.relative_to(task.source_dir).as_posix()
                  for p in task.source_dir.rglob("*") if p.is_file()}
    return frozenset(found)


def initial_text(task: Task, name: str) -> str | None:
    """The text of the workspace file ``name`` (relative) as the episode starts, or None. A
    symbolic link in the source folder is not followed: it could point at any host file."""
    for key, data in task.files.items():
        if _relative(task, key) == name:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if task.source_dir is not None:
        candidate = task.source_dir / name
        if candidate.is_file() and not candidate.is_symlink():
            return candidate.read_text("utf-8", errors="replace")
    return None
