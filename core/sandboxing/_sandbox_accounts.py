"""``/etc/passwd`` and ``/etc/group`` as sandboxed commands see them.

Commands run as a uid the host's account files do not know (``_UID_BASE`` + slot as root).
Without an entry, ``whoami`` fails, ``ls -l`` prints numbers, ``~`` does not expand - and every
``getpwuid`` misses the ``files`` database and falls through to the next NSS module (on
systemd hosts ``libnss_systemd`` is loaded and half a dozen userdb paths probed), which bash
does at every start: 0.5-0.8 ms of each command. So the sandbox gets its own small copies:
the host's system accounts (uid/gid below 1000, and ``nobody``; no real users' names or home
directories leak in) plus one account for the sandbox uid, named :data:`SANDBOX_USER`, whose
home is ``/tmp`` (what ``HOME`` says).
"""

from __future__ import annotations

import os
from pathlib import Path

SANDBOX_USER = "agent"
"""The name commands see for their own uid (``whoami``, ``id``, ``ls -l``)."""
_SYSTEM_ID_LIMIT = 1000
_NOBODY = 65534


def _system_lines(path: Path, sandbox_id: int) -> list[str]:
    """The host file's entries for system accounts, minus any that claims the sandbox's id."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    kept = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) < 3 or not fields[2].isdigit() or fields[0] == SANDBOX_USER:
            continue
        number = int(fields[2])
        if number != sandbox_id and (number < _SYSTEM_ID_LIMIT or number == _NOBODY):
            kept.append(line)
    return kept


def account_files(etc: Path, uid: int, gid: int) -> dict[str, bytes]:
    """``{"/etc/passwd": ..., "/etc/group": ...}`` for a sandbox whose commands run as
    ``uid``/``gid``; ``etc`` is the host's (or the environment root file system's) ``/etc``."""
    passwd = _system_lines(etc / "passwd", uid)
    passwd.append(f"{SANDBOX_USER}:x:{uid}:{gid}:sandboxed agent:/tmp:/bin/bash")
    group = _system_lines(etc / "group", gid)
    group.append(f"{SANDBOX_USER}:x:{gid}:")
    return {
        "/etc/passwd": ("\n".join(passwd) + "\n").encode(),
        "/etc/group": ("\n".join(group) + "\n").encode(),
    }


def data_fd(data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, at offset 0, for bwrap's ``--ro-bind-data``
    (inheritable only through ``pass_fds``; the caller closes it once bwrap started)."""
    fd = os.memfd_create("hg-etc", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
