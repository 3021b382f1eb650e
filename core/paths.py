"""Output directories given by users: a clear error, before any work, when one cannot be one.

Every command and library entry point that writes into a directory the user named calls
:func:`require_output_dir` first -- before heavy imports and long work -- so that a path that
cannot be written fails at once, naming the path and the reason (a :class:`ConfigError`: one
line and a hint on the command line), instead of with a traceback at the first write, possibly
minutes later.

Writability is tested by creating and removing a file, not by reading permission bits: as root
the bits stop nothing, while a read-only mount stops everyone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from harnessgrid.errors import ConfigError

__all__ = ["KERNEL_FILE_SYSTEMS", "files_not_as_recorded", "require_output_dir",
           "require_output_file"]

#: Where the kernel's own file systems are mounted: never a place for output (writes there fail
#: or, as root, change the running system).
KERNEL_FILE_SYSTEMS = (Path("/proc"), Path("/sys"))

_PROBE_PREFIX = ".harnessgrid-write-probe-"
#: What to do about a path that cannot be an output directory.
HINT = "choose a directory you can write to (it is created when missing)"


def require_output_dir(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` if it is, or can be created as, a directory that can be
    written; otherwise a :class:`ConfigError` naming ``what`` (the option or field that gave
    it), the path and what is in the way.

    Checked: not under ``/proc`` or ``/sys`` (symbolic links followed); neither the path nor a
    folder above it is a file; and a file can be created (then is removed) in the path when it
    exists, else in the nearest folder above it that exists (where it would be created). Leaves
    nothing behind: a missing directory is not created.
    """
    out = Path(path)
    real = Path(os.path.realpath(out))
    for kernel in KERNEL_FILE_SYSTEMS:
        if real == kernel or kernel in real.parents:
            raise ConfigError(f"{what} {out} is under {kernel}, a file system of the kernel, "
                              "not a place for output", hint=HINT)
    try:
        existing = _nearest_existing(out)
    except OSError as exc:
        raise ConfigError(f"{what} {out} cannot be looked up: {_reason(exc)}",
                          hint=HINT) from None
    if not existing.is_dir():
        kind = "a broken symbolic link" if existing.is_symlink() and not existing.exists() \
            else "a file"
        blocker = f"is {kind}" if existing == out else f"is under {existing}, {kind}"
        raise ConfigError(f"{what} {out} {blocker}, not a directory", hint=HINT)
    try:
        fd, probe = tempfile.mkstemp(prefix=_PROBE_PREFIX, dir=existing)
    except OSError as exc:
        where = "cannot be written" if existing == out else f"cannot be created in {existing}"
        raise ConfigError(f"{what} {out} {where}: {_reason(exc)}",
                          hint=_write_hint(exc)) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return out


def require_output_file(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` if a file can be written (or appended to) there: it is not a
    directory, and its folder passes :func:`require_output_dir`."""
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{what} {out} is a directory, not a file",
                          hint="give a file path (its folder is created when missing)")
    require_output_dir(out.parent, f"the folder of {what}")
    return out


def _nearest_existing(out: Path) -> Path:
    """``out`` or the nearest folder above it that exists (``.`` or ``/`` at the latest)."""
    for candidate in (out, *out.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path.cwd()  # unreachable: '.' or '/' exists


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def _write_hint(exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return "choose a directory on a writable file system (it is created when missing)"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, or choose a directory on another file system"
    return HINT


def files_not_as_recorded(folder: Path, sha256: dict[str, str]) -> list[str]:
    """The names in ``sha256`` whose file in ``folder`` is missing or has another SHA-256
    (the check of every shipped model: the micro base, the demo's warm start)."""
    import hashlib

    wrong = []
    for name, want in sha256.items():
        try:
            got = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        except OSError:
            got = None
        if got != want:
            wrong.append(name)
    return wrong
