"""Copies of an agent's workspace carry no privilege (issue 38, findings 4, 5 and 7).

Whoever copies a workspace - the grader's copy (pooled: made while the sandbox is idle but
up), a kept result (``keep_copy``), ``harnessgrid tasks``' regrading - does it as the host
process, root in production. An agent that leaves set-uid and set-gid files, a sticky or a
world-writable folder, or opens the workspace itself to everyone (``chmod 777 /workspace``)
must not find any of that in root's copy; links out of a grading copy must lead nowhere,
regrading included. Real bubblewrap episodes through the mini-bash adapter.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from shell_agent import ShellAgent

import harnessgrid as hg
from harnessgrid.cli.tasks_cmd import _regrade
from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugins.adapters.mini_bash import SENTINEL, MiniBashHarness
from harnessgrid.sandboxing.grading_io import DANGLING_TARGET
from harnessgrid.sandboxing.sandbox import check_bwrap, sandbox_available
from harnessgrid.sandboxing.sandbox_pool import SandboxPool
from harnessgrid.sandboxing.workspace import Workspace, inert_mode
from harnessgrid.tasks import FunctionGrader, Task

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

#: What an agent leaves to be copied: set-id files, a sticky world-writable folder, a folder
#: shut to others, the workspace itself opened to everyone, a link out to the host.
PRIVILEGE_BAIT = ("cp /bin/true su && chmod 6755 su && cp /bin/true sg && chmod 2711 sg && "
                  "mkdir -p open/deep shut && chmod 1777 open && chmod 777 open/deep && "
                  "chmod 700 shut && echo x > open/deep/f && chmod 666 open/deep/f && "
                  "ln -s /etc/passwd out && chmod 777 .")


def _agent(*commands: str) -> ShellAgent:
    return ShellAgent(*commands, finish=f"echo {SENTINEL}")


def _modes(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry's (mode bits, uid, type) below and including ``root``."""
    out = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        out[str(path.relative_to(root))] = (stat.S_IMODE(st.st_mode), st.st_uid,
                                            stat.S_IFMT(st.st_mode))
    return out


def _assert_inert(modes: dict[str, tuple[int, int, int]]) -> None:
    for path, (mode, uid, kind) in modes.items():
        if kind == stat.S_IFLNK:
            continue
        assert mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX) == 0, (path, oct(mode))
        assert mode & 0o022 == 0, (path, oct(mode))  # nobody but the owner writes
        assert uid == os.geteuid(), path  # the copier's own, not the agent's uid
        if kind == stat.S_IFDIR:
            assert mode in (0o755, 0o700), (path, oct(mode))


def test_the_pooled_grading_copy_is_inert() -> None:
    """Finding 4: the pooled copy is made while the sandbox is idle but up; it held root-owned
    ``-rwsr-xr-x`` and ``-rwxr-sr-x`` files and the agent's 0777 top folder."""
    seen: dict[str, Any] = {}

    def grade(workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        seen.update(_modes(workspace))
        seen["out -> "] = os.readlink(workspace / "out")
        return {"ran": 1.0}

    task = Task(id="bait", instruction="leave privileged files", grader=FunctionGrader(grade))

    async def episode() -> hg.Trajectory:
        async with SandboxPool(2) as pool:
            return await run_episode(MiniBashHarness(), task, _agent(PRIVILEGE_BAIT), pool=pool)

    traj = asyncio.run(episode())
    assert traj.score == 1.0, traj.grade_error
    link = seen.pop("out -> ")
    assert link == DANGLING_TARGET
    assert {"su", "sg", "open/deep/f", "shut", "."} <= set(seen)
    assert seen["shut"][0] == 0o700
    assert seen["su"][0] == 0o755
    assert seen["sg"][0] == 0o711
    _assert_inert(seen)


def test_a_kept_copy_is_inert(tmp_path: Path) -> None:
    """Finding 5: ``keep_copy`` left a root-owned 0777 folder without the sticky bit when the
    agent ran ``chmod 777 /workspace``: any local user could replace files in a kept result."""
    project = tmp_path / "project"
    project.mkdir()
    traj = hg.run_agent("leave privileged files", project, harness=MiniBashHarness(),
                        policy=_agent(PRIVILEGE_BAIT), keep_copy=True)
    kept = Path(traj.meta["workspace"])
    try:
        modes = _modes(kept)
        assert {"su", "sg", "open/deep/f", "."} <= set(modes)
        _assert_inert(modes)
        assert os.readlink(kept / "out") == "/etc/passwd"  # the user's result, link as made
    finally:
        shutil.rmtree(kept)


def test_regrading_reads_an_inert_copy_whose_links_lead_nowhere(tmp_path: Path) -> None:
    """Finding 7: ``harnessgrid tasks`` regrading copied the workspace and graded it without
    neutralising links: a link to a host file was followed by the grader."""
    project = tmp_path / "ws"
    project.mkdir()
    (project / "out").symlink_to("/etc/passwd")
    (project / "su").write_text("x")
    (project / "su").chmod(0o4777)
    project.chmod(0o777)
    seen: dict[str, Any] = {}

    def grade(workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        seen["link"] = os.readlink(workspace / "out")
        seen["reaches the host"] = (workspace / "out").exists()
        seen.update(_modes(workspace))
        return {"ran": 1.0}

    task = Task(id="regrade", instruction="-", grader=FunctionGrader(grade))
    ws = Workspace.open(project, in_place=True)
    traj = hg.Trajectory(episode_id="e", harness="x", task_id="regrade", policy="p",
                         termination="finished")
    harness = hg.resolve_harness("S0-T0-O0-C0-W0")
    outcome = asyncio.run(_regrade(task, harness, ws, traj, timeout_s=60))
    assert outcome == '{"ran": 1.0}'
    assert seen.pop("link") == DANGLING_TARGET
    assert seen.pop("reaches the host") is False
    _assert_inert(seen)


@pytest.mark.parametrize(("mode", "copied"), [
    (stat.S_IFREG | 0o6755, 0o755), (stat.S_IFREG | 0o4777, 0o755), (stat.S_IFREG | 0o2711, 0o711),
    (stat.S_IFREG | 0o1666, 0o644), (stat.S_IFREG | 0o400, 0o400), (stat.S_IFDIR | 0o1777, 0o755),
    (stat.S_IFDIR | 0o2775, 0o755), (stat.S_IFDIR | 0o700, 0o700), (stat.S_IFDIR | 0o751, 0o700),
    (stat.S_IFDIR | 0o555, 0o755),
])
def test_inert_modes(mode: int, copied: int) -> None:
    assert inert_mode(mode) == copied
