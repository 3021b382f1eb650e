"""Issue 11, item 4: in-process graders run on the host, so what the agent leaves in the
workspace must not lead them there. A symlink planted by the agent (to a host file, a host
directory, /dev/zero) is neutralized in the grading copy, and graders read through
:mod:`harnessgrid.sandboxing.grading_io`: regular files inside the workspace only, with a size
cap."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from shell_agent import ShellAgent

from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugins.adapters.mini_bash import SENTINEL, MiniBashHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.plugins.tasks.generated.common import text
from harnessgrid.sandboxing.grading_io import (
    DANGLING_TARGET,
    MAX_GRADED_FILE_BYTES,
    neutralize_links,
    read_bytes,
    read_text,
)
from harnessgrid.sandboxing.scratch import remove_tree
from harnessgrid.tasks import FunctionGrader, Task
from harnessgrid.trajectory import Trajectory


def Agent(*commands: str) -> ShellAgent:  # reads as the class it makes
    """The attacker; its last command also prints what the graders look for."""
    return ShellAgent(*commands, finish=f"echo {SENTINEL} && echo done")


def attack(task: Task, *commands: str) -> Trajectory:
    return asyncio.run(run_episode(MiniBashHarness(), task, Agent(*commands)))


# -- through real episodes: the agent plants the links in the sandbox --------------------------

def test_link_to_a_host_file_does_not_pass_the_built_in_task(tmp_path: Path) -> None:
    host = tmp_path / "answer.txt"
    host.write_text("HELLO WORLD\n")  # what the grader wants, sitting on the host
    traj = attack(UPPER_TASK, f"ln -s {host} out.txt")
    assert traj.grade_error is None, traj.grade_error
    assert traj.score == 0.0, traj.subscores


def test_link_to_a_host_directory_is_not_followed(tmp_path: Path) -> None:
    host = tmp_path / "notes"
    host.mkdir()
    (host / "found.txt").write_text("conf/app.ini\n")
    traj = attack(EDIT_TASK, f"ln -s {host} notes")
    assert traj.grade_error is None, traj.grade_error
    assert traj.subscores["finding_written"] == 0.0, traj.subscores


def test_a_naive_function_grader_cannot_reach_the_host_through_the_copy(tmp_path: Path) -> None:
    """The grading copy itself carries no link out: even a grader that reads with plain
    ``open`` (which it should not) sees nothing of the host."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")

    def naive(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        leaked = False
        for name in ("leak.txt", "dir/secret.txt"):
            try:
                with open(ws / name, "rb") as fh:  # bounded: a regression must not hang
                    leaked |= b"host secret" in fh.read(1000)
            except OSError:
                pass
        return {"no_leak": float(not leaked)}

    task = Task(id="leak", instruction="x", grader=FunctionGrader(naive))
    traj = attack(task, f"ln -s {secret} leak.txt && ln -s {tmp_path} dir")
    assert traj.grade_error is None, (traj.grade_error, traj.subscores)
    assert traj.score == 1.0, (traj.grade_error, traj.subscores)


_DEV_ZERO_EPISODE = textwrap.dedent("""
    import asyncio, json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a regression fails, not OOMs
    sys.path.insert(0, sys.argv[1])
    from test_grader_attacks import Agent
    from harnessgrid.plugins.adapters.mini_bash import MiniBashHarness
    from harnessgrid.plugins.tasks.examples import UPPER_TASK
    from harnessgrid.engine.runtime import run_episode
    traj = asyncio.run(run_episode(MiniBashHarness(), UPPER_TASK, Agent("ln -s /dev/zero out.txt")))
    print(json.dumps({"score": traj.score, "grade_error": traj.grade_error,
                      "termination": traj.termination}))
""")


def test_link_to_dev_zero_ends_promptly_with_score_zero() -> None:
    """Before: the grader read /dev/zero until the host ran out of memory. Run in a child with
    an address-space limit so that a regression fails this test instead of the machine."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _DEV_ZERO_EPISODE, str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"score": 0.0, "grade_error": None, "termination": "finished"}, result


# -- the grading copy ---------------------------------------------------------------------------

def test_neutralize_links_keeps_only_links_to_regular_files_inside(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host\n")
    root = tmp_path / "copy"
    (root / "sub").mkdir(parents=True)
    (root / "in.txt").write_text("mine\n")
    (root / "ok").symlink_to("in.txt")
    (root / "sub" / "ok").symlink_to("../in.txt")
    (root / "out").symlink_to(outside)
    (root / "rel_out").symlink_to("../outside.txt")
    (root / "zero").symlink_to("/dev/zero")
    (root / "dir").symlink_to("sub")  # a directory link: walks could loop through it
    (root / "root").symlink_to("/")
    (root / "dangling").symlink_to("nowhere")
    (root / "sub" / "bad").symlink_to(outside)
    os.mkfifo(root / "fifo")
    (root / "sub").chmod(0o555)  # the agent left it read-only
    try:
        changed = neutralize_links(root)
    finally:
        (root / "sub").chmod(0o755)
    assert changed == 8
    for name in ("out", "rel_out", "zero", "dir", "root", "dangling", "sub/bad"):
        assert os.readlink(root / name) == DANGLING_TARGET, name
        assert not (root / name).exists()
    assert os.readlink(root / "ok") == "in.txt"
    assert os.readlink(root / "sub" / "ok") == "../in.txt"
    assert not (root / "fifo").exists()
    assert not (root / "fifo").is_symlink()
    assert neutralize_links(root) == 0  # idempotent
    assert outside.read_text() == "host\n"


def test_neutralize_links_reaches_the_bottom_of_a_deep_tree(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1200):  # Python 3.11's os.walk would recurse 1,200 levels
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.symlink("/etc/passwd", "leak", dir_fd=fd)
    os.close(fd)
    deep = root.joinpath(*["d"] * 1200)
    chain = root / "c0"
    for i in range(1100):  # a chain of links os.path.realpath resolves by recursion
        (root / f"c{i}").symlink_to(f"c{i + 1}")
    (root / "c1100").symlink_to("/etc/passwd")
    try:
        assert neutralize_links(root) == 1102
        assert os.readlink(deep / "leak") == DANGLING_TARGET
        assert os.readlink(chain) == DANGLING_TARGET
        assert read_text(root, "/".join(["d"] * 1200) + "/leak") is None
    finally:  # pytest's own clean-up of old tmp dirs would recurse 1,200 levels and fail
        remove_tree(root)


def test_neutralize_links_reaches_below_path_max(tmp_path: Path) -> None:
    """A link planted below a path longer than PATH_MAX (40 levels of 200-byte names) is
    neutralized too: a grader reading by descriptors could otherwise reach it."""
    root = tmp_path / "copy"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(40):
        os.mkdir("n" * 200, dir_fd=fd)
        fd, old = os.open("n" * 200, os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.symlink("/etc/passwd", "leak", dir_fd=fd)
    os.symlink("../" + "n" * 200, "up", dir_fd=fd)  # inside, but a directory
    try:
        assert neutralize_links(root) == 2
        assert os.readlink("leak", dir_fd=fd) == DANGLING_TARGET
        assert os.readlink("up", dir_fd=fd) == DANGLING_TARGET
    finally:
        os.close(fd)
        remove_tree(root)


# -- the read helpers ---------------------------------------------------------------------------

def test_read_helpers_read_only_regular_files_inside(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "f.txt").write_text("host\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("ok\n")
    (ws / "d").mkdir()
    (ws / "d" / "b.txt").write_text("deep\n")
    (ws / "link.txt").symlink_to("a.txt")
    (ws / "out").symlink_to(host)
    (ws / "zero").symlink_to("/dev/zero")
    os.mkfifo(ws / "fifo")  # opening it must not wait for a writer
    (ws / "bad.txt").write_bytes(b"\xff\xfe")
    assert read_text(ws, "a.txt") == "ok\n"
    assert read_text(ws, "d/b.txt") == "deep\n"
    assert read_text(ws, "./d/b.txt") == "deep\n"
    for rel in ("link.txt", "out/f.txt", "zero", "fifo", "d", "missing", "bad.txt",
                "../host/f.txt", str(host / "f.txt"), "", "a.txt\0"):
        assert read_text(ws, rel) is None, rel
    # The generated families' helper is the same path: a link in a *parent* is refused too.
    assert text(ws, "out/f.txt") is None
    assert text(ws, "d/b.txt") == "deep\n"


def test_read_helpers_cap_the_size(tmp_path: Path) -> None:
    (tmp_path / "small").write_bytes(b"x" * 10)
    with open(tmp_path / "sparse", "wb") as fh:  # 8 GB that takes no disk
        fh.truncate(8 << 30)
    assert read_bytes(tmp_path, "small", limit=10) == b"x" * 10
    assert read_bytes(tmp_path, "small", limit=9) is None
    assert read_bytes(tmp_path, "sparse") is None
    (tmp_path / "big").write_bytes(b"y" * (MAX_GRADED_FILE_BYTES + 1))
    assert read_text(tmp_path, "big") is None


@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda t: t.id)
def test_honest_work_still_scores_one(task: Task) -> None:
    from harnessgrid.policies.scripted import ScriptedPolicy

    traj = asyncio.run(run_episode(MiniBashHarness(), task, ScriptedPolicy()))
    assert traj.score == 1.0, (traj.grade_error, traj.subscores)
