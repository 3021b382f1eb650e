"""Episodes spread over local worker processes (``harnessgrid eval --workers N``).

One event loop runs out of CPU long before a model server does: at 64 episodes at once, the
loop's own work (the model client, the sandbox protocol, the harness) becomes the limit. So the
episodes go to N worker processes, each with its own event loop and its share of the
concurrency, and come back here as trajectories, for the caller to store through the one
evaluation store (the workers never write it: a killed run resumes exactly as a one-process
run does).

This is the process backend of :mod:`harnessgrid.engine.executor`
(:class:`~harnessgrid.engine.executor.ProcessExecutor`). Jobs travel as
:class:`~harnessgrid.engine.executor.EpisodeJob` specs and are rebuilt in the worker the way a Ray
worker rebuilds them (:func:`~harnessgrid.engine.executor.run_job`), so a worker builds each suite
and the policy once. Workers are started with ``forkserver`` (or ``spawn``), never ``fork``: the
parent may hold threads (sandbox lifecycle pools, HTTP clients).

The parent hands out jobs as workers free up, at most each worker's share at a time, and knows
which jobs each worker holds. A worker that dies (killed, out of memory, a crash in native
code) costs exactly the episodes it held: each comes back as an ``internal_error`` trajectory
(:func:`~harnessgrid.engine.executor.lost_episode`: an infrastructure failure, so a resume runs it
again), a new worker takes its place, and the evaluation goes on. Nothing waits on a dead
worker: its process sentinel wakes the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from harnessgrid.engine.jobs import EpisodeJob, lost_episode
from harnessgrid.errors import ConfigError, HarnessgridError
from harnessgrid.sandboxing.sandbox_pool import PoolsByKey
from harnessgrid.trajectory import Trajectory

#: How often a worker may be replaced after dying, per worker asked for, before the jobs left
#: are given up as infrastructure failures (a worker that dies on start would loop forever).
RESPAWNS_PER_WORKER = 3
_STOP_WAIT_S = 10.0  # a worker told to stop (its pipe closed) is killed after this long
_POLL_S = 0.25  # how often a waiting parent looks at ``cancelled``


def check_workers(workers: object, concurrency: int) -> int:
    """``workers`` as a valid count for ``concurrency`` episodes at once, or a ConfigError."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers {workers!r} is not a number of processes (1 or more)",
                          hint="pass e.g. --workers 2 (1 runs every episode in this process)")
    if workers > concurrency:
        raise ConfigError(f"--workers {workers} is more than --concurrency {concurrency}: each "
                          "worker runs at least one episode at once",
                          hint=f"raise --concurrency to {workers} or more, or use fewer workers")
    return workers


def shares(concurrency: int, workers: int) -> list[int]:
    """Episodes at once per worker: ``concurrency`` split as evenly as it goes."""
    base, extra = divmod(concurrency, workers)
    return [base + (i < extra) for i in range(workers)]


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    share: int
    held: set[int] = field(default_factory=set)


def worker_episodes(jobs: Sequence[EpisodeJob], *, workers: int, concurrency: int,
                    cancelled: Callable[[], bool] | None = None,
                    ) -> Iterator[tuple[int, Trajectory]]:
    """Run ``jobs`` in ``workers`` processes, ``concurrency`` episodes at once in all; yield
    ``(index into jobs, trajectory)`` as each ends, every index exactly once. A job a worker
    cannot rebuild (a plugin missing there) raises :class:`HarnessgridError`; closing the
    generator (Ctrl-C, an error while storing) stops the workers.

    ``cancelled`` is polled while waiting: when it says so, :class:`asyncio.CancelledError` is
    raised. An async caller that waits here (blocking its loop) passes its task's
    ``cancelling``, so that Ctrl-C under ``asyncio.run`` (which cancels the main task instead
    of raising KeyboardInterrupt) is not left pending until the end."""
    check_workers(workers, concurrency)
    if not jobs:  # no worker process to start
        return
    context = _context()
    todo = deque(range(len(jobs)))
    pool: list[_Worker] = []
    respawns = RESPAWNS_PER_WORKER * workers
    encoded = [job.model_dump_json().encode() for job in jobs]
    try:
        for share in shares(concurrency, min(workers, max(1, len(jobs)))):
            pool.append(_start(context, share, len(jobs)))
        while todo or any(w.held for w in pool):
            for w in pool:  # hand out work up to each worker's share
                while todo and len(w.held) < w.share:
                    index = todo.popleft()
                    w.held.add(index)
                    w.conn.send_bytes(json.dumps({"index": index}).encode() + b"\n"
                                      + encoded[index])
            ready = wait([w.conn for w in pool] + [w.process.sentinel for w in pool],
                         timeout=_POLL_S)
            if cancelled is not None and cancelled():
                raise asyncio.CancelledError
            for w in list(pool):
                if w.conn in ready or w.process.sentinel in ready:
                    yield from _drain(w, jobs)
                if not w.process.is_alive() and w in pool:
                    yield from _lost(w, jobs)
                    pool.remove(w)
                    _close(w)
                    if todo and respawns > 0:
                        respawns -= 1
                        pool.append(_start(context, w.share, len(jobs)))
            if todo and not pool:  # every replacement died too: give the rest up
                while todo:
                    index = todo.popleft()
                    yield index, lost_episode(jobs[index], "no worker process is left (each "
                                              "one died); see the log of this run")
    finally:
        _stop(pool)


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _start(context: Any, share: int, jobs: int) -> _Worker:
    parent, child = context.Pipe(duplex=True)
    process = context.Process(target=_worker_main, args=(child, share, jobs),
                              name="harnessgrid-worker", daemon=True)
    # A started process re-runs the caller's main script unless it is guarded by
    # ``if __name__ == "__main__"``; workers need nothing from it, so they are not shown it.
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        process.start()
    finally:
        sys.modules["__main__"] = main
    child.close()
    return _Worker(process, parent, share)


def _drain(w: _Worker, jobs: Sequence[EpisodeJob]) -> Iterator[tuple[int, Trajectory]]:
    """Every message the worker has sent so far (also after it died: what it sent counts)."""
    from harnessgrid.trajectory import read_trajectory_line

    while True:
        try:
            if not w.conn.poll():
                return
            data = w.conn.recv_bytes()
        except (EOFError, OSError):
            return
        head, _, body = data.partition(b"\n")
        message = json.loads(head)
        index = int(message["index"])
        if "setup_error" in message:
            raise HarnessgridError(
                f"a worker process cannot run episode {jobs[index].describe()}: "
                f"{message['setup_error']}", hint=message.get("hint"))
        w.held.discard(index)
        traj = read_trajectory_line(body, f"worker {w.process.pid}")
        yield index, traj if traj is not None else lost_episode(
            jobs[index], "the worker's trajectory could not be read back")


def _lost(w: _Worker, jobs: Sequence[EpisodeJob]) -> Iterator[tuple[int, Trajectory]]:
    code = w.process.exitcode
    how = (f"killed by signal {-code}" if code is not None and code < 0
           else f"exit status {code}")
    for index in sorted(w.held):
        yield index, lost_episode(jobs[index], f"the worker process {w.process.pid} running "
                                              f"this episode died ({how})")
    w.held.clear()


def _close(w: _Worker) -> None:
    with contextlib.suppress(OSError):
        w.conn.close()
    w.process.join(timeout=1.0)


def _stop(pool: list[_Worker]) -> None:
    """Close every pipe (a worker then cancels what it holds and exits); kill stragglers."""
    for w in pool:
        with contextlib.suppress(OSError):
            w.conn.close()
    deadline = time.monotonic() + _STOP_WAIT_S
    for w in pool:
        w.process.join(timeout=max(0.0, deadline - time.monotonic()))
        if w.process.is_alive():
            w.process.kill()
            w.process.join(timeout=5.0)


# -- the worker side ---------------------------------------------------------------------------


def _worker_main(conn: Connection, share: int, jobs: int) -> None:
    """A worker process: its own event loop, ``share`` episodes at once, until its pipe ends;
    ``jobs`` (all of the run's) bounds how many sandboxes its pools start."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    asyncio.run(_serve(conn, share, jobs))


async def _serve(conn: Connection, share: int, jobs: int) -> None:
    # The worker's episodes take pre-started sandboxes, recycled between them, as a
    # one-process run does (runtime.episode_pool): no sandbox start per episode.
    async with PoolsByKey(min(share, jobs), expected=jobs) as pools:
        await _serve_jobs(conn, pools)


async def _serve_jobs(conn: Connection, pools: PoolsByKey) -> None:
    from harnessgrid.engine.jobs import run_job
    from harnessgrid.trajectory import trajectory_line

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[bytes | None] = asyncio.Queue()

    def receive() -> None:  # a thread: the pipe's blocking reads stay off the loop
        while True:
            try:
                data: bytes | None = conn.recv_bytes()
            except (EOFError, OSError):
                data = None
            loop.call_soon_threadsafe(inbox.put_nowait, data)
            if data is None:
                return

    threading.Thread(target=receive, name="harnessgrid-worker-inbox", daemon=True).start()
    sending = asyncio.Lock()

    async def send(data: bytes) -> None:
        async with sending:  # one message at a time; a big trajectory never blocks the loop
            await asyncio.to_thread(conn.send_bytes, data)

    async def run(head: dict[str, Any], body: bytes) -> None:
        job = EpisodeJob.model_validate_json(body)
        try:
            traj = await run_job(job, pool=pools)
        except HarnessgridError as exc:  # this process cannot rebuild the job
            await send(json.dumps({**head, "setup_error": exc.message,
                                   "hint": exc.hint}).encode() + b"\n")
            return
        await send(json.dumps(head).encode() + b"\n" + trajectory_line(traj))

    running: set[asyncio.Task[None]] = set()
    while True:
        data = await inbox.get()
        if data is None:  # the parent closed the pipe (done, interrupted or dead): stop
            break
        raw_head, _, body = data.partition(b"\n")
        task = asyncio.create_task(run(json.loads(raw_head), body))
        running.add(task)
        task.add_done_callback(running.discard)
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
