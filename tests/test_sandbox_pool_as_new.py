"""A recycled pooled sandbox is indistinguishable from a fresh one (issue 38, finding 3).

A covert channel between episodes is any number one episode can set and the next can read.
Emptying what commands can write is not enough: the kernel keeps counters that an episode
moves and the next one reads back - the pid namespace's last pid, the System V IPC id
sequence, the inode counters of the tmpfs mounts (``/tmp``, the workspace), the packet
counters of the network namespace, the command server's own scheduling counts. Each test
here encodes 137 in all of them in one lease and reads them back in the next lease of the
same pool, then compares with what a freshly started sandbox reads.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from harnessgrid.sandboxing.sandbox import Sandbox, check_bwrap, sandbox_available
from harnessgrid.sandboxing.sandbox_pool import SandboxPool
from harnessgrid.sandboxing.workspace import Workspace

pytestmark = [
    pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="only root sandboxes are recycled"),
]

SECRET = 137
# Flat on purpose: Workspace.limit_size does not yet move a workspace that holds a folder onto
# its tmpfs (it falls back to the host directory), which would change what "fresh" reads.
FILES = {"task.txt": "the task\n", "main.py": "print('hi')\n"}

#: The first command of an episode: every counter it can see, one "name value..." per line.
PROBE = r"""
echo "pid $$ $(cat /proc/sys/kernel/ns_last_pid)"
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT, IPC_RMID = 0o1000, 0
shm = libc.shmget(0, 4096, IPC_CREAT | 0o600)
msg = libc.msgget(0, IPC_CREAT | 0o600)
sem = libc.semget(0, 1, IPC_CREAT | 0o600)
print("ipc", shm, msg, sem)
libc.shmctl(shm, IPC_RMID, None); libc.msgctl(msg, IPC_RMID, None); libc.semctl(sem, 0, IPC_RMID)
for where in ("/tmp", "."):
    path = os.path.join(where, "probe")
    open(path, "w").close()
    print("inode", where, os.stat(path).st_ino, os.stat(where).st_ino)
    os.unlink(path)
PY
awk '$1 == "lo:" {print "lo", $2, $3, $10, $11}' /proc/net/dev
awk '$1 == "voluntary_ctxt_switches:" {print "pid1-switches", $2}' /proc/1/status
"""

#: An episode that writes SECRET into every counter it can move.
ENCODE = rf"""
for i in $(seq {SECRET}); do /bin/true; done
python3 - <<'PY'
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT, IPC_RMID = 0o1000, 0
for _ in range({SECRET}):
    libc.shmctl(libc.shmget(0, 4096, IPC_CREAT | 0o600), IPC_RMID, None)
    libc.msgctl(libc.msgget(0, IPC_CREAT | 0o600), IPC_RMID, None)
    libc.semctl(libc.semget(0, 1, IPC_CREAT | 0o600), 0, IPC_RMID)
for where in ("/tmp", "."):
    for i in range({SECRET}):
        path = os.path.join(where, "n%d" % i)
        open(path, "w").close()
        os.unlink(path)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range({SECRET}):
    udp.sendto(b"x" * {SECRET}, ("127.0.0.1", 9))
print("encoded")
PY
"""


def _readings(stdout: str) -> dict[str, list[int]]:
    out = {}
    for line in stdout.splitlines():
        name, *values = line.split()
        if name == "inode":
            name += values.pop(0)
        out[name] = [int(v) for v in values]
    return out


def _same_as_fresh(seen: dict[str, list[int]], fresh: dict[str, list[int]]) -> None:
    """Every counter equal to a fresh sandbox's; the server's scheduling count is timing, so
    only bounded: SECRET commands in the previous lease must not show."""
    assert set(seen) == set(fresh), (seen, fresh)
    switches = seen.pop("pid1-switches")[0]
    fresh_switches = fresh.pop("pid1-switches")[0]
    assert seen == fresh
    assert switches < fresh_switches + 20, (switches, fresh_switches)


async def _fresh_readings() -> dict[str, list[int]]:
    """What a sandbox started for one episode reads (no pool)."""
    ws = Workspace.create(FILES)
    try:
        async with Sandbox(ws) as sandbox:
            result = await sandbox.run(PROBE)
            assert result.ok, result
            return _readings(result.stdout)
    finally:
        ws.cleanup()


def test_a_recycled_sandbox_reads_every_counter_as_a_fresh_one_does() -> None:
    """Lease 1 reads the counters (as any fresh sandbox would), then encodes SECRET in each and
    runs SECRET more commands; lease 2 - the same sandbox, recycled by the pool - reads them
    all as a freshly started sandbox does: the same pid, the same IPC ids, the same inode
    numbers in /tmp and the workspace, no loopback traffic, a server with no history."""

    async def main() -> tuple[list[dict[str, list[int]]], dict[str, list[int]], SandboxPool]:
        fresh = await _fresh_readings()
        seen = []
        async with SandboxPool(1, expected=1) as pool:
            first = None
            for lease in range(2):
                ws, sandbox = await pool.acquire(FILES)
                assert sandbox is not None
                assert first is None or sandbox is first  # recycled, not started again
                first = sandbox
                probe = await sandbox.run(PROBE)
                assert probe.ok, probe
                seen.append(_readings(probe.stdout))
                if lease == 0:
                    encoded = await sandbox.run(ENCODE)
                    assert encoded.stdout == "encoded\n", encoded
                    for _ in range(SECRET // 4):
                        assert (await sandbox.run("true")).ok
                pool.release(ws, sandbox)
        return seen, fresh, pool

    (first, second), fresh, pool = asyncio.run(main())
    assert pool.stats.recycled >= 1
    assert pool.stats.started == 1
    _same_as_fresh(dict(first), dict(fresh))
    _same_as_fresh(second, fresh)


def test_a_recycled_sandbox_over_the_same_workspace_renews_the_kernel_counters() -> None:
    """``Sandbox.reset_sync()`` without a new workspace (the caller keeps its files): pids,
    IPC ids, /tmp inodes, loopback counters start over all the same."""
    ws = Workspace.create(FILES)
    try:
        with Sandbox(ws) as sandbox:
            before = _readings(sandbox.run_sync(PROBE).stdout)
            assert sandbox.run_sync(ENCODE).stdout == "encoded\n"
            assert sandbox.reset_sync() is None
            after = _readings(sandbox.run_sync(PROBE).stdout)
            assert sandbox.run_sync("cat task.txt").stdout == "the task\n"  # kept, as asked
    finally:
        ws.cleanup()
    for readings in (before, after):  # the workspace's own inode counter is the caller's
        readings.pop("inode.")
    _same_as_fresh(after, before)


@pytest.mark.parametrize("capped", [True, False], ids=["tmpfs", "host-directory"])
def test_every_lease_mounts_the_workspace_nosuid_nodev(capped: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each lease attaches the workspace itself (the host hands it a clone of the mount): as
    bwrap's bind did, it is nosuid and nodev - no set-id program or device file of a host
    directory works inside -, whether the kernel caps it (its own tmpfs) or the server polls
    (the host's directory as it is), in the first lease and the next."""
    if not capped:
        monkeypatch.setattr(Workspace, "limit_size", lambda self, max_bytes, max_files: False)
    ws = Workspace.create(FILES)
    try:
        with Sandbox(ws) as sandbox:
            for _ in range(2):
                line = sandbox.run_sync("grep ' /workspace ' /proc/self/mountinfo").stdout
                options = line.split()[5].split(",")
                assert {"rw", "nosuid", "nodev"} <= set(options), line
                assert sandbox.reset_sync() is None
    finally:
        ws.cleanup()
