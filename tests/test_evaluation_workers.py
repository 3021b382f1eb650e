"""``harnessgrid eval --workers N``: episodes in N local worker processes, stored here.

- scripted episodes stored by two workers equal those of one process, key for key;
- a worker killed (SIGKILL) under an episode costs that episode only: it is stored as an
  infrastructure failure, the evaluation completes, and a resume runs it again, with one
  effective result per key;
- bad values of N are refused with a message and a hint, before anything is written.

Real processes, real sandboxes, the real CLI for the kill (a test policy plugin kills its own
worker process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from plugin_dist import make_plugin_dist
from test_evaluation_store import CLI, lines
from typer.testing import CliRunner

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.workers import check_workers, shares
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.results import ResultKey
from harnessgrid.evaluation.run import EvalConfig, evaluate
from harnessgrid.evaluation.store import RESULTS, TRAJECTORIES, read_results
from harnessgrid.policies.scripted import ScriptedPolicy

HARNESSES = ("S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2")
VOLATILE = {"episode_id", "traj_offset", "finished_at", "wall_s", "model_s", "tools_s",
            "harness_s", "wait_s", "grade_s"}

#: The oracle, except that the first episode of the ``config`` task kills its own process.
KILLER_PLUGIN = '''
import os
import signal

from harnessgrid import hookimpl
from harnessgrid.policies import bind_to_episode
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.registrations import PolicyBackend


class Killer:
    def __init__(self, marker, oracle=None, task=None):
        self.spec = "killer"
        self.marker, self.oracle, self.task = marker, oracle or ScriptedPolicy(), task

    def for_episode(self, harness, task, state):  # an EpisodePolicy, as the oracle it wraps
        return Killer(self.marker, bind_to_episode(self.oracle, harness, task, state), task)

    async def act(self, request):
        if self.task.id == "config" and request.state.turn == 0:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:  # the first one only: the worker dies under this episode
                os.kill(os.getpid(), signal.SIGKILL)
        return await self.oracle.act(request)


@hookimpl
def harnessgrid_policies():
    yield PolicyBackend("killer", "Kills its worker once.", lambda rest, opts: Killer(opts["marker"]))
'''


def stable(out: Path) -> dict[ResultKey, dict[str, Any]]:
    return {r.key: r.model_dump(exclude=VOLATILE) for r in read_results(out)}


def test_workers_are_checked_before_anything_runs(tmp_path: Path) -> None:
    for bad in (0, -1, True, "2", 1.5):
        with pytest.raises(ConfigError, match="--workers") as info:
            check_workers(bad, 4)
        assert info.value.hint
    with pytest.raises(ConfigError, match="more than --concurrency 2"):
        check_workers(3, 2)
    assert check_workers(2, 2) == 2
    assert shares(7, 3) == [3, 2, 2]
    assert sum(shares(64, 5)) == 64
    base = {"policy": "scripted", "suites": ("examples",), "settings": ("in-space",),
            "runs": 1, "concurrency": 4}
    with pytest.raises(ConfigError, match="--ray"):
        evaluate(EvalConfig(**base, workers=2, ray="127.0.0.1:1"), tmp_path / "a")
    with pytest.raises(ConfigError, match="policy object"):
        evaluate(EvalConfig(**base, workers=2), tmp_path / "b", policy=ScriptedPolicy())
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists()
    from harnessgrid.cli import app

    result = CliRunner().invoke(app, ["eval", "--policy", "scripted", "--suites", "examples",
                                      "--out", str(tmp_path / "c"), "--workers", "0"])
    # a ConfigError: the CLI's entry point prints it with its hint, exit status 2
    assert isinstance(result.exception, ConfigError), result.output
    assert "--workers 0" in result.exception.message
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_two_workers_store_what_one_process_stores(tmp_path: Path) -> None:
    def run(workers: int, out: Path) -> None:
        outcome = evaluate(EvalConfig(
            policy="scripted", suites=("examples",), settings=("in-space", "out-of-space"),
            harnesses=HARNESSES, runs=2, concurrency=4, workers=workers,
            limits=EpisodeLimits(max_turns=12)), out)
        assert outcome.ran == outcome.total == 20  # 2 tasks × (3 configs + 2 adapters) × 2

    run(1, tmp_path / "one")
    run(2, tmp_path / "two")
    one, two = stable(tmp_path / "one"), stable(tmp_path / "two")
    assert len(two) == 20
    assert two == one
    assert all(r["passed"] for r in two.values())
    assert len(lines(tmp_path / "two" / TRAJECTORIES)) == 20


@pytest.mark.slow
def test_a_killed_worker_costs_only_its_episode(tmp_path: Path) -> None:
    """Two workers, one episode each at a time: the killed worker held exactly one."""
    root = tmp_path / "plugin"
    make_plugin_dist(root, "hg-killer", "killer_plugin", KILLER_PLUGIN)
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": f"{root}:{tests}"}
    out = tmp_path / "run"
    args = [sys.executable, "-c", CLI, "eval", "--policy", "killer", "--policy-opt",
            f"marker={tmp_path / 'killed'}", "--suites", "examples", "--settings", "in-space",
            "--harnesses", ",".join(HARNESSES), "--runs", "1", "--concurrency", "2",
            "--workers", "2", "--max-turns", "12", "--out", str(out), "--no-report"]
    first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                           check=False)
    assert first.returncode == 0, first.stderr
    assert "infrastructure failures: 1 of 6" in first.stderr
    results = {r.key: r for r in read_results(out)}
    assert len(results) == 6
    lost = [r for r in results.values() if r.infra_failure]
    assert len(lost) == 1
    assert lost[0].task == "config"
    assert lost[0].termination == "internal_error"
    assert "died (killed by signal 9)" in (lost[0].error or "")
    assert all(r.passed for r in results.values() if not r.infra_failure)

    again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                           check=False)
    assert again.returncode == 0, again.stderr
    assert "1 episode(s) run, 5 already stored, 1 infrastructure failure(s) retried" \
        in again.stderr
    final = read_results(out)
    assert len(final) == len({r.key for r in final}) == 6
    assert all(r.passed for r in final)
    assert len(lines(out / RESULTS)) == len(lines(out / TRAJECTORIES)) == 7  # 6 + the retry
    stored = [json.loads(line)["meta"]["eval"]["task"] for line in lines(out / TRAJECTORIES)]
    assert stored.count("config") == 4  # 3 harnesses, one of them twice (failure, retry)


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the workers hang below a forkserver process)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.slow
def test_killed_evaluation_with_workers_resumes_exactly(tmp_path: Path) -> None:
    """kill -9 of the evaluation mid-run: its workers go too (no orphan keeps running), and the
    resumed run stores every key once, as a one-process run does."""
    from test_evaluation import ORIGINAL, install_plugin
    from test_evaluation_store import wait_for_results

    env = install_plugin(tmp_path / "plugin")
    out = tmp_path / "run"
    args = [sys.executable, "-c", CLI, "eval", "--policy", "xmlfail", "--policy-opt",
            "delay=0.01", "--suites", "evaltest", "--settings", "in-space,original",
            "--original", ORIGINAL, "--runs", "2", "--concurrency", "4", "--workers", "2",
            "--out", str(out), "--max-turns", "12", "--no-report", "--quiet"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_results(out, 8, proc)
        below = _descendants(proc.pid)
        assert below  # the forkserver and its workers
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while _descendants(1) & below and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not (_descendants(1) & below), "worker processes outlived the evaluation"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = lines(out / RESULTS)
    assert 8 <= len(before) < 76
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr
    results = read_results(out)
    keys = [r.key for r in results]
    assert len(keys) == len(set(keys)) == 76
    trajectories = [json.loads(line) for line in lines(out / TRAJECTORIES)]
    traj_keys = [tuple(t["meta"]["eval"][k] for k in ResultKey._fields) for t in trajectories]
    assert len(traj_keys) == len(set(traj_keys)) == 76


def test_a_workers_episodes_run_on_recycled_sandboxes() -> None:
    """A worker keeps a sandbox pool, as a one-process run does: its sequential episodes run on
    sandboxes started once and recycled, not on a fresh start each. Each trajectory records its
    sandbox (host-side: to its commands a recycled sandbox is as new); four episodes on one
    worker see at most the pool's two sandboxes (with a start per episode they would see four)."""
    from servers import OpenAICompatServer, openai_text

    from harnessgrid.engine.ray_episodes import EpisodeJob
    from harnessgrid.engine.workers import worker_episodes

    reply = "Looking.\n```bash\ncut -d' ' -f22 /proc/1/stat\n```"
    with OpenAICompatServer([openai_text(reply) for _ in range(4)]) as server:
        jobs = [EpisodeJob(harness="S0-T2-O0-C0-W0", suite="examples", task_id="upper",
                           policy="openai:bench", limits=EpisodeLimits(max_turns=1),
                           policy_options={"base_url": server.base_url, "api_key": "none"})
                for _ in range(4)]
        trajs = [traj for _, traj in worker_episodes(jobs, workers=1, concurrency=1)]
    started = [traj.meta["sandbox"]["id"] for traj in trajs]
    assert len(started) == 4, started
    assert len(set(started)) <= 2, started
    assert max(traj.meta["sandbox"]["episode"] for traj in trajs) >= 2
