"""What a built environment is, as a record: the part of environments the contract layer
names (a task's grading context, a trajectory's toolchain) without the machinery that builds
and mounts them (:mod:`harnessgrid.sandboxing.environments`, where it is also importable)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class EnvironmentRecord(BaseModel):
    """A named environment as stored: what it is, where it lives and what it was built from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["venv", "rootfs"]
    digest: str
    path: str
    """The venv directory (mounted at this same path in the sandbox), or the rootfs root."""
    python: str = ""
    platform: str = ""
    installer: str = ""
    requirements: str = ""
    created_at: float = 0.0
    system_tools: tuple[str, ...] = ()
    """Programs its tasks need that a venv cannot hold (see
    :data:`harnessgrid.sandboxing.environments.BUILTIN_SYSTEM_TOOLS`)."""

    @property
    def bin_dir(self) -> str | None:
        """What goes first on PATH inside the sandbox (None for a rootfs: its /usr/bin is)."""
        return f"{self.path}/bin" if self.kind == "venv" else None

    @property
    def python_executable(self) -> str | None:
        return f"{self.path}/bin/python" if self.kind == "venv" else None

    def summary(self) -> dict[str, str]:
        """What a trajectory and ``harness show`` record about it."""
        return {"name": self.name, "kind": self.kind, "digest": self.digest}
