"""Episodes as Ray tasks: run episode jobs on a Ray cluster, get trajectories back as they end.

Why Ray, and why this shape: every episode already makes its own workspace and bubblewrap
sandbox in :func:`~harnessgrid.engine.runtime.run_episode`, so spreading episodes over machines only
needs *where* each one runs. Ray does that part with its own mechanisms — scheduling one
episode per CPU, re-running a task whose worker process or node died (``max_retries``), and
streaming finished tasks back with ``ray.wait`` — and nothing here re-implements them.

A job travels as plain specs (:class:`~harnessgrid.engine.executor.EpisodeJob`), never as live
objects: the worker rebuilds the harness, task and policy through the same registry the local
code uses (:func:`~harnessgrid.engine.executor.run_job`), so a job runs the same on any node, and a
scripted episode gives the same trajectory as a local one. Each Ray worker process keeps one
event loop and a sandbox pool for the episodes it runs, as a local run does; the pool is
closed when the worker has been idle for a while (:data:`POOL_IDLE_S`).

This is the Ray backend of :mod:`harnessgrid.engine.executor`
(:class:`~harnessgrid.engine.executor.RayExecutor`: ``eval --ray``, the trainer's
``rollout_backend: ray``); used directly::

    from harnessgrid.engine.ray_episodes import EpisodeJob, ray_cluster, ray_episodes

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
import atexit
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harnessgrid.engine.jobs import EpisodeJob, SetupError, rebuild, run_job
from harnessgrid.errors import ConfigError, HarnessgridError

if TYPE_CHECKING:
    from harnessgrid.sandboxing.sandbox_pool import PoolsByKey
    from harnessgrid.trajectory import Trajectory

__all__ = ["DEFAULT_MAX_RETRIES", "POOL_IDLE_S", "EpisodeJob", "EpisodeLostError",
           "import_ray", "ray_cluster", "ray_episodes"]

INSTALL_HINT = "install the Ray extra: pip install 'harnessgrid[ray]'"
#: How often a worker may die under one episode before the episode counts as lost (Ray's own
#: task retries; an episode is pure — its workspace and sandbox are new — so re-running it is
#: safe).
DEFAULT_MAX_RETRIES = 3
#: Seconds a Ray worker keeps its pre-started sandboxes after its last episode: long enough
#: for the next job of a run, short enough not to hold sandboxes once the run is over.
POOL_IDLE_S = 30.0
_WAIT_S = 1.0  # ray.wait timeout: how often a waiting driver checks for Ctrl-C


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
                 max_in_flight: int | None = None, idle_s: float = POOL_IDLE_S,
                 cancelled: Callable[[], bool] | None = None,
                 ) -> Iterator[tuple[int, Trajectory]]:
    """Run ``jobs`` as Ray tasks and yield ``(index into jobs, trajectory)`` as each ends.

    Each job is one task of ``num_cpus`` CPUs (fractions pack several I/O-bound episodes on a
    CPU). A task whose worker process or node dies is re-run by Ray elsewhere, up to
    ``max_retries`` times; only the attempt that returns is yielded, so each job is yielded
    exactly once. ``max_in_flight`` bounds how many tasks are submitted at once (default:
    all). An episode's own failures (policy error, sandbox error, a harness that raised) come
    back as its trajectory, as with :func:`~harnessgrid.engine.runtime.run_episode`; a job that
    cannot be run at all raises :class:`EpisodeLostError`, and the tasks still pending are
    cancelled. Each Ray worker keeps its sandbox pool ``idle_s`` seconds after its last
    episode. ``cancelled`` is polled while waiting: when it says so,
    :class:`asyncio.CancelledError` is raised (and the pending tasks are cancelled).

    Uses the current Ray connection, or connects to ``address`` for the duration (see
    :func:`ray_cluster`).
    """
    ray = import_ray()
    if not ray.is_initialized():
        with ray_cluster(address or "auto"):
            yield from ray_episodes(jobs, num_cpus=num_cpus, max_retries=max_retries,
                                    max_in_flight=max_in_flight, idle_s=idle_s,
                                    cancelled=cancelled)
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
                pending[remote.remote(jobs[submitted], idle_s)] = submitted
                submitted += 1
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_WAIT_S)
            if cancelled is not None and cancelled():
                raise asyncio.CancelledError
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


def _run_job_on_worker(job: EpisodeJob, idle_s: float = POOL_IDLE_S) -> dict[str, Any]:
    """The body of a Ray task: ``{"trajectory": JSON}``, or ``{"setup_error": ...}`` when
    this node cannot rebuild the job (plain data both ways: no exception pickling)."""
    try:
        task, policy = rebuild(job)
    except SetupError as exc:
        return {"setup_error": exc.message, "hint": exc.hint, "node": _node()}
    traj = _worker_loop().run(job.bind(task=task, policy=policy), idle_s)
    return {"trajectory": traj.model_dump_json()}


class _WorkerLoop:
    """The event loop of a Ray worker process, running in a thread of its own for as long as
    the process lives. Ray reuses a worker for many tasks, so its episodes share one loop
    (clients bound to a loop stay usable) and one sandbox pool, as a local run's do; because
    the loop keeps running between tasks, returned sandboxes are reset meanwhile, and the pool
    is closed once no episode has come for ``idle_s`` seconds."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="harnessgrid-ray-episodes",
                         daemon=True).start()
        self.pools: PoolsByKey | None = None
        self.running = 0
        self.idle: asyncio.TimerHandle | None = None
        atexit.register(self.close)

    def run(self, job: EpisodeJob, idle_s: float) -> Trajectory:
        """Run ``job`` on the loop; on an interruption of this thread (``ray.cancel``) the
        episode is cancelled too."""
        future = asyncio.run_coroutine_threadsafe(self._episode(job, idle_s), self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def _episode(self, job: EpisodeJob, idle_s: float) -> Trajectory:
        from harnessgrid.sandboxing.sandbox_pool import PoolsByKey

        if self.idle is not None:
            self.idle.cancel()
        if self.pools is None:  # a Ray worker runs one task at a time: a small pool
            self.pools = PoolsByKey(1)
        self.running += 1
        try:
            return await run_job(job, pool=self.pools)
        finally:
            self.running -= 1
            if not self.running:
                self.idle = self.loop.call_later(idle_s, self._close_pools)

    def _close_pools(self) -> asyncio.Future[None] | None:
        pools, self.pools = self.pools, None
        return None if pools is None else asyncio.ensure_future(pools.close())

    def close(self) -> None:
        """Close the pool at exit (best effort: a killed worker's sandboxes die with it)."""
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_now(), self.loop).result(timeout=10)

    async def _close_now(self) -> None:
        closing = self._close_pools()
        if closing is not None:
            await closing


_LOOP: _WorkerLoop | None = None
_LOOP_LOCK = threading.Lock()


def _worker_loop() -> _WorkerLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = _WorkerLoop()
        return _LOOP


def _node() -> str:
    try:
        import ray

        node_id: str = ray.get_runtime_context().get_node_id()
        return f"{socket.gethostname()} (node {node_id[:12]})"
    except Exception:  # noqa: BLE001 - only for the message
        return socket.gethostname()
