"""The per-episode workspace: a host directory where tools act, with every path confined to it.

Tool calls carry paths chosen by a model. A model that writes ``../../root/.ssh/id_rsa`` or plants
``ln -s /etc leak`` through the shell must not reach outside its episode, so every path goes
through :meth:`Workspace.resolve`, which maps sandbox paths (``/workspace/x``) and relative paths
onto the host directory and refuses anything that ends up outside it, symlinks included.

The file operations return plain data (strings, lists, tuples) so that tool interfaces format
them however their harness likes, and raise :class:`WorkspaceError` with a message a model can act
on (the path, what was wrong, what to do instead).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from harnessgrid.errors import HarnessgridError
from harnessgrid.sandboxing.safe_search import BoundedPattern, compile_bounded
from harnessgrid.sandboxing.scratch import (
    ScratchDir,
    list_dir_fd,
    mount_capped_fs,
    mounted_tmpfs,
    open_dir,
    remove_tree,
    step_down,
    step_up,
    unmount_capped_fs,
    walk_fd,
    walk_tree,
)

# defined apart so that the search module can raise it without importing this one
from harnessgrid.sandboxing.workspace_errors import WorkspaceError as WorkspaceError
from harnessgrid.sandboxing.workspace_owners import record_owners, restore_owners, seal_owners
from harnessgrid.timing import timed_tool

DEFAULT_MOUNT_PATH = "/workspace"
MAX_READ_BYTES = 5_000_000
"""Largest file (or slice) the file tools load into memory; the shell handles bigger ones."""
MAX_LINE_CHARS = 2_000
"""Search results cut longer lines: one minified file must not flood an observation."""
_BINARY_SNIFF_BYTES = 8_192
_SKIPPED_DIRS = frozenset({".git"})


#: What Linux accepts for a file name and a whole path (bytes): a longer path is the agent's
#: mistake, reported as such, not an OSError out of the first ``stat``.
_NAME_MAX = 255
_PATH_MAX = 4096


class PathEscapeError(WorkspaceError):
    """A path points outside the workspace: through ``..``, an absolute path or a symlink."""


def _validate_mount_path(mount_path: str) -> str:
    """Normalise ``mount_path``; it must be an absolute path other than ``/``."""
    if not isinstance(mount_path, str) or not mount_path.startswith("/") or "\0" in mount_path:
        raise HarnessgridError(
            f"mount_path {mount_path!r} is not an absolute path",
            hint="pass an absolute sandbox path such as '/workspace'",
        )
    parts = [p for p in mount_path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise HarnessgridError(
            f"mount_path {mount_path!r} must name a directory below '/' without '..'",
            hint="pass an absolute sandbox path such as '/workspace'",
        )
    return "/" + "/".join(parts)


class Workspace:
    """A directory on the host that one episode's tools and shell commands act on.

    Build one with :meth:`create` (fresh temp dir) or :meth:`open` (an existing directory, copied
    unless ``in_place=True``). ``mount_path`` is where the directory appears inside the sandbox;
    tools may name files relative to the workspace, as absolute paths under ``mount_path``, or as
    absolute host paths under :attr:`root`.
    """

    def __init__(self, root: Path, *, mount_path: str = DEFAULT_MOUNT_PATH, owned: bool) -> None:
        """Wrap ``root``; prefer :meth:`create` / :meth:`open`. ``owned`` roots are deleted by cleanup()."""
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise HarnessgridError(
                f"workspace directory {str(root)!r} does not exist or is not a directory",
                hint="create the directory first, or use Workspace.create()",
            )
        self.mount_path = _validate_mount_path(mount_path)
        self._owned = owned
        self._owner: tuple[int, int] | None = None
        self._journal: Path | None = None  # owners of a user's directory, while lent out
        self._scratch: ScratchDir | None = None  # the temp dir (and lock) create() made

    # ------------------------------------------------------------------ construction / lifetime

    @classmethod
    def create(
        cls,
        files: Mapping[str, str | bytes] | None = None,
        source_dir: Path | None = None,
        *,
        base_dir: Path | None = None,
        mount_path: str = DEFAULT_MOUNT_PATH,
        into: Workspace | None = None,
    ) -> Workspace:
        """Make a fresh temp directory holding a copy of ``source_dir`` and then ``files``.

        ``files`` maps workspace-relative paths (or paths under ``mount_path``) to contents; str
        contents are written as UTF-8. Symlinks in ``source_dir`` are copied as links, never
        followed, so a stray link cannot pull host files into the episode.

        ``into`` fills an empty workspace made earlier instead (a sandbox pool pre-starts a
        sandbox over one, see :mod:`harnessgrid.sandboxing.sandbox_pool`): the files get the owner
        the running sandbox gave that workspace, and a failure removes it like a fresh one.
        """
        mount_path = _validate_mount_path(mount_path)
        if source_dir is not None and not Path(source_dir).is_dir():
            raise HarnessgridError(
                f"source_dir {str(source_dir)!r} is not a directory",
                hint="pass an existing directory to copy into the workspace",
            )
        if into is not None:
            ws = into
            if ws.mount_path != mount_path or any(ws.root.iterdir()):
                raise HarnessgridError(
                    f"cannot fill {ws!r}: it is not an empty workspace at {mount_path}",
                    hint="pass a workspace made empty with Workspace.create(mount_path=...)",
                )
        else:
            if base_dir is not None:
                Path(base_dir).mkdir(parents=True, exist_ok=True)
            scratch = ScratchDir("hg-ws-", base_dir)  # the next process removes it if we die
            ws = cls(scratch.path, mount_path=mount_path, owned=True)
            ws._scratch = scratch
        try:
            if source_dir is not None:
                shutil.copytree(
                    source_dir, ws.root, symlinks=True, dirs_exist_ok=True, ignore=_ignore_special
                )
                if ws._owner is not None:  # copytree keeps our uid: hand them to the sandbox's
                    ws.assign_owner(*ws._owner)
            for rel, content in (files or {}).items():
                data = content.encode("utf-8") if isinstance(content, str) else content
                ws.write_bytes(rel, data)  # adopts what it creates
        except BaseException:
            ws.cleanup()
            raise
        return ws

    @classmethod
    def open(
        cls, directory: Path, *, mount_path: str = DEFAULT_MOUNT_PATH, in_place: bool = False
    ) -> Workspace:
        """Use an existing directory: a copy of it by default, the directory itself if ``in_place``.

        Working on a copy is the default because an agent may delete or rewrite anything in its
        workspace; only ask for ``in_place`` when that is what you want.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise HarnessgridError(
                f"workspace directory {str(directory)!r} does not exist or is not a directory",
                hint="pass an existing directory, or use Workspace.create()",
            )
        if in_place:
            return cls(directory, mount_path=mount_path, owned=False)
        return cls.create(source_dir=directory, mount_path=mount_path)

    def copy_to(self, dest: Path | None = None) -> Workspace:
        """Snapshot the workspace into ``dest`` (must not exist) or a new temp dir; the copy owns it.

        Graders run on such a copy so that grading cannot disturb, or be disturbed by, the
        episode's own directory; a kept result (``keep_copy``) is one too. The copy carries no
        privilege, whoever makes it (root, usually): it belongs to this process, no entry is
        set-uid, set-gid or sticky, none is writable by group or others, and folders are 0755
        (0700 where the agent closed one to others) - an agent's ``chmod 6755`` or ``chmod 777
        /workspace`` does not survive into root's copy. Make it when no command of the
        episode runs (the sandbox closed, or idle: a command's leftovers die with it), so the
        agent cannot change what is copied.
        """
        scratch = None
        if dest is None:
            scratch = ScratchDir("hg-ws-copy-")
            target = scratch.path
            target.rmdir()
        else:
            target = Path(dest)
            if target.exists():
                raise HarnessgridError(
                    f"copy destination {str(target)!r} already exists",
                    hint="pass a path that does not exist yet, or None for a temp dir",
                )
        _copy_tree(self.root, target)
        copy = Workspace(target, mount_path=self.mount_path, owned=True)
        copy._scratch = scratch
        return copy

    def cleanup(self) -> None:
        """Delete the directory if this workspace created it; leave a user's in-place dir alone."""
        if self._scratch is not None:
            self._scratch.remove()
        elif self._owned and self.root.exists():
            remove_tree(self.root)  # an agent may leave unreadable dirs behind: it copes

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r}, mount_path={self.mount_path!r})"

    # ------------------------------------------------------------------ ownership (for Sandbox)

    def assign_owner(self, uid: int, gid: int, *, journal: Path | None = None) -> None:
        """Hand every entry to ``uid:gid`` and keep doing so for files the tools create later.

        The sandbox runs commands as an unprivileged uid; files that host-side tools write while
        it runs must stay writable by that uid. Symlinks are re-owned, never followed. A user's
        directory (``in_place``) first has every entry's owner and mode written to ``journal``
        (:mod:`harnessgrid.sandboxing.workspace_owners`), sealed once the chown is done, which
        :meth:`release_owner` replays - or, after a crash, the next lease of the uid.
        """
        if journal is not None and not self._owned:
            record_owners(self.root, journal)
            self._journal = journal
        self._chown_all(uid, gid)
        if self._journal is not None:
            seal_owners(self.root, self._journal)
        self._owner = (uid, gid)

    def release_owner(self, uid: int, gid: int, *, hand_back: bool = True) -> None:
        """Give everything back: a user's directory exactly as its journal recorded it, a copy
        to ``uid:gid`` (the original owner); stop re-owning new files. ``hand_back=False`` only
        stops re-owning a copy about to be removed, where the chown walk would be wasted."""
        self._owner = None
        if self._journal is not None:
            restore_owners(self._journal)
            self._journal = None
        elif hand_back:
            self._chown_all(uid, gid)

    def _chown_all(self, uid: int, gid: int) -> None:
        # Through descriptors: paths deeper than PATH_MAX, which an agent can make, still work.
        os.chown(self.root, uid, gid, follow_symlinks=False)
        for dir_fd, name, _, _ in walk_fd(self.root):
            with contextlib.suppress(OSError):
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)

    def limit_size(self, max_bytes: int, max_files: int) -> bool:
        """Have the kernel hold this workspace to ``max_bytes`` and ``max_files`` entries:
        its content moves onto a tmpfs of that size mounted at :attr:`root` (root only; 1-3 ms,
        mostly the unmount at cleanup, plus copying the task's files). Returns False - and
        changes nothing - where that is not possible (not root, not a workspace this process
        created, the files do not fit); the sandbox server's polling then enforces the quota.
        Undone by :meth:`cleanup`."""
        if self._scratch is None or not self._owned:
            return False  # a user's directory (in_place) keeps living on its own disk
        if mounted_tmpfs(self.root):
            return True
        under = open_dir(self.root)  # the directory the mount hides: still readable through it
        try:
            if not mount_capped_fs(self.root, size_bytes=max_bytes, max_inodes=max_files + 1):
                return False
            top = open_dir(self.root)
            try:
                failed = _copy_into(under, top, keep_owner=True)
            finally:
                os.close(top)
            if failed:  # does not fit, or odd entries: back to the plain directory
                unmount_capped_fs(self.root)
                return False
            return True
        finally:
            os.close(under)

    def _adopt(self, path: Path) -> None:
        if self._owner is not None:
            os.chown(path, *self._owner, follow_symlinks=False)

    # ------------------------------------------------------------------ path confinement

    def resolve(self, path: str) -> Path:
        """Map a tool's path onto the host and prove it stays inside :attr:`root`.

        Accepts a workspace-relative path, an absolute path under :attr:`mount_path`, or an
        absolute host path under :attr:`root`. ``..`` may not climb above the workspace and
        symlinks anywhere in the chain must land inside it; the fully resolved path is returned,
        so later operations cannot be redirected by the links that were checked.
        """
        if not isinstance(path, str):
            raise WorkspaceError(f"path {path!r} is not a string", hint="pass the path as a string")
        if "\0" in path:
            raise PathEscapeError(
                f"path {path!r} contains a NUL byte", hint="remove the NUL character"
            )
        if path == "":
            raise PathEscapeError(
                "path is empty", hint="pass '.' for the workspace itself or a relative path"
            )
        if path.startswith("~"):
            raise PathEscapeError(
                f"path {path!r} refers to a home directory, which is outside the workspace",
                hint=f"use a path relative to the workspace or under {self.mount_path}",
            )
        parts = self._relative_parts(path)
        kept: list[str] = []
        for part in parts:
            if part in ("", "."):
                continue
            if part == "..":
                if not kept:
                    raise PathEscapeError(
                        f"path {path!r} climbs out of the workspace with '..'",
                        hint="use a path inside the workspace",
                    )
                kept.pop()
            else:
                kept.append(part)
        candidate = os.path.join(self.root, *kept)
        try:
            real = os.path.realpath(candidate)
        except (OSError, ValueError, UnicodeError) as exc:
            raise PathEscapeError(
                f"path {path!r} cannot be resolved: {exc}", hint="use a plain relative path"
            ) from exc
        try:
            too_long = len(os.fsencode(real)) >= _PATH_MAX or any(
                len(os.fsencode(part)) > _NAME_MAX for part in kept)
        except UnicodeError as exc:
            raise WorkspaceError(f"path {path[:200]!r} is not valid Unicode: {exc}",
                                 hint="use a plain relative path") from exc
        if too_long:
            raise WorkspaceError(
                f"path {path[:200]!r}{'...' if len(path) > 200 else ''} is too long "
                f"({len(path)} characters)",
                hint=f"names may have {_NAME_MAX} bytes, whole paths {_PATH_MAX - 1}",
            )
        if not _is_within(real, str(self.root)):
            raise PathEscapeError(
                f"path {path!r} resolves through a symlink to {real!r}, outside the workspace",
                hint="file tools do not follow links that leave the workspace",
            )
        return Path(real)

    def _relative_parts(self, path: str) -> list[str]:
        if not path.startswith("/"):
            return path.split("/")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        for prefix in (self.mount_path, str(self.root)):
            base = [p for p in prefix.split("/") if p]
            if parts[: len(base)] == base:
                return parts[len(base) :]
        raise PathEscapeError(
            f"absolute path {path!r} is outside the workspace {self.mount_path}",
            hint=f"use a path relative to the workspace or under {self.mount_path}",
        )

    def relative(self, host_path: Path) -> str:
        """The workspace-relative POSIX form of a resolved host path ('.' for the root)."""
        rel = os.path.relpath(host_path, self.root)
        return "." if rel == "." else Path(rel).as_posix()

    def sandbox_path(self, path: str) -> str:
        """Where ``path`` (confined like :meth:`resolve`) appears inside the sandbox."""
        rel = self.relative(self.resolve(path))
        return self.mount_path if rel == "." else f"{self.mount_path}/{rel}"

    # ------------------------------------------------------------------ file operations

    @timed_tool
    def exists(self, path: str) -> bool:
        """Whether ``path`` exists in the workspace (escapes raise instead of answering False)."""
        return self.resolve(path).exists()

    @timed_tool
    def read_bytes(self, path: str) -> bytes:
        """Whole file as bytes, up to :data:`MAX_READ_BYTES` (used for hashing and graders)."""
        target = self._existing_file(path)
        size = target.stat().st_size
        if size > MAX_READ_BYTES:
            raise WorkspaceError(
                f"{path!r} is {size} bytes, over the {MAX_READ_BYTES}-byte read limit",
                hint="read a part of it through the shell (head, tail, sed -n)",
            )
        return target.read_bytes()

    @timed_tool
    def read_text(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        """Lines ``offset`` .. ``offset+limit`` (0-based) of a text file, newlines kept.

        Binary files (a NUL byte near the start) are refused rather than dumped into a model's
        context; files over :data:`MAX_READ_BYTES` can only be read in slices (``limit``).
        """
        if offset < 0 or (limit is not None and limit < 0):
            raise WorkspaceError(
                f"offset={offset} / limit={limit} must not be negative",
                hint="pass offset >= 0 and limit >= 0 (or None for the rest of the file)",
            )
        target = self._existing_file(path)
        size = target.stat().st_size
        if size > MAX_READ_BYTES and limit is None:
            raise WorkspaceError(
                f"{path!r} is {size} bytes, over the {MAX_READ_BYTES}-byte read limit",
                hint="pass offset and limit to read a slice of lines",
            )
        lines: list[bytes] = []
        taken = 0
        with open(target, "rb") as fh:
            if b"\0" in fh.read(_BINARY_SNIFF_BYTES):
                raise WorkspaceError(
                    f"{path!r} is a binary file", hint="inspect it through the shell (xxd, file)"
                )
            fh.seek(0)
            index = 0
            # readline(cap + 1) bounds memory even for a multi-gigabyte file without newlines.
            while chunk := fh.readline(MAX_READ_BYTES + 1):
                if index >= offset:
                    if limit is not None and len(lines) >= limit:
                        break
                    taken += len(chunk)
                    if taken > MAX_READ_BYTES:
                        raise WorkspaceError(
                            f"the requested lines of {path!r} exceed {MAX_READ_BYTES} bytes",
                            hint="pass a smaller limit, or read it through the shell",
                        )
                    lines.append(chunk)
                if chunk.endswith(b"\n"):
                    index += 1
        return b"".join(lines).decode("utf-8", errors="replace")

    @timed_tool
    def write_text(self, path: str, content: str) -> None:
        """Write ``content`` as UTF-8, creating parent directories; replaces an existing file."""
        self.write_bytes(path, content.encode("utf-8"))

    @timed_tool
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write raw bytes, creating parent directories (confined like every other operation)."""
        target = self.resolve(path)
        if target == self.root or target.is_dir():
            raise WorkspaceError(f"{path!r} is a directory", hint="pass a file path to write to")
        if target.exists() and not target.is_file():
            raise WorkspaceError(
                f"{path!r} is not a regular file (a FIFO, socket or device)",
                hint="delete it first or write to another path",
            )
        self._make_parents(target.parent)
        existed = target.exists()
        try:
            with open(target, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise WorkspaceError(f"cannot write {path!r}: {exc.strerror}") from exc
        if not existed:
            self._adopt(target)

    def _make_parents(self, directory: Path) -> None:
        missing: list[Path] = []
        probe = directory
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        if not probe.is_dir():
            raise WorkspaceError(
                f"{self.relative(probe)!r} is a file, so it cannot hold other files",
                hint="choose a path whose parents are directories",
            )
        for item in reversed(missing):
            try:
                item.mkdir()
            except OSError as exc:  # e.g. the quota's "No space left on device"
                raise WorkspaceError(
                    f"cannot create directory {self.relative(item)!r}: {exc.strerror}",
                    hint="free space in the workspace (delete files) or choose another path",
                ) from exc
            self._adopt(item)

    @timed_tool
    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace ``old`` with ``new``; returns how many occurrences were replaced.

        A non-unique ``old`` is an error unless ``replace_all``: silently editing the first of
        several matches is how agents corrupt files.
        """
        if old == "":
            raise WorkspaceError(
                "the text to replace is empty", hint="pass the exact text that should change"
            )
        text = self.read_text(path)
        count = text.count(old)
        if count == 0:
            raise WorkspaceError(
                f"the text to replace was not found in {path!r} (0 occurrences)",
                hint="copy the exact current text, including whitespace, from a fresh read",
            )
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"the text to replace occurs {count} times in {path!r}",
                hint="include more surrounding context to make it unique, or set replace_all",
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        self.write_text(path, updated)
        return count if replace_all else 1

    @timed_tool
    def list_dir(self, path: str = ".") -> list[str]:
        """Sorted entry names of a directory; directories carry a trailing ``/``."""
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"{path!r} does not exist", hint="list '.' to see what exists")
        if not target.is_dir():
            raise WorkspaceError(f"{path!r} is not a directory", hint="read it as a file instead")
        names = []
        with os.scandir(target) as entries:
            for entry in entries:
                names.append(
                    entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name
                )
        return sorted(names)

    @timed_tool
    def glob(self, pattern: str, path: str = ".") -> list[str]:
        """Workspace-relative paths under ``path`` matching ``pattern`` (``*``, ``?``, ``[]``, ``**``).

        Matching is done on a walk that never follows symlinked directories, so a link to ``/``
        cannot make a glob enumerate the host. Directories carry a trailing ``/``.
        """
        if pattern.startswith("/") or ".." in pattern.split("/") or "\0" in pattern:
            raise WorkspaceError(
                f"glob pattern {pattern!r} must be relative and must not contain '..'",
                hint="pass a pattern such as '**/*.py' and a directory in 'path'",
            )
        base = self._existing_dir(path)
        matcher = _glob_regex(pattern)
        found = []
        for rel, is_dir in _walk(base):
            if matcher.fullmatch(rel):
                found.append(self.relative(base / rel) + ("/" if is_dir else ""))
        return sorted(found)

    @timed_tool
    def search(
        self,
        pattern: str,
        path: str = ".",
        *,
        regex: bool = True,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[tuple[str, int, str]]:
        """grep: ``(file, line number, line)`` for each matching line, files in sorted order.

        Pure Python so it behaves the same everywhere. Binary files, files over
        :data:`MAX_READ_BYTES`, ``.git`` and symlinks are skipped; lines are cut at
        :data:`MAX_LINE_CHARS`.
        """
        flags = re.IGNORECASE if ignore_case else 0
        try:
            compiled = compile_bounded(pattern if regex else re.escape(pattern), flags)
        except re.error as exc:
            raise WorkspaceError(
                f"search pattern {pattern!r} is not a valid regular expression: {exc}",
                hint="fix the pattern or pass regex=False for a literal search",
            ) from exc
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"{path!r} does not exist", hint="search '.' or an existing path")
        if target.is_file():
            files = [target]
        else:
            files = [target / rel for rel, is_dir in _walk(target) if not is_dir]
        results: list[tuple[str, int, str]] = []
        for file in files:
            if file.is_symlink() or not file.is_file():
                continue
            for number, line in _matching_lines(file, compiled):
                results.append((self.relative(file), number, line))
                if len(results) >= max_results:
                    return results
        return results

    @timed_tool
    def snapshot_files(self) -> dict[str, bytes]:
        """Every regular file (relative POSIX path → content); symlinks are not followed."""
        out: dict[str, bytes] = {}
        for rel, is_dir in _walk(self.root):
            full = self.root / rel
            if not is_dir and not full.is_symlink() and full.is_file():
                out[Path(rel).as_posix()] = full.read_bytes()
        return out

    # ------------------------------------------------------------------ helpers

    def _existing_file(self, path: str) -> Path:
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(
                f"{path!r} does not exist", hint="list the directory to see which files exist"
            )
        if target.is_dir():
            raise WorkspaceError(f"{path!r} is a directory", hint="list it instead of reading it")
        if not target.is_file():
            raise WorkspaceError(
                f"{path!r} is not a regular file (a FIFO, socket or device)",
                hint="only regular files can be read",
            )
        return target

    def _existing_dir(self, path: str) -> Path:
        target = self.resolve(path)
        if not target.is_dir():
            raise WorkspaceError(
                f"{path!r} is not an existing directory", hint="pass a directory in the workspace"
            )
        return target


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _walk(base: Path) -> Iterator[tuple[str, bool]]:
    """(relative path, is_dir) for everything under ``base``, sorted, symlinks never descended."""
    for dirpath, dirnames, filenames in walk_tree(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        rel_dir = os.path.relpath(dirpath, base)
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for name in dirnames:  # a symlink to a directory is listed, never entered
            yield prefix + name, not os.path.islink(os.path.join(dirpath, name))
        for name in sorted(filenames):
            yield prefix + name, False


def _glob_regex(pattern: str) -> BoundedPattern:
    """Translate a glob into a regex over '/'-separated relative paths; ``**`` spans directories."""
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment_regex(part) + ("" if last else "/"))
    return compile_bounded("".join(out), re.DOTALL)


def _segment_regex(segment: str) -> str:
    """One path segment of a glob: ``*`` and ``?`` stop at '/', ``[...]``/``[!...]`` are classes."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        end = segment.find("]", i + 2) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif end != -1:
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            members = re.escape(body[1:] if negate else body).replace("\\-", "-")
            out.append("[" + ("^" if negate else "") + members + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _matching_lines(file: Path, compiled: BoundedPattern) -> Iterator[tuple[int, str]]:
    try:
        if file.stat().st_size > MAX_READ_BYTES:
            return
        with open(file, "rb") as fh:
            if b"\0" in fh.read(_BINARY_SNIFF_BYTES):
                return
            fh.seek(0)
            for number, raw in enumerate(fh, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if compiled.search(line):
                    yield number, line[:MAX_LINE_CHARS]
    except OSError:
        return


def _copy_tree(source: Path, target: Path) -> None:
    """Copy ``source`` to a new directory ``target`` without recursion or long paths (see
    :func:`_copy_into`); what cannot be copied is left out."""
    target.mkdir(parents=True)
    src = open_dir(source)
    try:
        dst = open_dir(target)
        try:
            _copy_into(src, dst, keep_owner=False)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_into(src_root: int, dst_root: int, *, keep_owner: bool) -> int:
    """Copy the directory open as ``src_root`` into the (empty) one open as ``dst_root``,
    times included; with ``keep_owner`` owners and modes exactly (the workspace moving onto
    its tmpfs), else inert modes (:func:`inert_mode`: a copy for the host to read); returns
    how many entries could not be copied.

    Built for a tree an agent made: descriptors only (no path longer than one name, so
    PATH_MAX does not matter, and two descriptors held at any depth: the way back up is a
    checked ``..``, as in :func:`~harnessgrid.sandboxing.scratch.walk_fd`), links copied as links,
    FIFOs, sockets and devices left out, sparse files kept sparse and hard links kept linked - so
    the copy never holds more data than the source did, and a workspace within its quota cannot
    become a bigger copy.
    """
    failed = 0
    first_copy: dict[tuple[int, int], str] = {}  # hard-linked inode -> its path in the copy
    src, dst = os.dup(src_root), os.dup(dst_root)
    # per level: the source directory's lstat, the copy's, names still to do, path in the copy
    stack = [(os.fstat(src), os.fstat(dst), list_dir_fd(src), "")]
    try:
        while stack:
            src_st, _, names, rel = stack[-1]
            if not names:
                stack.pop()
                _copy_meta(dst, src_st, keep_owner)  # last: a read-only directory is filled first
                if stack:
                    src, dst = _up_both(src, dst, stack[-1][0], stack[-1][1])
                continue
            name = names.pop()
            try:
                info = os.stat(name, dir_fd=src, follow_symlinks=False)
                mode = info.st_mode
                if stat.S_ISDIR(mode):
                    os.mkdir(name, 0o700, dir_fd=dst)
                    made = os.stat(name, dir_fd=dst, follow_symlinks=False)
                    src, src_here = step_down(src, name, info)
                    try:
                        dst, _ = step_down(dst, name, made)
                    except OSError:  # back to where we were (step_up closes the child)
                        try:
                            src = step_up(src, src_st)
                        except OSError:
                            src = -1
                            raise _TreeChanged from None
                        raise
                    child_rel = f"{rel}/{name}" if rel else name
                    stack.append((src_here, made, list_dir_fd(src), child_rel))
                elif stat.S_ISLNK(mode):
                    os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                    if keep_owner:
                        os.chown(name, info.st_uid, info.st_gid, dir_fd=dst,
                                 follow_symlinks=False)
                    os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst,
                             follow_symlinks=False)
                elif stat.S_ISREG(mode):
                    key = (info.st_dev, info.st_ino)
                    if info.st_nlink > 1 and key in first_copy:
                        os.link(first_copy[key], name, src_dir_fd=dst_root, dst_dir_fd=dst,
                                follow_symlinks=False)
                        continue
                    _copy_file(src, dst, name, info, keep_owner)
                    if info.st_nlink > 1:
                        first_copy[key] = f"{rel}/{name}" if rel else name
            except OSError:
                failed += 1
    except _TreeChanged:
        failed += 1
        src = dst = -1
    finally:
        for fd in (src, dst):
            if fd >= 0:
                os.close(fd)
    return failed


class _TreeChanged(Exception):
    """The way back up (``..``) no longer leads where the copy came from."""


def _up_both(src: int, dst: int, src_parent: os.stat_result,
             dst_parent: os.stat_result) -> tuple[int, int]:
    try:
        up_src = step_up(src, src_parent)
    except OSError:
        os.close(dst)
        raise _TreeChanged from None
    try:
        return up_src, step_up(dst, dst_parent)
    except OSError:
        os.close(up_src)
        raise _TreeChanged from None


def _copy_file(src: int, dst: int, name: str, info: os.stat_result, keep_owner: bool) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    sfd = os.open(name, flags, dir_fd=src)
    try:
        dfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600,
                      dir_fd=dst)
        try:
            _copy_data(sfd, dfd, info.st_size)
            _copy_meta(dfd, info, keep_owner)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _copy_meta(fd: int, info: os.stat_result, keep_owner: bool) -> None:
    if keep_owner:  # the workspace itself, moved: exactly as it was
        os.chown(fd, info.st_uid, info.st_gid)
        os.chmod(fd, stat.S_IMODE(info.st_mode))
    else:
        os.chmod(fd, inert_mode(info.st_mode))
    os.utime(fd, ns=(info.st_atime_ns, info.st_mtime_ns))


def inert_mode(mode: int) -> int:
    """The mode a copy of an agent's entry gets: no set-id or sticky bit, nothing writable by
    group or others; folders 0755, or 0700 where the agent shut others out."""
    if stat.S_ISDIR(mode):
        return 0o755 if mode & 0o005 == 0o005 else 0o700
    return stat.S_IMODE(mode) & 0o755


_CHUNK = 1 << 20


def _copy_data(src: int, dst: int, size: int) -> None:
    """Copy ``size`` bytes, writing only the data: holes (SEEK_DATA/SEEK_HOLE, or all-zero
    chunks where the filesystem cannot tell) stay holes in the copy."""
    try:
        spans = _data_spans(src, size)
    except OSError:  # no SEEK_DATA here: copy it all, skipping zeros below
        spans = [(0, size)]
    zero = bytes(_CHUNK)
    for start, end in spans:
        offset = start
        while offset < end:
            chunk = os.pread(src, min(_CHUNK, end - offset), offset)
            if not chunk:
                break
            if chunk != zero[: len(chunk)]:
                view = memoryview(chunk)
                at = offset
                while view:
                    written = os.pwrite(dst, view, at)
                    view, at = view[written:], at + written
            offset += len(chunk)
    os.ftruncate(dst, size)


def _data_spans(fd: int, size: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        if end <= start:
            break
        spans.append((start, end))
        offset = end
    return spans


def _ignore_special(directory: str, names: list[str]) -> list[str]:
    """copytree filter: skip FIFOs, sockets and devices, which copying would block on or fail."""
    skipped = []
    for name in names:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped
