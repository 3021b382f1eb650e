"""One job type and one executor interface for every fan-out (:mod:`harnessgrid.engine.executor`).

- the same crash is reported identically by every backend that runs here (in-process from
  specs, in-process from live objects through ``run_episodes``, a worker process);
- every backend keeps a sandbox pool: sequential episodes see at most the pool's two
  sandboxes, counted by the sandbox each trajectory records (``meta["sandbox"]``), not by
  time taken; a Ray worker's loop keeps its pool between tasks and closes it when idle;
- results stream as ``(index, trajectory)``, each index once, identical jobs told apart.

The Ray cluster backend itself is exercised in ``test_evaluation_ray.py`` (it needs a cluster).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
from servers import OpenAICompatServer, openai_text

from harnessgrid.engine.executor import (
    EpisodeJob,
    Executor,
    LocalExecutor,
    ProcessExecutor,
    collect,
    lost_episode,
    run_episodes,
)
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.trajectory import Trajectory

#: A job every backend runs and that raises out of the runtime: an ``--env`` that does not
#: exist is refused when the episode starts (a ConfigError, as a plugin bug would raise).
CRASHING = EpisodeJob(harness="S0-T0-O0-C0-W0", suite="examples", task_id="upper",
                      policy="scripted", episode_id="crash-0001",
                      limits=EpisodeLimits(max_turns=3, environment="no-such-environment"))

#: Each turn reads the start time of PID 1 inside its sandbox: a command's view, which shows a
#: recycled sandbox as a fresh one (the trajectories' ``meta["sandbox"]`` tells them apart).
SANDBOX_START = "Looking.\n```bash\ncut -d' ' -f22 /proc/1/stat\n```"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def crash_report(traj: Trajectory) -> dict[str, Any]:
    return traj.model_dump(exclude={"started_at"})


def test_the_same_crash_is_reported_the_same_by_every_backend() -> None:
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.plugin_system.registry import load_suite
    from harnessgrid.policies.scripted import ScriptedPolicy

    reports = {}
    for name, executor in (("local", LocalExecutor(2)), ("process", ProcessExecutor(1, 1))):
        (traj,) = run(collect(executor, [CRASHING]))
        reports[name] = crash_report(traj)
    task = next(t for t in load_suite("examples").tasks() if t.id == "upper")
    live = EpisodeJob.of(resolve_harness(CRASHING.harness), task, ScriptedPolicy(),
                         CRASHING.limits, episode_id=CRASHING.episode_id)
    (traj,) = run(collect(LocalExecutor(), [live]))
    reports["live"] = crash_report(traj)
    (traj,) = run(run_episodes([(resolve_harness(CRASHING.harness), task)], ScriptedPolicy(),
                               CRASHING.limits))
    reports["run_episodes"] = crash_report(traj) | {"episode_id": CRASHING.episode_id}
    first = reports["local"]
    assert first["termination"] == "internal_error", first
    assert first["episode_id"] == "crash-0001"
    assert "no-such-environment" in first["error"]
    assert "Traceback" in first["error"]
    assert all(report == first for report in reports.values()), reports


def test_a_lost_episode_is_an_infrastructure_failure_of_its_job() -> None:
    traj = lost_episode(CRASHING, "the worker died")
    assert (traj.termination, traj.error, traj.episode_id) == ("internal_error",
                                                              "the worker died", "crash-0001")
    assert traj.infra_failure
    assert traj.score is None


def sandbox_starts(executor: Executor, n: int) -> list[str]:
    """The sandbox (``meta["sandbox"]["id"]``, host-side: a recycled sandbox is as new to its
    commands) each of ``n`` one-turn episodes ran in on ``executor``."""
    with OpenAICompatServer([openai_text(SANDBOX_START) for _ in range(n)]) as server:
        jobs = [EpisodeJob(harness="S0-T2-O0-C0-W0", suite="examples", task_id="upper",
                           policy="openai:bench", limits=EpisodeLimits(max_turns=1),
                           policy_options={"base_url": server.base_url, "api_key": "none"})
                for _ in range(n)]
        trajs = run(collect(executor, jobs))
    assert all(call.result.ok for traj in trajs for turn in traj.turns for call in turn.calls)
    return [traj.meta["sandbox"]["id"] for traj in trajs]


@pytest.mark.parametrize("executor", [LocalExecutor(1), ProcessExecutor(1, 1)],
                         ids=["local", "process"])
def test_sequential_episodes_reuse_pooled_sandboxes(executor: Executor) -> None:
    """Four episodes one at a time see at most the pool's two sandboxes (a start each would
    show four), in this process and in a worker process alike."""
    started = sandbox_starts(executor, 4)
    assert len(started) == 4, started
    assert len(set(started)) <= 2, started


def test_a_ray_workers_loop_keeps_its_pool_between_tasks_and_closes_it_when_idle() -> None:
    """What a Ray worker process does with its tasks, without Ray: each task runs on the
    worker's one loop, whose pool serves the next task, until it has been idle a while."""
    from harnessgrid.engine.jobs import rebuild
    from harnessgrid.engine.ray_episodes import _WorkerLoop

    worker = _WorkerLoop()
    with OpenAICompatServer([openai_text(SANDBOX_START) for _ in range(3)]) as server:
        job = EpisodeJob(harness="S0-T2-O0-C0-W0", suite="examples", task_id="upper",
                         policy="openai:bench", limits=EpisodeLimits(max_turns=1),
                         policy_options={"base_url": server.base_url, "api_key": "none"})
        trajs = []
        for _ in range(3):  # as Ray calls the task body: one at a time, on its main thread
            task, policy = rebuild(job)
            trajs.append(worker.run(job.bind(task=task, policy=policy), idle_s=0.2))
        pools = worker.pools
    started = {traj.meta["sandbox"]["id"] for traj in trajs}
    assert len(started) <= 2, started
    assert pools is not None
    (pool,) = pools._pools.values()
    assert pool.stats.handed_out == 3
    deadline = time.monotonic() + 120  # a hang guard only: the idle timer closes the pool
    while worker.pools is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.pools is None
    while pools._pools and any(p._ready or p._pending for p in pools._pools.values()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(not p._ready and not p._pending for p in pools._pools.values())
    worker.close()


def test_results_stream_by_index_each_once() -> None:
    """Identical jobs (a GRPO group) are told apart by their index; ``collect`` puts them
    back in job order and calls ``on_done`` as each ends."""
    job = EpisodeJob(harness="S1-T0-O2-C1-W0", suite="examples", task_id="upper",
                     policy="scripted")
    other = job.model_copy(update={"task_id": "config", "harness": "adapter:mini-bash"})
    jobs = [job, job, other, job]
    seen: list[int] = []
    trajs = run(collect(LocalExecutor(2), jobs, on_done=lambda i, _: seen.append(i)))
    assert sorted(seen) == [0, 1, 2, 3]
    assert [t.task_id for t in trajs] == ["upper", "upper", "config", "upper"]
    assert all(t.passed for t in trajs)
    assert len({t.episode_id for t in trajs}) == 4


def test_live_objects_never_leave_the_process() -> None:
    """A bound job pickles (Ray) and serializes (worker pipes) as its specs alone."""
    import pickle

    from harnessgrid.policies.scripted import ScriptedPolicy

    bound = CRASHING.bind(policy=ScriptedPolicy())
    assert bound.live.policy is not None
    assert pickle.loads(pickle.dumps(bound)).live.policy is None
    assert EpisodeJob.model_validate_json(bound.model_dump_json()) == CRASHING


def test_a_process_stream_closed_early_stops_its_workers() -> None:
    """Leaving the stream after the first result (an error while storing, Ctrl-C) stops the
    episodes still running and the worker processes with their sandboxes: the model server
    is asked by fewer episodes than were submitted (the ones after the first hang until their
    wall limit), and no process of the run is left below this one."""
    import contextlib
    import os

    from test_evaluation_ray import _descendants

    warm = EpisodeJob(harness="S0-T0-O0-C0-W0", suite="examples", task_id="upper",
                      policy="scripted")
    run(collect(ProcessExecutor(1, 1), [warm]))  # the forkserver, once per test process
    before = set(_descendants(os.getpid()))
    hanging = [replace(openai_text("Done."), delay_s=60.0) for _ in range(7)]
    with OpenAICompatServer([openai_text("Done."), *hanging]) as server:
        job = EpisodeJob(harness="S0-T2-O0-C0-W0", suite="examples", task_id="upper",
                         policy="openai:bench", limits=EpisodeLimits(max_turns=1, wall_s=5),
                         policy_options={"base_url": server.base_url, "api_key": "none",
                                         "max_retries": 0})

        async def first_of_many() -> Trajectory:
            finished = ProcessExecutor(2, 2).run([job] * 8)
            async with contextlib.aclosing(finished):
                async for _, traj in finished:
                    return traj
            raise AssertionError("nothing came back")

        first = run(first_of_many())
        asked = len(server.requests)
    assert first.termination != "internal_error", first.error
    assert asked < 8, asked
    deadline = time.monotonic() + 120  # a hang guard only: the workers are stopped on close
    while set(_descendants(os.getpid())) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(_descendants(os.getpid())) - before
