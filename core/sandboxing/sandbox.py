"""Shell commands of an episode, run inside one long-lived bubblewrap sandbox.

Why one sandbox per episode: starting ``bwrap`` costs several milliseconds per command, more than
the commands agents usually run. So :meth:`Sandbox.start` launches ``bwrap`` once with a tiny
command server (``_sandbox_server.py``) as the sandbox's PID 1, and every :meth:`Sandbox.run` is one
request/response on a pipe: the server spawns the command (``posix_spawn``, i.e. vfork speed),
streams back bounded output and kills whatever the command left behind. Episodes never share a
sandbox at the same time, and each sees only its own workspace: a sandbox pool may hand one
sandbox to several episodes in turn, each as new (:meth:`Sandbox.reset_sync`).

**Leases** (as root). There the sandbox's PID 1 is a *lessor*, not the command server: each
episode - a lease - gets a server of its own, forked from the lessor as PID 1 of a new pid
namespace, in new ipc, network and mount namespaces, with a new ``/proc``, ``/tmp`` and
``/dev/shm`` tmpfs, ``/dev/mqueue`` and workspace mount, and a loopback with no history. When the lease ends the
server exits and the kernel takes every process and namespace of the episode with it; the next
lease starts from the lessor's untouched state again. So a recycled sandbox is as new down to
what the kernel counts, which emptying directories never reset: its first command gets the pid
a fresh sandbox's first command gets, System V IPC objects get the same ids, files the same
inode numbers (in ``/tmp`` and, emptied by the pool, the workspace: a new tmpfs too), the
loopback's counters start at zero, and PID 1's own counters (CPU, context switches, memory
high-water mark) start over. What a recycled lease shares with the previous one: the sandbox's
uid (and its kernel keyrings, which no command can use, see below; the previous leases' session
keyrings linger, empty, until the kernel collects them, within about a second), its memory
cgroup (not visible inside), its bwrap mounts (read-only) and the lessor, which no command can
see or signal: it lives in the pid namespace above the lease's and in mount, ipc and network
namespaces of its own. A lease costs ~4 ms of CPU (fork, namespaces, mounts, the server's
privilege drop, its end), a fresh sandbox ~25 ms. Run as a normal user there are no leases: the
server is PID 1, and a pool starts a new sandbox per episode.

What the sandbox enforces (see ``SandboxLimits``):

- **Isolation** - new pid, net, ipc, uts (and cgroup) namespaces (as root, pid, net, ipc and
  mount namespaces of each lease's own besides); no network but loopback; the system
  (``/usr``, the ``/lib*`` and ``/bin`` links, a short allow-list of ``/etc``) read-only; the
  interpreter's install prefix read-only when it lives outside ``/usr``; a private size-capped
  tmpfs ``/tmp``; the workspace read-write at ``mount_path``. Nothing else of the host (``/root``,
  ``/home``, ``/work``, ``/tmp``, other workspaces) exists inside.
- **Unprivileged commands** - run as root, ``bwrap`` skips the user namespace and the server,
  holding only CAP_SETUID/SETGID (its lessor, which forked it, also CAP_SYS_ADMIN and
  CAP_NET_ADMIN for the lease's namespaces and mounts; it never runs a command), drops at
  startup to a uid of this sandbox's own (leased from ``_UID_BASE`` + slot through a lock file;
  the workspace is chowned to it while the sandbox runs and handed back at close). Commands
  therefore have no capabilities, run with ``no_new_privs`` (setuid binaries are inert), and
  RLIMIT_NPROC - which the kernel ignores for root - holds, per sandbox since the uid is
  private. The server keeps a saved uid of 0 (and no capabilities): that makes ``prlimit`` on
  it fail for commands; as PID 1 it ignores their signals and, being non-dumpable, cannot be
  ptraced or read through ``/proc``. Run as a normal user, ``bwrap`` uses a user namespace
  instead: isolation and RLIMIT_NPROC (counted per namespace) hold, but commands share the
  server's uid and could ``prlimit`` it to death (a ``SandboxError``).
- **Syscalls Docker refuses** - a seccomp filter (``_sandbox_seccomp``), installed by the server
  on itself once its privileged setup is done and inherited by every command, refuses on every
  ABI (64-bit, 32-bit compat, x32) what Docker's default profile refuses: keyrings (not
  namespaced: a key would outlive the episode under a uid that is leased again, and the host's
  session keyring would be inherited; the server joins a fresh one first), new namespaces
  (``unshare``/``clone`` flags, ``setns``; ``clone3`` gets ENOSYS), mounts, io_uring (ENOSYS),
  ``bpf``, ``perf_event_open``, ``userfaultfd``, unsafe ``personality`` values, AF_ALG and
  AF_VSOCK sockets, module, kexec, clock and other host-wide calls, and syscalls newer than its
  table (ENOSYS). A machine it has no table for cannot start a sandbox.
- **Limits per command** - wall clock (then SIGKILL to everything in the sandbox but the server),
  RLIMIT_CPU (``ulimit -t`` ahead of the command), RLIMIT_AS, RLIMIT_NPROC (fork bombs stop at
  ``max_procs``), RLIMIT_FSIZE and no core files (set once on the server, inherited with
  hard = soft), total RSS of the command's processes (polled every 50 ms), and output: the first
  ``output_bytes`` of stdout+stderr are kept, the rest is read and dropped, and a command that
  prints more than ``_DISCARD_FACTOR`` times the cap is killed - memory stays bounded whatever
  it prints. CPU and address space are per process; wall clock and RSS bound the whole command.
  The RSS check also counts memory outside any address space (memfds held open, System V
  shared memory); System V objects are removed when the command ends; as root the ipc
  namespace's ``kernel.shm*`` limits are set and each command runs in a memory cgroup of the
  sandbox where the host has one (``_sandbox_memory``). RLIMIT_NOFILE is ``open_files``.
- **Disk** - RLIMIT_FSIZE caps each file; the workspace as a whole is held to ``workspace_mb``
  bytes and ``max_files`` entries. As root the kernel does it: the workspace moves onto a tmpfs
  of exactly that size and inode count mounted at its host directory
  (``Workspace.limit_size``, 1-3 ms per episode; detached when the workspace is removed), so
  writes past the quota fail with ENOSPC whatever path, descriptor or permission trick made
  them, and the server kills a command that fills it. Elsewhere (not root, ``in_place``
  workspaces, unsafe mode) the server polls: a ``statvfs`` estimate every tick and a walk of
  the workspace by ``chdir`` (no path is longer than a name; directories the agent locked are
  opened up; sparse files count at their apparent size, hard links once) kill a command that
  grows it past either limit (overshoot is what the command writes in a few ticks; a command
  that only deletes is never killed). ``/tmp`` is a tmpfs of ``tmp_mb``.
- **No leftovers** - when a command ends, every other process in the sandbox is killed
  (``kill(-1)`` from PID 1 reaches the whole pid namespace, daemons included).

**Host tools** (:class:`HostTools`, an embedding product's tools): for the one command that
is given them, each is an executable on the command's PATH, in a private directory of its
``/tmp`` with a socket of the server; a call (``name '{json}'`` or ``name --key value``) is
one connection, which the server forwards to the host as a frame on its stdout and answers
with the host's reply (a request on its stdin) while the command runs. Nothing else of the
host is reachable through it: the server and the host each check the name, a call is capped
at 1 MiB and eight may be open at once.

If the server dies underneath (infrastructure failure) :meth:`Sandbox.run` raises
:class:`SandboxError`, so the runtime can mark the episode ``sandbox_error`` instead of scoring it.
``unsafe_no_sandbox`` runs the same server as a plain subprocess in the workspace directory: the
timeout, output cap, quota and the rlimits the platform allows still apply (not RLIMIT_NPROC,
which would count all the user's processes, nor the RSS check); leftovers are killed by process
group and, on Linux, as orphans of the server (a child subreaper). Nothing is isolated.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import itertools
import json
import logging
import marshal
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from types import CodeType, TracebackType
from typing import IO, Any, NoReturn, Self, TypeVar

from harnessgrid.environment_record import EnvironmentRecord
from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.sandboxing._sandbox_accounts import account_files, data_fd
from harnessgrid.sandboxing._sandbox_memory import (
    CGROUP_SLACK_MB,
    MemoryCgroup,
    ipc_namespace_limits,
)
from harnessgrid.sandboxing._sandbox_seccomp import native_keyctl, sandbox_filter
from harnessgrid.sandboxing.scratch import (
    can_clone_mounts,
    clone_mount,
    mounted_tmpfs,
    unmount_capped_fs,
)
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.sandboxing.workspace_owners import restore_owners
from harnessgrid.timing import timed_tool, tool_span

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

_SERIALS = itertools.count(1)

SHM_MB = 64
"""Size of the sandbox's ``/dev/shm`` (a tmpfs; at most ``tmp_mb``): room for POSIX semaphores
and shared memory - what ``multiprocessing`` uses -, bounded because its pages belong to no
process (the memory cgroup, where the host has one, counts them; they go with the lease)."""

MB = 1024 * 1024
INSTALL_HINT = (
    "install bubblewrap: `apt-get install -y bubblewrap` (Debian/Ubuntu) or "
    "`dnf install bubblewrap` (Fedora/RHEL). There is none for macOS (brew has none): pass "
    "--unsafe-no-sandbox (Sandbox(unsafe_no_sandbox=True)) to run commands unsandboxed. "
    "If bwrap is installed but fails, allow unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1) or run as root."
)
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_UID_BASE = 2_000_000_000
"""Sandboxed commands run as ``_UID_BASE + slot``: far from real accounts and subuid ranges."""
_UID_SLOTS = 4096
_DISCARD_FACTOR = 32
_HOST_GRACE_S = 15.0
"""How much longer than the command's timeout the host waits before declaring the server dead."""
_START_TIMEOUT_S = 30.0
_MAX_HEADER_BYTES = 1 << 20
_MAX_TOOL_CALL_BYTES = (1 << 20) + 256
"""A host tool call's arguments (the server's TOOL_REQUEST_MAX): one frame may carry them."""
_MAX_TOOL_REPLY_CHARS = 1 << 20
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}\Z")
"""A host tool is a file on the command's PATH: a plain name, and one no option looks like."""
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_FORBIDDEN_MOUNTS = (*_SYSTEM_DIRS, "/proc", "/dev", "/sys")
_ETC_ALLOWLIST = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "protocols",
    "services",
    "ssl",
    "timezone",
)
"""/etc entries commands commonly need (dynamic linker, names, certificates, /usr/bin/awk links).
The rest of the host's /etc (credentials, service configs) stays out; ``passwd`` and ``group``
are the sandbox's own (:mod:`harnessgrid.sandboxing._sandbox_accounts`)."""
_SERVER_CAPS = ("CAP_SETUID", "CAP_SETGID")
"""All the server needs, and only until it drops to the sandbox uid at startup."""
_LESSOR_CAPS = (*_SERVER_CAPS, "CAP_SYS_ADMIN", "CAP_NET_ADMIN")
"""As root, the sandbox's PID 1 (the lessor) also keeps these, to give each lease (episode) new
namespaces and mounts; it never runs a command, and each lease's server drops them all."""


@functools.cache
def _tool_client() -> str:
    """The source of a host tool's client inside the sandbox (``_sandbox_tool.py``)."""
    return Path(__file__).with_name("_sandbox_tool.py").read_text()


@functools.cache
def _server_code() -> CodeType:
    """The command server (``_sandbox_server.py``) compiled once per host process and sent to
    each sandbox as a code object: compiling it in every server cost ~5 ms of CPU per start.
    marshal carries it, and the server runs on this very interpreter binary, so the bytecode
    matches."""
    path = Path(__file__).with_name("_sandbox_server.py")
    code: CodeType = compile(path.read_text(), str(path), "exec", dont_inherit=True)
    return code


_BOOTSTRAP = (
    "import marshal,sys;R=sys.stdin.buffer;B=marshal.loads(R.read(int.from_bytes(R.read(4),"
    "'little')));CFG=B['config'];exec(B['source'])"
)
"""The server's command line: its code and config come down the pipe, keeping argv short."""

_LIFECYCLE = ThreadPoolExecutor(max_workers=8, thread_name_prefix="hg-sandbox")
"""Where sandboxes are launched and closed, off the event loop. Its threads live as long as the
process, which matters: ``bwrap --die-with-parent`` dies with the *thread* that spawned it, so a
sandbox launched from a short-lived thread (``asyncio.to_thread``'s pool is shut down at the end
of ``asyncio.run``) would be killed with that thread."""


def off_loop_detached(action: Callable[[], _T]) -> asyncio.Future[_T]:
    """Run a blocking sandbox lifecycle step (launch, chown, close, rmtree) in the lifecycle
    threads, so that a hundred episodes starting at once never stall the event loop. The step
    runs to its end even if whoever awaits the future is cancelled."""
    return asyncio.get_running_loop().run_in_executor(_LIFECYCLE, action)

async def finish_or_undo(future: asyncio.Future[_T], undo: Callable[[_T], object], *,
                         on_error: Callable[[], object] | None = None) -> None:
    """Wait for a lifecycle step. Cancelled meanwhile, the step still completes in its thread and
    ``undo`` then cleans up what it made; ``on_error`` runs when the step itself failed."""
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        def after(done: asyncio.Future[_T]) -> None:
            if done.cancelled() or done.exception() is not None:
                if on_error is not None:
                    on_error()
            else:
                undo(done.result())
        future.add_done_callback(after)
        raise
    except BaseException:
        if on_error is not None:
            on_error()
        raise


# ---------------------------------------------------------------------------- public data types


@dataclass(frozen=True)
class SandboxLimits:
    """Per-command limits (``workspace_mb`` and ``tmp_mb`` hold for the sandbox's lifetime).

    ``cpu_s`` and ``memory_mb`` (address space) hold per process; the polled RSS check applies
    ``memory_mb`` to the command's processes together. ``wall_s`` bounds the whole command.
    """

    wall_s: float = 60.0
    cpu_s: int = 60
    memory_mb: int = 2048
    max_procs: int = 256
    file_size_mb: int = 256
    output_bytes: int = 1_000_000
    workspace_mb: int = 1024
    tmp_mb: int = 256
    max_files: int = 100_000
    """Entries (files, directories, links) the workspace may hold, like ``workspace_mb``."""
    open_files: int = 1024
    """Descriptors one process may hold open (RLIMIT_NOFILE, hard = soft)."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise HarnessgridError(
                    f"SandboxLimits.{item.name}={value!r} must be a positive number",
                    hint=f"pass a positive {item.type} (default {item.default!r})",
                )


@dataclass(frozen=True)
class HostTools:
    """Host functions a command may call from inside the sandbox (an embedding product's
    tools, :mod:`harnessgrid.product_tools`): each name is a shell command in the sandbox
    that sends its arguments to the host over the command channel and prints the reply.

    ``names`` maps each command name to a one-line description (its ``--help``);
    ``handler(name, arguments)`` runs on the host and returns ``(ok, text)``: ``text`` is
    printed on stdout (exit 0) when ``ok``, on stderr (exit 1) otherwise.
    """

    names: Mapping[str, str]
    handler: Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]]


@dataclass(frozen=True)
class CommandResult:
    """What one shell command produced.

    ``exit_code`` is None when the sandbox killed the command (``killed`` says why: ``timeout``,
    ``output_limit``, ``memory``, ``disk_quota``); a command that died of a signal reports
    128 + signal like a shell, with ``killed`` set to ``cpu`` / ``file_size`` for SIGXCPU /
    SIGXFSZ. The sandbox's explanations end ``stderr``, prefixed ``[sandbox]``.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    truncated: bool
    duration_s: float
    killed: str | None = None
    #: Where the command's time went in the server, step by step (name, seconds), when the
    #: sandbox's ``time_phases`` is set (benchmarks/sandbox_cost.py); empty otherwise.
    phases: tuple[tuple[str, float], ...] = ()

    @property
    def ok(self) -> bool:
        """The command ran to completion and exited 0."""
        return self.exit_code == 0


# ---------------------------------------------------------------------------- availability


def _namespace_flags() -> list[str]:
    """As root we skip the user namespace so the server can drop each command to its own uid."""
    if os.geteuid() == 0:
        return [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
    return ["--unshare-all"]


@functools.lru_cache(maxsize=1)
def check_bwrap() -> str | None:
    """Why episode sandboxes cannot run here, or None when ``bwrap`` works (cached)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed or not on PATH; it sandboxes shell commands"
    argv = [exe, *_namespace_flags(), *_probe_mounts(), "--proc", "/proc", "--dev", "/dev"]
    try:
        proc = subprocess.run([*argv, "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap ({exe}) could not be run: {exc}"
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip()
        return f"bwrap ({exe}) is installed but cannot create a sandbox here: {detail}"
    return None


def _probe_mounts() -> list[str]:
    """The system directories, mounted as a sandbox mounts them. Not ``/``: a recursive bind of
    the whole tree copies every mount under it, among them other sandboxes' workspace mounts,
    and one unmounted meanwhile failed the probe ("Unable to apply mount flags: remount
    /newroot/tmp/hg-ws-...: No such file or directory"), so a busy machine read as one where
    bwrap cannot run."""
    args: list[str] = []
    for system_dir in _SYSTEM_DIRS[:-1]:
        if os.path.islink(system_dir):
            args += ["--symlink", os.readlink(system_dir), system_dir]
        elif os.path.isdir(system_dir):
            args += ["--ro-bind", system_dir, system_dir]
    return args


def sandbox_available() -> bool:
    """True when commands can run sandboxed (``bwrap`` present and allowed to create namespaces)."""
    return check_bwrap() is None


_warned_unsafe = False


def _warn_unsafe() -> None:
    global _warned_unsafe
    if _warned_unsafe:
        return
    _warned_unsafe = True
    message = (
        "harnessgrid: running shell commands WITHOUT a sandbox (unsafe_no_sandbox=True): "
        "commands see the whole host, its network and your files; only time, CPU, memory, "
        "file-size, output and workspace-size limits apply"
    )
    # One channel only: through logging as well, an unconfigured logger printed it twice.
    warnings.warn(message, RuntimeWarning, stacklevel=3)


# ---------------------------------------------------------------------------- internals


class _UidLease:
    """A uid no other live sandbox on this host uses, held through an flock'ed lock file.

    A private uid makes RLIMIT_NPROC count this sandbox's processes only, and keeps one
    episode's commands from signalling another's. The lock dies with the process holding it.
    """

    def __init__(self, uid: int, fd: int, journal: Path) -> None:
        self.uid = uid
        self._fd = fd
        self.journal = journal
        """Where an ``in_place`` workspace's owners are kept while this uid holds it."""

    @classmethod
    def acquire(cls) -> _UidLease:
        lock_dir = Path(tempfile.gettempdir()) / "harnessgrid-sandbox-uids"
        (lock_dir / _JOURNALS).mkdir(mode=0o700, parents=True, exist_ok=True)
        _hand_back_crashed_in_place(lock_dir)
        for slot in range(_UID_SLOTS):  # lowest free slot: few lock files, quick to find
            uid = _UID_BASE + slot
            fd = _try_lock(lock_dir, uid)
            if fd is not None:
                return cls(uid, fd, lock_dir / _JOURNALS / f"{uid}.json")
        raise SandboxError(
            f"all {_UID_SLOTS} sandbox uids are in use",
            hint=f"too many live sandboxes? stale locks live in {lock_dir}",
        )

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_JOURNALS = "in-place"


def _try_lock(lock_dir: Path, uid: int) -> int | None:
    fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _hand_back_crashed_in_place(lock_dir: Path) -> None:
    """Replay the owners journal of every uid whose sandbox died holding a user's directory
    (the journal is there, the uid's lock is free), before any uid is leased again: from then
    on no sandbox can write that directory. One listing of a folder that is usually empty."""
    for journal in (lock_dir / _JOURNALS).glob("*.json"):
        fd = _try_lock(lock_dir, int(journal.stem)) if journal.stem.isdigit() else None
        if fd is None:
            continue  # its sandbox is alive, or not a journal of ours
        try:
            root = restore_owners(journal)
            logger.warning("a sandbox died holding the directory %s: its files were handed back "
                           "to their owners", root)
        finally:
            os.close(fd)


Frame = tuple[dict[str, Any], bytes, bytes]


class _ProtocolError(Exception):
    """The server's output does not parse: treated like a dead server."""


class _Channel:
    """Framed responses from the server's stdout, readable from sync code or any event loop."""

    def __init__(self, read_fd: int, write_fd: int, max_payload: int) -> None:
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self._rfd = read_fd
        self._wfd = write_fd
        self._max_payload = max_payload
        self._buf = bytearray()
        self._eof = False
        # Requests not yet written, whole frames in order: replies to host tool calls are
        # queued from tasks while the server may be busy writing to us, so they must never
        # block (both pipes full would deadlock) nor interleave with a request.
        self._out = bytearray()
        self._writer: asyncio.AbstractEventLoop | None = None

    def _write(self) -> None:
        with contextlib.suppress(BlockingIOError):
            del self._out[: os.write(self._wfd, self._out)]

    def send(self, data: bytes) -> None:
        """Write ``data`` after anything still queued, waiting until all of it is written."""
        self._out += data
        self._write()
        while self._out:
            select.select([], [self._wfd], [])
            self._write()

    def queue(self, data: bytes) -> None:
        """Write ``data`` after anything still queued, from the running event loop, as the pipe
        takes it (a later :meth:`send` writes what is left)."""
        self._out += data
        self._pump()

    def _pump(self) -> None:
        try:
            self._write()
        except OSError:  # the server is gone: reading its output says so
            self._out.clear()
        if self._out and self._writer is None:
            self._writer = asyncio.get_running_loop()
            self._writer.add_writer(self._wfd, self._pump)
        elif not self._out:
            self.stop_writing()

    def stop_writing(self) -> None:
        if self._writer is not None:
            self._writer.remove_writer(self._wfd)
            self._writer = None

    def _parse(self) -> Frame | None:
        newline = self._buf.find(b"\n")
        if newline < 0:
            if len(self._buf) > _MAX_HEADER_BYTES:
                raise _ProtocolError("response header too long")
            return None
        try:
            header = json.loads(self._buf[:newline])
            out_len, err_len = int(header.get("out_len", 0)), int(header.get("err_len", 0))
            cap = max(self._max_payload, _MAX_TOOL_CALL_BYTES if "host_tool" in header else 0)
        except (ValueError, TypeError, AttributeError) as exc:
            raise _ProtocolError(f"malformed response header: {exc}") from exc
        if out_len < 0 or err_len < 0 or out_len + err_len > cap:
            raise _ProtocolError(f"response of {out_len}+{err_len} bytes is over the output cap")
        end = newline + 1 + out_len + err_len
        if len(self._buf) < end:
            return None
        out = bytes(self._buf[newline + 1 : newline + 1 + out_len])
        err = bytes(self._buf[newline + 1 + out_len : end])
        del self._buf[:end]
        return header, out, err

    def _fill(self) -> None:
        while not self._eof:
            try:
                chunk = os.read(self._rfd, 1 << 20)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
            self._buf += chunk

    def _next(self, deadline: float) -> tuple[Frame | None, float]:
        frame = self._parse()
        if frame is None and self._eof:
            raise EOFError
        remaining = deadline - time.monotonic()
        if frame is None and remaining <= 0:
            raise TimeoutError
        return frame, remaining

    def read_sync(self, deadline: float) -> Frame:
        while True:
            frame, remaining = self._next(deadline)
            if frame is not None:
                return frame
            select.select([self._rfd], [], [], remaining)
            self._fill()

    async def read_async(self, deadline: float) -> Frame:
        loop = asyncio.get_running_loop()
        while True:
            frame, remaining = self._next(deadline)
            if frame is not None:
                return frame
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self._rfd, _resolve, ready)
            try:
                async with asyncio.timeout(remaining):
                    await ready
            except TimeoutError:
                pass
            finally:
                loop.remove_reader(self._rfd)
            self._fill()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _frame(message: dict[str, Any]) -> bytes:
    """Host → server: a 4-byte length, then marshal. marshal costs the server no import and both
    ends run the same interpreter; the server → host direction stays JSON, which the host can
    parse safely whatever the sandbox sends."""
    data = marshal.dumps(message)
    return len(data).to_bytes(4, "little") + data


def _checked_tool_names(tools: HostTools) -> dict[str, str]:
    names = dict(tools.names)
    for name, description in names.items():
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise HarnessgridError(
                f"host tool name {name!r} cannot be a command in the sandbox",
                hint="use letters, digits, '_' and '-', starting with a letter or '_' "
                     "(at most 64 characters), e.g. 'lookup_order'",
            )
        if not isinstance(description, str):
            raise HarnessgridError(
                f"the description of host tool {name!r} is {description!r}, not a string",
                hint="map each name to a one-line description (its --help)",
            )
    return names


async def _reply_to_call(channel: _Channel, tools: HostTools, call_id: int, name: str,
                         arguments: bytes, ended: asyncio.Event) -> None:
    ok, text = await _answer_call(tools, name, arguments)
    if len(text) > _MAX_TOOL_REPLY_CHARS:
        text = text[:_MAX_TOOL_REPLY_CHARS] + f"\n[truncated to {_MAX_TOOL_REPLY_CHARS} characters]"
    if not ended.is_set():  # a handler that ignored its cancellation: nobody waits any more
        channel.queue(_frame({"reply": call_id, "ok": ok, "text": text}))


async def _answer_call(tools: HostTools, name: str, arguments: bytes) -> tuple[bool, str]:
    """The handler's answer to a call from the sandbox, or why there is none. The call is the
    agent's: its name is checked again here (the server checked it too), and nothing in it
    makes this raise."""
    if name not in tools.names:
        return False, f"{name!r} is not a host tool of this command"
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        return False, f"{name}: the arguments are not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return False, f"{name}: the arguments must be a JSON object, not {type(parsed).__name__}"
    try:
        answer = await tools.handler(name, parsed)
    except Exception as exc:  # the product's bug, reported to the agent as a failed call
        logger.warning("host tool %r raised", name, exc_info=True)
        return False, f"{name} failed on the host: {type(exc).__name__}: {exc}"
    if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], str)):
        logger.warning("host tool handler for %r returned %r, not (ok, text)", name, answer)
        return False, f"{name} failed on the host: its handler returned no (ok, text) pair"
    return bool(answer[0]), answer[1]


def _kill_process(proc: subprocess.Popen[bytes], server: int | None = None) -> None:
    """SIGKILL the bwrap process group and the server (``server``: a pidfd of it, closed here),
    waiting until the server - and with it, as PID 1, the whole sandbox - is gone: only then
    may its uid be leased again. (The server also dies with bwrap by its parent-death signal,
    which covers a host that dies without closing; this makes the wait exact.)"""
    if server is not None:
        try:
            signal.pidfd_send_signal(server, signal.SIGKILL)
            # bwrap reaps it (no zombie of the uid left for init to reap later) and exits.
            proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            os.close(server)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        logger.warning("sandbox process %d did not exit after SIGKILL", proc.pid)


def _children(pid: int) -> list[int]:
    try:
        return [int(kid) for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _needed_paths() -> tuple[str, ...]:
    """What the sandbox itself mounts and runs from: system dirs, /proc, /dev, /sys, /tmp
    (the server's scratch) and the interpreter the command server runs on."""
    python = os.path.realpath(sys.executable)
    return (*_FORBIDDEN_MOUNTS, "/tmp", os.path.realpath(sys.base_prefix),
            os.path.dirname(python))


def mount_conflict(mount_path: str) -> str | None:
    """The path the sandbox needs that a workspace at ``mount_path`` (a task chooses where)
    would hide or sit inside, or None. Mounted over the interpreter's directory, a file the
    task ships would run as the sandbox's first process, with its capabilities."""
    return next((needed for needed in _needed_paths()
                 if _under(mount_path, needed) or _under(needed, mount_path)), None)


def _check_mount_path(mount_path: str) -> None:
    needed = mount_conflict(mount_path)
    if needed is not None:
        raise HarnessgridError(
            f"mount_path {mount_path!r} would hide or sit inside {needed}, which the "
            "sandbox needs",
            hint="mount the workspace elsewhere, e.g. '/workspace'",
        )


def _checked_environment(env: EnvironmentRecord | None,
                         mount_path: str) -> EnvironmentRecord | None:
    """The environment, if its mount and the workspace's leave each other alone."""
    if env is not None and env.kind == "venv" and (_under(mount_path, env.path)
                                                   or _under(env.path, mount_path)):
        raise HarnessgridError(
            f"environment {env.name!r} at {env.path} and the workspace at {mount_path} would "
            "hide one another in the sandbox",
            hint="keep the environment store (HARNESSGRID_ENV_DIR) outside the workspace mount")
    return env


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _normalise_sandbox_path(path: str, what: str) -> str:
    parts = [p for p in str(path).split("/") if p not in ("", ".")]
    if not str(path).startswith("/") or not parts or ".." in parts or "\0" in str(path):
        raise HarnessgridError(
            f"{what} {path!r} is not an absolute sandbox path below '/'",
            hint="pass an absolute path such as '/workspace/reward'",
        )
    return "/" + "/".join(parts)


# ---------------------------------------------------------------------------- the sandbox


class Sandbox:
    """One episode's shell: a long-lived bubblewrap sandbox around ``workspace``.

    Use ``async with Sandbox(ws) as sb: await sb.run("pytest -q")`` (or ``with`` and
    :meth:`run_sync`). Commands run one at a time and share the workspace, not processes.
    ``extra_ro_binds`` maps host paths to sandbox paths mounted read-only (graders mount a task's
    ``reward/`` folder at ``<mount_path>/reward``). ``unsafe_no_sandbox`` runs commands as plain
    subprocesses in the workspace directory, for hosts without bubblewrap (paths under
    ``mount_path`` then do not exist for commands, and binds become plain symlinks).
    ``environment`` is mounted read-only with its tools first on PATH (None: none).

    Both are what the caller passes, nothing else: a sandbox never follows whatever episode
    happens to be running around it. Graders that run code are told their episode's choice
    (:class:`harnessgrid.tasks.GradingContext`) and pass it on here.
    """

    def __init__(
        self,
        workspace: Workspace,
        limits: SandboxLimits | None = None,
        *,
        unsafe_no_sandbox: bool = False,
        extra_ro_binds: Mapping[Path, str] | None = None,
        environment: EnvironmentRecord | None = None,
    ) -> None:
        self.environment = _checked_environment(environment, workspace.mount_path)
        self.workspace = workspace
        self.limits = limits if limits is not None else SandboxLimits()
        self.unsafe_no_sandbox = unsafe_no_sandbox
        self._binds = self._validate_binds(extra_ro_binds or {})
        if unsafe_no_sandbox:
            _warn_unsafe()
        else:
            problem = check_bwrap()
            if problem is not None:
                raise SandboxError(problem, hint=INSTALL_HINT)
            _check_mount_path(workspace.mount_path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: _Channel | None = None
        self._stderr: IO[bytes] | None = None
        self._lease: _UidLease | None = None
        self._original_owner: tuple[int, int] | None = None
        self._cgroup: MemoryCgroup | None = None
        # As root: the lessor's lease socket (a lease request carries the workspace's mount).
        self._lease_sock: socket.socket | None = None
        self._workspace_by_fd = False  # leases attach the workspace themselves (renewable)
        self._made_mountpoints: list[Path] = []
        self._dead: str | None = None
        self._closed = False
        self._discard_workspace = False
        self.identity = f"{os.getpid()}-{next(_SERIALS)}"
        """This sandbox, host-side: the same for every episode it serves, recycled or not
        (trajectories record it; commands cannot tell one lease from a fresh sandbox)."""
        self.episodes = 0
        """Episodes (leases) begun on it: 1 for a fresh sandbox, +1 per recycling."""
        # Launch and close may run in different lifecycle threads: one at a time, in order.
        self._closing = threading.RLock()
        self._busy = False
        self._interrupted = False
        self.time_phases = False
        """Ask the server where each command's time goes (:attr:`CommandResult.phases`)."""
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
        self._locks = weakref.WeakKeyDictionary()

    def _validate_binds(self, binds: Mapping[Path, str]) -> list[tuple[str, str]]:
        out = []
        for src, dst in binds.items():
            if not Path(src).exists():
                raise HarnessgridError(
                    f"extra_ro_binds source {str(src)!r} does not exist",
                    hint="pass an existing host file or directory",
                )
            out.append(
                (os.path.realpath(src), _normalise_sandbox_path(dst, "extra_ro_binds target"))
            )
        return out

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        """Whether the server is up and usable."""
        return self._proc is not None and self._dead is None and not self._closed

    def alive(self) -> bool:
        """Started, not closed, and the server still up: its process runs and its pipe is quiet
        (an idle server sends nothing, so anything readable is EOF or garbage). Cheap: one
        ``poll`` and one zero-timeout ``select``; a pool checks it before handing out."""
        if not self.running or self._channel is None or self._proc is None:
            return False
        if self._proc.poll() is not None:
            return False
        try:
            return not select.select([self._channel._rfd], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def idle(self) -> bool:
        """Running, with no command running or cut short (cancelled): every process the
        episode's commands started is gone - the server kills them all before it answers -
        so the workspace holds still (graders may copy it with the sandbox still up)."""
        return self.running and not self._busy and not self._interrupted

    @property
    def server_pid(self) -> int | None:
        """Host pid of the command server, for diagnostics: the sandbox's PID 1 or, as root,
        the current lease's server (PID 1 of the lease's own pid namespace, the only child of
        the sandbox's PID 1, the lessor)."""
        pid = self._pid1()
        if pid is None or self._lease_sock is None:
            return pid
        kids = _children(pid)
        return kids[0] if kids else None

    def _pid1(self) -> int | None:
        """Host pid of the sandbox's PID 1 (bwrap's child: the server, or the lessor)."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        if self.unsafe_no_sandbox:
            return self._proc.pid
        kids = _children(self._proc.pid)
        return kids[0] if kids else None

    def _server_pidfd(self) -> int | None:
        """A pidfd of the sandbox's running PID 1, to kill it - and with it the whole sandbox -
        and wait for its end (None when it has already exited, in unsafe mode - bwrap's pid is
        the server's - or without pidfds)."""
        pid = None if self.unsafe_no_sandbox else self._pid1()
        if pid is None:
            return None
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return None
        # The pid was read from bwrap's children and bwrap was alive: confirm it still is, so
        # the pidfd cannot be of a process that reused the number.
        if self._proc is None or self._proc.poll() is not None:
            os.close(fd)
            return None
        return fd

    async def start(self) -> None:
        """Launch the sandbox and wait until its server answers.

        The launch (``Popen``, uid lease, chown of the workspace) runs in a lifecycle thread, not
        on the event loop. Cancelled or failed half-way, the sandbox is closed again (in the
        background), so no process, uid or ownership change outlives the attempt."""
        launching = off_loop_detached(self._launch)
        try:
            channel = await asyncio.shield(launching)
            deadline = time.monotonic() + _START_TIMEOUT_S
            self._check_ready(await self._guard(channel.read_async(deadline)))
        except BaseException:
            launching.add_done_callback(lambda _: _LIFECYCLE.submit(self.close_sync))
            raise

    def start_sync(self) -> None:
        """:meth:`start` for synchronous callers."""
        channel = self._launch()
        deadline = time.monotonic() + _START_TIMEOUT_S
        self._check_ready(self._guard_sync(lambda: channel.read_sync(deadline)))

    def _check_ready(self, frame: Frame) -> None:
        if not frame[0].get("ready"):
            self._fail(f"the sandbox server did not start: {frame[0]!r}")
        self.episodes = 1

    @property
    def shm_mb(self) -> int:
        """Size of the sandbox's ``/dev/shm`` tmpfs: :data:`SHM_MB`, at most ``tmp_mb``."""
        return min(SHM_MB, self.limits.tmp_mb)

    def _pinnable(self) -> int:
        """Bytes the sandbox may legitimately pin at once: its processes' memory and the tmpfs
        it is given (``/tmp``, ``/dev/shm``, the workspace when the kernel caps it)."""
        limits = self.limits
        return (limits.memory_mb + limits.tmp_mb + self.shm_mb + limits.workspace_mb
                + CGROUP_SLACK_MB) * MB

    def _launch(self) -> _Channel:
        with self._closing:  # a close racing the launch waits for it, then stops the server
            return self._launch_locked()

    def _launch_locked(self) -> _Channel:
        if self._closed:
            raise SandboxError("this sandbox was closed", hint="create a new Sandbox")
        if self._proc is not None:
            raise SandboxError("this sandbox is already started")
        root = self.workspace.root
        uid = None
        if self.unsafe_no_sandbox:
            self._link_binds()
        elif os.geteuid() == 0:
            self._lease = _UidLease.acquire()
            uid = self._lease.uid
            st = root.stat()
            self._original_owner = (st.st_uid, st.st_gid)
            self.workspace.assign_owner(uid, uid, journal=self._lease.journal)
            self._cgroup = MemoryCgroup.create(f"harnessgrid-sandbox-{uid}", self._pinnable())
            # Each lease attaches the workspace itself, so a lease can get another one; extra
            # binds (inside it, say) are bwrap's to mount, over a workspace bwrap binds.
            self._workspace_by_fd = not self._binds and can_clone_mounts()
        config = {
            "root": str(root) if self.unsafe_no_sandbox else self.workspace.mount_path,
            "uid": uid,
            "pidns": not self.unsafe_no_sandbox,
            "limits": {f.name: getattr(self.limits, f.name) for f in fields(self.limits)},
            "shm_mb": self.shm_mb,
            "quota": self.limits.workspace_mb * MB,
            "discard_factor": _DISCARD_FACTOR,
            "env": self._base_env(),
            # Where a command's host tools live while it runs (HostTools): its own /tmp.
            "tmp": tempfile.gettempdir() if self.unsafe_no_sandbox else "/tmp",
            "seccomp": sandbox_filter(),  # None: no table for this machine, the server stops
            "keyctl_nr": native_keyctl(),
        }
        python = os.path.realpath(sys.executable)
        server = [python, "-I", "-S", "-c", _BOOTSTRAP]
        data_fds: list[int] = []  # --ro-bind-data sources, bwrap's to read at start
        kept_fds: list[int] = []  # what the server keeps: the memory cgroup's files
        try:
            if self._cgroup is not None:
                kept_fds += self._cgroup.open_fds()
                config["cgroup_procs_fd"], config["cgroup_events_fd"] = kept_fds
            if self._lease is not None:  # root: PID 1 is a lessor, see _sandbox_server.lessor
                lessor_end, self._lease_sock = socket.socketpair(socket.AF_UNIX,
                                                                 socket.SOCK_SEQPACKET)
                kept_fds.append(lessor_end.detach())
                config["lease_fd"] = kept_fds[-1]
                config["ipc_limits"] = ipc_namespace_limits(self.limits.memory_mb * MB)
            if not self.unsafe_no_sandbox:
                server = self._bwrap_argv(python, uid, data_fds) + server
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - as long as the sandbox
            try:
                proc = subprocess.Popen(
                    server,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._stderr,
                    env={"PATH": _PATH, "LANG": "C.UTF-8"},
                    cwd=root,
                    close_fds=True,
                    pass_fds=data_fds + kept_fds,
                    start_new_session=True,
                )
            except OSError as exc:
                self._release_host_state()
                hint = INSTALL_HINT
                raise SandboxError(f"cannot launch the sandbox: {exc}", hint=hint) from exc
        finally:
            for fd in data_fds + kept_fds:
                os.close(fd)
        assert proc.stdin is not None
        assert proc.stdout is not None
        self._proc = proc
        weakref.finalize(self, _kill_process, proc)
        self._channel = _Channel(
            proc.stdout.fileno(), proc.stdin.fileno(), self.limits.output_bytes + 4096
        )
        boot = {"source": _server_code(), "config": config}
        self._guard_sync(lambda: self._usable_channel().send(_frame(boot)))
        if self._lease_sock is not None:
            self._guard_sync(self._ask_for_lease)
        return self._channel

    def _ask_for_lease(self) -> None:
        """Ask the lessor for a new lease over the current workspace (its server then says
        ready): a message on the lease socket, with a clone of the workspace's mount."""
        assert self._lease_sock is not None
        fds = []
        if self._workspace_by_fd:
            fd = clone_mount(self.workspace.root)
            if fd is None:
                raise OSError(f"cannot clone the mount of {self.workspace.root} (open_tree)")
            fds.append(fd)
        try:
            socket.send_fds(self._lease_sock, [b"L"], fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _link_binds(self) -> None:
        """Unsafe mode cannot mount: extra binds inside the workspace become symlinks (writable!)."""
        for src, dst in self._binds:
            mount = self.workspace.mount_path
            if not _under(dst, mount) or dst == mount:
                raise HarnessgridError(
                    f"extra_ro_binds target {dst!r} is outside the workspace {mount}",
                    hint="without the sandbox only targets inside the workspace can be provided",
                )
            link = self.workspace.root / os.path.relpath(dst, mount)
            if not os.path.lexists(link):
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(src)
                self._made_mountpoints.append(link)

    def _base_env(self) -> dict[str, str]:
        # No .pyc files: an agent that edits a .py file and reruns it within the same second
        # (same size, same mtime) would otherwise run the stale bytecode.
        common = {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        env_bin = self.environment.bin_dir if self.environment is not None else None
        if env_bin is not None:  # the environment's python/python3 before the system's
            common["VIRTUAL_ENV"] = os.path.dirname(env_bin)
        if self.unsafe_no_sandbox:
            path = os.environ.get("PATH", _PATH)
            path = f"{env_bin}:{path}" if env_bin else path
            return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **common}
        path = f"{env_bin}:{_PATH}" if env_bin else _PATH
        return {"PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "TERM": "dumb", **common}

    def _bwrap_argv(self, python: str, uid: int | None, data_fds: list[int]) -> list[str]:
        """bwrap's arguments; the descriptors of ``--ro-bind-data`` sources go to ``data_fds``
        (passed to bwrap, closed by the caller)."""
        bwrap = shutil.which("bwrap") or "bwrap"
        args = [bwrap, *_namespace_flags(), "--die-with-parent", "--new-session", "--as-pid-1"]
        args += ["--hostname", "sandbox"]
        if os.geteuid() == 0:
            args += ["--cap-drop", "ALL"]
            for cap in _SERVER_CAPS if self._lease_sock is None else _LESSOR_CAPS:
                args += ["--cap-add", cap]
        mounted: list[str] = []
        made: set[str] = set()

        def mount(kind: str, src: str | None, dst: str, perms: str | None = None) -> None:
            # bwrap makes missing parents mode 0700 as root; commands must be able to traverse.
            parts = dst.strip("/").split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                parent = "/" + "/".join(parts[:depth])
                if any(_under(parent, done) for done in mounted):
                    break  # inside a mounted tree: that tree decides
                if parent not in made:
                    args.extend(["--perms", "0755", "--dir", parent])
                    made.add(parent)
            args.extend(["--perms", perms] if perms is not None else [])
            args.extend([kind, dst] if src is None else [kind, src, dst])
            mounted.append(dst)

        env = self.environment
        rootfs = env.path if env is not None and env.kind == "rootfs" else ""  # replaces /usr...
        for system_dir in _SYSTEM_DIRS[:-1]:
            path = Path(rootfs + system_dir)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), system_dir]
            elif path.is_dir():
                mount("--ro-bind", str(path), system_dir)
        # A JDK's configuration (security policy, jvm.cfg) is linked from /etc/java-N-*.
        java = sorted(p.name for p in Path(f"{rootfs}/etc").glob("java-*") if p.is_dir())
        for name in (*_ETC_ALLOWLIST, *java):
            if os.path.exists(f"{rootfs}/etc/{name}"):
                mount("--ro-bind", f"{rootfs}/etc/{name}", f"/etc/{name}")
        ids = (uid, uid) if uid is not None else (os.getuid(), os.getgid())
        for dst, data in account_files(Path(rootfs + "/etc"), *ids).items():
            data_fds.append(data_fd(data))
            mount("--ro-bind-data", str(data_fds[-1]), dst, perms="0644")
        mount("--proc", None, "/proc")
        mount("--dev", None, "/dev")
        # POSIX semaphores and shared memory (multiprocessing's locks and queues) need a
        # writable /dev/shm: a small tmpfs of the sandbox's own, renewed with each lease.
        args += ["--perms", "1777", "--size", str(self.shm_mb * MB)]
        mount("--tmpfs", None, "/dev/shm")
        # POSIX message queues live in the ipc namespace, not in a process: mounted, a reset
        # can list and remove those an episode left (Sandbox.reset_sync).
        mount("--mqueue", None, "/dev/mqueue")
        args += ["--perms", "1777", "--size", str(self.limits.tmp_mb * MB)]
        mount("--tmpfs", None, "/tmp")
        prefixes = [os.path.realpath(sys.base_prefix)]  # the server's interpreter, read-only
        if not _under(os.path.dirname(python), prefixes[0]):
            prefixes.append(os.path.dirname(python))
        for prefix in prefixes:
            if not _under(prefix, "/usr"):
                mount("--ro-bind", prefix, prefix)
        if env is not None and env.kind == "venv":
            # At its host path: its scripts' shebangs and pyvenv.cfg name absolute paths.
            parts = env.path.strip("/").split("/")[:-1]
            for depth in range(2, len(parts) + 1):
                if parts[0] == "tmp":  # inside the fresh tmpfs: make traversable parents
                    args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:depth])]
            mount("--ro-bind", env.path, env.path)
        workspace_mount = self.workspace.mount_path
        # As root the kernel holds the workspace to its quota (a capped tmpfs on the host, which
        # graders read after close); elsewhere the server polls. See Workspace.limit_size.
        self.workspace.limit_size(self.limits.workspace_mb * MB, self.limits.max_files)
        if self._workspace_by_fd:  # each lease attaches it here (see _ask_for_lease)
            mount("--dir", None, workspace_mount, perms="0755")
        else:
            mount("--bind", str(self.workspace.root), workspace_mount)
        for src, dst in self._binds:
            if _under(dst, workspace_mount) and dst != workspace_mount:
                host_path = self.workspace.root / os.path.relpath(dst, workspace_mount)
                if not os.path.lexists(host_path):
                    self._made_mountpoints.append(host_path)
            mount("--ro-bind", src, dst)
        args += ["--chdir", "/", "--remount-ro", "/", "--"]
        return args

    async def close(self) -> None:
        """Stop the sandbox (killing anything still running) and hand the workspace back.

        The whole close runs in a lifecycle thread: it finishes even if the caller is
        cancelled while waiting for it."""
        if not self._closed:
            await asyncio.shield(off_loop_detached(self.close_sync))

    def close_sync(self, *, discard_workspace: bool = False) -> None:
        """:meth:`close` for synchronous callers; closing twice is harmless.

        ``discard_workspace``: the caller deletes the workspace right after (a pool does), so
        its files are not chowned back to their original owner - a walk over every entry."""
        with self._closing:
            self._discard_workspace = discard_workspace
            proc = self._begin_close()
            if proc is not None:
                # Wait for the clean exit (the server kills everything, and bwrap returns only
                # once the whole pid namespace is gone) so the private uid is free when it is
                # leased again. A blocking wait wakes at once; polling cost ~5 ms per episode.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0 if self._interrupted else 2.0)
                _kill_process(proc, self._server_pidfd())
            self._release_host_state()

    def reset_sync(self, *, empty_workspace: bool = False, timeout_s: float = 10.0) -> str | None:
        """End the current lease (episode) of a started sandbox and begin a new one, as new - a
        :class:`~harnessgrid.sandboxing.sandbox_pool.SandboxPool` recycles its sandboxes this
        way -, or say why it cannot be: None when done; otherwise the reason, and the caller
        must close it.

        The lease's server, PID 1 of the lease's own pid namespace, exits, and with it every
        process of the episode and its pid, ipc, network and mount namespaces (System V
        objects, message queues, ``/tmp``, the loopback's counters). The next lease is a new
        server - forked from the sandbox's PID 1, the lessor, which no command can reach - in
        new namespaces: a new pid namespace (its first command gets the pid a fresh sandbox's
        first command gets), a new ipc namespace (the same IPC ids), a new ``/tmp`` tmpfs (the
        same inode numbers), a new ``/proc``, a network namespace with no history, a server
        with no history of its own. ``empty_workspace`` (what a pool asks): the workspace's
        tmpfs, with all the episode left there, is detached and a new empty one of the same
        size takes its place (the same inode numbers too); the workspace must then be one the
        sandbox capped (``Workspace.limit_size``). Without it the workspace is kept as it is,
        the caller's to fill or empty. Nothing else is kept but the sandbox's uid, its memory
        cgroup and its PID 1, none of which a command can read anything from.

        Refused for a sandbox that is not plainly idle and healthy: never started, closed,
        dead, interrupted (a cancelled command), busy, not run as root (only a root sandbox has
        leases), unsandboxed or with extra binds."""
        why = self._why_not_resettable()
        if why is None and empty_workspace and not mounted_tmpfs(self.workspace.root):
            why = "the workspace is not a tmpfs of the sandbox's own: it cannot be emptied"
        if why is not None:
            return why
        channel = self._usable_channel()
        deadline = time.monotonic() + timeout_s
        try:
            self._guard_sync(lambda: channel.send(_frame({"end": True})))
            ended = self._guard_sync(lambda: channel.read_sync(deadline))[0]
            if ended.get("ended") is not True:
                return f"the sandbox did not end its lease: {ended!r:.300}"
            if empty_workspace:  # no process of the episode is left to hold it
                detached = unmount_capped_fs(self.workspace.root)
                if detached is not None:
                    return detached
                if not self.workspace.limit_size(self.limits.workspace_mb * MB,
                                                 self.limits.max_files):
                    return "cannot mount a new tmpfs for the workspace"
                assert self._lease is not None
                self.workspace.assign_owner(self._lease.uid, self._lease.uid)
            self._guard_sync(self._ask_for_lease)
            ready = self._guard_sync(lambda: channel.read_sync(deadline))[0]
        except SandboxError as exc:
            return str(exc.message)
        if ready.get("ready") is not True:
            return f"the sandbox's new lease did not start: {ready!r:.300}"
        self.episodes += 1
        return None

    def renewable(self) -> bool:
        """Whether :meth:`reset_sync` can give this sandbox a new lease at all: started as root
        without extra binds, on a kernel that can move a mount into it (Linux >= 5.2)."""
        return self._lease_sock is not None and self._workspace_by_fd

    def _why_not_resettable(self) -> str | None:
        if not self.running:
            return "the sandbox is not running"
        if self.unsafe_no_sandbox:
            return "an unsandboxed server cannot find every leftover process"
        if self._interrupted:
            return "a command was interrupted (cancelled): the server may still be busy"
        if self._busy:
            return "a command is running"
        if self._binds or self._made_mountpoints:
            return "the sandbox has extra binds"
        if not self.renewable():
            return ("only a sandbox started as root, on Linux >= 5.2, gets new leases (new "
                    "namespaces and mounts); close it and start another")
        if self._channel is None or self._channel._buf or self._channel._out:
            return "unread or unsent data is pending on the server's channel"
        if not self.alive():
            return "the sandbox server is gone"
        return None

    def _begin_close(self) -> subprocess.Popen[bytes] | None:
        if self._closed:
            return None
        self._closed = True
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # EOF: the server exits, and with PID 1 the whole sandbox
        if self._lease_sock is not None:
            self._lease_sock.close()  # EOF: the lessor, once its lease is over, exits too
        return proc

    def _release_host_state(self) -> None:
        if self._lease_sock is not None:
            self._lease_sock.close()
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        for mountpoint in self._made_mountpoints:
            try:
                if mountpoint.is_symlink():
                    mountpoint.unlink()
                else:
                    mountpoint.rmdir()
            except OSError:
                pass
        self._made_mountpoints = []
        if self._original_owner is not None:
            self.workspace.release_owner(*self._original_owner,
                                         hand_back=not self._discard_workspace)
            self._original_owner = None
        if self._cgroup is not None:  # empty now: bwrap returns once the pid namespace is gone
            self._cgroup.remove()
            self._cgroup = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    async def __aenter__(self) -> Self:
        if self._proc is None:  # a pooled sandbox comes already started
            await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __enter__(self) -> Self:
        self.start_sync()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()

    # ------------------------------------------------------------------ commands

    async def run(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        host_tools: HostTools | None = None,
    ) -> CommandResult:
        """Run ``command`` with ``bash -c`` (``sh`` where there is no bash); starts the sandbox
        if needed.

        ``cwd`` is confined like any workspace path (relative, or absolute under mount_path);
        ``timeout_s`` overrides ``limits.wall_s``; ``env`` adds to a minimal environment (the
        host's environment, API keys included, never reaches the command). ``host_tools``
        are commands of this command's lifetime that call back to the host (:class:`HostTools`):
        ``name '{"key": "value"}'`` or ``name --key value``; the command's time limit keeps
        running while the host answers.
        """
        request, timeout = self._request(command, timeout_s, cwd, env, host_tools)
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        # In an episode's turn the round trip is the turn's tools_s (once, when ``execute``
        # ran the command); the command's own duration is the least it took.
        with tool_span() as span:
            async with lock:
                if self._proc is None:
                    await self.start()
                channel = self._usable_channel()
                deadline = time.monotonic() + timeout + _HOST_GRACE_S
                self._busy = True
                try:
                    self._guard_sync(lambda: channel.send(request))
                    frame = await self._converse(channel, deadline, host_tools)
                except asyncio.CancelledError:
                    self._interrupted = True  # the server is busy: close must not wait for it
                    raise
                finally:
                    self._busy = False
            result = self._result(frame)
            span.floor = result.duration_s
        return result

    @timed_tool
    def run_sync(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        host_tools: HostTools | None = None,
    ) -> CommandResult:
        """:meth:`run` for synchronous callers (CLI, tests); not while an async run is pending,
        and without host tools (their handlers are coroutines: use :meth:`run`)."""
        if host_tools is not None:
            raise HarnessgridError(
                "run_sync() cannot serve host tools: their handlers run on an event loop",
                hint="use `await sandbox.run(command, host_tools=...)`",
            )
        request, timeout = self._request(command, timeout_s, cwd, env)
        if self._busy:
            raise SandboxError("run_sync() called while another command runs in this sandbox")
        if self._proc is None:
            self.start_sync()
        channel = self._usable_channel()
        deadline = time.monotonic() + timeout + _HOST_GRACE_S
        self._guard_sync(lambda: channel.send(request))
        return self._result(self._guard_sync(lambda: channel.read_sync(deadline)))

    def _request(
        self,
        command: str,
        timeout_s: float | None,
        cwd: str | None,
        env: Mapping[str, str] | None,
        host_tools: HostTools | None = None,
    ) -> tuple[bytes, float]:
        if not isinstance(command, str) or "\0" in command:
            raise HarnessgridError(
                f"command {command!r:.80} must be a string without NUL bytes",
                hint="pass the shell command line as text",
            )
        timeout = self.limits.wall_s if timeout_s is None else timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise HarnessgridError(
                f"timeout_s={timeout_s!r} must be a positive number of seconds",
                hint="pass e.g. timeout_s=30, or None for limits.wall_s",
            )
        if cwd is None:  # the workspace itself (most commands): nothing to resolve
            root = self.workspace.root
            sandbox_cwd = str(root) if self.unsafe_no_sandbox else self.workspace.mount_path
        else:
            target = self.workspace.resolve(cwd)
            if not target.is_dir():
                raise HarnessgridError(
                    f"cwd {cwd!r} is not a directory in the workspace",
                    hint="pass an existing directory, relative to the workspace",
                )
            rel = self.workspace.relative(target)
            if self.unsafe_no_sandbox:
                sandbox_cwd = str(target)
            else:
                sandbox_cwd = self.workspace.mount_path + ("" if rel == "." else "/" + rel)
        extra = dict(env or {})
        for key, value in extra.items():
            bad_key = not isinstance(key, str) or not key or "=" in key or "\0" in key
            if bad_key or not isinstance(value, str) or "\0" in value:
                raise HarnessgridError(
                    f"environment entry {key!r}={value!r} is not a valid variable",
                    hint="keys need no '=' or NUL; keys and values must be strings",
                )
        request: dict[str, Any] = {
            "cmd": command, "cwd": sandbox_cwd, "env": extra, "timeout": timeout}
        if self.time_phases:
            request["phases"] = True
        if host_tools is not None and host_tools.names:
            request["tools"] = _checked_tool_names(host_tools)
            request["client"] = _tool_client()
        return _frame(request), float(timeout)

    async def _converse(
        self, channel: _Channel, deadline: float, tools: HostTools | None
    ) -> Frame:
        """The command's result, answering its host tool calls as they come in, each in a task
        of its own (a slow tool holds up no other call); calls still running when the command
        ends are cancelled (their callers are gone)."""
        if tools is None:
            return await self._guard(channel.read_async(deadline))
        ended = asyncio.Event()
        calls: set[asyncio.Task[None]] = set()
        try:
            while True:
                frame = await self._guard(channel.read_async(deadline))
                call = frame[0].get("host_tool")
                if call is None:
                    return frame
                if not (isinstance(call, dict) and isinstance(call.get("id"), int)
                        and isinstance(call.get("name"), str)):
                    self._fail(f"the sandbox server sent a malformed host tool call: {call!r:.200}")
                task = asyncio.create_task(
                    _reply_to_call(channel, tools, call["id"], call["name"], frame[1], ended))
                calls.add(task)
                task.add_done_callback(calls.discard)
        finally:
            ended.set()
            for task in list(calls):
                task.cancel()
            channel.stop_writing()  # the next request's send() writes any reply left queued

    def _result(self, frame: Frame) -> CommandResult:
        header, out, err = frame
        if "error" in header:
            self._fail(f"the sandbox server rejected a request: {header['error']}")
        stderr = err.decode("utf-8", errors="replace")
        notes = [f"[sandbox] {note}" for note in header.get("notes", [])]
        if notes:
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + "\n".join(notes)
        killed = header.get("killed")
        return CommandResult(
            stdout=out.decode("utf-8", errors="replace"),
            stderr=stderr,
            exit_code=header.get("exit_code"),
            timed_out=killed == "timeout",
            truncated=bool(header.get("truncated")),
            duration_s=float(header.get("duration_s", 0.0)),
            killed=killed,
            phases=tuple((str(name), float(sec)) for name, sec in header.get("phases", ())),
        )

    # ------------------------------------------------------------------ failure handling

    def _usable_channel(self) -> _Channel:
        if self._closed:
            raise SandboxError("this sandbox was closed", hint="create a new Sandbox")
        if self._dead is not None or self._channel is None:
            raise SandboxError(f"the sandbox is not usable: {self._dead or 'never started'}")
        return self._channel

    async def _guard(self, reading: Awaitable[Frame]) -> Frame:
        """Turn a dead, silent or garbled server into SandboxError (and a dead Sandbox)."""
        try:
            return await reading
        except (EOFError, TimeoutError, OSError, _ProtocolError) as exc:
            self._fail(self._describe(exc))

    def _guard_sync(self, action: Callable[[], _T]) -> _T:
        try:
            return action()
        except (EOFError, TimeoutError, OSError, _ProtocolError) as exc:
            self._fail(self._describe(exc))

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            return "the sandbox server stopped responding"
        if isinstance(exc, _ProtocolError):
            return f"the sandbox server sent a malformed response: {exc}"
        return f"the sandbox server exited unexpectedly ({type(exc).__name__})"

    def _fail(self, reason: str) -> NoReturn:
        """Mark the sandbox dead, kill what is left of it and raise SandboxError."""
        self._dead = reason
        if self._proc is not None:
            _kill_process(self._proc, self._server_pidfd())
        detail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:].decode(errors="replace").strip()
            detail = f"; server stderr: {tail}" if tail else ""
        self._release_host_state()  # nothing runs any more: hand the workspace back now
        raise SandboxError(
            f"{reason}{detail}",
            hint="this is an infrastructure failure, not the agent's; start a new Sandbox",
        )
