"""Reading an episode's final workspace from an in-process grader, safely.

The agent controls every entry of the workspace, and in-process graders run on the host: a
symlink the agent planted (``out.txt -> /etc/passwd``, ``out.txt -> /dev/zero``, a directory
``out -> /``) would make a grader read host files or read forever. Two layers stop that:

* :func:`neutralize_links` runs on the grading copy before any grader sees it (the runtime's
  ``_grade``): every symlink that does not point to a regular file inside the copy is replaced
  by a dangling marker link (``/dev/null/…``, which can never resolve), so it still *exists* as
  an entry but leads nowhere; FIFOs, sockets and devices are removed.
* :func:`read_bytes` / :func:`read_text` are the one way graders read a file: a regular file
  inside the workspace reached without following any symlink, at most
  :data:`MAX_GRADED_FILE_BYTES`; anything else reads as ``None`` (the sub-score becomes 0).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from harnessgrid.sandboxing.scratch import walk_fd

#: The most bytes a grader reads from one file; a bigger file reads as missing.
MAX_GRADED_FILE_BYTES = 5_000_000
#: Where a neutralized link points: below a character device, so it can never resolve.
DANGLING_TARGET = "/dev/null/harnessgrid-link-removed"
_PATH_MAX = 4096


def _open_no_follow(root: Path, rel: str) -> int | None:
    """An fd of ``root/rel`` opened without following a symlink in any component, or None."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "\0" in rel:
        return None
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            if part == ".":
                continue
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
            os.close(fd)
            fd = nxt
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        last = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | nofollow, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return last


def read_bytes(root: Path, rel: str, limit: int = MAX_GRADED_FILE_BYTES) -> bytes | None:
    """The content of the regular file ``rel`` under ``root``, or None when it is missing, not a
    regular file, reached through a symlink, outside ``root`` or over ``limit`` bytes."""
    fd = _open_no_follow(Path(root), rel)
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        total = 0
        while True:  # read at most limit + 1 bytes, whatever st_size said
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(root: Path, rel: str, limit: int = MAX_GRADED_FILE_BYTES) -> str | None:
    """:func:`read_bytes` decoded as UTF-8, or None (also for invalid UTF-8)."""
    data = read_bytes(root, rel, limit)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _inside_regular(root: str, link: str) -> bool:
    """Whether the link ``link`` resolves to a regular file inside ``root``."""
    if len(os.fsencode(link)) >= _PATH_MAX:  # unreachable by path: no grader can use it
        return False
    try:
        resolved = os.path.realpath(link)
    except (OSError, ValueError, RecursionError):  # a chain of a thousand links
        return False
    if not (resolved == root or resolved.startswith(root.rstrip("/") + "/")):
        return False
    try:
        return stat.S_ISREG(os.stat(resolved, follow_symlinks=False).st_mode)
    except OSError:
        return False


def neutralize_links(root: Path) -> int:
    """Make the grading copy at ``root`` safe to read on the host; returns how many entries
    were changed. Symlinks not pointing to a regular file inside ``root`` (links out of it,
    to directories, devices or nothing) become dangling markers; special files are removed.
    Nothing is ever followed."""
    base = os.path.realpath(root)
    changed = 0
    # walk_fd: by descriptors, so entries below a path longer than PATH_MAX are reached too
    for dir_fd, name, info, rel in walk_fd(base):
        try:
            if stat.S_ISLNK(info.st_mode):
                if os.readlink(name, dir_fd=dir_fd) == DANGLING_TARGET or _inside_regular(
                        base, os.path.join(base, rel)):
                    continue
                _replace(dir_fd, name, marker=True)
                changed += 1
            elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                _replace(dir_fd, name, marker=False)
                changed += 1
        except OSError:
            continue  # left as it is: read_bytes still refuses it
    return changed


def _replace(dir_fd: int, name: str, *, marker: bool) -> None:
    """Unlink ``name`` (and put a marker link there), making its directory writable if the agent
    left it read-only: the copy is the grader's own."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(dir_fd, os.fstat(dir_fd).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        os.unlink(name, dir_fd=dir_fd)
    if marker:
        os.symlink(DANGLING_TARGET, name, dir_fd=dir_fd)
