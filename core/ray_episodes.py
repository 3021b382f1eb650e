"""Episodes as Ray tasks: run episode jobs on a Ray cluster, get trajectories back as they end.

Why Ray, and why this shape: every episode already makes its own workspace and bubblewrap
sandbox in :func:`~harnessgrid.runtime.run_episode`, so spreading episodes over machines only
needs *where* each one runs. Ray does that part with its own mechanisms — scheduling one
episode per CPU, re-running a task whose worker process or node died (``max_retries``), and
streaming finished tasks back with ``ray.wait`` — and nothing here re-implements them.

A job travels as plain specs (:class:`EpisodeJob`: harness address, suite spec + task id,
policy spec + options, limits), never as live objects: the worker rebuilds the harness, task
and policy through the same registry the local code uses and calls ``run_episode``, so a job
runs the same on any node, and a scripted episode gives the same trajectory as a local one.

Example (the evaluator's ``--ray`` and, later, the trainer's rollouts use exactly this)::

    from harnessgrid.ray_episodes import EpisodeJob, ray_cluster, ray_episodes

    jobs = [EpisodeJob(harness=code, suite="examples", task_id="upper", policy="scripted")
            for code in ("S0-T0-O0-C0-W0", "S2-T2-O2-C2-W2")]
    with ray_cluster("127.0.0.1:6379"):          # HOST:PORT of `ray start --head`, or "auto"
        for index, traj in ray_episodes(jobs):    # in the order they finish
            print(jobs[index].harness, traj.passed)

Every node needs the same harnessgrid and plugins (suites, adapters, policies), ``bwrap``, and
the files of path-addressed suites (``clawgym:/data/...``) at the same path. A node that cannot
rebuild a job (a plugin or a file missing there, no ``bwrap``) stops the run with an error that
names the node; it is never stored as an episode result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from harnessgrid.errors import ConfigError, HarnessgridError
from harnessgrid.runtime import EpisodeLimits

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.sandbox_pool import PoolsByKey, SandboxPool
    from harnessgrid.tasks import Task, TaskSuite
    from harnessgrid.trajectory import Trajectory

INSTALL_HINT = "install the Ray extra: pip install 'harnessgrid[ray]'"
#: How often a worker may die under one episode before the episode counts as lost (Ray's own
#: task retries; an episode is pure — its workspace and sandbox are new — so re-running it is
#: safe).
DEFAULT_MAX_RETRIES = 3
_WAIT_S = 1.0  # ray.wait timeout: how often a waiting driver checks for Ctrl-C


class EpisodeJob(BaseModel):
    """One episode as plain specs, rebuilt on whichever node runs it.

    ``harness`` is anything :func:`~harnessgrid.api.resolve_harness` accepts (a code of
    ``space``, a level list, ``adapter:NAME``); ``suite`` is a :func:`~harnessgrid.tasks.load_suite`
    spec and ``task_id`` a task of it; ``task_hash``, when given, is the task's
    ``content_hash()`` as the caller saw it, checked on the worker so a node with other task
    files fails loudly instead of grading a different task. ``space`` maps each factor to its
    levels (default: the paper's 3^5 grid).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    harness: str
    suite: str
    task_id: str
    policy: str
    policy_options: dict[str, Any] = Field(default_factory=dict)
    limits: EpisodeLimits = EpisodeLimits()
    space: dict[str, list[str]] | None = None
    suite_options: dict[str, Any] = Field(default_factory=dict)
    #: The episode's id (hence its token policies' per-turn sampling seeds); a fresh one when
    #: not given. The trainer passes its derived ids so a Ray rollout samples as a local one.
    episode_id: str | None = None
    task_hash: str | None = None

    def describe(self) -> str:
        return f"{self.suite}/{self.task_id} via {self.harness}"


class EpisodeLostError(HarnessgridError):
    """An episode could not be run on the cluster: its workers kept dying, or a node could not
    rebuild it. Nothing is stored for it, so resuming runs it again."""


def import_ray() -> ModuleType:
    """``ray``, or a :class:`ConfigError` that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"Ray is not installed ({exc})", hint=INSTALL_HINT) from None
    return ray


def _probe(ray: ModuleType, address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the address, when nothing answers where Ray will connect
    (``ray.init`` would otherwise retry for many minutes). Ray replaces a loopback host by this
    machine's address, so that address is probed too."""
    targets: list[tuple[str, str]] = []
    if address not in ("auto", "local"):
        targets.append((address.removeprefix("ray://"), address))
    if not address.startswith("ray://"):
        canonical = _bootstrap_address(ray, address)
        if canonical is not None and all(t != canonical for t, _ in targets):
            targets.append((canonical, f"{address} (Ray connects to {canonical})"))
    for hostport, shown in targets:
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"Ray address {address!r} is not HOST:PORT",
                              hint="give the address `ray start --head` printed, e.g. "
                                   "--ray 10.0.0.5:6379, or --ray auto for the cluster started "
                                   "on this machine")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
        except OSError as exc:
            raise ConfigError(f"cannot reach the Ray cluster at {shown}: {exc}",
                              hint=_CONNECT_HINT) from None


def _bootstrap_address(ray: ModuleType, address: str) -> str | None:
    """The HOST:PORT ``ray.init(address)`` will dial, when Ray's (private) helper says so."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        found = canonicalize_bootstrap_address(address)
    except Exception:  # noqa: BLE001 - another Ray version: probe what was given only
        return None
    return found if isinstance(found, str) else None


_CONNECT_HINT = ("start the cluster first: `ray start --head --port=6379` on the head machine "
                 "and `ray start --address=HEAD:6379` on each worker; pass the head's HOST:PORT "
                 "(run harnessgrid on a machine of the cluster), or leave out --ray to run on "
                 "this machine")


@contextmanager
def ray_cluster(address: str | None = "auto") -> Iterator[dict[str, float]]:
    """Connected to the Ray cluster at ``address`` inside the block; yields the cluster's
    resources (``{"CPU": 8.0, ...}``).

    ``address`` is ``HOST:PORT`` (the head's GCS address that ``ray start --head`` prints),
    ``ray://HOST:PORT`` (Ray Client), or ``"auto"`` (the cluster started on this machine, or
    ``RAY_ADDRESS``). When this process is already connected (a trainer that called
    ``ray.init`` itself) the connection is reused and left open; otherwise it is closed on exit.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield dict(ray.cluster_resources())
        return
    address = address or "auto"
    _probe(ray, address)
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    except Exception as exc:  # noqa: BLE001 - every connection failure gets the same advice
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"cannot connect to the Ray cluster at {address}: {first}",
                          hint=_CONNECT_HINT) from None
    try:
        yield dict(ray.cluster_resources())
    finally:
        ray.shutdown()


def ray_episodes(jobs: Sequence[EpisodeJob], *, address: str | None = None,
                 num_cpus: float = 1.0, max_retries: int = DEFAULT_MAX_RETRIES,
                 max_in_flight: int | None = None) -> Iterator[tuple[int, Trajectory]]:
    """Run ``jobs`` as Ray tasks and yield ``(index into jobs, trajectory)`` as each ends.

    Each job is one task of ``num_cpus`` CPUs (fractions pack several I/O-bound episodes on a
    CPU). A task whose worker process or node dies is re-run by Ray elsewhere, up to
    ``max_retries`` times; only the attempt that returns is yielded, so each job is yielded
    exactly once. ``max_in_flight`` bounds how many tasks are submitted at once (default:
    all). An episode's own failures (policy error, sandbox error, a harness that raised) come
    back as its trajectory, as with :func:`~harnessgrid.runtime.run_episode`; a job that
    cannot be run at all raises :class:`EpisodeLostError`, and the tasks still pending are
    cancelled.

    Uses the current Ray connection, or connects to ``address`` for the duration (see
    :func:`ray_cluster`).
    """
    ray = import_ray()
    if not ray.is_initialized():
        with ray_cluster(address or "auto"):
            yield from ray_episodes(jobs, num_cpus=num_cpus, max_retries=max_retries,
                                    max_in_flight=max_in_flight)
        return
    from harnessgrid.trajectory import Trajectory

    remote = _remote(ray).options(
        num_cpus=num_cpus, max_retries=max_retries, retry_exceptions=False,
        name="harnessgrid-episode")
    pending: dict[Any, int] = {}
    submitted = 0
    limit = max_in_flight or len(jobs)
    try:
        while submitted < len(jobs) or pending:
            while submitted < len(jobs) and len(pending) < limit:
                pending[remote.remote(jobs[submitted])] = submitted
                submitted += 1
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_WAIT_S)
            if not ready:
                continue
            rest = [ref for ref in pending if ref not in ready]
            if rest:  # everything else that is done too, without waiting
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready = list(ready) + list(more)
            for ref in ready:
                index = pending.pop(ref)
                yield index, Trajectory.model_validate_json(
                    _outcome(ray, ref, jobs[index], max_retries))
    finally:
        for ref in pending:
            with suppress(Exception):  # best effort; the job ends with the driver
                ray.cancel(ref)


def _remote(ray: ModuleType) -> Any:
    """The Ray remote function, made once per process (each ``ray.remote`` call would export
    the function to the cluster again)."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = ray.remote(_run_job_on_worker)
    return _REMOTE


_REMOTE: Any = None


def _outcome(ray: ModuleType, ref: Any, job: EpisodeJob, max_retries: int) -> str:
    """The trajectory JSON a task returned, or :class:`EpisodeLostError`."""
    try:
        out: dict[str, Any] = ray.get(ref)
    except ray.exceptions.RayError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise EpisodeLostError(
            f"episode {job.describe()} was lost on the Ray cluster (re-run up to "
            f"{max_retries} times when its worker died): {type(exc).__name__}: {first}",
            hint="finished episodes are kept; check the cluster with `ray status` and run "
                 "again to resume") from None
    if "setup_error" in out:
        raise EpisodeLostError(
            f"Ray node {out['node']} cannot run episode {job.describe()}: {out['setup_error']}",
            hint=out.get("hint") or "every node needs the same harnessgrid, plugins, bwrap "
                                    "and suite files as this machine")
    trajectory: str = out["trajectory"]
    return trajectory


# -- the worker side ---------------------------------------------------------------------------
# Module state of a Ray worker process: Ray reuses a worker for many tasks, so suites and
# policies (a loaded model, an API client) are built once per process, and one event loop
# serves every episode (clients bound to a loop stay usable).

_SUITES: dict[str, TaskSuite] = {}
_POLICIES: dict[str, Policy] = {}
_MAX_POLICIES = 4  # oldest dropped first
_HARNESSES: set[str] = set()  # harness addresses already resolved once on this node
_COMPOSED: dict[str, Harness] = {}  # composed harnesses by (address, space), see _harness
_MAX_COMPOSED = 256  # the 243 configurations of the paper's grid fit
_LOOP: asyncio.AbstractEventLoop | None = None


class _SetupError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def _run_job_on_worker(job: EpisodeJob) -> dict[str, Any]:
    """The body of a Ray task: ``{"trajectory": JSON}``, or ``{"setup_error": ...}`` when
    this node cannot rebuild the job (plain data both ways: no exception pickling)."""
    global _LOOP
    try:
        task, policy = _rebuild(job)
    except _SetupError as exc:
        return {"setup_error": exc.message, "hint": exc.hint, "node": _node()}
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    traj = _LOOP.run_until_complete(arun_job(job, task=task, policy=policy))
    return {"trajectory": traj.model_dump_json()}


async def arun_job(job: EpisodeJob, *, task: Task | None = None,
                   policy: Policy | None = None,
                   pool: SandboxPool | PoolsByKey | None = None) -> Trajectory:
    """Run one job in this process: what a Ray worker does, usable anywhere (tests, a local
    fallback). An exception out of the harness becomes an ``internal_error`` trajectory, the
    evaluator's rule; a job that cannot be rebuilt here raises :class:`ConfigError`. ``pool``
    lends it a pre-started (recycled) sandbox, as in :func:`~harnessgrid.runtime.run_episode`."""
    from harnessgrid.runtime import crashed_episode, run_episode

    if task is None or policy is None:
        try:
            task, policy = _rebuild(job)
        except _SetupError as exc:
            raise ConfigError(f"cannot run episode {job.describe()}: {exc.message}",
                              hint=exc.hint) from None
    name = job.harness
    try:
        harness = _harness(job)
        name = harness.name
        return await run_episode(harness, task, policy, job.limits, pool=pool,
                                 episode_id=job.episode_id or uuid.uuid4().hex[:12])
    except Exception as exc:  # noqa: BLE001 - one broken episode must not stop the others
        return crashed_episode(name, task, policy, exc)


def _harness(job: EpisodeJob) -> Harness:
    """The job's harness: a composed one is built once per process and shared by its episodes
    (it holds no episode state; ``run_episodes`` shares one too); an adapter is made fresh for
    each episode (adapters keep per-session state)."""
    from harnessgrid.api import resolve_harness
    from harnessgrid.space import FactorSpace

    if job.harness.strip().startswith("adapter:"):
        return resolve_harness(job.harness)
    key = json.dumps([job.harness, job.space], sort_keys=True)
    harness = _COMPOSED.get(key)
    if harness is None:
        if len(_COMPOSED) >= _MAX_COMPOSED:
            _COMPOSED.pop(next(iter(_COMPOSED)))
        space = FactorSpace.from_levels(job.space) if job.space is not None else None
        harness = _COMPOSED[key] = resolve_harness(job.harness, space)
    return harness


def _rebuild(job: EpisodeJob) -> tuple[Task, Policy]:
    """The task and policy of a job, from this process's registry; what cannot be rebuilt here
    raises :class:`_SetupError` (a node problem, not an episode result)."""
    from harnessgrid.policies import make_policy
    from harnessgrid.runtime import require_sandbox

    try:
        require_sandbox(job.limits)
        task = _task(job)
        # Resolve once here so a level or adapter missing on this node is a setup error (a
        # composed harness is built and kept for the episodes; see _harness).
        checked = json.dumps([job.harness, job.space], sort_keys=True)
        if checked not in _HARNESSES:
            _harness(job)
            _HARNESSES.add(checked)
        key = json.dumps([job.policy, job.policy_options], sort_keys=True, default=str)
        if key not in _POLICIES:
            while len(_POLICIES) >= _MAX_POLICIES:  # e.g. a trainer's per-step weight snapshots
                _POLICIES.pop(next(iter(_POLICIES)))
            _POLICIES[key] = make_policy(job.policy, job.policy_options)
        return task, _POLICIES[key]
    except _SetupError:
        raise
    except HarnessgridError as exc:
        raise _SetupError(exc.message, exc.hint) from None
    except Exception as exc:  # noqa: BLE001 - e.g. a backend's import failing on this node
        raise _SetupError(f"{type(exc).__name__}: {exc}") from None


def _task(job: EpisodeJob) -> Task:
    from harnessgrid.tasks import load_suite, task_ids

    key = json.dumps([job.suite, job.suite_options], sort_keys=True, default=str)
    if key not in _SUITES:  # a suite loads once per worker; its tasks are built when used
        _SUITES[key] = load_suite(job.suite, **job.suite_options)
    suite = _SUITES[key]
    candidates = [tasks[i] for tasks in suite.splits.values()
                  for i, tid in enumerate(task_ids(tasks)) if tid == job.task_id]
    if not candidates:
        raise _SetupError(f"suite {job.suite!r} has no task {job.task_id!r} on this node",
                          hint="every node needs the same suite (plugin version, files)")
    if job.task_hash is None:
        return candidates[0]
    for task in candidates:
        if task.content_hash() == job.task_hash:
            return task
    raise _SetupError(f"task {job.suite}/{job.task_id} has other content on this node "
                      f"(hash {candidates[0].content_hash()}, expected {job.task_hash})",
                      hint="every node needs the same suite version and task files")


def _node() -> str:
    try:
        import ray

        node_id: str = ray.get_runtime_context().get_node_id()
        return f"{socket.gethostname()} (node {node_id[:12]})"
    except Exception:  # noqa: BLE001 - only for the message
        return socket.gethostname()
