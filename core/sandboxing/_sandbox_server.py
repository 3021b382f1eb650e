"""Command server, PID 1 of an episode sandbox (see :mod:`harnessgrid.sandboxing.sandbox`).

Not imported by harnessgrid: the host compiles this file once and sends the code object
(marshal), with ``CFG``, to a bootstrap interpreter inside the sandbox (``-I -S``, standard
library only, the host's own interpreter binary), which runs it with ``exec``. Its start-up
CPU is paid by every episode: C modules only (``posix``, ``_signal``, ``_ctypes``, ...), no
Python-level imports. Protocol: requests on stdin as a 4-byte length and a marshal'd dict
(from the host only); per request one JSON header line on stdout, followed by ``out_len``
bytes of stdout and ``err_len`` bytes of stderr. A command run with host tools (a request
with ``tools``) may also produce, before its own header, ``{"host_tool": {"id", "name"}}``
headers whose stdout is a call's JSON arguments; the host answers each with a
``{"reply": id, "ok", "text"}`` request while the command runs (:class:`HostCalls`).
Imported as a module (tooling, tests) it defines functions and does nothing.

Run as root, the sandbox's PID 1 is a *lessor* instead (:func:`lessor`; ``CFG["lease_fd"]``):
for each lease - an episode - the host sends a message on the lease socket, with a clone of the
workspace's mount, and the lessor forks that lease's server (:func:`lease`): PID 1 of a new pid
namespace, in new ipc, network and mount namespaces, which renews the mounts (:func:`renew`),
drops its privileges and serves the episode's commands as above. ``{"end": true}`` on stdin
ends the lease: the server exits with everything of the episode, and the lessor answers
``{"ended": true}``, ready for the next lease.
"""

import _ctypes  # C module: the `ctypes` package (struct, types, its own code) cost ~2 ms/start
import _json
import _signal as signal  # C module: `signal` pulls in enum, ~1/4 of start-up CPU
import marshal
import posix as os  # what `os` re-exports, without os.py's Python layer (~1.3 ms of start-up)
import resource
import select
import sys
import time
from _stat import S_ISDIR, S_ISREG

CFG = globals().get("CFG")  # injected by the bootstrap; None when imported
if CFG is not None:
    ROOT, UID, PIDNS, QUOTA = CFG["root"], CFG["uid"], CFG["pidns"], CFG["quota"]
    LIM = CFG["limits"]
    MAX_FILES = LIM.get("max_files", 100_000)
TICK = 0.05
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024
FULL_BYTES = 64 * 1024  # a kernel-capped workspace with less free is full


class c_int(_ctypes._SimpleCData):  # ctypes' own name for it
    _type_ = "i"


class c_long(_ctypes._SimpleCData):  # ctypes' own name for it
    _type_ = "l"


class c_char(_ctypes._SimpleCData):  # ctypes' own name for it
    _type_ = "c"


def c_buffer(data):
    """A C copy of ``data`` that stays put (ctypes passes it to a function as a pointer)."""
    kind = type("Buffer", (_ctypes.Array,), {"_type_": c_char, "_length_": len(data)})
    return kind.from_buffer_copy(data)


class Libc:
    """The process's C library, as much of ``ctypes.CDLL(None, use_errno=True)`` as we use:
    int-returning functions taking ints and bytes (passed as pointers)."""

    _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)

    def __getattr__(self, name):
        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = c_int

        return Function((name, self))


LIBC = Libc()


def become_unprivileged():
    """Drop to the sandbox uid for good: no capabilities, not dumpable, saved uid kept at 0.

    Commands run as the same uid but cannot touch the server: as PID 1 it ignores their
    signals, being non-dumpable it cannot be ptraced or read through /proc, and its saved uid
    of 0 makes prlimit() on it fail. Spawned commands lose the saved uid at execve.
    """
    os.setgroups([])
    os.setresgid(UID, UID, 0)
    os.setresuid(UID, UID, 0)

    # struct __user_cap_header_struct {u32 version (3); int pid (0: us)}, then two
    # __user_cap_data_struct {u32 effective, permitted, inheritable} all zero: no capabilities.
    header = (0x20080522).to_bytes(4, sys.byteorder) + bytes(4)
    if LIBC.capset(header, bytes(24)) != 0:
        raise OSError(_ctypes.get_errno(), "capset")
    with open("/proc/self/status") as fh:
        caps = [line.split()[1] for line in fh if line.startswith(("CapPrm", "CapEff", "CapAmb"))]
    if any(int(value, 16) for value in caps):
        raise SystemExit(f"sandbox server: could not drop capabilities: {caps}")


def restrict_syscalls():
    """Join a fresh, empty session keyring (the host's stays behind), empty the uid's own
    keyrings, then install the seccomp filter the host built
    (:mod:`harnessgrid.sandboxing._sandbox_seccomp`: keyrings, namespaces, mounts, io_uring,
    bpf, ... refused as in Docker's default profile) on ourselves, so every command inherits
    it. A kernel that refuses the filter, or a machine the filter has no table for, stops the
    sandbox: it would run without the isolation it promises.

    Installed on the server itself, not only on commands, because nothing it does from here on
    is refused: all that needs a refused syscall or a privilege comes first - the namespaces,
    mounts and ipc limits (set up by bwrap, the host or the lessor before :func:`setup`), the
    rlimits, the uid and capability drop, the keyring calls above. What follows is spawning
    (posix_spawn: glibc tries clone3, gets ENOSYS and falls back to clone, without namespace
    flags), signals, waits, prctl, System V IPC removal, file and AF_UNIX socket calls. The
    lessor, which must unshare and mount for each lease, never installs it: no command runs
    under it."""
    if CFG.get("seccomp") is None:
        raise SystemExit("sandbox server: no seccomp filter for this machine's architecture "
                         "(see harnessgrid.sandboxing._sandbox_seccomp)")
    keyctl = CFG.get("keyctl_nr")
    if keyctl is not None:
        LIBC.syscall(c_long(keyctl), c_long(1), c_long(0))  # JOIN_SESSION_KEYRING, anonymous
        # The uid's own keyrings outlive every process of it: empty what an earlier holder of
        # this uid (a harnessgrid without this filter, anything else) may have left there.
        for keyring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
            LIBC.syscall(c_long(keyctl), c_long(7), c_long(keyring))  # KEYCTL_CLEAR
    program = c_buffer(CFG["seccomp"])
    pointer = _ctypes.sizeof(c_long)  # struct sock_fprog: u16 length, pointer (aligned)
    header = (len(CFG["seccomp"]) // 8).to_bytes(2, sys.byteorder) + bytes(pointer - 2)
    fprog = c_buffer(header + _ctypes.addressof(program).to_bytes(pointer, sys.byteorder))
    if LIBC.prctl(c_int(38), c_long(1), c_long(0), c_long(0), c_long(0)) != 0:
        raise SystemExit(
            f"sandbox server: PR_SET_NO_NEW_PRIVS failed: errno {_ctypes.get_errno()}")
    if LIBC.prctl(c_int(22), c_long(2), fprog, c_long(0), c_long(0)) != 0:  # SECCOMP_MODE_FILTER
        raise SystemExit(f"sandbox server: the kernel refused the seccomp filter (errno "
                         f"{_ctypes.get_errno()}); the sandbox needs CONFIG_SECCOMP_FILTER")


def prctl(option, value):
    try:
        LIBC.prctl(option, value, 0, 0, 0)
    except AttributeError:  # not Linux (unsafe mode on macOS)
        pass


def close_inherited_fds(*also):
    """Close every inherited descriptor but the memory cgroup's (see :func:`enter_cgroup`),
    which commands must not inherit as such, and ``also`` (the lessor's lease socket)."""
    keep = sorted(fd for fd in (CFG.get("cgroup_procs_fd"), CFG.get("cgroup_events_fd"), *also)
                  if fd is not None)
    low = 3
    for fd in keep:
        os.closerange(low, fd)
        os.set_inheritable(fd, False)
        low = fd + 1
    os.closerange(low, min(os.sysconf("SC_OPEN_MAX"), 1 << 16))


def setup():
    close_inherited_fds()
    if PIDNS and os.getpid() != 1:  # kill(-1) outside a pid namespace would hit the host
        raise SystemExit("sandbox server: expected to be PID 1 of its own pid namespace")
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # PID 1 ignores default-handled signals
    # Limits the commands inherit (hard = soft, so they cannot raise them); CPU is per command.
    limits = [
        (resource.RLIMIT_AS, LIM["memory_mb"] * MB),
        (resource.RLIMIT_FSIZE, LIM["file_size_mb"] * MB),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, LIM["open_files"]),
        # POSIX message queues hold kernel memory outside any process; the uid is the
        # sandbox's own, so this bounds the sandbox (Linux's default, whatever the host's is).
        (resource.RLIMIT_MSGQUEUE, 819_200),
    ]
    if PIDNS:  # outside, RLIMIT_NPROC would count every process of the user, not ours
        limits.append((resource.RLIMIT_NPROC, LIM["max_procs"]))
    for res, value in limits:
        try:
            resource.setrlimit(res, (int(value), int(value)))
        except (OSError, ValueError):
            if PIDNS:
                raise  # unsafe mode applies what the platform allows
    if UID is not None:
        become_unprivileged()
        # Changing uids cleared the parent-death signal bwrap set (--die-with-parent): re-arm
        # it, or a server whose bwrap was killed (host crash, a close that had to kill) would
        # live on, busy with its command, as a uid the host leases to the next sandbox.
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if PIDNS:
        restrict_syscalls()
    prctl(4, 0)  # PR_SET_DUMPABLE 0
    if not PIDNS:
        prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come to us to be killed
    os.umask(0o022)


def dumps(value):
    """JSON for the header's plain values, without importing json (and re, enum): that import
    alone was a third of the server's start-up time."""
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else "null"
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return "{" + ",".join(_json.encode_basestring_ascii(str(k)) + ":" + dumps(v)
                          for k, v in value.items()) + "}"


def send(header, out=b"", err=b""):
    header["out_len"], header["err_len"] = len(out), len(err)
    data = memoryview(dumps(header).encode() + b"\n" + out + err)
    while data:
        data = data[os.write(1, data):]


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def enter(name):
    """chdir into the directory ``name`` without following a link; one the agent locked
    (chmod 000) is opened up first - the server runs as the files' owner. Returns its stat."""
    for attempt in (0, 1):
        try:
            fd = os.open(name, DIR_FLAGS)  # needs r (chmod 300 refuses it) ...
            try:
                os.fchdir(fd)  # ... and this x (chmod 600 refuses it)
                return os.fstat(fd)
            finally:
                os.close(fd)
        except PermissionError:
            if attempt:
                raise
            os.chmod(name, os.lstat(name).st_mode & 0o7777 | 0o700)


def usage(top):
    """(bytes, entries, complete) of the tree: sparse files at their apparent size (a copy may
    fill the holes), hard links once, symlinks never followed; ``complete`` is False when a
    directory could not be entered even after opening it up.

    It walks by chdir, one name at a time, so no path is ever longer than a name: a tree
    deeper than PATH_MAX and directories the agent locked are counted like the rest. If the
    agent renames directories under the walk (".." is then not where we came from), it stops
    early (incomplete too).
    """
    total, entries, seen, complete = 0, 0, set(), True
    try:
        here = [enter(top)]
    except OSError:
        return 0, 0, False
    stack = [listing()]
    while stack:
        names = stack[-1]
        if not names:
            stack.pop()
            here.pop()
            if stack:
                try:
                    st = enter("..")
                except OSError:
                    complete = False
                    break
                if (st.st_dev, st.st_ino) != (here[-1].st_dev, here[-1].st_ino):
                    complete = False
                    break
            continue
        name = names.pop()
        try:
            st = os.lstat(name)
        except OSError:
            continue
        entries += 1
        if st.st_nlink > 1 and not S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        size = st.st_blocks * 512
        if S_ISREG(st.st_mode):
            size = max(size, st.st_size)
        total += size
        if S_ISDIR(st.st_mode):
            try:
                here.append(enter(name))
            except OSError:
                complete = False
                continue
            stack.append(listing())
    os.chdir("/")
    return total, entries, complete


def listing():
    try:
        return os.listdir(".")
    except OSError:
        return []


class Disk:
    """Workspace quota in bytes and entries.

    Where the workspace is a filesystem no bigger than the quota (the tmpfs the host mounts
    when it runs as root) the kernel enforces it - writes past it fail with ENOSPC - and statvfs
    is exact: a command that filled it is killed as over quota. Elsewhere (not root, unsafe
    mode, in-place workspaces) the server polls: a statvfs estimate each tick, confirmed by a
    (throttled) walk, kills a command that grows the workspace past either limit.
    """

    def __init__(self):
        st = os.statvfs(ROOT)
        self.kernel = st.f_blocks * st.f_frsize <= QUOTA and 0 < st.f_files <= MAX_FILES + 1
        self.walk()

    def stat(self):
        st = os.statvfs(ROOT)
        return st.f_bavail * st.f_frsize, st.f_favail, st

    def walk(self):
        began = time.monotonic()
        free, ffree, st = self.stat()
        if self.kernel:
            self.used = (st.f_blocks - st.f_bfree) * st.f_frsize
            self.files = st.f_files - st.f_ffree - 1  # the root directory is not the agent's
        else:
            used, files, complete = usage(ROOT)
            if not complete and hasattr(self, "used"):  # blinded: keep what statvfs saw grow
                used, files = (max(pair) for pair in zip((used, files), self.estimate(),
                                                         strict=True))
            self.used, self.files = used, files
        self.ref, self.fref = free, ffree
        self.walked = time.monotonic()
        self.cost = self.walked - began

    def estimate(self):
        free, ffree, _ = self.stat()
        return self.used + self.ref - free, self.files + self.fref - ffree

    def beyond(self, used, files):
        if self.kernel:  # the kernel stops it at the cap: "full" is as far as it can go
            free, ffree, _ = self.stat()
            return free < FULL_BYTES or ffree <= 0
        return used > QUOTA or files > MAX_FILES

    def floor(self):
        """Usage when a command starts: exact when we may already be over the quota."""
        if self.beyond(*self.estimate()):
            self.walk()
        used, files = self.estimate()
        return max(self.used, used), max(self.files, files)

    def refresh(self):
        """Walk again once the last walk is 20 times its own cost old: walking takes at most
        ~5% of the server's time, and growth statvfs cannot see (sparse files, a quota in
        entries, a disk shared with others) is still caught within a few ticks."""
        if time.monotonic() - self.walked >= max(TICK, 20 * self.cost):
            self.walk()

    def over(self, floor):
        """Over quota and grown past ``floor``: a command that only deletes is never killed."""
        self.refresh()
        grown = self.used > floor[0] or self.files > floor[1]
        return grown and self.beyond(self.used, self.files)

    def describe(self):
        return (f"{int(self.used // MB)} MB and {int(self.files)} files used of "
                f"{int(QUOTA // MB)} MB and {int(MAX_FILES)} files")


def memory_in_use():
    """What the command's processes pin, polled each tick: their resident memory, plus memory
    that is in no process's address space - memory files (memfd) they hold open and System V
    shared memory, attached or not (/dev/shm is a small tmpfs, SHM_MB). Shared pages that
    are also mapped count twice: the check errs towards stopping. A memfd only mapped (its
    descriptor closed) is seen through its resident pages alone: the memory cgroup, where
    the host has one, bounds what this misses."""
    total, seen = 0, set()
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            total += resident(name) + memory_files(name, seen)
    return total + sysv_shared_memory()


def resident(pid):
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def memory_files(pid, seen):
    """Bytes of the memfds open in process ``pid`` not counted yet (``seen``: their inodes)."""
    total = 0
    base = f"/proc/{pid}/fd/"
    try:
        fds = os.listdir(base)
    except OSError:
        return 0
    for fd in fds:
        try:
            if not os.readlink(base + fd).startswith("/memfd:"):
                continue
            st = os.stat(base + fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def sysv_shared_memory():
    """Resident and swapped bytes of every System V shared memory segment (the ipc namespace
    is the sandbox's own)."""
    lines = read_lines("/proc/sysvipc/shm")
    if len(lines) < 2:
        return 0
    header = lines[0].split()
    columns = [header.index(c) for c in ("rss", "swap") if c in header]
    total = 0
    for line in lines[1:]:
        fields = line.split()
        total += sum(int(fields[c]) for c in columns if c < len(fields))
    return total


def children():
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def kill_all(pid, reaped):
    """Kill the command and everything it started."""
    if PIDNS:  # we are PID 1: kill(-1) reaches every other process in the namespace
        while True:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if not reaped:
        os.waitpid(pid, 0)
    for _ in range(1000):  # subreaper: orphans that left the process group come to us
        kids = children()
        if not kids:
            break
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
                os.waitpid(kid, 0)
            except OSError:
                pass


def spawn(req, w_out, w_err, tools_dir=None):
    """posix_spawn (vfork speed); the limits were set on us and are inherited, except CPU."""
    os.chdir(as_bytes(req["cwd"]))
    cpu = int(LIM["cpu_s"] + 0.999)
    # Bytes throughout: a lone surrogate in what the agent wrote must not kill the server.
    script = b"ulimit -St %d; ulimit -Ht %d; " % (cpu, cpu + 1) + as_bytes(req["cmd"])
    if CFG.get("cgroup_procs_fd") is not None:
        script = ENTER_CGROUP + script
    env = {as_bytes(k): as_bytes(v) for k, v in CFG["env"].items()}
    env[b"PWD"] = as_bytes(req["cwd"])
    env.update((as_bytes(k), as_bytes(v)) for k, v in req["env"].items())
    if tools_dir is not None:  # the host tools come first: they are what the agent was told
        env[b"PATH"] = as_bytes(tools_dir) + b":" + env.get(b"PATH", b"/usr/bin:/bin")
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, w_out, 1),
        (os.POSIX_SPAWN_DUP2, w_err, 2),
    ]
    if req.get("script_fd") is not None:
        actions.append((os.POSIX_SPAWN_DUP2, req["script_fd"], SCRIPT_FD))
    if CFG.get("cgroup_procs_fd") is not None:
        actions.append((os.POSIX_SPAWN_DUP2, CFG["cgroup_procs_fd"], CGROUP_FD))
    options = dict(
        file_actions=actions,
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT),
    )
    argv = [SHELL.rsplit("/", 1)[-1].encode(), b"-c", script]
    try:
        return os.posix_spawn(SHELL, argv, env, setsid=True, **options)
    except NotImplementedError:  # no POSIX_SPAWN_SETSID: a process group does for killpg
        return os.posix_spawn(SHELL, argv, env, setpgroup=0, **options)


def find_shell():
    """bash, which the prompts and tool descriptions promise; plain sh only where there is none."""
    for path in ("/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"):
        if os.access(path, os.X_OK):
            return path
    return "/bin/sh"


SHELL = find_shell()


def as_bytes(text):
    """UTF-8, lone surrogates included (surrogatepass): never raises for what an agent wrote."""
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


SIGNAL_REASONS = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size"}
CGROUP_FD = 8
# The command's shell moves itself into the sandbox's memory cgroup before it runs anything
# (so before anything can fork) and closes the descriptor: the agent's code never holds it.
ENTER_CGROUP = (b"{ echo 0 >&8; } 2>/dev/null || { echo '[sandbox] cannot enter the memory "
                b"cgroup' >&2; exit 126; }; exec 8>&-; ")


CGROUP_NOTE = ("command killed: the sandbox's memory cgroup reached its limit (memory_mb plus "
               "the sizes of /tmp and the workspace): memory held outside processes "
               "(memory files, shared memory) counts too")


def oom_kills():
    """How many processes the kernel killed in the memory cgroup so far (its ``oom_kill``
    count: v2 memory.events, v1 memory.oom_control), or None without a cgroup."""
    fd = CFG.get("cgroup_events_fd")
    if fd is None:
        return None
    for line in os.pread(fd, 4096, 0).split(b"\n"):
        if line.startswith(b"oom_kill "):
            return int(line.split()[1])
    return None


def notes_for(killed, timeout, disk, truncated, cap):
    notes = []
    if killed == "timeout":
        notes.append(f"command killed: it ran longer than the {timeout:g} s time limit")
    elif killed == "output_limit":
        limit = int(cap * CFG["discard_factor"])
        notes.append(f"command killed: it printed more than {limit} bytes")
    elif killed == "memory":
        notes.append(
            f"command killed: its processes used more than {int(LIM['memory_mb'])} MB of memory")
    elif killed == "disk_quota":
        notes.append(
            f"command killed: the workspace is over its quota ({disk.describe()}); delete files"
        )
    elif killed == "cpu":
        notes.append(f"command killed: it used more than {int(LIM['cpu_s'])} s of CPU time")
    elif killed == "file_size":
        notes.append(f"command killed: it wrote a file larger than {int(LIM['file_size_mb'])} MB")
    if truncated:
        notes.append(f"output truncated to the first {int(cap)} bytes")
    return notes


TOOL_REQUEST_MAX = (1 << 20) + 256
"""Bytes of one host tool call: the 1 MiB of arguments its client may send, and the name."""
TOOL_CALLS_MAX = 8
"""Calls of one command open at once; more are refused: the server's memory stays bounded."""
INBOX = bytearray()
"""What the host wrote on stdin that is not consumed yet (requests, replies to host calls)."""


def peek_request():
    """The first complete request in INBOX and its length, or None (marshal, from the host)."""
    if len(INBOX) < 4:
        return None
    end = 4 + int.from_bytes(INBOX[:4], "little")
    if len(INBOX) < end:
        return None
    return marshal.loads(bytes(INBOX[4:end])), end


def next_request():
    """The host's next request, waiting for it; None when the host closed our stdin."""
    while True:
        try:
            found = peek_request()
        except (ValueError, EOFError, TypeError) as exc:
            del INBOX[:4 + int.from_bytes(INBOX[:4], "little")]
            send({"error": f"bad request: {exc}"})
            continue
        if found is not None:
            del INBOX[:found[1]]
            return found[0]
        chunk = os.read(0, 65536)
        if not chunk:
            return None
        INBOX.extend(chunk)


class HostCall:
    """One connection to a command's tool socket: one call."""

    __slots__ = ("data", "fd", "id", "out", "sock")

    def __init__(self, sock):
        self.sock, self.fd = sock, sock.fileno()
        self.data, self.id, self.out = bytearray(), None, None


class HostCalls:
    """The host tools of one command (``req["tools"]``: name -> description).

    A private directory, first on the command's PATH, holds one client per tool (the host's
    ``_sandbox_tool.py``) and the socket they connect to; each connection is one call. From
    the run loop's select, the server reads a call to its end (at most TOOL_REQUEST_MAX),
    checks the tool's name, forwards it to the host as a ``host_tool`` frame, and writes the
    host's reply back when it comes in on stdin. Nothing here blocks or trusts the caller - the
    command is the agent: it can stall or garble its own calls, not the server.
    """

    issued = 0

    def __init__(self, tools, client):
        import _socket  # a C module, loaded only by the commands that have host tools

        self.tools, self.made, self.listener = tools, [], None
        self.calls, self.waiting, self.host_open = {}, {}, True
        self.socket = _socket.socket
        self.dir = f"{CFG['tmp']}/.hg-tools-{os.urandom(8).hex()}"
        os.mkdir(self.dir, 0o700)
        try:
            path = self.dir + "/.socket"
            self.listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            self.listener.setblocking(False)
            self.listener.bind(path)
            self.made.append(path)
            self.listener.listen(TOOL_CALLS_MAX)
            head = f"#!{sys.executable} -IS\n{client}\n"
            for name, description in tools.items():
                self.write(name, head + f"raise SystemExit(main({name!a}, {description!a}, "
                                        f"{path!a}))\n")
        except BaseException:
            self.close()
            raise

    def write(self, name, text):
        path = f"{self.dir}/{name}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o700)
        self.made.append(path)
        try:
            data = memoryview(as_bytes(text))
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)

    def readers(self):
        fds = [self.listener.fileno()] + [c.fd for c in self.calls.values() if c.data is not None]
        return [*fds, 0] if self.host_open else fds

    def writers(self):
        return [c.fd for c in self.calls.values() if c.out is not None]

    def serve(self, readable, writable):
        for fd in writable:
            if fd in self.calls:
                self.flush(self.calls[fd])
        for fd in readable:
            if fd == 0:
                self.from_host()
            elif fd == self.listener.fileno():
                self.accept()
            elif fd in self.calls:
                self.receive(self.calls[fd])

    def accept(self):
        try:
            fd = self.listener._accept()[0]
        except OSError:  # gone before we took it, or out of descriptors: not ours to fix
            return
        call = HostCall(self.socket(fileno=fd))
        call.sock.setblocking(False)
        self.calls[call.fd] = call
        if len(self.calls) > TOOL_CALLS_MAX:
            self.answer(call, False, f"too many host tool calls at once (at most "
                        f"{TOOL_CALLS_MAX}): wait for one to finish")

    def receive(self, call):
        try:
            data = call.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            self.drop(call)
            return
        if not data:
            self.dispatch(call)
        elif len(call.data) + len(data) > TOOL_REQUEST_MAX:
            self.answer(call, False, f"the call is larger than {TOOL_REQUEST_MAX} bytes")
        else:
            call.data += data

    def dispatch(self, call):
        name, sep, arguments = bytes(call.data).partition(b"\n")
        name = name.decode("utf-8", "replace")
        if not sep or name not in self.tools:
            self.answer(call, False, f"{name[:100]!r} is not a host tool of this command; it "
                        f"has: {', '.join(sorted(self.tools))}")
            return
        call.data, call.id = None, HostCalls.issued
        HostCalls.issued += 1  # ids are never reused: a late reply cannot answer a new call
        self.waiting[call.id] = call
        send({"host_tool": {"id": call.id, "name": name}}, arguments)

    def answer(self, call, ok, text):
        call.data = None
        self.waiting.pop(call.id, None)
        call.out = memoryview((b"0" if ok else b"1") + as_bytes(text))

    def from_host(self):
        try:
            chunk = os.read(0, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:  # the host is closing the sandbox: no reply will come
            self.host_open = False
            return
        INBOX.extend(chunk)
        while True:  # replies only: anything else is the host's next request, for main()
            try:
                found = peek_request()
            except (ValueError, EOFError, TypeError):
                return
            if found is None or not isinstance(found[0], dict) or "reply" not in found[0]:
                return
            del INBOX[:found[1]]
            reply = found[0]
            call = self.waiting.get(reply["reply"])
            if call is not None:  # else its caller is gone
                self.answer(call, bool(reply["ok"]), reply["text"])

    def flush(self, call):
        try:
            sent = call.sock.send(call.out)
        except BlockingIOError:
            return
        except OSError:
            self.drop(call)
            return
        call.out = call.out[sent:]
        if not call.out:
            self.drop(call)

    def drop(self, call):
        call.sock.close()
        self.calls.pop(call.fd, None)
        self.waiting.pop(call.id, None)

    def close(self):
        """End every call (their clients see the connection close) and remove the directory;
        what the command itself put in it stays (it is in its own /tmp)."""
        for call in list(self.calls.values()):
            self.drop(call)
        if self.listener is not None:
            self.listener.close()
        for path in self.made:
            try:
                os.unlink(path)
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


LONG_SCRIPT = 100_000  # bytes; the kernel caps one argv string at 128 KiB
SCRIPT_FD = 9  # a long command reaches the shell as /dev/fd/9: an anonymous file, no path


def run_any(req, disk):
    """Run a request; a command too long for argv (a big heredoc) is sourced from an anonymous
    in-memory file (memfd) handed to the shell as fd 9: no path the agent could plant or race.
    Whatever goes wrong here is the command's failure (exit 126), never the server's."""
    data = as_bytes(req["cmd"])
    if len(data) <= LONG_SCRIPT:
        return run(req, disk)
    fd = None
    try:
        fd = os.memfd_create("hg-command", os.MFD_CLOEXEC)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, 0)  # SEEK_SET
        return run(dict(req, cmd=b". /dev/fd/%d" % SCRIPT_FD, script_fd=fd), disk)
    except (AttributeError, OSError) as exc:
        msg = f"sandbox: cannot pass the {len(data)}-byte command to the shell: {exc}\n"
        return {"exit_code": 126, "killed": None, "truncated": False, "notes": []}, b"", msg.encode()
    finally:
        if fd is not None:
            os.close(fd)


def run(req, disk):
    if not req.get("tools"):
        return run_with(req, disk, None)
    try:
        calls = HostCalls(req["tools"], req["client"])
    except (OSError, ValueError) as exc:
        msg = f"sandbox: cannot set up the host tools in {CFG['tmp']}: {exc}\n"
        return {"exit_code": 126, "killed": None, "truncated": False, "notes": []}, b"", msg.encode()
    try:
        return run_with(req, disk, calls)
    finally:
        calls.close()


class Phases:
    """A command's steps and the seconds each took, for ``phases`` requests
    (benchmarks/sandbox_cost.py): when each step ended, so that a millisecond can be traced to
    where it went. Without ``phases`` in the request nothing is timed (:class:`Untimed`)."""

    def __init__(self, start):
        self.last, self.steps = start, []

    def end(self, name):
        now = time.monotonic()
        self.steps.append([name, now - self.last])
        self.last = now


class Untimed:
    steps = None

    def end(self, name):
        pass


class Output:
    """The command's stdout and stderr pipes: what is kept of them (``cap`` bytes in all, the
    rest read and dropped) and how much was written."""

    def __init__(self, cap):
        self.cap = cap
        self.r_out, self.w_out = os.pipe()
        self.r_err, self.w_err = os.pipe()
        self.kept = {self.r_out: bytearray(), self.r_err: bytearray()}
        self.live = [self.r_out, self.r_err]
        self.seen = 0

    def close(self, fds):
        for fd in fds:
            os.close(fd)

    def pump(self, fd):
        """Read once from ``fd``; False when it had nothing (or is at its end, and closed)."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            self.live.remove(fd)
            os.close(fd)
            return False
        self.seen += len(data)
        room = self.cap - len(self.kept[self.r_out]) - len(self.kept[self.r_err])
        if room > 0:
            self.kept[fd] += data[:room]
        return True

    def drain(self):
        """What the command wrote before it ended (its writers are gone now), then close."""
        for fd in list(self.live):
            os.set_blocking(fd, False)
            while fd in self.live and self.pump(fd):
                pass
            if fd in self.live:
                os.close(fd)


def watch(pid, out, disk, floor, calls, deadline, start):
    """Serve the command until it exits or a limit stops it: ``(wait status or None, why it
    was stopped or None)``. The memory and disk limits are checked every ``TICK``; the output
    limit on every read."""
    try:
        pidfd = os.pidfd_open(pid)  # wakes select() when the command exits (Linux >= 5.3)
    except (AttributeError, OSError):
        pidfd = None  # older kernels: poll waitpid instead
    status, next_tick = None, start + TICK
    try:
        while status is None:
            now = time.monotonic()
            if now >= deadline:
                return None, "timeout"
            if now >= next_tick:
                if PIDNS and memory_in_use() > LIM["memory_mb"] * MB:
                    return None, "memory"
                if disk.over(floor):
                    return None, "disk_quota"
                next_tick = now + TICK
            wait = max(0.0, min(deadline, next_tick) - now)
            if pidfd is None:
                wait = min(wait, 0.001)
            readers = out.live + ([] if pidfd is None else [pidfd])
            if calls is None:
                ready = select.select(readers, [], [], wait)[0]
            else:
                ready, writable, _ = select.select(
                    readers + calls.readers(), calls.writers(), [], wait)
                calls.serve(ready, writable)
            for fd in ready:
                if fd == pidfd:
                    status = os.waitpid(pid, 0)[1]
                elif fd in out.live:
                    out.pump(fd)
            if pidfd is None:
                done, code = os.waitpid(pid, os.WNOHANG)
                status = code if done else None
            if out.seen > out.cap * CFG["discard_factor"]:
                return status, "output_limit"
        return status, None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def exit_of(status, killed):
    """``(exit_code, killed)`` from the wait status: a signal's death is reported as the
    shell reports it (128 + signal) with its reason, also when the shell's child died of it."""
    if killed is not None or status is None:
        return None, killed
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, SIGNAL_REASONS.get(sig)
    exit_code = os.waitstatus_to_exitcode(status)
    return exit_code, SIGNAL_REASONS.get(exit_code - 128)


def run_with(req, disk, calls):
    start = time.monotonic()
    phases = Phases(start) if req.get("phases") else Untimed()
    floor = disk.floor()  # before the command starts: all it writes counts
    oom_before = oom_kills()
    phases.end("quota and cgroup baseline")
    out = Output(LIM["output_bytes"])
    try:
        pid = spawn(req, out.w_out, out.w_err, None if calls is None else calls.dir)
    except (OSError, ValueError) as exc:
        out.close((out.r_out, out.w_out, out.r_err, out.w_err))
        msg = f"sandbox: cannot start the command: {exc}\n"
        return {"exit_code": 127, "killed": None, "truncated": False, "notes": []}, b"", msg.encode()
    out.close((out.w_out, out.w_err))
    phases.end("spawn")
    status, killed = watch(pid, out, disk, floor, calls, start + req["timeout"], start)
    phases.end("command (shell, limits, cgroup entry, the command; polled)")
    kill_all(pid, status is not None)
    phases.end("kill and reap what is left")
    if PIDNS:
        remove_ipc()  # System V objects die with the command that made them, like its processes
    phases.end("System V objects removed")
    cgroup_oom = killed is None and oom_before is not None and oom_kills() != oom_before
    if cgroup_oom:
        killed = "memory"  # the cgroup's limit acted before the poll did
    out.drain()
    exit_code, killed = exit_of(status, killed)
    truncated = out.seen > out.cap
    notes = notes_for(killed, req["timeout"], disk, truncated, out.cap)
    if cgroup_oom:
        notes[0] = CGROUP_NOTE
    notes += quota_notes(disk, killed)
    header = {"exit_code": exit_code, "killed": killed, "truncated": truncated, "notes": notes}
    phases.end("output, cgroup and quota checks")
    if phases.steps is not None:
        header["phases"] = phases.steps
    return header, bytes(out.kept[out.r_out]), bytes(out.kept[out.r_err])


def quota_notes(disk, killed):
    """The workspace's quota, said when a command that was not stopped for it left the
    workspace at or over it (counted again first, so that the note is true)."""
    disk.refresh()
    if disk.beyond(*disk.estimate()):
        disk.walk()
    if killed is None and disk.beyond(disk.used, disk.files):
        return [f"the workspace is at or over its quota ({disk.describe()}): writes fail and "
                "commands that grow it will be killed; delete files"]
    return []


IPC_RMID = 0
IPC_KINDS = (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl"))


def remove_ipc():
    """Remove the System V IPC objects (shared memory, message queues, semaphore sets) the
    agent made: they live in the sandbox's ipc namespace, not in a process, and would outlast
    the episode. As their creator, the uid may remove them whatever their mode."""
    for kind, remover in IPC_KINDS:
        for line in read_lines("/proc/sysvipc/" + kind)[1:]:
            fields = line.split()
            if len(fields) > 1:
                if kind == "sem":
                    getattr(LIBC, remover)(int(fields[1]), 0, IPC_RMID)
                else:
                    getattr(LIBC, remover)(int(fields[1]), IPC_RMID, 0)
        if len(read_lines("/proc/sysvipc/" + kind)) > 1:
            return f"System V {kind} objects are left"
    return None


def read_lines(path):
    try:
        with open(path) as fh:
            return fh.read().splitlines()
    except OSError:
        return []


# ---------------------------------------------------------------------------- leases (root)
#
# Run as root, the sandbox's PID 1 is a *lessor*, not the command server: each episode (lease)
# gets a server of its own, forked from the lessor into new pid, ipc, net and mount namespaces,
# with a new /proc, /tmp, /dev/mqueue and workspace mount (see ``lessor``). Nothing a lease
# could move - pid numbers, System V IPC ids, tmpfs inode numbers and directory offsets,
# network counters, the server's own scheduling and memory counts - carries over to the next.

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME = 0x20, 0x400, 0x800
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x8000000, 0x20000000, 0x40000000
# open_tree(2) and move_mount(2): the same numbers on every architecture (Linux >= 5.2).
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429
OPEN_TREE_CLONE, AT_RECURSIVE, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, -100, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def checked(result, what):
    if result < 0:
        raise OSError(_ctypes.get_errno(), what)
    return result


def mount(source, target, fstype, flags, data=None):
    checked(LIBC.mount(source, as_bytes(target), fstype, c_long(flags), data), f"mount {target}")


def unmount(target):
    checked(LIBC.umount2(as_bytes(target), MNT_DETACH), f"umount {target}")


def clone_mount(path):
    """A detached copy of the mount tree at ``path`` (an O_PATH descriptor), to attach again."""
    return checked(LIBC.syscall(c_long(SYS_OPEN_TREE), c_long(AT_FDCWD), as_bytes(path),
                                c_long(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC)),
                   f"open_tree {path}")


def attach_mount(fd, target):
    checked(LIBC.syscall(c_long(SYS_MOVE_MOUNT), c_long(fd), b"", c_long(AT_FDCWD),
                         as_bytes(target), c_long(MOVE_MOUNT_F_EMPTY_PATH)), f"move_mount {target}")


def mounts():
    """(mount point, shared with a peer group) of each mount, in /proc/self/mountinfo's order."""
    found = []
    for line in read_lines("/proc/self/mountinfo"):
        fields = line.split(" ", 7)
        point = fields[4]
        if "\\" in point:  # space, tab, newline and backslash are written as \\ooo
            parts = point.split("\\")
            point = parts[0] + "".join(chr(int(p[:3], 8)) + p[3:] for p in parts[1:])
        found.append((point, fields[6].startswith("shared:")))  # the first optional field
    return found


def submounts(table, top):
    """The mount points below ``top``, outermost only (a recursive clone carries the rest)."""
    found = []
    for point, _ in table:
        outer = not any(point == p or point.startswith(p + "/") for p in found)
        if point.startswith(top + "/") and outer:
            found.append(point)
    return found


def make_dirs(path):
    """Create the missing directories of ``path`` (mode 0755, as bwrap makes them)."""
    here = ""
    for name in path.strip("/").split("/"):
        here += "/" + name
        try:
            os.mkdir(here, 0o755)
        except FileExistsError:
            pass


def new_tmp(table):
    """A new /tmp tmpfs of ``tmp_mb``; what bwrap mounted below /tmp (an environment, extra
    binds) is carried over onto it, at the same paths."""
    carried = []
    try:
        for point in submounts(table, "/tmp"):
            fd = clone_mount(point)
            carried.append((point, fd, S_ISDIR(os.fstat(fd).st_mode)))
        unmount("/tmp")
        size = int(LIM["tmp_mb"]) * MB
        mount(b"tmpfs", "/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777,size=%d" % size)
        for point, fd, is_dir in carried:
            make_dirs(point.rsplit("/", 1)[0])
            if is_dir:
                make_dirs(point)
            else:
                os.close(os.open(point, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            attach_mount(fd, point)
    finally:
        for _, fd, _ in carried:
            os.close(fd)


def new_proc(table):
    """A /proc of the lease's pid namespace, with the System V IPC limits of its new ipc
    namespace written (only a privileged process inside may) and the read-only covers bwrap
    put on the old one (``/proc/irq``, ``/proc/bus``, ...) put on it too."""
    covers = submounts(table, "/proc")
    unmount("/proc")
    mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name, value in CFG["ipc_limits"].items():
        with open("/proc/sys/" + name, "w") as fh:
            fh.write(str(value))
    for point in covers:
        mount(as_bytes(point), point, None, MS_BIND | MS_REC)
        mount(None, point, None,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def loopback_up():
    """Bring up the new network namespace's loopback (the kernel gives it 127.0.0.1 and ::1)."""
    sock = checked(LIBC.socket(2, 2 | os.O_CLOEXEC, 0), "socket")  # AF_INET, SOCK_DGRAM
    try:
        request = c_buffer(b"lo".ljust(16, b"\0") + bytes(24))  # struct ifreq: name, flags
        checked(LIBC.ioctl(sock, c_long(SIOCGIFFLAGS), request), "SIOCGIFFLAGS lo")
        flags = int.from_bytes(bytes(request)[16:18], sys.byteorder) | IFF_UP
        request = c_buffer(bytes(request)[:16] + flags.to_bytes(2, sys.byteorder) + bytes(22))
        checked(LIBC.ioctl(sock, c_long(SIOCSIFFLAGS), request), "SIOCSIFFLAGS lo")
    finally:
        os.close(sock)


def renew(workspace_fd, table):
    """In the lease's namespaces, as root still: mounts of its own for all that holds state -
    /proc, /tmp, /dev/mqueue (tied to the ipc namespace) and the workspace (``workspace_fd``:
    the host's clone of the lease's workspace; None: the one bwrap mounted) -, then loopback.
    ``table``: the lessor's mounts (:func:`mounts`), which this mount namespace copied."""
    if any(shared for _, shared in table):  # bwrap's are private: no peer sees our mounts
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    new_proc(table)
    new_tmp(table)
    unmount("/dev/shm")
    mount(b"tmpfs", "/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV,
          b"mode=1777,size=%d" % (int(CFG["shm_mb"]) * MB))
    unmount("/dev/mqueue")
    mount(b"mqueue", "/dev/mqueue", b"mqueue", 0)
    if workspace_fd is not None:
        attach_mount(workspace_fd, ROOT)
        os.close(workspace_fd)
        # As bwrap's binds: no set-id programs or device files from a host directory.
        flags = os.statvfs(ROOT).f_flag  # ST_* flags: the same bits as MS_* for these
        if flags & (MS_NOSUID | MS_NODEV) != MS_NOSUID | MS_NODEV:
            kept = flags & (MS_RDONLY | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
            mount(None, ROOT, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | kept)
    loopback_up()


def fail(message):
    try:
        os.write(2, as_bytes(f"sandbox server: {message}\n"))
    except OSError:
        pass


def lease(workspace_fd, table):
    """The lease's server: PID 1 of the pid namespace the lessor made for it, it moves into new
    ipc, network and mount namespaces, renews the mounts (:func:`renew`), drops its
    privileges like any server (:func:`setup`) and serves the episode's commands. Exits 0 when
    the host ended the lease."""
    code = 1
    try:
        checked(LIBC.unshare(c_int(CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWNS)), "unshare")
        renew(workspace_fd, table)
        setup()
        serve()
        code = 0
    except SystemExit as exc:  # setup()'s messages already name us
        fail(str(exc.code).removeprefix("sandbox server: "))
    except BaseException as exc:  # noqa: BLE001 - reported, then this process ends
        fail(f"the lease could not start: {type(exc).__name__}: {exc}")
    os._exit(code)


def next_lease(sock):
    """The host's next lease request on the lease socket: (True, the workspace descriptor or
    None), or (False, None) once the host closed the sandbox."""
    try:
        data, ancillary, _, _ = sock.recvmsg(16, _socket.CMSG_SPACE(4))
    except OSError:
        return False, None
    fds = [int.from_bytes(payload[i:i + 4], sys.byteorder)
           for level, kind, payload in ancillary
           if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
           for i in range(0, len(payload) - 3, 4)]
    for fd in fds[1:]:
        os.close(fd)
    return bool(data), (fds[0] if fds else None)


def lessor():
    """PID 1 of the sandbox, as root: it keeps CAP_SYS_ADMIN and CAP_NET_ADMIN (with SETUID and
    SETGID) and never runs a command. For each lease the host asks for (a message on the lease
    socket, with the workspace's mount), it forks :func:`lease`; when that ends - the host
    asked, the server answered no more - it says ``ended`` on stdout and waits for the next.
    A lease that failed or died takes the sandbox with it (the host then sees it end).
    Commands never reach it: they live in a pid namespace below this one and in mount, ipc and
    network namespaces of their lease's own."""
    global _socket
    import _socket  # C module (SCM_RIGHTS), here only: the unprivileged path does not pay it

    close_inherited_fds(CFG["lease_fd"])
    if os.getpid() != 1:
        raise SystemExit("sandbox server: expected to be PID 1 of its own pid namespace")
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    prctl(4, 0)  # PR_SET_DUMPABLE 0
    sock = _socket.socket(fileno=CFG["lease_fd"])
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    table = mounts()  # what bwrap mounted: each lease's mount namespace starts as a copy
    while True:
        wanted, workspace_fd = next_lease(sock)
        if not wanted:
            return
        # A new pid namespace for the next child: unshare() makes one only while children
        # still go into our own, so point them back there first.
        checked(LIBC.setns(own_pid_ns, CLONE_NEWPID), "setns")
        checked(LIBC.unshare(c_int(CLONE_NEWPID)), "unshare")
        child = os.fork()
        if child == 0:
            sock.close()
            lease(workspace_fd, table)
        if workspace_fd is not None:
            os.close(workspace_fd)
        # The server is its namespace's PID 1: when it exits, all the lease's processes are
        # gone (the kernel kills them and it reaps them first).
        if os.waitpid(child, 0)[1] != 0:
            return
        try:
            send({"ended": True})
        except OSError:
            return


def serve():
    disk = Disk()
    send({"ready": True})
    # The bootstrap read its frame through sys.stdin.buffer, which holds nothing more: the host
    # sends its first request only once we are ready. From here on fd 0 is read directly.
    while True:
        req = next_request()
        if req is None:
            break
        if isinstance(req, dict) and req.get("end") is True:
            break  # the host ends the lease (the lessor says when it is over)
        began = time.monotonic()
        if not isinstance(req, dict) or "cmd" not in req:
            if not (isinstance(req, dict) and "reply" in req):  # a late reply: its call ended
                send({"error": f"bad request: {req!r}"})
            continue
        header, out, err = run_any(req, disk)
        header["duration_s"] = time.monotonic() - began
        send(header, out, err)
    if PIDNS:
        kill_all(0, True)


def main():
    if CFG.get("lease_fd") is not None:
        lessor()
    else:
        setup()
        serve()


if CFG is not None:
    main()
