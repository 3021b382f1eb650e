"""Host-side memory bounds of a sandbox that the server cannot set itself (root only).

``RLIMIT_AS`` bounds what a process maps, not what the kernel holds for it: pages written into
a memory file (memfd) with ``write()``, System V shared memory filled and detached, tmpfs
files. The server's poll counts those (``memory_in_use`` in ``_sandbox_server.py``); two
kernel-enforced bounds back it up here:

- **A memory cgroup per sandbox** (:class:`MemoryCgroup`), where the host has one to give:
  cgroup v1's memory hierarchy, or a cgroup v2 directory whose parent delegates the memory
  controller. Every command's shell moves itself into it before it runs anything, so all a
  command and its children allocate - in any form - is charged there, with no swap. The server
  stays outside: the kernel's out-of-memory killer, when the limit is hit, can only pick a
  command's process, and the server reports ``killed: memory`` from the cgroup's ``oom_kill``
  count. The limit is everything the sandbox may legitimately pin at once - ``memory_mb`` for
  processes plus the tmpfs it is given (``/tmp``, a kernel-capped workspace) -
  so it never stops a command the poll would let run; it bounds what no poll sees.
- **System V IPC limits of the sandbox's ipc namespace** (:func:`ipc_namespace_limits`): one
  shared memory segment at most ``memory_mb``, all of them together too, a few dozen segments
  and message queues. They are per namespace, and only a process inside it with privileges
  can set them: each lease's server (a root sandbox's, see ``_sandbox_server.lease``) writes
  them into its new ipc namespace before it drops its privileges.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MB = 1024 * 1024
_CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Headroom of the cgroup for what the kernel charges besides the command's own pages (page
#: tables, pipe and socket buffers, page cache of the files it reads, which it can reclaim).
CGROUP_SLACK_MB = 64


@dataclass
class MemoryCgroup:
    """A memory cgroup the sandbox's commands enter; :meth:`remove` once they are all gone."""

    path: Path
    events_file: str  # the file holding "oom_kill N"

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> MemoryCgroup | None:
        """Make (or reuse, after a crash) the cgroup ``name`` limited to ``limit_bytes`` with
        no swap; None where the host gives none (not root, no memory controller that this
        process may subdivide). Only root makes one: elsewhere the poll alone bounds memory."""
        if os.geteuid() != 0:
            return None
        for parent, version in _candidate_parents():
            try:
                return cls._make(parent / name, version, limit_bytes)
            except OSError as exc:
                logger.debug("no memory cgroup under %s: %s", parent, exc)
        return None

    @classmethod
    def _make(cls, path: Path, version: int, limit_bytes: int) -> MemoryCgroup:
        path.mkdir(exist_ok=True)
        try:
            if version == 2:
                (path / "memory.max").write_text(str(limit_bytes))
                (path / "memory.swap.max").write_text("0")
                return cls(path, "memory.events")
            (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            memsw = path / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # swap accounting on: memory + swap together, i.e. no swap
                memsw.write_text(str(limit_bytes))
            return cls(path, "memory.oom_control")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise

    def open_fds(self) -> tuple[int, int]:
        """(``cgroup.procs`` for writing, the events file for reading): the server hands the
        first to each command's shell, which writes ``0`` to it (itself), and reads the second
        after each command. Opened here, as root: the server's uid could not open them."""
        procs = os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        try:
            events = os.open(self.path / self.events_file, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            os.close(procs)
            raise
        return procs, events

    def remove(self) -> None:
        """Remove the cgroup (no process is left in it once the sandbox closed)."""
        try:
            self.path.rmdir()
        except OSError as exc:
            logger.debug("memory cgroup %s not removed: %s", self.path, exc)


def _candidate_parents() -> list[tuple[Path, int]]:
    """Where this process may make a memory cgroup: below its own cgroup v1 memory cgroup, or
    below its own cgroup v2 directory when that delegates the memory controller."""
    parents: list[tuple[Path, int]] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return parents
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "memory" in controllers.split(","):
            parents.append((_CGROUP_ROOT / "memory" / relative, 1))
        elif hierarchy == "0":
            for mount in (_CGROUP_ROOT, _CGROUP_ROOT / "unified"):
                here = mount / relative
                with contextlib.suppress(OSError):
                    if "memory" in (here / "cgroup.subtree_control").read_text().split():
                        parents.append((here, 2))
    return parents


def ipc_namespace_limits(memory_bytes: int) -> dict[str, int]:
    """The System V IPC limits of a sandbox's ipc namespace, by sysctl (``/proc/sys/...``)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return {
        "kernel/shmmax": memory_bytes,  # bytes of one segment
        "kernel/shmall": memory_bytes // page,  # pages of all segments together
        "kernel/shmmni": 64,  # segments
        "kernel/msgmni": 32,  # message queues, 16 KiB each by default
    }
