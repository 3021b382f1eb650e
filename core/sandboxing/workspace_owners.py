"""Owners and modes of a user's directory, kept on disk while a sandbox borrows it.

A sandbox run as root makes its commands' uid the owner of every entry of the workspace, so
they can write it. For a workspace harnessgrid made (a copy) that is harmless; for a user's own
directory (``in_place``) the entries must get back exactly the owners and modes they had - not
the owner of the top directory - and that must survive a crash of the host process: otherwise
the directory stays owned by a sandbox uid that later, unrelated sandboxes lease.

So before the first chown, :func:`record_owners` writes a journal (atomically, fsync'ed) of
every entry's owner and mode, keyed by inode so renames keep their owner, and
:func:`restore_owners` replays it at close. A journal still on disk when its uid is leased
again means its sandbox died: the lease replays it before the uid is used
(``_UidLease.acquire`` in :mod:`harnessgrid.sandboxing.sandbox`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

from harnessgrid.sandboxing.scratch import open_dir, walk_fd

logger = logging.getLogger(__name__)

#: Mode bits compared to tell "the agent chmod'ed it" from "chown cleared its set-id bits".
_PERMISSIONS = 0o1777


def record_owners(root: Path, journal: Path) -> None:
    """Write ``journal``: the identity of ``root`` and the owner and mode of it and every
    entry below it. Written to a temporary name, fsync'ed and renamed, so a crash leaves either
    no journal (nothing was chowned yet) or a complete one."""
    top = os.stat(root, follow_symlinks=False)
    entries = {
        str(st.st_ino): [st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)]
        for _, _, st, _ in walk_fd(root) if st.st_dev == top.st_dev
    }
    record = {"root": os.fsdecode(root), "dev": top.st_dev, "ino": top.st_ino,
              "owner": [top.st_uid, top.st_gid, stat.S_IMODE(top.st_mode)], "entries": entries}
    partial = journal.with_name(journal.name + ".partial")
    with open(partial, "w") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(partial, journal)
    _sync_dir(journal.parent)


def restore_owners(journal: Path) -> Path | None:
    """Give every entry of the journal's directory back the owner and mode it had; entries
    made since belong to the directory's owner. Symlinks are never followed. A mode the agent
    changed stays (its work); one that only lost its set-id bits to the chown gets them back.
    The journal is removed once done; a directory that is gone or was replaced is left alone.
    Returns the directory (None for an unreadable journal, which stays for a person to read)."""
    try:
        record: dict[str, Any] = json.loads(journal.read_text())
    except (OSError, ValueError) as exc:
        logger.warning("cannot read the owners journal %s: %s", journal, exc)
        return None
    root = Path(record["root"])
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        if _is_recorded_directory(root, record):
            _replay(root, record)
    journal.unlink(missing_ok=True)
    return root


def _is_recorded_directory(root: Path, record: dict[str, Any]) -> bool:
    fd = open_dir(root)  # no symlink followed
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if (st.st_dev, st.st_ino) != (record["dev"], record["ino"]):
        logger.warning("%s is no longer the directory a sandbox borrowed: owners left as is",
                       root)
        return False
    return True


def _replay(root: Path, record: dict[str, Any]) -> None:
    default = record["owner"]
    top = os.stat(root, follow_symlinks=False)
    _restore(str(root), None, top, default, default)
    entries: dict[str, list[int]] = record["entries"]
    for dir_fd, name, st, _ in walk_fd(root):
        was = entries.get(str(st.st_ino)) if st.st_dev == record["dev"] else None
        _restore(name, dir_fd, st, was, default)


def _restore(name: str, dir_fd: int | None, st: os.stat_result, was: list[int] | None,
             default: list[int]) -> None:
    owner = was if was is not None else default
    with contextlib.suppress(OSError):
        if (st.st_uid, st.st_gid) != (owner[0], owner[1]):
            os.chown(name, owner[0], owner[1], dir_fd=dir_fd, follow_symlinks=False)
        if was is None or stat.S_ISLNK(st.st_mode):
            return
        mode = stat.S_IMODE(st.st_mode)
        if mode != was[2] and mode & _PERMISSIONS == was[2] & _PERMISSIONS:
            os.chmod(name, was[2], dir_fd=dir_fd)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
