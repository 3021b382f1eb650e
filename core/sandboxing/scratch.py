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
import functools
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MOUNT_SOURCE = "harnessgrid-ws"
"""The source name of the size-capped tmpfs a workspace may be mounted on (see
``Workspace.limit_size``): how :func:`remove_tree` recognises a mount that is ours to undo."""


def open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    """A descriptor of directory ``name`` (relative to ``dir_fd``), never through a symlink;
    a directory its owner locked (``chmod 000``) is opened up (u+rwx) first - we own it."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        os.chmod(name, stat.S_IMODE(mode) | stat.S_IRWXU, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def list_dir_fd(fd: int) -> list[str]:
    """Entry names of the open directory ``fd`` (empty when it cannot be listed)."""
    try:
        return os.listdir(fd)
    except OSError:
        return []


def walk_fd(top: str | Path) -> Iterator[tuple[int, str, os.stat_result, str]]:
    """Every entry below ``top`` as ``(fd of its directory, name, lstat, path relative to
    top)``, top-down, through
    descriptors: no path longer than one name is ever used, so neither PATH_MAX nor
    permissions an agent removed hide anything, and one descriptor is held at a time however
    deep the tree (the way back up is ``..``, checked to be the directory we came from; if the
    tree changes under the walk, the walk stops). Symlinks are never followed; each fd is
    valid only until the next item."""
    try:
        fd = open_dir(top)
    except OSError:
        return
    # per level: the directory, names still to do, its path relative to top
    stack = [(os.fstat(fd), list_dir_fd(fd), "")]
    try:
        while stack:
            names, prefix = stack[-1][1], stack[-1][2]
            if not names:
                stack.pop()
                if stack:
                    try:
                        fd = step_up(fd, stack[-1][0])
                    except OSError:
                        fd = -1  # step_up closed it
                        return
                continue
            name = names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            rel = prefix + name
            yield fd, name, st, rel
            if stat.S_ISDIR(st.st_mode):
                try:
                    fd, here = step_down(fd, name, st)
                except OSError:
                    continue
                stack.append((here, list_dir_fd(fd), rel + "/"))
    finally:
        if fd >= 0:
            os.close(fd)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def step_down(fd: int, name: str, expected: os.stat_result) -> tuple[int, os.stat_result]:
    """Open the subdirectory ``name`` of ``fd`` (which was ``expected`` when listed) and close
    ``fd``; returns the new fd and its stat. On failure ``fd`` stays open and OSError rises."""
    child = open_dir(name, fd)
    here = os.fstat(child)
    if not _same(here, expected):
        os.close(child)
        raise OSError(f"{name!r} changed while it was walked")
    os.close(fd)
    return child, here


def step_up(fd: int, parent: os.stat_result) -> int:
    """Open ``..`` of ``fd`` and close ``fd``; OSError (``fd`` closed) unless it is ``parent``."""
    try:
        up = os.open("..", _DIR_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    if not _same(os.fstat(up), parent):
        os.close(up)
        raise OSError("the tree changed while it was walked")
    return up


@functools.cache
def _libc() -> Any:
    import ctypes  # only here: mounts exist only where we run as root on Linux

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long  # a descriptor or -1, not a C int's worth of bits
    return libc


def mount_capped_fs(path: Path, *, size_bytes: int, max_inodes: int) -> bool:
    """Mount a tmpfs of ``size_bytes`` and ``max_inodes`` on the directory ``path`` (hiding what
    it holds), owned and moded like it; False where that is not allowed (not root, not Linux).
    The kernel then refuses writes past the cap (ENOSPC) whatever the writer does;
    :func:`remove_tree` detaches it."""
    if os.geteuid() != 0 or not os.path.exists("/proc/self/mounts"):
        return False
    st = os.stat(path)
    options = (f"size={size_bytes},nr_inodes={max_inodes},mode={stat.S_IMODE(st.st_mode):o},"
               f"uid={st.st_uid},gid={st.st_gid}")
    libc = _libc()
    flags = 0x2 | 0x4  # MS_NOSUID | MS_NODEV: nothing the agent leaves there runs privileged
    result = libc.mount(_MOUNT_SOURCE.encode(), os.fsencode(path), b"tmpfs", flags,
                        options.encode())
    return bool(result == 0)


def mounted_tmpfs(path: str | Path) -> bool:
    """Whether a workspace tmpfs of ours (see :func:`mount_capped_fs`) is mounted at ``path``."""
    target = os.fspath(path)
    try:  # a mount point is on another device than its parent: cheap to rule out first
        if os.stat(target).st_dev == os.stat(os.path.dirname(target)).st_dev:
            return False
        with open("/proc/self/mounts") as fh:
            return any(line.split()[:2] == [_MOUNT_SOURCE, target] for line in fh)
    except OSError:
        return False


def unmount_capped_fs(path: str | Path) -> str | None:
    """Detach the workspace tmpfs mounted at ``path``, if one of ours is (MNT_DETACH: its
    memory is freed once nothing holds it); None, or why it could not be detached."""
    if mounted_tmpfs(path) and _libc().umount2(os.fsencode(path), 2) != 0:
        import ctypes

        return f"cannot detach the tmpfs at {path}: {os.strerror(ctypes.get_errno())}"
    return None


_OPEN_TREE = 428  # open_tree(2): the same number on every architecture (Linux >= 5.2)
_OPEN_TREE_CLONE = 1


def clone_mount(path: str | Path) -> int | None:
    """A detached copy of the mount at ``path`` (an O_PATH descriptor, close-on-exec) to attach
    elsewhere - a sandbox lease attaches its workspace so; None where the kernel has no
    ``open_tree`` (before 5.2) or refuses (not root)."""
    import ctypes

    fd = _libc().syscall(ctypes.c_long(_OPEN_TREE), ctypes.c_long(-100), os.fsencode(path),
                         ctypes.c_long(_OPEN_TREE_CLONE | os.O_CLOEXEC))
    return int(fd) if fd >= 0 else None


@functools.cache
def can_clone_mounts() -> bool:
    """Whether this process can clone mounts (:func:`clone_mount`): root, Linux >= 5.2."""
    fd = clone_mount("/") if os.geteuid() == 0 else None
    if fd is None:
        return False
    os.close(fd)
    return True


def remove_tree(path: Path) -> None:
    """Delete ``path``, however deep, long or locked (directories an agent made unreadable
    are opened first); a workspace tmpfs mounted on it is detached first."""
    path_str = os.path.realpath(path) if os.path.isdir(path) else os.fspath(path)
    if os.path.isdir(path) and not os.path.islink(path):
        unmount_capped_fs(path_str)
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    try:
        root = open_dir(path)
    except OSError:
        return
    try:
        _empty_dir(root)
    finally:
        os.close(root)
    with contextlib.suppress(OSError):
        os.rmdir(path)


_REMOVE_DEPTH = 64


def _empty_dir(root: int) -> None:
    """Delete everything in the open directory ``root``. A subtree deeper than
    :data:`_REMOVE_DEPTH` levels is first renamed into a holding directory at the top and
    emptied later from there, so the descriptors held stay few whatever the depth."""
    hold: list[tuple[str, int]] = []  # (name in root, fd), made on first need
    pending: list[str] = []  # subtrees moved into the holding directory
    moves = [0]

    def move_up(fd: int, entry: str) -> None:
        if not hold:
            name = _holding_dir(root)
            hold.append((name, open_dir(name, root)))
        moves[0] += 1
        moved = str(moves[0])
        os.rename(entry, moved, src_dir_fd=fd, dst_dir_fd=hold[0][1])
        pending.append(moved)

    _empty_levels(root, move_up)
    while pending:
        name = pending.pop()
        with contextlib.suppress(OSError):
            fd = open_dir(name, hold[0][1])
            try:
                _empty_levels(fd, move_up)
            finally:
                os.close(fd)
            os.rmdir(name, dir_fd=hold[0][1])
    if hold:
        os.close(hold[0][1])
        with contextlib.suppress(OSError):
            os.rmdir(hold[0][0], dir_fd=root)


def _empty_levels(top: int, move_up: Callable[[int, str], None]) -> None:
    """Delete what ``top`` holds, down to :data:`_REMOVE_DEPTH` levels; deeper directories
    go to ``move_up``."""
    # (fd, names still to handle, the directory's own name in its parent)
    stack: list[tuple[int, list[str], str]] = [(top, list_dir_fd(top), "")]
    while stack:
        fd, names, own = stack[-1]
        if not names:
            stack.pop()
            if stack:  # `top` itself stays (and open): the caller owns it
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(own, dir_fd=stack[-1][0])
            continue
        entry = names.pop()
        try:
            mode = os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(mode):
                os.unlink(entry, dir_fd=fd)
            elif len(stack) >= _REMOVE_DEPTH:
                move_up(fd, entry)
            else:
                child = open_dir(entry, fd)
                stack.append((child, list_dir_fd(child), entry))


def _holding_dir(root: int) -> str:
    for attempt in range(1000):
        name = f".hg-remove-{os.getpid()}-{attempt}"
        try:
            os.mkdir(name, 0o700, dir_fd=root)
            return name
        except FileExistsError:
            continue
    raise OSError("no free name for a holding directory")


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
