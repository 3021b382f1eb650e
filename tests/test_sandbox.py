"""The episode sandbox, against real bubblewrap: isolation, limits, cleanup, failure modes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harnessgrid.errors import HarnessgridError, SandboxError
from harnessgrid.sandboxing import sandbox as sandbox_module
from harnessgrid.sandboxing.sandbox import Sandbox, SandboxLimits, check_bwrap, sandbox_available
from harnessgrid.sandboxing.workspace import PathEscapeError, Workspace

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

FAST = SandboxLimits(wall_s=10, cpu_s=5, max_procs=64, memory_mb=512, workspace_mb=64)
IS_ROOT = os.geteuid() == 0
#: Seconds after which something that must end counts as hung: only a guard against a hang.
#: The tests check which limit acted (its message, ``killed``), never how fast (issue 28: under
#: load 5-14 on 2 cores, "< 3 s" and "< 1 s" failed although every limit worked).
HANG_S = 600
#: FAST with wall and CPU limits no test reaches, for tests of another limit: were that one not
#: to act, the command would run on (and the test fail) instead of being cut by these.
PATIENT = replace(FAST, wall_s=HANG_S, cpu_s=HANG_S)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with Workspace.create({"hello.txt": "hi\n", "sub/x.txt": "x\n"}, base_dir=tmp_path) as ws:
        yield ws


@pytest.fixture
def sb(ws: Workspace) -> Iterator[Sandbox]:
    with Sandbox(ws, FAST) as sb:
        yield sb


def processes_of(uid: int) -> list[int]:
    """Host pids running as ``uid`` (the sandbox's private uid when we are root)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def sandbox_uid(sb: Sandbox) -> int:
    return int(sb.run_sync("id -u").stdout)


# ---------------------------------------------------------------- basics


def test_runs_commands_in_the_workspace(sb: Sandbox, ws: Workspace) -> None:
    """Commands see the workspace at mount_path, and their writes land in the host directory."""
    result = sb.run_sync("pwd; cat hello.txt; echo out > made.txt; echo err >&2; exit 3")
    assert result.stdout == "/workspace\nhi\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3
    assert not result.ok
    assert not result.timed_out
    assert not result.truncated
    assert result.killed is None
    assert ws.read_text("made.txt") == "out\n"


def test_a_command_says_where_its_time_went_when_asked(sb: Sandbox) -> None:
    """benchmarks/sandbox_cost.py's breakdown: the server's steps of one command, named, in
    order; nothing is timed unless asked. (What the times are is the benchmark's business.)"""
    assert sb.run_sync("true").phases == ()
    sb.time_phases = True
    result = sb.run_sync("echo hi")
    assert result.stdout == "hi\n"
    names = [name for name, _ in result.phases]
    assert names[:2] == ["quota and cgroup baseline", "spawn"]
    assert names[-1] == "output, cgroup and quota checks"
    assert len(names) == len(set(names)) >= 5
    assert all(isinstance(seconds, float) for _, seconds in result.phases)


def test_cwd_and_env(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """cwd is confined like any path; env adds to a minimal one; host secrets never pass."""
    monkeypatch.setenv("HG_TEST_SECRET", "hunter2")
    result = sb.run_sync("pwd; echo $FOO; env", cwd="sub", env={"FOO": "bar"})
    assert result.stdout.startswith("/workspace/sub\nbar\n")
    assert "hunter2" not in result.stdout
    assert sb.run_sync("pwd", cwd="/workspace/sub").stdout == "/workspace/sub\n"
    with pytest.raises(PathEscapeError):
        sb.run_sync("pwd", cwd="..")
    with pytest.raises(HarnessgridError, match="not a directory"):
        sb.run_sync("pwd", cwd="hello.txt")
    with pytest.raises(HarnessgridError, match="timeout_s"):
        sb.run_sync("true", timeout_s=0)


def test_commands_run_in_bash(sb: Sandbox) -> None:
    """Prompts and tool descriptions promise bash: bash syntax works (sh only without bash)."""
    result = sb.run_sync('[[ -n "$BASH_VERSION" ]] && arr=(a b) && echo "${arr[1]}"')
    assert result.stdout == "b\n", result


def test_async_runs_and_sync_share_the_sandbox(ws: Workspace) -> None:
    """The async API and run_sync drive the same server; state is shared, processes are not."""

    async def episode() -> list[str]:
        async with Sandbox(ws, FAST) as sb:
            first = await sb.run("echo 1 > n.txt; echo a")
            second = await sb.run("cat n.txt")
            return [first.stdout, second.stdout]

    assert asyncio.run(episode()) == ["a\n", "1\n"]


def test_limits_are_validated() -> None:
    """A bad limit names the field and the value."""
    with pytest.raises(HarnessgridError, match=r"SandboxLimits\.wall_s=0"):
        SandboxLimits(wall_s=0)
    with pytest.raises(HarnessgridError, match="max_procs"):
        SandboxLimits(max_procs=True)


# ---------------------------------------------------------------- isolation


def test_host_secrets_are_not_visible(sb: Sandbox, tmp_path: Path) -> None:
    """The host's home, /work, /tmp, /home and /etc secrets do not exist inside the sandbox.

    /etc holds only an allow-list (passwd, ld.so.cache, ...); /root exists only as the parent of
    the read-only interpreter prefix when the interpreter lives there.
    """
    marker = tmp_path / "host-tmp-marker"
    marker.write_text("host")
    assert sb.run_sync("cat /etc/passwd > /dev/null").ok, "allow-listed /etc files are readable"
    for path in ["/work", "/home", "/etc/shadow", "/etc/ssh", str(marker), str(Path.cwd())]:
        assert sb.run_sync(f"test -e {path}").exit_code == 1, path
    assert sb.run_sync("ls -A /tmp").stdout == "", "/tmp is a private, empty tmpfs"
    home = Path.home()
    python_prefix = os.path.realpath(sys.base_prefix)
    allowed = set()
    if python_prefix.startswith(str(home) + "/"):
        allowed.add(Path(python_prefix).relative_to(home).parts[0])
    inside = sb.run_sync(f"ls -A {home} 2>/dev/null").stdout.split()
    assert set(inside) <= allowed, inside
    host_entries = set(os.listdir(home)) - allowed
    assert not host_entries & set(inside)


def test_system_is_read_only(sb: Sandbox, ws: Workspace) -> None:
    """Only the workspace (and the private /tmp and /dev/shm) can be written; the system
    cannot."""
    for path in ["/usr/hg", "/etc/hg", "/hg", "/bin/hg", "/proc/hg", "/dev/hg"]:
        result = sb.run_sync(f"touch {path}")
        assert result.exit_code != 0, path
    assert sb.run_sync("touch /tmp/ok && touch /dev/shm/ok && touch /workspace/ok").ok
    assert ws.exists("ok")


def test_commands_are_unprivileged(sb: Sandbox) -> None:
    """Commands hold no capabilities and run with no_new_privs (setuid binaries are inert)."""
    status = sb.run_sync("grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs)' /proc/self/status").stdout
    assert "CapEff:\t0000000000000000" in status
    assert "CapPrm:\t0000000000000000" in status
    assert "NoNewPrivs:\t1" in status
    if IS_ROOT:
        assert sandbox_uid(sb) >= sandbox_module._UID_BASE


def test_the_sandbox_uid_has_a_name_and_host_users_stay_out(sb: Sandbox, ws: Workspace) -> None:
    """Commands run as a uid the host's /etc/passwd does not list; the sandbox's own account
    files name it (``whoami``, ``id``, ``ls -l``, ``~``, ``getent``) - without an entry every
    bash start also fell through to the next NSS module - and carry only the host's system
    accounts, not its real users."""
    uid = sandbox_uid(sb)
    assert sb.run_sync("whoami").stdout == "agent\n"
    assert sb.run_sync("id").stdout.startswith(f"uid={uid}(agent) gid=")
    assert sb.run_sync("ls -l hello.txt").stdout.split()[2:4] == ["agent", "agent"]
    assert sb.run_sync("echo ~; getent passwd agent | cut -d: -f3").stdout == f"/tmp\n{uid}\n"
    assert sb.run_sync("getent group agent").ok
    assert sb.run_sync("test -w /etc/passwd").exit_code == 1, "the account files are read-only"
    inside = [line.split(":") for line in sb.run_sync("cat /etc/passwd").stdout.splitlines()]
    real_users = [f[0] for f in inside if 1000 <= int(f[2]) < 65534 and int(f[2]) != uid]
    assert real_users == []
    assert inside[0][:3:2] == ["root", "0"], "system accounts are kept"


def test_no_network(sb: Sandbox) -> None:
    """A server listening on the host's loopback cannot be reached from inside."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        probe = (
            "import socket,sys\n"
            "s=socket.socket(); s.settimeout(2)\n"
            f"try: s.connect(('127.0.0.1',{port}))\n"
            "except OSError as e: print('refused', e); sys.exit(1)\n"
            "print('connected')\n"
        )
        result = sb.run_sync(f"python3 -c {shlex.quote(probe)}")
        assert result.exit_code == 1, result
        assert "refused" in result.stdout, result
        interfaces = sb.run_sync("cat /proc/net/dev").stdout
        assert [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]] == ["lo"]
    finally:
        server.close()


def test_symlink_escape_via_shell_is_refused_by_file_tools(sb: Sandbox, ws: Workspace) -> None:
    """The shell may plant links to /etc; the host-side file tools refuse to follow them out."""
    assert sb.run_sync("ln -s /etc etc && ln -s /etc/passwd pw && ln -s ../../.. up").ok
    for path in ["etc/passwd", "pw", "up/etc/passwd"]:
        with pytest.raises(PathEscapeError):
            ws.read_text(path)
    with pytest.raises(PathEscapeError):
        ws.write_text("etc/evil", "x")
    assert ws.search("root") == [], "search does not follow links out either"
    assert sb.run_sync("cat ../../etc/shadow").exit_code != 0, "'..' in the shell stays inside"


def test_two_concurrent_sandboxes_are_isolated(tmp_path: Path) -> None:
    """Two episodes in one event loop see neither each other's workspace nor processes."""
    ws_a = Workspace.create({"who": "a\n"}, base_dir=tmp_path)
    ws_b = Workspace.create({"who": "b\n"}, base_dir=tmp_path)

    async def both() -> tuple[list[str], list[str]]:
        async with Sandbox(ws_a, FAST) as a, Sandbox(ws_b, FAST) as b:
            await a.run("sleep 30 > /dev/null 2>&1 &")  # killed at once, but try anyway
            results = await asyncio.gather(
                a.run(f"cat who; ls {ws_b.root} 2>&1; ls /proc | grep -c '^[0-9]'"),
                b.run(f"cat who; ls {ws_a.root} 2>&1; ls /proc | grep -c '^[0-9]'"),
            )
            return results[0].stdout.splitlines(), results[1].stdout.splitlines()

    out_a, out_b = asyncio.run(both())
    assert out_a[0] == "a"
    assert out_b[0] == "b"
    assert "No such file or directory" in out_a[1]
    assert "No such file or directory" in out_b[1]
    # server + sh + ls + grep: nothing of the other sandbox, nothing of the host
    assert int(out_a[-1]) <= 5
    assert int(out_b[-1]) <= 5
    ws_a.cleanup()
    ws_b.cleanup()


def test_extra_ro_binds_mount_read_only(ws: Workspace, tmp_path: Path) -> None:
    """The grader's reward/ folder appears read-only inside, and leaves no trace afterwards."""
    reward = tmp_path / "reward"
    reward.mkdir()
    (reward / "check.sh").write_text("echo graded\n")
    with Sandbox(ws, FAST, extra_ro_binds={reward: "/workspace/reward"}) as sb:
        assert sb.run_sync("sh reward/check.sh").stdout == "graded\n"
        assert sb.run_sync("touch reward/x").exit_code != 0
        assert sb.run_sync("rm reward/check.sh").exit_code != 0
    assert (reward / "check.sh").exists()
    assert not (ws.root / "reward").exists(), "the mountpoint made for the bind is removed"
    with pytest.raises(HarnessgridError, match="does not exist"):
        Sandbox(ws, FAST, extra_ro_binds={tmp_path / "missing": "/workspace/reward"})


def test_custom_mount_path(tmp_path: Path) -> None:
    """Tasks that expect e.g. /root/.openclaw/workspace get their workspace there."""
    with (
        Workspace.create(
            {"a": "1"}, base_dir=tmp_path, mount_path="/root/.openclaw/workspace"
        ) as ws,
        Sandbox(ws, FAST) as sb,
    ):
        assert sb.run_sync("pwd; cat a").stdout == "/root/.openclaw/workspace\n1"
    with (
        Workspace.create(base_dir=tmp_path, mount_path="/usr/local/ws") as ws,
        pytest.raises(HarnessgridError, match="would hide or sit inside /usr"),
    ):
        Sandbox(ws)


@pytest.mark.parametrize("where", ["interpreter", "above it", "tmp"])
def test_a_workspace_cannot_shadow_what_the_sandbox_runs(tmp_path: Path, where: str) -> None:
    """Found: a task's mount point over the interpreter's directory made a file the task
    ships run as the sandbox's first process (uid 0, with its capabilities)."""
    prefix = os.path.realpath(sys.base_prefix)
    mount = {"interpreter": os.path.join(prefix, "bin"), "above it": os.path.dirname(prefix),
             "tmp": "/tmp/ws"}[where]
    files = {"bin/python3": "#!/bin/sh\necho owned > /proof\n"}
    with (
        Workspace.create(files, base_dir=tmp_path, mount_path=mount) as ws,
        pytest.raises(HarnessgridError, match="which the sandbox needs"),
    ):
        Sandbox(ws)


# ---------------------------------------------------------------- limits


def test_infinite_loop_times_out(ws: Workspace) -> None:
    """A command past its wall-clock limit is killed and reported as timed out: by the call's
    ``timeout_s`` (its message names 1 s), not the sandbox's own limit (HANG_S)."""
    with Sandbox(ws, PATIENT) as sb:
        result = sb.run_sync("while :; do :; done", timeout_s=1)
        assert result.timed_out
        assert result.killed == "timeout"
        assert result.exit_code is None
        assert "longer than the 1 s time limit" in result.stderr, result.stderr
        assert sb.run_sync("echo next").stdout == "next\n"


def test_cpu_limit(ws: Workspace) -> None:
    """RLIMIT_CPU stops a busy process before the (much longer) wall-clock limit: ``killed``
    says which limit acted, so a loaded machine (less CPU per second) changes nothing."""
    with Sandbox(ws, SandboxLimits(cpu_s=1, wall_s=HANG_S)) as sb:
        result = sb.run_sync("python3 -c 'while True: pass'")
    assert result.killed == "cpu"
    assert result.exit_code == 128 + signal.SIGXCPU


def test_fork_bomb_is_contained(ws: Workspace) -> None:
    """RLIMIT_NPROC (on a uid of the sandbox's own) stops a fork bomb; the host can still
    start processes, the command ends with a clear result at its timeout (its message names
    3 s, not the sandbox's HANG_S), nothing survives."""
    with Sandbox(ws, PATIENT) as sb:
        uid = sandbox_uid(sb)
        result = sb.run_sync("bomb() { bomb | bomb & }; bomb; sleep 100", timeout_s=3)
        assert result.timed_out
        assert "longer than the 3 s time limit" in result.stderr
        # sh says "Cannot fork", bash "fork: retry: Resource temporarily unavailable"
        assert "Cannot fork" in result.stderr or "fork: retry" in result.stderr
        subprocess.run(["true"], check=True, timeout=HANG_S)  # the host can still fork
        assert sb.run_sync("echo alive").stdout == "alive\n"
        if IS_ROOT:
            assert processes_of(uid) == [sb.server_pid]


def test_huge_output_is_truncated_with_bounded_memory(ws: Workspace) -> None:
    """1 GB of output: the first output_bytes are kept, the command is killed (``killed``
    says by the output limit; the wall limit is out of reach), and neither the server nor the
    host buffers the rest."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Sandbox(ws, PATIENT) as sb:
        result = sb.run_sync("head -c 1000000000 /dev/zero | tr '\\0' a")
    assert result.truncated
    assert result.killed == "output_limit"
    assert len(result.stdout) == FAST.output_bytes
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert grown_kb < 50_000, f"host RSS grew {grown_kb} kB"


def test_moderate_overflow_is_truncated_but_runs_to_completion(sb: Sandbox) -> None:
    """A little over the cap: output is cut, the command still finishes with its exit code."""
    result = sb.run_sync("head -c 1500000 /dev/zero | tr '\\0' b; echo done >&2; exit 4")
    assert result.truncated
    assert result.killed is None
    assert result.exit_code == 4
    assert len(result.stdout) + len(result.stderr.split("[sandbox]")[0]) <= FAST.output_bytes
    assert "output truncated" in result.stderr


def test_memory_hog_is_stopped(ws: Workspace) -> None:
    """One process is held by RLIMIT_AS; several together by the polled RSS limit."""
    with Sandbox(ws, SandboxLimits(memory_mb=200, wall_s=HANG_S)) as sb:
        single = sb.run_sync("python3 -c 'b = bytearray(400 << 20)'")
        assert single.exit_code != 0
        assert "MemoryError" in single.stderr
        # Each hog holds its memory until the wall limit: however slowly they start, they
        # are together over the limit, and only the RSS check can end them before HANG_S.
        hog = f"python3 -c 'import time; b = b\"x\" * (90 << 20); time.sleep({HANG_S})'"
        many = sb.run_sync(f"for i in 1 2 3 4; do {hog} & done; wait")
        assert many.killed == "memory"
        assert many.exit_code is None
        assert "memory" in many.stderr


def test_disk_filling_is_contained(ws: Workspace) -> None:
    """Per-file size is capped by RLIMIT_FSIZE, the whole workspace by the quota; a command
    that only deletes is still allowed when over the quota."""
    limits = SandboxLimits(workspace_mb=64, file_size_mb=16, wall_s=30)
    with Sandbox(ws, limits) as sb:
        big = sb.run_sync("head -c 20M /dev/zero > big; echo $?")
        assert "File size limit exceeded" in big.stderr
        assert (ws.root / "big").stat().st_size == 16 << 20
        fill = sb.run_sync("i=0; while :; do i=$((i+1)); head -c 8M /dev/zero > f$i; done")
        assert fill.killed == "disk_quota", fill
        assert "quota" in fill.stderr
        assert "delete files" in fill.stderr
        used = sum(p.stat().st_blocks * 512 for p in ws.root.rglob("*") if p.is_file())
        assert used < 600 << 20, f"workspace grew to {used >> 20} MB"
        cleanup = sb.run_sync("rm -f f* big && echo cleaned")
        assert cleanup.ok
        assert cleanup.stdout == "cleaned\n"
        assert sb.run_sync("head -c 1M /dev/zero > small && echo fine").stdout == "fine\n"


def test_private_tmp_is_size_capped(ws: Workspace) -> None:
    """/tmp is a tmpfs of tmp_mb: filling it fails with ENOSPC instead of eating host RAM."""
    with Sandbox(ws, SandboxLimits(tmp_mb=8)) as sb:
        result = sb.run_sync("head -c 20M /dev/zero > /tmp/fill")
    assert "No space left on device" in result.stderr


# ---------------------------------------------------------------- leftovers and failures


def test_background_processes_do_not_survive(sb: Sandbox) -> None:
    """Background jobs, setsid'd and double-forked daemons die when their command ends."""
    started = sb.run_sync(
        "sleep 300 & setsid sleep 301 & (sleep 302 &); nohup sleep 303 >/dev/null 2>&1 & echo ok"
    )
    assert started.stdout == "ok\n"
    left = sb.run_sync("ps -eo args | grep -c '^sleep'")
    assert left.stdout.strip() == "0"
    if IS_ROOT:
        assert processes_of(sandbox_uid(sb)) == [sb.server_pid]


@pytest.mark.skipif(not IS_ROOT, reason="as a normal user commands share the server's uid")
def test_commands_cannot_kill_or_trace_the_server(sb: Sandbox) -> None:
    """The server (PID 1) ignores signals from commands and refuses prlimit/ptrace/fd access,
    so an agent cannot turn its own failure into an infrastructure error."""
    attack = "kill -9 1; kill -INT 1; kill -TERM 1; prlimit --pid 1 --cpu=0:0; ls /proc/1/fd"
    sb.run_sync(attack)
    assert sb.run_sync("echo alive").stdout == "alive\n"


def test_the_server_itself_holds_no_capabilities(sb: Sandbox) -> None:
    """The server (PID 1) ends up with no capabilities, non-dumpable, as the sandbox uid with a
    saved uid of 0 (what makes prlimit on it fail); its start-up calls capset without the
    ctypes package, so this pins that the cheaper call still drops everything."""
    if not IS_ROOT:
        pytest.skip("uid switching happens only when run as root")
    uid = sandbox_uid(sb)
    assert sb.server_pid is not None
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{sb.server_pid}/status").read_text().splitlines())
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields[cap])
    assert fields["Uid"].split() == [str(uid), str(uid), "0", str(uid)]
    assert fields["Groups"].split() == []
    assert Path(f"/proc/{sb.server_pid}/status").stat().st_uid == 0  # not dumpable


def test_killed_server_raises_sandbox_error(ws: Workspace) -> None:
    """If the server dies underneath, run() raises SandboxError (an infrastructure failure),
    and the sandbox stays unusable rather than half-working."""
    with Sandbox(ws, FAST) as sb:
        assert sb.run_sync("true").ok
        pid = sb.server_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SandboxError, match="exited unexpectedly"):
            sb.run_sync("echo hi")
        with pytest.raises(SandboxError, match="not usable"):
            sb.run_sync("echo hi")
        assert not sb.running


def test_killed_server_during_async_command(ws: Workspace) -> None:
    """The async path reports a server death mid-command the same way."""

    async def episode() -> None:
        async with Sandbox(ws, FAST) as sb:
            pending = asyncio.create_task(sb.run("touch started && sleep 5"))
            deadline = time.monotonic() + HANG_S
            while not (ws.root / "started").exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)  # until the command runs: a condition, not a delay
            os.kill(sb.server_pid or 0, signal.SIGKILL)
            with pytest.raises(SandboxError):
                await pending

    asyncio.run(episode())


def test_workspace_ownership_is_restored(ws: Workspace) -> None:
    """While running, workspace files belong to the sandbox uid (host tools' new files too);
    after close they are handed back to their original owner."""
    if not IS_ROOT:
        pytest.skip("uid switching happens only when run as root")
    original = ws.root.stat().st_uid
    with Sandbox(ws, FAST) as sb:
        ws.write_text("by_tool/new.txt", "from the host tool")
        assert sb.run_sync("echo more >> by_tool/new.txt && mkdir d && touch d/f").ok
    for path in [ws.root, ws.root / "by_tool" / "new.txt", ws.root / "d" / "f"]:
        assert path.stat().st_uid == original, path


def test_a_discarded_workspace_is_not_handed_back(ws: Workspace) -> None:
    """Closing with ``discard_workspace`` (a pool deletes the workspace right after) skips the
    chown walk: files stay with the sandbox uid, and host tools stop re-owning new files."""
    if not IS_ROOT:
        pytest.skip("uid switching happens only when run as root")
    original = ws.root.stat().st_uid
    with Sandbox(ws, FAST) as sb:
        uid = sandbox_uid(sb)
        assert sb.run_sync("touch made").ok
        sb.close_sync(discard_workspace=True)
    assert (ws.root / "made").stat().st_uid == uid != original
    ws.write_text("after.txt", "written after close")
    assert (ws.root / "after.txt").stat().st_uid == os.geteuid()


def test_missing_bwrap_says_how_to_install(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bwrap the error names the packages and the unsafe opt-out."""
    check_bwrap.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        assert check_bwrap() is not None
        assert not sandbox_available()
        with pytest.raises(SandboxError) as info:
            Sandbox(ws)
        text = str(info.value)
        assert "apt-get install -y bubblewrap" in text
        assert "dnf install bubblewrap" in text
        assert "unsafe-no-sandbox" in text
    finally:
        monkeypatch.undo()
        check_bwrap.cache_clear()


def test_the_availability_probe_mounts_no_tree_that_holds_workspaces(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the probe bound ``/`` recursively, copying every mount under it; a workspace
    mount of another sandbox that went away meanwhile failed it ("Unable to apply mount flags:
    remount /newroot/tmp/hg-ws-...: No such file or directory"), and the whole process then
    refused to run, naming bwrap. The race is too narrow to provoke on demand, so the check is
    on the probe's command: it binds the system directories, none of which holds the
    directories workspaces are made in."""
    import tempfile

    ran: list[list[str]] = []
    real_run = subprocess.run

    def recording(argv: list[str], *args: object, **kwargs: object) -> object:
        ran.append(list(argv))
        return real_run(argv, *args, **kwargs)  # type: ignore[call-overload]

    check_bwrap.cache_clear()
    monkeypatch.setattr(subprocess, "run", recording)
    try:
        assert check_bwrap() is None
    finally:
        monkeypatch.undo()
        check_bwrap.cache_clear()
    [argv] = ran
    bound = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
    assert "/usr" in bound
    homes = {tempfile.gettempdir(), "/tmp", "/dev/shm", os.path.expanduser("~")}
    for source in bound:
        assert not any(home == source or home.startswith(source.rstrip("/") + "/")
                       for home in homes), source


def test_unsafe_mode_warns_and_still_limits(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unsafe_no_sandbox warns loudly once, runs in the host directory, and keeps the limits
    it can (timeout, output cap, cleanup of background jobs); binds become symlinks."""
    reward = tmp_path / "reward"
    reward.mkdir()
    (reward / "check.sh").write_text("echo graded\n")
    monkeypatch.setattr(sandbox_module, "_warned_unsafe", False)
    with pytest.warns(RuntimeWarning, match="WITHOUT a sandbox"):
        sb = Sandbox(ws, PATIENT, unsafe_no_sandbox=True,
                     extra_ro_binds={reward: "/workspace/reward"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Sandbox(ws, FAST, unsafe_no_sandbox=True)  # only the first one warns
    with sb:
        assert sb.run_sync("pwd").stdout.strip() == str(ws.root)
        assert sb.run_sync("sh reward/check.sh").stdout == "graded\n"
        assert sb.run_sync("sleep 5", timeout_s=0.5).timed_out
        assert sb.run_sync("head -c 50000000 /dev/zero").killed == "output_limit"
        # Each daemon records its own pid: counting processes by pattern (pgrep) miscounted
        # under load, and a pid file names exactly the processes this run started.
        code = "import os, time; open('pids', 'a').write(f'{os.getpid()}\\n'); time.sleep(300)"
        daemon = f"python3 -c {shlex.quote(code)}"
        started = sb.run_sync(
            # Wait (bounded by HANG_S) for both to start: python start-up is slow on a loaded
            # machine.
            f"setsid {daemon} & {daemon} & "
            f"for i in $(seq {HANG_S * 10}); do [ \"$(wc -l < pids 2>/dev/null)\" = 2 ] && break; "
            "sleep 0.05; done; for p in $(cat pids); do kill -0 $p && echo alive; done"
        )
        assert started.stdout == "alive\nalive\n", "both were running while the command ran"
        pids = [int(line) for line in (ws.root / "pids").read_text().split()]
        for pid in pids:  # gone now (or, if the pid was reused at once, no longer our daemon)
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            assert b"time.sleep(300)" not in cmdline, f"daemon {pid} survived its command"
    assert not os.path.lexists(ws.root / "reward"), "the link is removed at close"


def test_command_longer_than_argv_allows(ws: Workspace) -> None:
    """A 300 KB command (a big heredoc, as an agent writing a file through a shell-only
    interface produces) runs: the kernel's 128 KiB argv limit does not apply to it."""
    content = "line of text\n" * 25_000
    command = f"cat > big.txt <<'EOF'\n{content}EOF\nwc -c < big.txt; exit 3"
    with Sandbox(ws, FAST) as sb:
        result = sb.run_sync(command)
        assert result.exit_code == 3
        assert result.stdout.strip() == str(len(content))
        assert sb.run_sync("ls -A /tmp").stdout == ""  # the script file is gone
    assert (ws.root / "big.txt").read_text() == content


@pytest.mark.skipif(not IS_ROOT, reason="the private uid exists only when run as root")
def test_async_close_leaves_no_process_of_the_uid(ws: Workspace) -> None:
    """After ``await close()`` nothing of the sandbox runs any more, so the uid it leased can
    be handed to the next sandbox without inheriting processes (or their RLIMIT_NPROC count)."""

    async def episode() -> int:
        sb = Sandbox(ws, FAST)
        await sb.start()
        uid = int((await sb.run("id -u")).stdout)
        await sb.run("(sleep 30 &) ; sleep 30 & true")
        await sb.close()
        return uid

    for _ in range(3):
        assert processes_of(asyncio.run(episode())) == []


def _gone(uid: int, within_s: float = 10.0) -> bool:
    """Whether no process of ``uid`` is left, waiting (up to ``within_s``) for the kernel to
    finish killing them: the check is that they end, not how fast."""
    deadline = time.monotonic() + within_s
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.skipif(not IS_ROOT, reason="the private uid exists only when run as root")
def test_a_cancelled_command_leaves_no_process_of_the_uid(ws: Workspace) -> None:
    """Cancelled mid-command (Ctrl-C), close must kill bwrap: the server and its command must
    end with it, before the uid is leased again (they used to live on, reparented to init)."""

    async def episode() -> int:
        sb = Sandbox(ws, FAST)
        await sb.start()
        uid = int((await sb.run("id -u")).stdout)
        running = asyncio.create_task(sb.run("sleep 30"))
        deadline = time.monotonic() + HANG_S
        while len(processes_of(uid)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # until the command runs beside the server
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await sb.close()
        assert processes_of(uid) == []  # close waited for the end
        return uid

    asyncio.run(episode())


@pytest.mark.skipif(not IS_ROOT, reason="the private uid exists only when run as root")
def test_the_sandbox_dies_with_bwrap(ws: Workspace) -> None:
    """bwrap killed from outside (its host process died: --die-with-parent) takes the server and
    its running command along, although the server changed uid (which clears the parent-death
    signal bwrap set)."""
    with Sandbox(ws, PATIENT) as sb:
        uid = sandbox_uid(sb)
        assert sb._proc is not None
        busy = threading.Thread(target=lambda: _ignore(sb.run_sync, f"sleep {HANG_S}"))
        busy.start()  # the server is busy with a command, not reading its (host) stdin
        deadline = time.monotonic() + HANG_S
        while len(processes_of(uid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(sb._proc.pid, signal.SIGKILL)
        # Generous, yet far less than the command's HANG_S: survivors would still be there.
        assert _gone(uid, within_s=HANG_S / 5)
        busy.join()


def _ignore(call: Any, *args: Any) -> None:
    with contextlib.suppress(SandboxError):
        call(*args)
