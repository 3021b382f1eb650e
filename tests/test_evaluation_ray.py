"""``harnessgrid eval --ray``: episodes as Ray tasks on a real local Ray cluster.

The cluster is Ray's own multi-node test cluster (``ray.cluster_utils.Cluster``): a head with
one CPU and, per test, ONE separate worker node with one CPU, every process on 127.0.0.1
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps Ray from swapping the loopback address for the
machine's own). Evaluations run through the real CLI in fresh processes, as a user runs them.

- scripted episodes stored through the cluster equal the local evaluator's, key for key;
- a worker node killed (SIGKILL, all its processes) while an episode runs on it loses
  nothing: the episode is re-run on the head by Ray and stored exactly once;
- the trainer-facing primitive yields each job exactly once, duplicates included;
- a Ray worker runs its episodes on its pool's sandboxes, and reports a crash as locally;
- no Ray installed, or no cluster at the address: a message and a hint, no traceback.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugin_dist import make_plugin_dist
from test_evaluation_store import CLI

from harnessgrid.engine.executor import run_job
from harnessgrid.engine.ray_episodes import EpisodeJob, EpisodeLostError
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.results import ResultKey
from harnessgrid.evaluation.store import RESULTS, TRAJECTORIES, read_results

#: Ray on loopback only, no token file written to ~/.ray, no usage report.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0"}

#: A test policy: the oracle, slowed down, logging on which Ray node each turn runs.
SLOW_PLUGIN = '''
import asyncio
import importlib.util
import json
import os

from harnessgrid import hookimpl
from harnessgrid.policies import bind_to_episode
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.registrations import PolicyBackend


class SlowOracle:
    def __init__(self, delay, log, oracle=None, episode=None):
        self.spec = "slow-oracle"
        self.delay, self.log, self.oracle = delay, log, oracle or ScriptedPolicy()
        self.episode = episode

    def for_episode(self, harness, task, state):  # an EpisodePolicy, as the oracle it wraps
        return SlowOracle(self.delay, self.log,
                          bind_to_episode(self.oracle, harness, task, state), (harness, task))

    async def act(self, request):
        import ray

        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
        harness, task = self.episode
        line = json.dumps({"node": node, "task": task.id,
                           "harness": harness.name, "turn": request.state.turn})
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (line + "\\n").encode())
        os.close(fd)
        await asyncio.sleep(self.delay)
        return await self.oracle.act(request)


@hookimpl
def harnessgrid_policies():
    yield PolicyBackend("slow-oracle", "The oracle, slowed down; logs each turn's Ray node.",
                        lambda rest, opts: SlowOracle(float(opts.get("delay", 0.2)),
                                                      opts["log"]))
'''

#: Seconds after which a CLI process or a wait counts as hung. Only a guard against a hang:
#: under load (issue 28: load 5-14 on 2 cores) starting Python and importing Ray alone took
#: more than the 60 s these tests once allowed. What each test checks is the outcome (exit
#: status, message, stored results), never how fast it came.
HANG_S = 600.0

HARNESSES = "S0-T0-O0-C0-W0,S1-T1-O1-C1-W1,S2-T2-O2-C2-W2,S0-T2-O1-C2-W1"
#: Fields that differ between any two runs of the same episode (ids, clocks, file offsets).
VOLATILE = {"episode_id", "traj_offset", "finished_at", "wall_s", "model_s", "tools_s",
            "harness_s", "wait_s", "grade_s"}


def hg(env: dict[str, str], *args: str, timeout: float = HANG_S,
       prelude: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", prelude + CLI, *args],
                          env={**env, "COLUMNS": "300"}, capture_output=True, text=True,
                          timeout=timeout, check=False)


def stable(out: Path) -> dict[ResultKey, dict[str, Any]]:
    return {r.key: r.model_dump(exclude=VOLATILE) for r in read_results(out)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    """A Ray head (1 CPU) on 127.0.0.1 that sees the test plugin; the environment for CLI
    processes. Worker nodes are added by each test."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'harnessgrid[ray]')")
    plugin = tmp_path_factory.mktemp("rayplugin")
    make_plugin_dist(plugin, "hg-sloworacle", "slow_oracle_plugin", SLOW_PLUGIN)
    tests = str(Path(__file__).parent)
    extra = {**RAY_ENV, "PYTHONPATH": os.pathsep.join(
        [str(plugin), tests, *filter(None, [os.environ.get("PYTHONPATH")])])}
    # Ray's files (sockets, logs, the "current cluster" address) in a short private folder.
    temp = tempfile.mkdtemp(prefix="hgray", dir="/tmp")
    os.makedirs(os.path.join(temp, "ray"))
    extra["RAY_TMPDIR"] = temp
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)  # the nodes (and so their workers) inherit it
    from ray.cluster_utils import Cluster  # after: Ray reads the loopback switch on import

    head = None
    try:
        head = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False,
            # Notice a dead node in ~1 s instead of Ray's default ~15 s (a test-speed knob).
            "_system_config": {"health_check_period_ms": 300,
                               "health_check_failure_threshold": 3}})
        yield head, dict(os.environ)
    finally:
        if head is not None:
            head.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def worker(cluster: tuple[Any, dict[str, str]]) -> Iterator[Any]:
    """ONE separate worker node (1 CPU) for this test, removed afterwards if still alive."""
    head, _ = cluster
    node = head.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    yield node
    if node in head.worker_nodes:
        head.remove_node(node, allow_graceful=False)


@pytest.mark.slow
def test_results_equal_the_local_evaluators(cluster: tuple[Any, dict[str, str]], worker: Any,
                                            tmp_path: Path) -> None:
    """Scripted episodes are deterministic: the stored results are the same, key for key."""
    head, env = cluster
    common = ["--policy", "scripted", "--suites", "examples", "--settings",
              "in-space,out-of-space", "--harnesses", HARNESSES, "--runs", "2", "--max-turns",
              "12", "--no-report"]
    remote = hg(env, "eval", *common, "--out", str(tmp_path / "ray"), "--ray", head.address)
    assert remote.returncode == 0, remote.stderr
    assert f"Ray cluster at {head.address}: 2 CPUs" in remote.stderr
    assert "24 episode(s) run, 0 already stored" in remote.stderr
    local = hg(env, "eval", *common, "--out", str(tmp_path / "local"), "--quiet")
    assert local.returncode == 0, local.stderr
    ray_results, local_results = stable(tmp_path / "ray"), stable(tmp_path / "local")
    assert len(ray_results) == 24  # 2 tasks × (4 configurations + 2 adapters) × 2 runs
    assert ray_results == local_results
    assert all(r["passed"] for r in ray_results.values())
    # Same manifest, so each directory resumes the other's way: nothing left to run.
    again = hg(env, "eval", *common, "--out", str(tmp_path / "ray"))
    assert again.returncode == 0
    assert "0 episode(s) run, 24 already stored" in again.stderr


@pytest.mark.slow
def test_killed_worker_node_loses_no_episode(cluster: tuple[Any, dict[str, str]], worker: Any,
                                             tmp_path: Path) -> None:
    """The worker node is killed while it runs an episode; Ray re-runs that episode on the head
    and the evaluation completes with every episode stored exactly once."""
    head, env = cluster
    out, log = tmp_path / "run", tmp_path / "turns.jsonl"
    args = [sys.executable, "-c", CLI, "eval", "--policy", "slow-oracle", "--policy-opt",
            "delay=0.2", "--policy-opt", f"log={log}", "--suites", "examples", "--settings",
            "in-space", "--harnesses", "S0-T0-O0-C0-W0,S1-T1-O1-C1-W1", "--runs", "1", "--max-turns", "12",
            "--out", str(out), "--ray", head.address, "--no-report", "--quiet"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        victim = _wait_for_episode_on(worker.node_id, log, out, proc)
        _kill_node(head, worker)
        _, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    results = read_results(out)
    keys = [r.key for r in results]
    assert len(keys) == len(set(keys)) == len(_lines(out / RESULTS)) == 4  # 2 tasks × 2
    assert len(_lines(out / TRAJECTORIES)) == 4
    assert all(r.passed for r in results)
    stored = [r for r in results if (r.task, r.harness) == victim]
    assert len(stored) == 1
    turns = [json.loads(line) for line in _lines(log)]
    restarts = [t["node"] for t in turns if (t["task"], t["harness"]) == victim
                and t["turn"] == 0]
    assert restarts[0] == worker.node_id
    assert head.head_node.node_id in restarts[1:]


def _kill_node(head: Any, node: Any) -> None:
    """What a machine going away does: SIGKILL the node's raylet *and* every process under it
    (Ray's worker processes, the episodes' sandboxes), which ``remove_node`` alone leaves to
    notice the raylet's death by themselves; then let Ray's test cluster forget the node."""
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    for pid in [raylet, *_descendants(raylet)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    head.remove_node(node, allow_graceful=False)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc (Linux, like the bwrap sandbox)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def _wait_for_episode_on(node_id: str, log: Path, out: Path,
                         proc: subprocess.Popen[str]) -> tuple[str, str]:
    """(task, harness) of an episode that just started on ``node_id`` (its first turn is
    logged: several 0.2 s turns are still ahead of it)."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        stored = {(r.task, r.harness) for r in read_results(out)} if out.exists() else set()
        for line in _lines(log):
            turn = json.loads(line)
            if (turn["node"] == node_id and turn["turn"] == 0
                    and (turn["task"], turn["harness"]) not in stored):
                return turn["task"], turn["harness"]
        time.sleep(0.05)
    raise AssertionError("no episode ran on the worker node")


@pytest.mark.slow
def test_ray_episodes_yields_each_job_once(cluster: tuple[Any, dict[str, str]],
                                           worker: Any) -> None:
    """The primitive the trainer reuses: identical jobs (a GRPO group) are told apart by their
    index, each yielded exactly once, with at most ``max_in_flight`` submitted at a time."""
    from harnessgrid.engine.ray_episodes import ray_cluster, ray_episodes

    head, _ = cluster
    job = EpisodeJob(harness="S1-T0-O2-C1-W0", suite="examples", task_id="upper",
                     policy="scripted")
    other = job.model_copy(update={"task_id": "config", "harness": "adapter:mini-bash"})
    jobs = [job, job, other, job, other]
    with ray_cluster(head.address) as resources:
        assert resources["CPU"] == 2
        seen = list(ray_episodes(jobs, max_in_flight=2))
    assert sorted(i for i, _ in seen) == [0, 1, 2, 3, 4]
    for index, traj in seen:
        assert (traj.task_id, traj.passed) == (jobs[index].task_id, True)
    assert len({traj.episode_id for _, traj in seen}) == 5
    # A node that cannot rebuild a job (other task files there) stops the run, naming itself.
    wrong = job.model_copy(update={"task_hash": "0" * 16})
    with ray_cluster(head.address), pytest.raises(EpisodeLostError, match=r"Ray node .* cannot "
                                                  r"run episode examples/upper .*other content"):
        list(ray_episodes([wrong]))


def test_a_ray_worker_keeps_a_sandbox_pool_and_reports_crashes_as_locally(
        cluster: tuple[Any, dict[str, str]]) -> None:
    """The Ray backend of harnessgrid.engine.executor: a worker's sequential episodes run on the
    sandboxes of its pool (each trajectory records its sandbox: four episodes see at most the
    pool's two sandboxes, where a start each would show four), and a crashing
    episode comes back exactly as the in-process executor reports it."""
    import asyncio

    from servers import OpenAICompatServer, openai_text
    from test_executor import CRASHING, SANDBOX_START, crash_report

    from harnessgrid.engine.executor import LocalExecutor, RayExecutor, collect
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.ray_episodes import ray_cluster

    head, _ = cluster
    with OpenAICompatServer([openai_text(SANDBOX_START) for _ in range(4)]) as server:
        jobs = [EpisodeJob(harness="S0-T2-O0-C0-W0", suite="examples", task_id="upper",
                           policy="openai:bench", limits=EpisodeLimits(max_turns=1),
                           policy_options={"base_url": server.base_url, "api_key": "none"})
                for _ in range(4)]
        with ray_cluster(head.address):
            trajs = asyncio.run(collect(RayExecutor(max_in_flight=1), [*jobs, CRASHING]))
    started = [traj.meta["sandbox"]["id"] for traj in trajs[:4]]
    assert len(started) == 4, started
    assert len(set(started)) <= 2, started
    (local,) = asyncio.run(collect(LocalExecutor(), [CRASHING]))
    assert crash_report(trajs[-1]) == crash_report(local)
    assert local.termination == "internal_error"


def test_a_job_runs_from_plain_specs_in_process() -> None:
    """What a Ray worker does, without Ray: rebuild harness, task and policy, run, grade."""
    import asyncio

    job = EpisodeJob(harness="S2-T1-O0-C1-W2", suite="examples", task_id="upper",
                     policy="scripted")
    traj = asyncio.run(run_job(job))
    assert traj.passed
    assert traj.harness == "S2-T1-O0-C1-W2"
    assert traj.task_id == "upper"
    with pytest.raises(ConfigError, match="other content on this node"):
        asyncio.run(run_job(job.model_copy(update={"task_hash": "0" * 16})))
    with pytest.raises(ConfigError, match="has no task 'nosuch'"):
        asyncio.run(run_job(job.model_copy(update={"task_id": "nosuch"})))


def test_a_process_builds_a_composed_harness_once_and_each_adapter_fresh() -> None:
    """A worker's jobs share one composed harness per (address, space) - it holds no episode
    state - and each get a fresh adapter (adapters keep per-session state); a job whose
    space differs gets its own harness."""
    from harnessgrid.engine.jobs import _harness

    job = EpisodeJob(harness="S1-T2-O0-C1-W0", suite="examples", task_id="upper",
                     policy="scripted")
    assert _harness(job) is _harness(job.model_copy(update={"task_id": "config"}))
    small = {"system_prompt": ["minimal", "guidelines"], "tool_interface": ["function_calling",
             "xml_tags", "bash_only"], "observation": ["raw", "structured"],
             "context": ["full", "window"], "workflow": ["react"]}
    other = job.model_copy(update={"space": small})
    assert _harness(other) is not _harness(job)
    assert _harness(other).name == _harness(job).name == "S1-T2-O0-C1-W0"
    shell = job.model_copy(update={"harness": "adapter:claude-code"})
    assert _harness(shell) is not _harness(shell)


def test_a_policy_object_cannot_go_to_a_cluster(tmp_path: Path) -> None:
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.policies.scripted import ScriptedPolicy

    config = EvalConfig(policy="scripted", suites=("examples",), settings=("in-space",),
                        runs=1, ray="127.0.0.1:6379")
    with pytest.raises(ConfigError, match="cannot be sent to a Ray cluster"):
        evaluate(config, tmp_path / "x", policy=ScriptedPolicy())
    assert not (tmp_path / "x").exists()


def test_unreachable_cluster_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    """Nothing listens at the address: the CLI fails fast with advice. "cannot reach" is the
    probe's message, which comes before ``ray.init`` (that one would retry for minutes and
    then say "cannot connect"), so the message itself shows that the failure was fast."""
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "x"
    result = hg({**os.environ, **RAY_ENV}, "eval", "--policy", "scripted", "--suites",
                "examples", "--settings", "in-space", "--out", str(out), "--ray",
                f"127.0.0.1:{port}")
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in result.stderr
    assert "ray start --head" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()  # a wrong address leaves nothing behind
    bad = hg({**os.environ, **RAY_ENV}, "eval", "--policy", "scripted", "--suites",
             "examples", "--out", str(out), "--ray", "headnode")
    assert bad.returncode == 2, bad.stderr
    assert "'headnode' is not HOST:PORT" in bad.stderr, bad.stderr


def test_missing_ray_says_how_to_install_it(tmp_path: Path) -> None:
    result = hg(dict(os.environ), "eval", "--policy", "scripted", "--suites", "examples",
                "--out", str(tmp_path / "x"), "--ray", "127.0.0.1:6379",
                prelude="import sys\nsys.modules['ray'] = None\n")
    assert result.returncode == 2, result.stderr
    assert "Ray is not installed" in result.stderr
    assert "pip install 'harnessgrid[ray]'" in result.stderr
    assert "Traceback" not in result.stderr
