"""Graders are told their episode's sandbox settings explicitly (issue 29, item 3).

A grader that runs code in a sandbox declares :class:`~harnessgrid.tasks.ContextGrader`
(``grade_in(workspace, transcript, context)``) and gets the graded episode's
:class:`~harnessgrid.tasks.GradingContext`: its environment, and whether it ran unsandboxed.
Nothing travels implicitly: episodes graded at the same time in one event loop each get their
own settings, and a ``Sandbox(ws)`` that nobody told otherwise is sandboxed and bare wherever
it is built. Plain graders keep the two-argument ``grade(workspace, transcript)`` contract.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from pathlib import Path
from typing import Any

from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.grading import grade_episode
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.models import Action
from harnessgrid.plugins.tasks import clawgym, pinchbench
from harnessgrid.plugins.tasks._clawgym_export import RegeneratedGrader
from harnessgrid.plugins.tasks._sandboxed_grader import GRADING_DIR, runner_command
from harnessgrid.plugins.tasks.examples import UPPER_TASK
from harnessgrid.plugins.tasks.generated import scripts  # noqa: F401 - registers its families
from harnessgrid.plugins.tasks.generated.base import FAMILIES, SandboxedFunctionGrader, rng_for
from harnessgrid.plugins.tasks.generated.common import run_sandboxed
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.environments import EnvironmentRecord, build_venv
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import ContextGrader, FunctionGrader, GradingContext, Task, grader_call
from harnessgrid.trajectory import Trajectory

CLAWGYM_MOUNT = clawgym.DEFAULT_MOUNT
SANDBOX_UID_BASE = 2_000_000_000  # sandboxed commands run as this + a slot


def _record(name: str) -> EnvironmentRecord:
    return EnvironmentRecord(name=name, kind="venv", digest=f"d-{name}", path=f"/opt/hg-{name}")


class RecordingGrader:
    """A ContextGrader that waits until ``parties`` gradings are in flight at once, then
    scores what it was told (its workspace's ``id.txt`` names the episode)."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=120)
        self.seen: dict[str, GradingContext] = {}

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        return self.grade_in(workspace, transcript, GradingContext())

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]:
        self.barrier.wait()  # every grading is running now: none has finished before another
        self.seen[(workspace / "id.txt").read_text()] = context
        return {"told": 1.0}


def _traj(episode: str) -> Trajectory:
    return Trajectory(episode_id=episode, harness="h", task_id="t", policy="p",
                      termination="finished")


def test_concurrent_gradings_in_one_loop_each_get_their_episodes_context() -> None:
    """Two episodes graded at the same time in one event loop (one with an environment and
    the sandbox, one bare and unsandboxed): each grader is told its own episode's settings."""
    grader = RecordingGrader(parties=2)
    task = Task(id="t", instruction="x", grader=grader)
    settings = {"a": (_record("a"), False), "b": (None, True)}

    async def both() -> list[Trajectory]:
        async def one(name: str) -> Trajectory:
            environment, unsafe = settings[name]
            with Workspace.create({"id.txt": name}) as ws:
                traj = _traj(name)
                await grade_episode(task, ws, traj, [], 120.0, environment=environment,
                                    unsafe_no_sandbox=unsafe)
                return traj

        return list(await asyncio.gather(one("a"), one("b")))

    trajs = asyncio.run(both())
    assert [t.score for t in trajs] == [1.0, 1.0], [t.grade_error for t in trajs]
    assert grader.seen == {"a": GradingContext(_record("a"), False),
                           "b": GradingContext(None, True)}


def test_plain_graders_keep_the_two_argument_contract() -> None:
    """A third-party grader with only ``grade(workspace, transcript)`` is called as before;
    a ContextGrader is recognised by its declared ``grade_in``, and called with the context."""
    calls: list[tuple[str, list[dict[str, Any]]]] = []

    class Plain:
        def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
            calls.append(((workspace / "f.txt").read_text(), transcript))  # the grading copy
            return {"ok": 1.0}

    assert not isinstance(Plain(), ContextGrader)
    assert not isinstance(FunctionGrader(lambda ws, t: {"ok": 1.0}), ContextGrader)
    assert isinstance(RecordingGrader(1), ContextGrader)
    task = Task(id="t", instruction="x", grader=Plain())
    traj = _traj("e")
    with Workspace.create({"f.txt": "x"}) as ws:
        asyncio.run(grade_episode(task, ws, traj, [{"e": 1}], 60.0, environment=_record("a"),
                                  unsafe_no_sandbox=True))
    assert traj.score == 1.0, traj.grade_error
    assert calls == [("x", [{"e": 1}])]
    # An attribute of that name on the instance is not the declared capability.
    plain = Plain()
    plain.grade_in = lambda *args, **kwargs: {"wrong": 1.0}  # type: ignore[attr-defined]
    assert grader_call(plain, GradingContext()) == plain.grade
    recording = RecordingGrader(1)
    context = GradingContext(_record("z"), True)
    with Workspace.create({"id.txt": "z"}) as ws:
        assert grader_call(recording, context)(ws.root, []) == {"told": 1.0}
    assert recording.seen == {"z": context}


def test_every_grader_that_starts_a_sandbox_wants_the_context(tmp_path: Path) -> None:
    """ClawGym's, PinchBench's, a regenerated export's and the generated suite's
    code-running graders all declare ``grade_in``; a ClawGym check runs on the python of the
    environment it is told (never on one it finds by itself)."""
    reward = tmp_path / "reward"
    reward.mkdir()
    assert isinstance(clawgym.ClawGymGrader(reward, CLAWGYM_MOUNT, "check.py"), ContextGrader)
    assert issubclass(pinchbench.PinchBenchGrader, ContextGrader)
    assert isinstance(RegeneratedGrader("grid", "x", ""), ContextGrader)
    for family in ("fix_python_bug", "fix_shell_script"):  # they run the agent's code
        grader = FAMILIES[family].make(rng_for(family, 0), 0).grader
        assert isinstance(grader, SandboxedFunctionGrader), family
        assert isinstance(grader, ContextGrader)
    assert not isinstance(FAMILIES["command_output"].make(rng_for("command_output", 0), 0)
                          .grader, ContextGrader)  # reads files only
    record = _record("py")
    told = runner_command(f"{GRADING_DIR}/check.py", CLAWGYM_MOUNT, record)
    assert told.startswith(f"{record.path}/bin/python ")
    bare = runner_command(f"{GRADING_DIR}/check.py", CLAWGYM_MOUNT, None)
    assert record.path not in bare


def test_a_sandbox_nobody_configured_is_sandboxed_and_bare_inside_any_episode() -> None:
    """``Sandbox(ws)`` means: sandboxed, no environment, wherever it is built. A plain grader
    that builds one while an unsandboxed episode with an environment is being graded gets
    exactly that, not the episode's settings."""
    built: list[tuple[bool, EnvironmentRecord | None, str]] = []

    def grade(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        with Sandbox(Workspace.open(ws, in_place=True)) as sb:
            built.append((sb.unsafe_no_sandbox, sb.environment, sb.run_sync("id -u").stdout))
        return {"ran": 1.0}

    task = UPPER_TASK.model_copy(update={"grader": FunctionGrader(grade)})
    traj = asyncio.run(run_episode(resolve_harness("S0-T0-O0-C0-W0"), task, ScriptedPolicy(),
                                   EpisodeLimits(unsafe_no_sandbox=True)))
    assert traj.score == 1.0, traj.grade_error
    [(unsafe, environment, uid)] = built
    assert not unsafe
    assert environment is None
    assert int(uid) >= SANDBOX_UID_BASE  # really in the sandbox
    with Workspace.create({}) as ws:
        plain = Sandbox(ws)
        assert not plain.unsafe_no_sandbox
        assert plain.environment is None


def _uid_check(ws: Path, transcript: list[dict[str, Any]],
               context: GradingContext) -> dict[str, float]:
    code, out, _ = run_sandboxed(ws, "id -u", context)
    assert code == 0, out
    return {"sandboxed": float(int(out.strip()) >= SANDBOX_UID_BASE)}


def test_concurrent_episodes_graders_follow_their_own_sandbox_choice() -> None:
    """Two episodes in one event loop, one run unsandboxed: the generated suite's sandboxed
    check of each runs as its own episode did."""
    task = UPPER_TASK.model_copy(update={"grader": SandboxedFunctionGrader(_uid_check)})
    harness = resolve_harness("S0-T0-O0-C0-W0")

    async def both() -> list[Trajectory]:
        return list(await asyncio.gather(
            run_episode(harness, task, ScriptedPolicy(), EpisodeLimits()),
            run_episode(harness, task, ScriptedPolicy(), EpisodeLimits(unsafe_no_sandbox=True))))

    safe, unsafe = asyncio.run(both())
    assert safe.subscores == {"sandboxed": 1.0}, safe.grade_error
    assert unsafe.subscores == {"sandboxed": 0.0}, unsafe.grade_error
    # Graded outside any episode: sandboxed.
    with Workspace.create({}) as ws:
        assert task.grader is not None
        assert task.grader.grade(ws.root, []) == {"sandboxed": 1.0}


ENV_CHECK = textwrap.dedent("""\
    import sys
    def grade(transcript, workspace_path):
        return {"env_python": float(sys.prefix.startswith(%r))}
    """)


def _env_task(root: Path, check: str) -> Task:
    """A ClawGym-layout task (it declares the ``clawgym`` environment) whose check says
    whether it runs on the given environment's python."""
    folder = root / "env_probe"
    (folder / "input_files").mkdir(parents=True)
    (folder / "reward").mkdir()
    (folder / "input_files" / "in.txt").write_text("x\n")
    (folder / "reward" / "check.py").write_text(check)
    plan = [Action.of("finish", message="done")]
    (folder / "data_entry.json").write_text(json.dumps({
        "task_id": "env_probe", "input_mount_dir": CLAWGYM_MOUNT,
        "user_query": "Say done.",
        "metadata": {"category": "scripting", "grading_type": "automated",
                     "harnessgrid": {"plan": [a.model_dump(mode="json") for a in plan]}}}))
    task: Task = clawgym.load(str(folder)).tasks()[0]
    return task


def test_concurrent_episodes_graders_mount_their_own_environment(env_dir: Path,
                                                                 tmp_path: Path) -> None:
    """Two episodes of one ClawGym task in one event loop, one in an environment and one
    without (``--env none``): each check runs on its own episode's python."""
    record = build_venv("bare", "")
    task = _env_task(tmp_path, ENV_CHECK % record.path)
    harness = resolve_harness("S0-T0-O0-C0-W0")

    async def both() -> list[Trajectory]:
        return list(await asyncio.gather(
            run_episode(harness, task, ScriptedPolicy(), EpisodeLimits(environment="bare")),
            run_episode(harness, task, ScriptedPolicy(), EpisodeLimits(environment="none"))))

    inside, bare = asyncio.run(both())
    assert inside.subscores == {"env_python": 1.0}, inside.grade_error
    assert inside.environment == record.summary()
    assert bare.subscores == {"env_python": 0.0}, bare.grade_error
    assert bare.environment is None
    # Graded outside any episode: no environment, whatever one was built.
    with Workspace.create({}, mount_path=CLAWGYM_MOUNT) as ws:
        assert task.grader is not None
        assert task.grader.grade(ws.root, []) == {"env_python": 0.0}
