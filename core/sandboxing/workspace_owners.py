"""Owners and modes of a user's directory, kept on disk while a sandbox borrows it.

A sandbox run as root makes its commands' uid the owner of every entry of the workspace, so
they can write it. For a workspace harnessgrid made (a copy) that is harmless; for a user's own
directory (``in_place``) the entries must get their owners back at close, that must survive a
crash of the host process (otherwise the directory stays owned by a sandbox uid that later,
unrelated sandboxes lease), and - the part that matters most - handing back must never grant
anything. The directory may hold a root-owned set-uid program; while the sandbox runs, the agent
can rewrite it, delete it and let a new file take its inode number, rename, hard-link and chmod.
Giving such content the recorded owner and set-uid bit back would mint a root set-uid program
out of the agent's bytes.

So the rule at close is: **an entry gets back its recorded owner and mode only when it is
provably the entry that was recorded, untouched**; everything else is the agent's work and
belongs to the directory's owner, with its set-uid and set-gid bits cleared.

"Provably untouched" is decided by the inode's change time (``ctime``), which no unprivileged
process can set: every write, truncation, chmod, chown, rename, link or unlink of an inode - and
the creation of a new file on a reused inode number - moves it to the current time. Before the
first chown, :func:`record_owners` writes a journal (atomically, fsync'ed) of the entries whose
hand-back matters - a foreign owner or a set-id bit - keyed by inode, with the file type and, for
set-id files, a SHA-256 of their bytes. After the chown walk, :func:`seal_owners` waits until
the filesystem's own clock has moved past the chown's timestamps and writes that seal into the
journal: from then on any change of any entry shows as a ``ctime`` past the seal, whatever the
filesystem's timestamp granularity. :func:`restore_owners` replays it: the same inode, the same
type, a ``ctime`` not past the seal and, for set-id files, the same bytes (belt and braces
against a clock stepped backwards) restore the record; anything else goes to the directory's
owner without set-id bits. A journal without a seal (the process died between chown and seal)
restores nothing but the directory itself: all entries go to its owner.

What this costs a user: a foreign-owned file the agent renamed, rewrote or chmod'ed comes back
owned by the directory's owner, and a set-id program it touched comes back without its set-id
bit - the agent's work is the directory owner's. Directories keep a set-gid bit (it only steers
the group of new files, and the group is the owner's after the hand-back).

A journal still on disk when its uid is leased again means its sandbox died: the lease replays
it before the uid is used (``_UidLease.acquire`` in :mod:`harnessgrid.sandboxing.sandbox`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

from harnessgrid.sandboxing.scratch import open_dir, walk_fd

logger = logging.getLogger(__name__)

_SET_ID = stat.S_ISUID | stat.S_ISGID
_JOURNAL_VERSION = 2
#: How long :func:`seal_owners` waits for the filesystem's clock to tick (a filesystem with
#: one-second timestamps needs up to a second; past this something is wrong with its clock).
_SEAL_WAIT_S = 3.0


def record_owners(root: Path, journal: Path) -> None:
    """Write ``journal`` before anything is chowned: the identity, owner and mode of ``root``
    and of every entry below it whose hand-back matters (see :func:`_matters`). Written to a
    temporary name, fsync'ed and renamed, so a crash leaves either no journal (nothing was
    chowned yet) or a complete one."""
    top = os.stat(root, follow_symlinks=False)
    default = (top.st_uid, top.st_gid)
    entries: dict[str, list[Any]] = {}
    for dir_fd, name, st, _ in walk_fd(root):
        if st.st_dev == top.st_dev and _matters(st, default):
            digest = _digest(dir_fd, name, st) if _is_set_id_file(st) else None
            entries[str(st.st_ino)] = [st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode),
                                       stat.S_IFMT(st.st_mode), digest]
    _write(journal, {"version": _JOURNAL_VERSION, "root": os.fsdecode(root), "dev": top.st_dev,
                     "ino": top.st_ino, "owner": [*default, stat.S_IMODE(top.st_mode)],
                     "seal_ns": None, "entries": entries})


def seal_owners(root: Path, journal: Path) -> None:
    """Call once every entry of ``root`` is chowned: record a time that every chown of the walk
    is at or before and every later change of an entry is after. ``root``'s own change time is
    the probe (it is restored from the journal whatever happens to it): its ctime is read after
    the walk, then touched until the filesystem stamps a later time - so timestamps of any
    granularity are covered, and the wait is at most one tick of the filesystem's clock."""
    record = json.loads(journal.read_text())
    fd = open_dir(root)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        os.fchmod(fd, mode)  # a change: ctime is now at or after every chown of the walk
        seal = os.fstat(fd).st_ctime_ns
        deadline = time.monotonic() + _SEAL_WAIT_S
        while True:
            os.fchmod(fd, mode)
            if os.fstat(fd).st_ctime_ns > seal:
                break
            if time.monotonic() > deadline:
                logger.warning("%s: the filesystem's timestamps did not advance in %.0f s; the "
                               "journal stays unsealed (every entry goes to the directory's "
                               "owner at close)", root, _SEAL_WAIT_S)
                return
            time.sleep(0.0005)
    finally:
        os.close(fd)
    record["seal_ns"] = seal
    _write(journal, record)


def restore_owners(journal: Path) -> Path | None:
    """Hand the journal's directory back: the directory itself and every untouched recorded
    entry get exactly the owner and mode they had; every other entry goes to the directory's
    owner with its set-id bits cleared (directories keep set-gid). Symlinks are never followed.
    The journal is removed once done; a directory that is gone or was replaced is left alone.
    Returns the directory (None for an unreadable journal, which stays for a person to read)."""
    try:
        record: dict[str, Any] = json.loads(journal.read_text())
        root = Path(record["root"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("cannot read the owners journal %s: %s", journal, exc)
        return None
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        if _is_recorded_directory(root, record):
            _replay(root, record)
    journal.unlink(missing_ok=True)
    return root


def _matters(st: os.stat_result, default: tuple[int, int]) -> bool:
    """Whether handing the entry to the directory's owner would lose something: a foreign
    owner or group, or a set-id bit (a set-gid directory of the owner's group keeps its bit
    anyway)."""
    if (st.st_uid, st.st_gid) != default:
        return True
    kept = stat.S_ISUID if stat.S_ISDIR(st.st_mode) else _SET_ID
    return bool(st.st_mode & kept)


def _is_set_id_file(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & _SET_ID)


def _digest(dir_fd: int, name: str, st: os.stat_result) -> str | None:
    """SHA-256 of a regular file's bytes, read through a descriptor that follows no link;
    None when it cannot be read or is no longer the inode ``st`` describes."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_ino != st.st_ino:
            return None
        sha = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            sha.update(chunk)
        return sha.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


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
    uid, gid, mode = record["owner"]
    os.chown(root, uid, gid, follow_symlinks=False)
    os.chmod(root, mode)  # the user's directory, proven by dev and inode: exactly as it was
    seal: int | None = record.get("seal_ns") if record.get("version") == _JOURNAL_VERSION else None
    entries: dict[str, list[Any]] = record["entries"] if seal is not None else {}
    restored: set[int] = set()  # hard links: the first visit's chown moves the ctime
    for dir_fd, name, st, _ in walk_fd(root):
        if st.st_ino in restored:
            continue
        was = entries.get(str(st.st_ino)) if st.st_dev == record["dev"] else None
        if was is not None and seal is not None and _untouched(dir_fd, name, st, was, seal):
            _set(name, dir_fd, st, was[0], was[1], was[2])
            restored.add(st.st_ino)
        else:
            _hand_to_owner(name, dir_fd, st, uid, gid)


def _untouched(dir_fd: int, name: str, st: os.stat_result, was: list[Any], seal: int) -> bool:
    """The entry is the recorded inode, unchanged since the seal (and, for a set-id file, with
    the recorded bytes)."""
    _, _, _, kind, digest = was
    if stat.S_IFMT(st.st_mode) != kind or st.st_ctime_ns > seal:
        return False
    return digest is None or _digest(dir_fd, name, st) == digest


def _hand_to_owner(name: str, dir_fd: int, st: os.stat_result, uid: int, gid: int) -> None:
    """The agent's work: the directory's owner, no set-uid, no set-gid (but on directories)."""
    cleared = stat.S_ISUID if stat.S_ISDIR(st.st_mode) else _SET_ID
    _set(name, dir_fd, st, uid, gid, stat.S_IMODE(st.st_mode) & ~cleared)


def _set(name: str, dir_fd: int, st: os.stat_result, uid: int, gid: int, mode: int) -> None:
    # chown first: it clears set-id bits, which the chmod after it then sets as wanted.
    with contextlib.suppress(OSError):
        current = stat.S_IMODE(st.st_mode)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            current = stat.S_IMODE(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        if not stat.S_ISLNK(st.st_mode) and current != mode:
            os.chmod(name, mode, dir_fd=dir_fd)


def _write(journal: Path, record: dict[str, Any]) -> None:
    partial = journal.with_name(journal.name + ".partial")
    with open(partial, "w") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(partial, journal)
    _sync_dir(journal.parent)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
