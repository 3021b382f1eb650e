"""Issue 11: the sandbox against an agent that attacks it (real bubblewrap, real episodes).

Each test plays one attack and checks two things: the host is untouched (nothing stored past
the quota, read, reached or left running), and the attack is the agent's own failure - a
failed or killed command with a clear message, a scored episode - never an infrastructure
error. The quota attacks run twice: with the kernel-enforced workspace (a capped tmpfs, as
root) and with the server's polling, which is what a host without mount rights gets.
Plain limits (fork bombs, memory, /tmp, output, loopback) are in ``test_sandbox.py``; links
planted for graders in ``test_grader_attacks.py``.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from shell_agent import ShellAgent

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugins.adapters.mini_bash import MiniBashHarness
from harnessgrid.plugins.tasks.examples import UPPER_TASK
from harnessgrid.sandboxing.sandbox import Sandbox, SandboxLimits, check_bwrap, sandbox_available
from harnessgrid.sandboxing.scratch import mounted_tmpfs, walk_fd
from harnessgrid.sandboxing.workspace import Workspace

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

IS_ROOT = os.geteuid() == 0
MB = 1 << 20
QUOTA_MB, MAX_FILES = 5, 300
QUOTA = SandboxLimits(workspace_mb=QUOTA_MB, max_files=MAX_FILES, file_size_mb=64, wall_s=20,
                      cpu_s=20, memory_mb=512, max_procs=64)
#: What polling lets through before it notices: a few ticks of the loops below (1 MB / 20 ms).
POLL_SLACK = 8 * MB


def stored(root: Path) -> tuple[int, int]:
    """(bytes allocated, entries) under ``root`` as the host sees them, hard links once."""
    total, entries, seen = 0, 0, set()
    for _, _, st, _ in walk_fd(root):
        entries += 1
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total, entries


@pytest.fixture(params=["kernel", "polling"])
def quota_ws(request: pytest.FixtureRequest, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh workspace; "polling" refuses the capped mount, as a host without mount rights
    (not root) would - the one stand-in here, since these tests run as root."""
    if request.param == "kernel" and not IS_ROOT:
        pytest.skip("the kernel-enforced quota needs root (mount)")
    if request.param == "polling":
        monkeypatch.setattr(Workspace, "limit_size", lambda self, max_bytes, max_files: False)
    ws = Workspace.create({"keep.txt": "task file\n"}, base_dir=tmp_path)
    try:
        yield ws
    finally:
        root = ws.root
        ws.cleanup()
        assert not os.path.lexists(root), "nothing left on the host"
        assert not mounted_tmpfs(root), "nothing left on the host"


def assert_quota_held(ws: Workspace, result_stderr: str, killed: str | None) -> None:
    kernel = mounted_tmpfs(ws.root)
    used, entries = stored(ws.root)
    assert killed == "disk_quota", result_stderr[-500:]
    assert "over its quota" in result_stderr
    assert "delete files" in result_stderr
    assert used <= QUOTA_MB * MB + (0 if kernel else POLL_SLACK), f"{used / MB:.1f} MB stored"
    assert entries <= MAX_FILES + (0 if kernel else 5000)


# ------------------------------------------------------------------ the quota's four bypasses

@pytest.mark.parametrize("mode", ["600", "000"])
def test_writing_through_a_file_opened_before_its_directory_was_locked(
        quota_ws: Workspace, mode: str) -> None:
    """(a) The file is opened, then its directory loses r/x: the quota still sees it."""
    with Sandbox(quota_ws, QUOTA) as sb:
        result = sb.run_sync(f"mkdir d && exec 3>d/f && chmod {mode} d && "
                             "for i in $(seq 200); do head -c 1M /dev/zero >&3; sleep 0.02; done")
        assert_quota_held(quota_ws, result.stderr, result.killed)
        assert sb.run_sync("echo still usable").stdout == "still usable\n"


def test_files_below_a_path_longer_than_path_max(quota_ws: Workspace) -> None:
    """(b) 25 levels of 200-byte names (5 KB of path): counted, and removed at cleanup."""
    deep = "d=$(printf 'a%.0s' $(seq 200)); for i in $(seq 25); do mkdir $d && cd $d || exit 9; done"
    with Sandbox(quota_ws, QUOTA) as sb:
        result = sb.run_sync(
            f"{deep}; for i in $(seq 200); do head -c 1M /dev/zero > f$i; sleep 0.02; done")
        assert result.exit_code != 9
        assert_quota_held(quota_ws, result.stderr, result.killed)


def test_sparse_files_and_hard_links_do_not_inflate_the_grading_copy(
        quota_ws: Workspace, tmp_path: Path) -> None:
    """(c) 2 GB of apparent size in sparse files and 20 links to one file stay within the
    quota when the workspace is copied for grading: holes stay holes, links stay links."""
    with Sandbox(quota_ws, QUOTA) as sb:
        sb.run_sync("head -c 2M /dev/urandom > real; for i in $(seq 20); do ln real l$i; done; "
                    "for i in $(seq 40); do truncate -s 50M s$i; done")
    copy = quota_ws.copy_to(tmp_path / "copy")
    try:
        used, _ = stored(copy.root)
        assert used <= QUOTA_MB * MB, f"the copy holds {used / MB:.1f} MB"
        assert (copy.root / "real").stat().st_nlink == 21
        sparse = [p for p in copy.root.iterdir() if p.name.startswith("s")]
        # Polling may kill `truncate` between its create and its resize (a 0-byte file): the
        # copy must have every file at its original apparent size, holes kept.
        assert any(p.stat().st_size == 50 * MB for p in sparse)
        assert all(p.stat().st_size == (quota_ws.root / p.name).stat().st_size for p in sparse)
    finally:
        copy.cleanup()


def test_sparse_files_count_at_their_apparent_size_when_polling(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Polling counts what a copy could become: a 50 MB sparse file is over a 5 MB quota."""
    monkeypatch.setattr(Workspace, "limit_size", lambda self, max_bytes, max_files: False)
    with Workspace.create({}, base_dir=tmp_path) as ws, Sandbox(ws, QUOTA) as sb:
        result = sb.run_sync("truncate -s 50M s; sleep 0.5")
        assert result.killed == "disk_quota" or "over its quota" in result.stderr, result


def test_file_count_is_capped(quota_ws: Workspace) -> None:
    """(d) Empty files cost no bytes but an inode each: max_files holds them."""
    with Sandbox(quota_ws, QUOTA) as sb:
        result = sb.run_sync("mkdir m && cd m && for i in $(seq 100000); do : > f$i; done")
        assert_quota_held(quota_ws, result.stderr, result.killed)
        assert sb.run_sync("rm -rf m && echo cleaned").stdout == "cleaned\n"


def test_quota_attack_in_an_episode_is_scored_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real episode: the agent fills its workspace, sees why its command died, the
    episode is graded (not sandbox_error), and no workspace stays in the temp directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    limits = EpisodeLimits(sandbox=QUOTA, max_turns=4)
    agent = Agent("for i in $(seq 200); do head -c 1M /dev/zero > f$i; sleep 0.02; done",
                  "mkdir -p x && exec 3>x/f && chmod 000 x && head -c 20M /dev/zero >&3")
    traj = asyncio.run(run_episode(MiniBashHarness(), UPPER_TASK, agent, limits))
    assert traj.termination not in ("sandbox_error", "internal_error"), traj.error
    assert traj.score is not None
    assert traj.grade_error is None
    assert "quota" in str(traj.model_dump())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("hg-")]


# ------------------------------------------------------------------ reaching the host

def test_no_host_process_or_server_internals_through_proc(tmp_path: Path) -> None:
    """Only the sandbox's own processes exist in /proc; the server (PID 1) cannot be read
    through /proc/1/root, /proc/1/environ or its fds."""
    with Workspace.create({}, base_dir=tmp_path) as ws, Sandbox(ws, QUOTA) as sb:
        pids = sb.run_sync("ls /proc | grep -c '^[0-9]'").stdout.strip()
        assert 0 < int(pids) <= 4, "the server, the shell and ls/grep only"
        probe = sb.run_sync("ls /proc/1/root/ ; cat /proc/1/environ; ls /proc/1/fd")
        assert probe.stdout == ""
        assert "Permission denied" in probe.stderr


def test_host_secrets_in_the_environment_do_not_reach_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """API keys in the host's environment are in neither the command's nor the server's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-1")
    monkeypatch.setenv("HF_TOKEN", "hf_host_secret_2")
    with Workspace.create({}, base_dir=tmp_path) as ws, Sandbox(ws, QUOTA) as sb:
        seen = sb.run_sync("env; cat /proc/self/environ /proc/1/environ 2>/dev/null; set")
    assert "host-secret" not in seen.stdout
    assert "host_secret" not in seen.stdout
    assert "OPENAI_API_KEY" not in seen.stdout
    assert "HF_TOKEN" not in seen.stdout


def test_no_route_but_loopback(tmp_path: Path) -> None:
    """Any address but loopback is unreachable at once (no interface, no route, no DNS)."""
    probe = ("import socket\nfor host in ('1.1.1.1', '10.0.0.1'):\n"
             "    s = socket.socket(); s.settimeout(2)\n"
             "    try: s.connect((host, 80)); print('reached', host)\n"
             "    except OSError as e: print('unreachable', e.errno)\n")
    with Workspace.create({}, base_dir=tmp_path) as ws, Sandbox(ws, QUOTA) as sb:
        result = sb.run_sync(f"python3 -c {shlex.quote(probe)}; getent hosts example.com")
    assert "reached" not in result.stdout
    assert result.stdout.count("unreachable") == 2


def test_links_out_of_the_workspace_reach_nothing_of_the_host(tmp_path: Path) -> None:
    """Host paths do not exist inside, so a symlink or hard link to them leads nowhere, and
    traversal (``../``, absolute paths) only meets the read-only sandbox system."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host data\n")
    before = secret.stat()
    with Workspace.create({}, base_dir=tmp_path) as ws, Sandbox(ws, QUOTA) as sb:
        attack = (f"ln {secret} hard; ln -s {secret} soft; cat soft; cat ../../{secret}; "
                  f"echo x > ../escape; echo x > /escape; ln /etc/passwd pw; echo x >> pw")
        result = sb.run_sync(attack)
        assert "host data" not in result.stdout
        assert not os.path.lexists(ws.root / "hard")
        assert not (ws.root.parent / "escape").exists()
    after = secret.stat()
    assert (after.st_nlink, after.st_mtime_ns, after.st_size) == (
        before.st_nlink, before.st_mtime_ns, before.st_size)
    assert "x" not in Path("/etc/passwd").read_text().splitlines()


@pytest.mark.skipif(not IS_ROOT, reason="the private uid exists only when run as root")
def test_daemons_do_not_outlive_the_sandbox(tmp_path: Path) -> None:
    """nohup, setsid and double-forked daemons are gone after their command and, whatever
    is started last, after close: no host process of the sandbox's uid remains."""
    with Workspace.create({}, base_dir=tmp_path) as ws:
        with Sandbox(ws, QUOTA) as sb:
            uid = int(sb.run_sync("id -u").stdout)
            daemons = "nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 & (sleep 303 &) ; true"
            sb.run_sync(daemons)
            assert sb.run_sync("ps -eo args | grep -c '^sleep 30'").stdout.strip() == "0"
            sb.run_sync(daemons)
        assert not [p for p in Path("/proc").iterdir()
                    if p.name.isdigit() and _owner(p) == uid]


def _owner(proc_dir: Path) -> int | None:
    try:
        return proc_dir.stat().st_uid
    except OSError:
        return None


# ------------------------------------------------------------------ helpers

Agent = ShellAgent


def test_helpers_count_what_is_stored(tmp_path: Path) -> None:
    """``stored`` counts hard links once and every entry: the quota checks rely on it."""
    (tmp_path / "a").write_bytes(b"x" * 8192)
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "d").mkdir()
    used, entries = stored(tmp_path)
    assert entries == 3
    assert 8192 <= used < 3 * 8192
    assert stat.S_ISDIR((tmp_path / "d").stat().st_mode)
