"""Isolation, second round (real bubblewrap): kernel keyrings, memory that is not address space,
and the owners of an ``in_place`` directory.

Keyrings are not namespaced and the sandbox uid is leased again, so each keyring test runs the
exact sequence an attacker would: one episode stores a key, the next sandbox on the same uid -
recycled by a reset, as a pool does, or freshly started - looks for it. The memory tests write
what ``RLIMIT_AS`` does not see (a memfd filled with ``write()``, System V shared memory filled
and detached) and check the command is stopped or the memory is gone when it ends.
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessgrid.sandboxing._sandbox_seccomp import KEYRING_SYSCALLS
from harnessgrid.sandboxing.sandbox import Sandbox, SandboxLimits, check_bwrap, sandbox_available
from harnessgrid.sandboxing.workspace import Workspace

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

IS_ROOT = os.geteuid() == 0
_ABI = {"x86_64": "x86_64", "aarch64": "aarch64"}.get(platform.machine())
ADD_KEY, REQUEST_KEY, KEYCTL = KEYRING_SYSCALLS[_ABI][1] if _ABI else (0, 0, 0)
needs_known_abi = pytest.mark.skipif(_ABI is None, reason="keyring syscall numbers: x86_64/aarch64")

#: Run inside the sandbox: add a key to a keyring, or look one up, printing what happened.
KEY_PROBE = f"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
op, name = sys.argv[1], sys.argv[2].encode()
if op == "add":  # KEY_SPEC_USER_KEYRING (-4)
    r = libc.syscall({ADD_KEY}, b"user", name, b"the answer", 10, ctypes.c_long(-4))
else:
    r = libc.syscall({REQUEST_KEY}, b"user", name, None, ctypes.c_long(0))
print(op, "ok" if r >= 0 else "errno=%d" % ctypes.get_errno())
"""


@pytest.fixture
def probe_ws(tmp_path: Path) -> Iterator[Workspace]:
    (tmp_path / "key.py").write_text(KEY_PROBE)
    with Workspace.open(tmp_path) as ws:
        yield ws


def _uid(sandbox: Sandbox) -> str:
    return sandbox.run_sync("id -u").stdout.strip()


@needs_known_abi
def test_a_key_one_episode_stores_is_not_found_by_the_next_on_that_uid(
        probe_ws: Workspace, tmp_path: Path) -> None:
    with Sandbox(probe_ws) as first:
        uid = _uid(first)
        stored = first.run_sync("python3 key.py add hg-answer")
        assert stored.stdout.strip() == "add errno=1", stored  # EPERM: no keyring syscalls
        # Recycled for the next episode, as a SandboxPool does.
        assert first.reset_sync() is None
        probe_ws.write_text("key.py", KEY_PROBE)
        assert _uid(first) == uid
        assert first.run_sync("python3 key.py find hg-answer").stdout.strip() == "find errno=1"
        assert "hg-answer" not in first.run_sync("cat /proc/keys").stdout
    # A fresh sandbox gets the lowest free uid: the one just released.
    with Workspace.open(tmp_path) as ws, Sandbox(ws) as second:
        assert _uid(second) == uid
        found = second.run_sync("python3 key.py find hg-answer")
        assert found.stdout.strip() == "find errno=1", found
        assert "hg-answer" not in second.run_sync("cat /proc/keys").stdout


@needs_known_abi
def test_the_host_session_keyring_is_not_reachable(probe_ws: Workspace) -> None:
    """The host process's session keyring (where PAM, systemd or a Kerberos KEYRING: cache
    keep keys) is neither listed nor readable inside, and nothing added inside reaches it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # A session keyring of this test's own, so the host's real one is left alone.
    assert libc.syscall(KEYCTL, 1, None) >= 0, ctypes.get_errno()  # JOIN_SESSION_KEYRING
    key = libc.syscall(ADD_KEY, b"user", b"hg-host-secret", b"hunter2", 7, ctypes.c_long(-3))
    assert key >= 0, ctypes.get_errno()
    try:
        with Sandbox(probe_ws) as sandbox:
            found = sandbox.run_sync("python3 key.py find hg-host-secret")
            assert found.stdout.strip() == "find errno=1", found
            listed = sandbox.run_sync("cat /proc/keys")
            assert "hg-host-secret" not in listed.stdout
            assert "_ses" in listed.stdout  # a session keyring of its own, empty
            added = sandbox.run_sync("python3 key.py add hg-from-inside")
            assert added.stdout.strip() == "add errno=1"
        assert "hg-from-inside" not in Path("/proc/keys").read_text()
    finally:
        libc.syscall(KEYCTL, 3, ctypes.c_long(key))  # KEYCTL_REVOKE


# ---------------------------------------------------------------------------- in_place owners

needs_root = pytest.mark.skipif(not IS_ROOT, reason="commands get a uid of their own only as root")


def _user_project(top: Path) -> Path:
    """A directory as a user has it: entries of two owners, a set-uid helper, a link."""
    project = top / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hi')\n")
    (project / "notes.txt").write_text("mine\n")
    (project / "tool").write_text("#!/bin/sh\n")
    (project / "link").symlink_to("notes.txt")
    os.chown(project, 1234, 1234)
    os.chown(project / "src", 1234, 1234)
    os.chown(project / "src" / "main.py", 1234, 1234)
    os.chown(project / "notes.txt", 1235, 1236)
    os.chown(project / "tool", 1235, 1235)
    os.chmod(project / "tool", 0o4755)
    os.chown(project / "link", 1235, 1235, follow_symlinks=False)
    return project


def _owners(project: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for path in [project, *project.rglob("*")]:
        st = path.lstat()
        out[str(path.relative_to(project))] = (st.st_uid, st.st_gid, st.st_mode & 0o7777)
    return out


@needs_root
def test_an_in_place_session_gives_each_entry_back_its_own_owner_and_mode(tmp_path: Path) -> None:
    project = _user_project(tmp_path)
    before = _owners(project)
    with Workspace.open(project, in_place=True) as ws, Sandbox(ws) as sandbox:
        assert sandbox.run_sync("mv notes.txt renamed.txt && echo new > made.txt").ok
        assert _owners(project)["."][0] >= 2_000_000_000  # lent to the sandbox uid meanwhile
    after = _owners(project)
    # A file the agent renamed is its work: the directory's owner's, with its own mode.
    assert after.pop("renamed.txt") == (1234, 1234, before.pop("notes.txt")[2])
    assert after.pop("made.txt")[:2] == (1234, 1234)  # new files: the directory's owner
    assert after == before  # untouched: owners, and the set-uid bit the lending chown cleared


@needs_root
def test_a_crashed_in_place_session_is_handed_back_before_the_uid_is_leased_again(
        tmp_path: Path) -> None:
    """The host process dies (kill -9) while a sandbox holds the user's directory: it stays
    owned by the sandbox uid, until the next sandbox started on this host - which would lease
    that uid - hands it back first."""
    project = _user_project(tmp_path)
    before = _owners(project)
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\n"
            "from pathlib import Path\n"
            "from harnessgrid.sandboxing.sandbox import Sandbox\n"
            "from harnessgrid.sandboxing.workspace import Workspace\n"
            "ws = Workspace.open(Path(sys.argv[1]), in_place=True)\n"
            "sb = Sandbox(ws); sb.start_sync(); sb.run_sync('touch during.txt')\n"
            "print('holding', flush=True); time.sleep(600)\n"), str(project)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        holder.kill()
    finally:
        holder.wait()
    assert _owners(project)["."][0] >= 2_000_000_000  # still lent: nobody handed it back
    with Workspace.create({"x.txt": "x"}) as other, Sandbox(other) as sandbox:
        assert sandbox.run_sync("true").ok
        after = _owners(project)
    assert after.pop("during.txt")[:2] == (1234, 1234)
    assert after == before


# ---------------------------------------------------------------------------- memory

#: Run inside the sandbox: hold memory the address-space limit does not see.
MEMORY_PROBE = """
import ctypes, mmap, os, sys
op, mb = sys.argv[1], int(sys.argv[2])
chunk = b"x" * (1 << 20)
if op in ("memfd", "mapped-only"):  # a new memory file every 128 MB, each under RLIMIT_FSIZE
    held = []
    for i in range(mb):
        if i % 128 == 0:
            if op == "mapped-only" and held:  # keep the last file by a one-page mapping alone
                last = held.pop()  # (mmap.mmap would keep a duplicate descriptor)
                libc = ctypes.CDLL(None)
                libc.mmap.restype = ctypes.c_void_p
                libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, last, ctypes.c_long(0))
                os.close(last)
            held.append(os.memfd_create("hog"))
        os.write(held[-1], chunk)
elif op == "shm":  # System V segments of 64 MB, each filled and detached
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    for i in range(mb // 64):
        segment = libc.shmget(0, 64 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if segment < 0:
            sys.exit("shmget: errno %d" % ctypes.get_errno())
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, 64 << 20)
        libc.shmdt(ctypes.c_void_p(address))
elif op == "segment":  # one segment of mb MB, left behind
    libc = ctypes.CDLL(None, use_errno=True)
    print("ok" if libc.shmget(0, mb << 20, 0o1600) >= 0 else "errno=%d" % ctypes.get_errno())
    sys.exit(0)
print("held", mb, "MB")
"""
SMALL_MEMORY = SandboxLimits(memory_mb=256, wall_s=60, cpu_s=60, tmp_mb=16, workspace_mb=64)


@pytest.fixture
def memory_sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    (tmp_path / "hold.py").write_text(MEMORY_PROBE)
    with Workspace.open(tmp_path) as ws, Sandbox(ws, SMALL_MEMORY) as sandbox:
        yield sandbox


def test_memory_files_filled_with_write_count_towards_memory_mb(memory_sandbox: Sandbox) -> None:
    result = memory_sandbox.run_sync("python3 hold.py memfd 1500")
    assert result.killed == "memory", result
    assert "held" not in result.stdout


def test_shared_memory_filled_and_detached_counts_and_dies_with_its_command(
        memory_sandbox: Sandbox) -> None:
    hog = memory_sandbox.run_sync("python3 hold.py shm 1024")
    # Stopped by the poll, or refused by the namespace's limit on all segments together.
    assert hog.killed == "memory" or "shmget: errno 28" in hog.stderr, hog
    left = memory_sandbox.run_sync("python3 hold.py segment 32; wc -l < /proc/sysvipc/shm")
    assert left.stdout.split() == ["ok", "2"]  # the header and the segment, while it runs
    assert memory_sandbox.run_sync("wc -l < /proc/sysvipc/shm").stdout.strip() == "1"


@needs_root
def test_a_segment_larger_than_memory_mb_is_refused(memory_sandbox: Sandbox) -> None:
    result = memory_sandbox.run_sync("python3 hold.py segment 300")
    assert result.stdout.strip() == "errno=22", result  # EINVAL: above kernel.shmmax


def test_open_files_and_message_queues_are_capped(memory_sandbox: Sandbox) -> None:
    limits = memory_sandbox.run_sync(
        "ulimit -n; ulimit -Hn; ulimit -n 20000 || echo refused; ulimit -Hq")
    assert limits.stdout.split() == ["1024", "1024", "refused", "819200"], limits


@needs_root
def test_memory_no_poll_can_see_is_bounded_by_the_sandbox_cgroup(
        memory_sandbox: Sandbox) -> None:
    """Memory files kept only by a one-page mapping are in no process's resident memory and
    no descriptor table: the poll misses them; the cgroup holds the sandbox to what it may pin."""
    if memory_sandbox._cgroup is None:
        pytest.skip("this host gives no memory cgroup (cgroup v1 memory or delegated v2)")
    result = memory_sandbox.run_sync("python3 hold.py mapped-only 1500")
    assert result.killed == "memory", result
    assert "memory cgroup" in result.stderr
