"""Temporary directories never outlive an evaluation: Ctrl-C removes them at once, and after a
``kill -9`` the next process removes what the dead one left (:mod:`harnessgrid.sandboxing.scratch`).

The evaluations are real ``harnessgrid eval`` processes with a policy plugin (installed as an
entry point) that waits forever, so episodes are in flight when the signal arrives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import sigint_default
from plugin_dist import write_dist_info

from harnessgrid.sandboxing.scratch import ScratchDir, scratch_dir, sweep_stale
from harnessgrid.sandboxing.workspace import Workspace

HANGING_POLICY = '''
import asyncio

from harnessgrid import hookimpl
from harnessgrid.registrations import PolicyBackend


class Hang:
    spec = "hang"
    context_limit = None

    async def act(self, request):
        await asyncio.sleep(3600)

    def count_tokens(self, messages):
        return 0


@hookimpl
def harnessgrid_policies():
    yield PolicyBackend(scheme="hang", description="Never answers.",
                        create=lambda rest, options: Hang())
'''


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("hg-"))


def start_eval(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "hang_policy.py").write_text(HANGING_POLICY)
    write_dist_info(plugin, "hg-hang", {"hang": "hang_policy"})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(plugin)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessgrid", "eval", "--policy", "hang", "--suites", "examples",
         "--settings", "in-space", "--harnesses", "S0-T0-O0-C0-W0,S1-T1-O1-C1-W1", "--runs",
         "1", "--concurrency", "4", "--out", str(tmp_path / "out"), "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    deadline = time.monotonic() + 60
    while sum(n.endswith(".lock") for n in leftovers(tmp)) < 4:  # four episodes in flight
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, leftovers(tmp)
        time.sleep(0.1)
    return proc, tmp


def test_ctrl_c_during_eval_leaves_no_workspace(tmp_path: Path) -> None:
    proc, tmp = start_eval(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert leftovers(tmp) == [], err.decode()[-2000:]


def test_workspaces_of_a_killed_eval_are_removed_by_the_next_process(tmp_path: Path) -> None:
    proc, tmp = start_eval(tmp_path)
    live = ScratchDir("hg-ws-", tmp)  # a live directory of this process: must survive
    proc.kill()
    proc.wait(timeout=30)
    stale = leftovers(tmp)
    assert sum(n.endswith(".lock") for n in stale) == 5  # kill -9 cleans nothing up itself
    assert sweep_stale(tmp, "hg-ws-") == 0  # once per process and place: this one swept it
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from harnessgrid.sandboxing.workspace import Workspace; "
         "Workspace.create({'a.txt': 'x'}, base_dir=Path(sys.argv[1])).cleanup()", str(tmp)],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert leftovers(tmp) == sorted([live.path.name, live.path.name + ".lock"])
    live.remove()
    assert leftovers(tmp) == []


def test_scratch_dirs_are_removed_and_unlocked(tmp_path: Path) -> None:
    with scratch_dir("hg-grade-", tmp_path) as path:
        (path / "sub").mkdir()
        (path / "sub" / "f").write_text("x")
        (path / "sub").chmod(0)  # an agent may leave unreadable directories
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".lock"]
    assert list(tmp_path.iterdir()) == []
    ws = Workspace.create({"a.txt": "x"}, base_dir=tmp_path)
    copy = ws.copy_to()
    assert copy.root.name.startswith("hg-ws-copy-")
    assert (copy.root / "a.txt").read_text() == "x"
    copy.cleanup()
    ws.cleanup()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("in_place", [True, False])
def test_a_users_directory_is_never_swept(tmp_path: Path, in_place: bool) -> None:
    """Only directories with a lock file of ours are ever removed."""
    mine = tmp_path / "hg-ws-mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    ws = Workspace.open(mine, in_place=in_place)
    ws.cleanup()
    sweep_stale(tmp_path, "hg-ws-")
    assert (mine / "keep.txt").read_text() == "keep"
