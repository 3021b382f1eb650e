"""The workspace's error, in a module of its own: the workspace and the bounded search it uses
both raise it, and neither imports the other for it. Import it from
:mod:`harnessgrid.sandboxing.workspace`, its documented home."""

from __future__ import annotations

from harnessgrid.errors import HarnessgridError


class WorkspaceError(HarnessgridError):
    """A file operation failed for a reason the caller (often a model) can fix."""
