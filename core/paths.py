"""Output directories given by users: a clear error, before any work, when one cannot be one."""

from __future__ import annotations

from pathlib import Path

from harnessgrid.errors import ConfigError

__all__ = ["require_output_dir"]


def require_output_dir(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` if it is, or can be created as, a directory; otherwise a
    :class:`ConfigError` naming ``what`` (the option or field that gave it) and the path that
    is in the way. Creates nothing."""
    out = Path(path)
    for candidate in (out, *out.parents):
        if candidate.exists() or candidate.is_symlink():
            if not candidate.is_dir():
                blocker = "is a file" if candidate == out else f"is under {candidate}, a file"
                raise ConfigError(f"{what} {out} {blocker}, not a directory",
                                  hint=f"give {what} a directory path (it is created when "
                                       "missing)")
            return out
    return out
