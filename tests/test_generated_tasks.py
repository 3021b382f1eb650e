"""The generated suites ``grid`` / ``grid-bench`` / ``grid-long``.

Every family is solved by its oracle plan through a native and a text tool interface (the
test-only probe levels, with windowed context and a verify-before-finish workflow on the text
side) and through shell-only commands; the null policy never passes. Splits are checked for
size, uniqueness and disjointness (content hash, parameters, seed ranges), generation for
determinism across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError
from harnessgrid.plugin_system.composed_harness import ComposedHarness
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import PluginManager, Registry
from harnessgrid.plugins.tasks.generated import FAMILIES, generate, splits
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.tools import as_shell
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import BEHAVIOURS, Task, TaskSuite, task_ids
from harnessgrid.trajectory import Trajectory
from harnessgrid.transcripts import session_events

PROBE_SPACE = FactorSpace.from_levels({
    "system_prompt": ["probe"], "tool_interface": ["probe", "probe_text"],
    "observation": ["probe"], "context": ["probe", "probe_window"],
    "workflow": ["probe", "probe_verify"]})
NATIVE = "S0-T0-O0-C0-W0"
TEXT = "S0-T1-O0-C1-W1"  # text calls, windowed context, verification before finishing
NAMES = sorted(FAMILIES)
ID = re.compile(r"^grid/[a-z0-9_]+-\d{5,}$")


@pytest.fixture(scope="module")
def registry() -> Registry:
    return PluginManager(builtins=["harnessgrid.plugins.policies", "levels_for_tests"],
                         load_external=False).registry()


def harness(registry: Registry, code: str) -> ComposedHarness:
    return compose(PROBE_SPACE.parse(code), registry)


def sample(name: str) -> list[Task]:
    """Two seeds of a family, plus a long-horizon variant where it has one."""
    tasks = [generate(name, 0), generate(name, 1)]
    if FAMILIES[name].long_capable:
        tasks.append(generate(name, 2, long=True))
    return tasks


def explain(traj: Trajectory) -> str:
    failed = [f"{c.action} -> {c.result.error or (c.result.output + c.result.stderr)[-300:]}"
              for t in traj.turns for c in t.calls if not c.result.ok]
    return (f"{traj.task_id} via {traj.harness}: {traj.termination} score={traj.score} "
            f"{traj.subscores} grade_error={traj.grade_error} error={traj.error}\n"
            + "\n".join(failed))


def run_all(jobs: list[tuple[ComposedHarness, Task]], policy: ScriptedPolicy) -> list[Trajectory]:
    return asyncio.run(run_episodes(jobs, policy, concurrency=4))


@pytest.mark.parametrize("name", NAMES)
def test_oracle_solves_and_null_fails(registry: Registry, name: str) -> None:
    tasks = sample(name)
    jobs = [(harness(registry, code), t) for t in tasks for code in (NATIVE, TEXT)]
    for traj in run_all(jobs, ScriptedPolicy()):
        assert traj.termination == "finished", explain(traj)
        assert traj.score == 1.0, explain(traj)
        assert all(0.0 <= v <= 1.0 for v in traj.subscores.values())
        assert traj.subscores
    for traj in run_all(jobs, ScriptedPolicy(empty=True)):  # null sends nothing
        assert traj.termination == "format_errors", explain(traj)
        assert traj.grade_error is None, explain(traj)
        assert traj.score is not None, explain(traj)
        assert traj.score < 1.0, explain(traj)
        assert not traj.passed, explain(traj)


def test_plans_also_work_as_plain_shell_commands(registry: Registry) -> None:
    """Shell-only tool interfaces (bash_only) run every action as a command (``as_shell``):
    the oracle's plans must survive that translation too."""
    tasks = [t.model_copy(update={"plan": tuple(as_shell(a) for a in t.plan)})
             for name in NAMES for t in sample(name)[-1:]]
    for traj in run_all([(harness(registry, NATIVE), t) for t in tasks], ScriptedPolicy()):
        assert traj.termination == "finished", explain(traj)
        assert traj.score == 1.0, explain(traj)


def test_graders_are_deterministic(registry: Registry) -> None:
    """Grading the same final workspace twice gives the same sub-scores (graders that execute
    code do it on a copy), and so does grading an untouched workspace."""
    h = harness(registry, NATIVE)

    async def solve(task: Task, ws: Workspace) -> Trajectory:
        return await run_episode(h, task, ScriptedPolicy(), workspace=ws)

    for name in NAMES:
        task = generate(name, 3)
        assert task.grader is not None
        ws = Workspace.create(task.files)
        blank = Workspace.create(task.files)
        try:
            traj = asyncio.run(solve(task, ws))
            transcript = session_events(traj)
            first = task.grader.grade(ws.root, transcript)
            assert first == task.grader.grade(ws.root, transcript) == traj.subscores, name
            assert set(first.values()) == {1.0}, (name, first)
            untouched = task.grader.grade(blank.root, [])
            assert untouched == task.grader.grade(blank.root, []), name
            assert sum(untouched.values()) < len(untouched), (name, untouched)
        finally:
            ws.cleanup()
            blank.cleanup()


@pytest.fixture(scope="module")
def computed_index() -> dict[str, Any]:
    """The split index computed from scratch, from cold caches (the build time is printed)."""
    for cached in (splits.train_tasks, splits.train_keys, splits._eval_splits,
                   splits.load_index):
        cached.cache_clear()
    t0 = time.perf_counter()
    index = splits.compute_index()
    print(f"\n[grid] all splits built from scratch in {time.perf_counter() - t0:.2f}s")
    return json.loads(json.dumps(index))


@pytest.fixture(scope="module")
def suites(computed_index: dict[str, Any]) -> dict[str, TaskSuite]:
    """All three suites as built from scratch (eagerly, by the split construction itself)."""
    train = tuple(t for n in NAMES for t in splits.train_tasks(n))
    bench, long = splits._eval_splits()
    return {"grid": TaskSuite(name="grid", splits={"train": train}),
            "grid-bench": TaskSuite(name="grid-bench", splits={"eval": bench}),
            "grid-long": TaskSuite(name="grid-long", splits={"eval": long})}


def test_shipped_index_matches_the_generators(computed_index: dict[str, Any]) -> None:
    shipped = json.loads(splits.INDEX_FILE.read_text())
    assert shipped == computed_index, ("plugins/tasks/generated/index.json is stale: run "
                                       "`python -m harnessgrid.plugins.tasks.generated`")


def test_loaded_suites_are_the_built_ones(suites: dict[str, TaskSuite]) -> None:
    """The lazily loaded suites list the same ids in the same order, and build the same tasks."""
    for name, built in suites.items():
        loaded = hg.load_suite(name)
        assert list(loaded.splits) == list(built.splits)
        for split, tasks in built.splits.items():
            assert task_ids(loaded.tasks(split)) == task_ids(tasks), name
            for i in range(0, len(tasks), max(1, len(tasks) // 7)):
                mine, theirs = loaded.tasks(split)[i], tasks[i]
                assert (mine.id, mine.content_hash(), mine.metadata) == \
                    (theirs.id, theirs.content_hash(), theirs.metadata)


def test_one_task_builds_only_that_task(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[str, int]] = []
    real = splits.generate
    monkeypatch.setattr(splits, "generate", lambda f, s, **kw: built.append((f, s)) or
                        real(f, s, **kw))
    suite = hg.load_suite("grid")
    assert len(suite.tasks("train")) >= 13_500
    assert not built
    first = suite.tasks("train")[0].id
    task = suite.get("grid/json_merge-00003")
    assert task.id == "grid/json_merge-00003"
    assert task.suite == "grid"
    assert built == [("column_stats", 0), ("json_merge", 3)], first
    assert suite.split_of("grid/json_merge-00003") == "train"
    with pytest.raises(ConfigError, match="no task 'grid/json_merge-100000'"):
        suite.get("grid/json_merge-100000")


def test_a_stale_index_is_computed_once_and_cached(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    computed_index: dict[str, Any]) -> None:
    """Edited generators (another digest): the index is computed, cached, then read back."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(splits, "source_digest", lambda: "0123456789abcdef")
    computed: list[int] = []
    real = splits.compute_index
    monkeypatch.setattr(splits, "compute_index", lambda: computed.append(1) or real())
    splits.load_index.cache_clear()
    try:
        first = splits.load_index()
        cached = tmp_path / "harnessgrid" / "grid-index-0123456789abcdef.json"
        assert computed == [1]
        assert cached.is_file()
        splits.load_index.cache_clear()
        assert splits.load_index() == json.loads(cached.read_text())
        assert computed == [1]
        assert first["grid-bench"] == [list(e) for e in computed_index["grid-bench"]]
    finally:
        splits.load_index.cache_clear()


def _keys(tasks: Any) -> tuple[set[str], set[str], set[str]]:
    return ({t.id for t in tasks}, {t.content_hash() for t in tasks},
            {t.metadata["params_key"] for t in tasks})


def test_split_sizes_and_uniqueness(suites: dict[str, TaskSuite]) -> None:
    train = suites["grid"].tasks("train")
    bench = suites["grid-bench"].tasks("eval")
    long = suites["grid-long"].tasks("eval")
    assert list(suites["grid"].splits) == ["train"]
    assert list(suites["grid-bench"].splits) == list(suites["grid-long"].splits) == ["eval"]
    assert len(train) >= 13_500
    assert len(bench) == 200
    assert len(long) >= 60
    for tasks in (train, bench, long):
        ids, hashes, params = _keys(tasks)
        assert len(ids) == len(hashes) == len(params) == len(tasks)
    per_family = {n: sum(t.metadata["family"] == n for t in bench) for n in NAMES}
    assert min(per_family.values()) >= len(bench) // len(NAMES), per_family
    assert {t.metadata["family"] for t in train} == set(NAMES)


def test_eval_suites_are_disjoint_from_train(suites: dict[str, TaskSuite]) -> None:
    """By content hash, by drawn parameters, by id, and by seed range."""
    train = _keys(suites["grid"].tasks("train"))
    bench = _keys(suites["grid-bench"].tasks("eval"))
    long = _keys(suites["grid-long"].tasks("eval"))
    for a, b in ((train, bench), (train, long), (bench, long)):
        for left, right in zip(a, b, strict=True):
            assert not left & right
    seeds = {name: [t.metadata["seed"] for t in s.tasks()] for name, s in suites.items()}
    assert max(seeds["grid"]) < splits.BENCH_SEED_BASE <= min(seeds["grid-bench"])
    assert max(seeds["grid-bench"]) < splits.LONG_SEED_BASE <= min(seeds["grid-long"])


def test_tasks_are_well_formed(suites: dict[str, TaskSuite]) -> None:
    for suite in suites.values():
        for task in suite.tasks():
            fam = FAMILIES[task.metadata["family"]]
            assert ID.match(task.id), task.id
            assert task.suite == suite.name, task.id
            assert task.plan, task.id
            assert task.grader is not None, task.id
            assert task.instruction, task.id
            assert task.tags == fam.tags, task.id
            assert set(task.tags) <= set(BEHAVIOURS), task.id
            assert fam.difficulty[0] <= task.difficulty <= fam.difficulty[1], task.id
            assert all(not p.startswith("/") and ".." not in p.split("/") for p in task.files)
            assert task.limits.max_turns is not None
            assert task.limits.max_turns >= len(task.plan) + 4


def test_all_six_behaviours_are_covered() -> None:
    covered = {tag for fam in FAMILIES.values() for tag in fam.tags}
    assert covered == set(BEHAVIOURS)
    for behaviour in BEHAVIOURS:  # each by several families, not a token one
        assert sum(behaviour in f.tags for f in FAMILIES.values()) >= 3, behaviour
    assert len(FAMILIES) >= 20


def test_long_suite_needs_eight_actions_or_more(suites: dict[str, TaskSuite]) -> None:
    for task in suites["grid-long"].tasks("eval"):
        assert task.metadata["long"], (task.id, len(task.plan))
        assert len(task.plan) >= 8, (task.id, len(task.plan))
    families = {t.metadata["family"] for t in suites["grid-long"].tasks("eval")}
    assert families == {n for n in NAMES if FAMILIES[n].long_capable}
    assert len(families) >= 4


_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from harnessgrid.plugins.tasks.generated import FAMILIES, generate, splits
sample = [generate(n, s) for n in sorted(FAMILIES) for s in (0, 7, 321)]
sample += [generate(n, 5, long=True) for n in sorted(FAMILIES) if FAMILIES[n].long_capable]
t1 = time.perf_counter()
train = splits.grid_suite().tasks("train")
t2 = time.perf_counter()
sample += list(splits.bench_suite().tasks("eval")[::10]) + list(splits.long_suite().tasks("eval"))
sample += list(train[::997])
print(json.dumps({"seconds": t2 - t1,
                  "tasks": [[t.id, t.content_hash(), t.metadata["params_key"], len(t.plan)]
                            for t in sample]}))
"""


def test_generation_is_identical_across_processes() -> None:
    """Another interpreter with another PYTHONHASHSEED generates the same tasks and splits;
    it also times a cold build of the train split."""
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    there = json.loads(out.stdout)
    print(f"\n[grid] cold load of the train split in a fresh process: {there['seconds']:.2f}s")
    here = [generate(n, s) for n in NAMES for s in (0, 7, 321)]
    here += [generate(n, 5, long=True) for n in NAMES if FAMILIES[n].long_capable]
    here += list(splits.bench_suite().tasks("eval")[::10]) + list(splits.long_suite().tasks("eval"))
    here += list(splits.grid_suite().tasks("train")[::997])
    mine = [[t.id, t.content_hash(), t.metadata["params_key"], len(t.plan)] for t in here]
    assert there["tasks"] == mine


def test_plugin_registers_lazy_suites() -> None:
    reg = PluginManager(builtins=["harnessgrid.plugins.tasks.grid"],
                        load_external=False).registry()
    assert {"grid", "grid-bench", "grid-long"} <= set(reg.task_suites)
    assert not any(reg.task_suite(n).takes_argument for n in ("grid", "grid-bench", "grid-long"))
    small = reg.task_suite("grid").load(None, families="csv_group_agg,todo_checklist")
    assert isinstance(small, TaskSuite)
    assert small.name == "grid"
    assert {t.metadata["family"] for t in small.tasks("train")} == {"csv_group_agg",
                                                                    "todo_checklist"}
    bench = reg.task_suite("grid-bench").load(None, families=["json_merge"])
    assert bench.tasks("eval")
    assert all(t.suite == "grid-bench" for t in bench.tasks("eval"))
    with pytest.raises(ConfigError, match="unknown task families"):
        reg.task_suite("grid").load(None, families="nope")
    with pytest.raises(ConfigError, match="unknown option"):
        reg.task_suite("grid-long").load(None, shuffle=True)


@pytest.mark.slow
def test_oracle_over_a_larger_sample(registry: Registry) -> None:
    """Ten tasks per family (train seeds, whatever variant the family draws) and the eval
    suites' first tasks: the oracle passes and an untouched workspace does not."""
    tasks = [generate(n, s) for n in NAMES for s in range(10, 20)]
    tasks += list(splits.bench_suite().tasks("eval")[:50])
    tasks += list(splits.long_suite().tasks("eval")[:24])
    for traj in run_all([(harness(registry, NATIVE), t) for t in tasks], ScriptedPolicy()):
        assert traj.termination == "finished", explain(traj)
        assert traj.score == 1.0, explain(traj)
    for task in tasks:
        assert task.grader is not None
        blank = Workspace.create(task.files)
        try:
            scores = task.grader.grade(Path(blank.root), [])
        finally:
            blank.cleanup()
        assert sum(scores.values()) < len(scores), (task.id, scores)
