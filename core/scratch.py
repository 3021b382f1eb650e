"""Temporary directories that do not outlive their process, even one killed with ``kill -9``.

Episodes make a workspace (and a copy for grading) per episode in the temp directory. Normal
ends, exceptions and Ctrl-C delete them in ``finally`` blocks; a process killed outright cannot.
So each directory ``hg-ws-XXXX`` has a sibling ``hg-ws-XXXX.lock`` that its process holds an
``flock`` on for the directory's life. The kernel drops the lock when the process dies, however
it dies, and the next harnessgrid process to make a directory in the same place removes every
directory whose lock it can take. Locks rather than pids: a pid may be reused, or belong to
another pid namespace sharing ``/tmp``; a lock is held exactly while its owner lives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_LOCK_SUFFIX = ".lock"
_swept: set[str] = set()


def walk_tree(top: str | Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` (top-down, symlinks listed but never entered, unreadable directories
    skipped, ``dirnames`` may be pruned in place) without recursion: Python 3.11's ``os.walk``,
    ``shutil.rmtree`` and ``shutil.copytree`` recurse once per level, so an agent's 1,200-level
    directory tree would raise ``RecursionError`` out of them."""
    stack = [os.fspath(top)]
    while stack:
        dirpath = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except OSError:
            continue
        dirnames: list[str] = []
        filenames: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        yield dirpath, dirnames, filenames
        for name in reversed(dirnames):
            child = os.path.join(dirpath, name)
            if not os.path.islink(child):
                stack.append(child)


def remove_tree(path: Path) -> None:
    """Delete ``path``, however deep; directories an agent made unreadable are opened first."""
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    dirs: list[str] = []
    stack = [os.fspath(path)]
    while stack:  # not walk_tree: a directory must be opened before it is listed
        dirpath = stack.pop()
        dirs.append(dirpath)
        with contextlib.suppress(OSError):
            os.chmod(dirpath, stat.S_IRWXU)
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append(entry.path)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    for dirpath in reversed(dirs):  # children before their parents
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
    if os.path.lexists(path):  # what paths could not reach (longer than PATH_MAX)
        with contextlib.suppress(OSError, RecursionError):
            shutil.rmtree(path, ignore_errors=True)


class ScratchDir:
    """A new directory named ``<prefix>XXXX`` under ``base`` (the temp dir by default), locked
    while this object lives; :meth:`remove` deletes it and its lock."""

    def __init__(self, prefix: str, base: Path | None = None) -> None:
        parent = Path(base) if base is not None else Path(tempfile.gettempdir())
        sweep_stale(parent, prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        self._lock_path = self.path.with_name(self.path.name + _LOCK_SUFFIX)
        # Locked before it gets its final name, so a sweeper never sees it unlocked.
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(tmp, self._lock_path)
        self._fd: int | None = fd

    def remove(self) -> None:
        remove_tree(self.path)
        if self._fd is not None:
            try:
                self._lock_path.unlink(missing_ok=True)
            finally:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:  # a forgotten ScratchDir still releases its descriptor
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)  # type: ignore[arg-type]


@contextmanager
def scratch_dir(prefix: str, base: Path | None = None) -> Iterator[Path]:
    """``with scratch_dir("hg-grade-") as path:`` — removed on exit, or by the next process
    if this one is killed."""
    scratch = ScratchDir(prefix, base)
    try:
        yield scratch.path
    finally:
        scratch.remove()


def sweep_stale(parent: Path, prefix: str) -> int:
    """Remove ``parent/<prefix>*`` directories whose owner is gone (once per process and place);
    returns how many were removed."""
    key = f"{parent}\0{prefix}"
    if key in _swept:
        return 0
    _swept.add(key)
    removed = 0
    try:
        locks = [p for p in parent.iterdir()
                 if p.name.startswith(prefix) and p.name.endswith(_LOCK_SUFFIX)]
    except OSError:
        return 0
    for lock_path in locks:
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held: its owner is alive
            continue
        try:
            remove_tree(lock_path.with_name(lock_path.name[:-len(_LOCK_SUFFIX)]))
            lock_path.unlink(missing_ok=True)
            removed += 1
        finally:
            os.close(fd)
    return removed
