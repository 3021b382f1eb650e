"""Pre-started episode sandboxes: an episode gets a sandbox that is already up.

Starting a sandbox (``bwrap``, a fresh interpreter for the command server, chowning the
workspace to a leased uid) costs tens of milliseconds, more than an episode's harness code. A
:class:`SandboxPool` starts sandboxes ahead of need, in the sandbox lifecycle threads, while
earlier episodes run: each over an *empty* workspace directory (a sandbox is bound to its
workspace at launch), which :meth:`SandboxPool.acquire` then fills with the task's files
(``Workspace.create(into=...)``, owned by the sandbox's uid).

A returned sandbox is recycled for a later episode instead of closed (:meth:`SandboxPool.
release`): it gets a new lease (:meth:`Sandbox.reset_sync` with ``empty_workspace``) - the
episode's command server exits, taking every process of the episode and its pid, ipc, network
and mount namespaces with it; the workspace's tmpfs is replaced by a new, empty one; a new
server starts, forked from the sandbox's PID 1 in new namespaces, with a new ``/proc``, ``/tmp``,
``/dev/shm`` and ``/dev/mqueue`` (about 4 ms of CPU, against ~25 for a start) - and it goes back to the pool,
so sequential and concurrent episodes stop paying a sandbox start each. The next episode gets
it **as new**: nothing the previous episode could set tells it apart from a freshly started
sandbox - no file, process, IPC object or message queue, and no kernel counter either: its
first command gets the pid a fresh sandbox's does, IPC objects get the same ids, files in
``/tmp`` and the workspace the same inode numbers, the loopback's traffic counters and the
server's own CPU and scheduling counts start from zero (``tests/test_sandbox_pool_as_new.py``
encodes a number in each and reads them back on the next lease). What it keeps is the
sandbox's uid, its memory cgroup and its PID 1, from none of which a command can read
anything. Only root sandboxes have leases: run as a normal user, a returned sandbox is closed
and each episode gets one freshly started (ahead of need all the same). A sandbox is lent to
one episode at a time. A sandbox whose reset fails, or that is not plainly healthy when
returned (closed - a graded episode closes its sandbox before grading unless it is idle -,
dead, a command cancelled, busy, unsandboxed), is closed and its directory removed; so is one
that served ``reuse`` episodes (a bound on the lessor's own lifetime), or one the pool has no
room for. ``reuse=1`` turns recycling off. Only what can be decided before the task is known
is pooled - the mount path, the limits, the sandbox mode and the environment (the
:class:`PoolKey`); an episode that needs anything else (another mount path, other limits,
extra binds) gets a fresh start, as without a pool. A pooled sandbox whose
server died while it waited is discarded, never handed out. Closing the pool (``async with``
does it, on errors and cancellation too) stops what is still waiting and removes its
directories; returned sandboxes are reset or closed in the background, awaited by
:meth:`SandboxPool.close`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from harnessgrid.errors import HarnessgridError
from harnessgrid.sandboxing.environments import EnvironmentRecord
from harnessgrid.sandboxing.sandbox import (
    Sandbox,
    SandboxLimits,
    finish_or_undo,
    mount_conflict,
    off_loop_detached,
)
from harnessgrid.sandboxing.workspace import DEFAULT_MOUNT_PATH, Workspace

logger = logging.getLogger(__name__)

_Ready = tuple[Workspace, Sandbox]

MIN_SLOTS = 2
"""Sandboxes a pool keeps started even for one episode at a time (a smaller ``size`` is raised)."""
DEFAULT_REUSE = 50
"""Episodes (leases) one pooled sandbox serves, each as new, before it is closed."""


@dataclass(frozen=True)
class PoolKey:
    """What a pre-started sandbox is bound to; an episode must match it to use one."""

    mount_path: str = DEFAULT_MOUNT_PATH
    limits: SandboxLimits = SandboxLimits()
    unsafe_no_sandbox: bool = False
    environment: EnvironmentRecord | None = None


@dataclass
class PoolStats:
    """What the pool did, for benchmarks and tests."""

    started: int = 0
    handed_out: int = 0
    fresh: int = 0
    discarded: int = 0
    failed_starts: int = 0
    recycled: int = 0
    """Returned sandboxes reset and put back for another episode."""
    not_recycled: int = 0
    """Returned sandboxes closed instead: unhealthy, a failed reset, worn out or no room."""


def _prestart(key: PoolKey) -> _Ready:
    """Blocking: an empty workspace with a started sandbox over it (runs in a lifecycle thread)."""
    ws = Workspace.create(mount_path=key.mount_path)
    try:
        sandbox = Sandbox(ws, key.limits, unsafe_no_sandbox=key.unsafe_no_sandbox,
                          environment=key.environment)
        sandbox.start_sync()
    except BaseException:
        ws.cleanup()
        raise
    return ws, sandbox


def _reset(ws: Workspace, sandbox: Sandbox) -> str | None:
    """Blocking: make a returned sandbox as new - a new lease over an empty workspace - (None),
    or say why it cannot be."""
    why: str | None = sandbox.reset_sync(empty_workspace=True)
    if why is None and any(ws.root.iterdir()):  # a new tmpfs: trust, but verify
        why = "the workspace is not empty after the reset"
    return why


def _dispose(ws: Workspace, sandbox: Sandbox | None) -> None:
    """Blocking: stop the sandbox (if any), then remove its directory (whose files therefore
    need not be chowned back first)."""
    try:
        if sandbox is not None:
            sandbox.close_sync(discard_workspace=True)
    finally:
        ws.cleanup()


class SandboxPool:
    """Up to ``size`` sandboxes (at least :data:`MIN_SLOTS`, none for ``size=0``) kept started
    for episodes matching ``key``.

    ``expected`` (optional) is how many episodes will ask: the pool then starts no more than
    that in all, so the last episodes leave no unused sandboxes to throw away. ``reuse`` is how
    many episodes one sandbox may serve in turn, reset in between (1: close each after its
    episode). Use it as ``async with SandboxPool(8) as pool:`` and pass ``pool=`` to
    :func:`~harnessgrid.engine.runtime.run_episode`;
    :func:`~harnessgrid.engine.executor.run_episodes` makes one itself, sized to its concurrency.

    Recycling, the pool keeps at most ``size + 1`` sandboxes in all (lent, waiting, starting
    or being reset; at least :data:`MIN_SLOTS`): one spare, so an episode rarely waits for
    the reset of the one before it. Acquisitions beyond that are still served (a start each),
    and what they return is closed.
    """

    def __init__(self, size: int, key: PoolKey | None = None, *,
                 expected: int | None = None, reuse: int = DEFAULT_REUSE) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise HarnessgridError(f"SandboxPool size={size!r} must be a whole number >= 0",
                                   hint="size it to the number of episodes run at once")
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)
                                     or expected < 0):
            raise HarnessgridError(f"SandboxPool expected={expected!r} must be a whole number "
                                   ">= 0 or None", hint="pass how many episodes will run")
        if isinstance(reuse, bool) or not isinstance(reuse, int) or reuse < 1:
            raise HarnessgridError(f"SandboxPool reuse={reuse!r} must be a whole number >= 1",
                                   hint="episodes one sandbox may serve; 1 turns recycling off")
        self.key = key or PoolKey()
        # A mount path the sandbox refuses cannot be pooled; those episodes fail as before.
        # One slot cannot keep up with episodes shorter than a start (scripted ones, quick
        # failures): a sequential run would wait for each start. Two let starts overlap.
        pooled = size > 0 and not mount_conflict(self.key.mount_path)
        self.size = max(size, MIN_SLOTS) if pooled else 0
        self.reuse = reuse
        # Recycled sandboxes come back: count them all, with one spare (see the class doc).
        self._capacity = max(size + 1, MIN_SLOTS) if pooled else 0
        self.stats = PoolStats()
        self._to_start = expected
        self._ready: deque[_Ready] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._starting = 0
        self._resetting = 0
        self._lent: dict[Sandbox, int] = {}  # handed out, not returned yet: episodes served
        self._uses: dict[Sandbox, int] = {}  # waiting or resetting: episodes served so far
        self._pending: set[asyncio.Future[object]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifetime

    async def __aenter__(self) -> Self:
        self._refill()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop every waiting sandbox, wait for those being started or returned, remove all
        their directories. Idempotent; also finishes (in the lifecycle threads) if cancelled."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        while self._ready or self._pending:
            while self._ready:
                ws, sandbox = self._ready.popleft()
                self._background(functools.partial(_dispose, ws, sandbox))
            pending = list(self._pending)
            await asyncio.gather(*(asyncio.shield(f) for f in pending), return_exceptions=True)
            self._pending.difference_update(pending)

    # ------------------------------------------------------------------ episodes

    def matches(self, key: PoolKey) -> bool:
        """Whether an episode with ``key`` can use this pool's sandboxes."""
        return self.size > 0 and key == self.key

    async def acquire(self, files: Mapping[str, str | bytes] | None = None,
                      source_dir: Path | None = None, *,
                      key: PoolKey | None = None) -> tuple[Workspace, Sandbox | None]:
        """A workspace holding ``source_dir`` and ``files``, and its started sandbox - or None
        for the sandbox when ``key`` does not match the pool or pre-starting failed (the caller
        then starts one itself, as without a pool). Give both back with :meth:`release`."""
        key = key or self.key
        self._check_open()
        ready = await self._take() if self.matches(key) else None
        if ready is None:
            self.stats.fresh += 1
            made = off_loop_detached(lambda: Workspace.create(files, source_dir,
                                                              mount_path=key.mount_path))
            await finish_or_undo(made, lambda ws: self.release(ws, None))
            return made.result(), None
        ws, sandbox = ready
        if sandbox in self._lent:  # cannot happen: the invariant the isolation rests on
            raise HarnessgridError("the sandbox pool would lend one sandbox twice",
                                   hint="this is a bug in harnessgrid.sandboxing.sandbox_pool; "
                                        "report it")
        self._lent[sandbox] = self._uses.pop(sandbox, 0) + 1
        self.stats.handed_out += 1
        self._refill()  # the next episodes' sandboxes start while this one runs
        if source_dir is None and _small(files):
            # A thread hop costs more than writing a few small files (and, on a busy host,
            # several ms of waiting for the thread): those are written right here.
            try:
                Workspace.create(files, mount_path=key.mount_path, into=ws)
            except BaseException:
                self._discard(ws, sandbox)  # create() removed the workspace already
                raise
            return ws, sandbox
        filled = off_loop_detached(lambda: Workspace.create(files, source_dir,
                                                            mount_path=key.mount_path, into=ws))
        await finish_or_undo(filled, lambda _: self._discard(ws, sandbox),
                             on_error=lambda: self._discard(ws, sandbox))
        return ws, sandbox

    def release(self, ws: Workspace, sandbox: Sandbox | None) -> None:
        """The episode is over: its sandbox is reset and put back for another episode, or
        closed and its workspace removed (see the module doc) - in the background (never
        blocks, so it is safe in ``finally`` under cancellation). Give each sandbox back once."""
        if sandbox is None:
            self._background(lambda: _dispose(ws, None))
            return
        uses = self._lent.pop(sandbox, None)
        if uses is None:
            raise HarnessgridError("this sandbox is not lent by this pool (returned twice?)",
                                   hint="call release() once per acquire(), with what it gave")
        if (self._closed or uses >= self.reuse or not sandbox.idle()
                or not sandbox.renewable()  # not root: no leases, a fresh start instead
                or self._total() >= self._capacity):  # (the others: this one is not lent now)
            self._not_recycled(ws, sandbox)
            return
        self._resetting += 1
        future = self._background(lambda: _reset(ws, sandbox))
        future.add_done_callback(functools.partial(self._reset_done, ws, sandbox, uses))

    def waiting(self) -> list[Sandbox]:
        """The started sandboxes not handed out yet (diagnostics and tests)."""
        return [sandbox for _, sandbox in self._ready]

    # ------------------------------------------------------------------ internals

    def _total(self) -> int:
        """Sandboxes of this pool alive or on their way: lent, waiting, starting, resetting."""
        return len(self._lent) + len(self._ready) + self._starting + self._resetting

    def _discard(self, ws: Workspace, sandbox: Sandbox) -> None:
        """A lent sandbox that must not serve again (its workspace failed to fill)."""
        self._lent.pop(sandbox, None)
        self._background(functools.partial(_dispose, ws, sandbox))
        self._refill()

    def _not_recycled(self, ws: Workspace, sandbox: Sandbox) -> None:
        self.stats.not_recycled += 1
        self._background(functools.partial(_dispose, ws, sandbox))
        self._refill()

    def _reset_done(self, ws: Workspace, sandbox: Sandbox, uses: int,
                    future: asyncio.Future[object]) -> None:
        self._resetting -= 1
        why = "cancelled" if future.cancelled() else (future.exception() or future.result())
        if why is not None or self._closed:
            if why is not None:
                logger.info("a returned sandbox is closed, not recycled: %s", why)
            self._not_recycled(ws, sandbox)
            self._wake()  # a waiter counting on this one starts its own
            return
        self.stats.recycled += 1
        self._uses[sandbox] = uses
        self._ready.append((ws, sandbox))
        self._wake()

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessgridError("the sandbox pool is closed",
                                   hint="acquire sandboxes inside `async with pool:`")

    async def _take(self) -> _Ready | None:
        """The next live pre-started sandbox; None once a start failed while we waited (the
        episode then starts its own and reports why, instead of waiting for more failures)."""
        failures = self.stats.failed_starts
        while True:
            while not self._ready:
                self._check_open()
                if self.stats.failed_starts > failures:
                    return None
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                self._refill()  # a sandbox on its way for it
                try:
                    await waiter
                except asyncio.CancelledError:
                    if self._ready:
                        self._wake()  # a wake-up meant for us must not be lost
                    raise
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
            ws, sandbox = self._ready.popleft()
            if sandbox.alive():
                return ws, sandbox
            logger.warning("a pre-started sandbox died while waiting; discarded")
            self.stats.discarded += 1
            self._uses.pop(sandbox, None)
            self._background(functools.partial(_dispose, ws, sandbox))
            if self._to_start is not None:
                self._to_start += 1  # its episode still needs one
            self._refill()

    def _refill(self) -> None:
        """Start sandboxes until ``size`` are waiting or on their way (within the capacity
        when recycling); while acquisitions wait, at least one is always on its way, even
        past ``expected`` or the capacity (a caller may hold all the others)."""
        while not self._closed and (self._to_start is None or self._to_start > 0):
            supply = len(self._ready) + self._starting + self._resetting
            room = self.reuse == 1 or self._total() < self._capacity
            waiting = sum(not w.done() for w in self._waiters)
            if not (supply < self.size or waiting > supply) or not room:
                break
            self._start_one()
        if (not self._closed and self._starting == 0 and self._resetting == 0 and not self._ready
                and any(not w.done() for w in self._waiters)):
            self._start_one()  # never leave an acquisition waiting on nothing

    def _start_one(self) -> None:
        self._starting += 1
        if self._to_start is not None:
            self._to_start = max(0, self._to_start - 1)
        future = self._background(lambda: _prestart(self.key))
        future.add_done_callback(self._started)

    def _started(self, future: asyncio.Future[object]) -> None:
        self._starting -= 1
        if future.cancelled() or future.exception() is not None:
            self.stats.failed_starts += 1
            exc = None if future.cancelled() else future.exception()
            logger.warning("pre-starting a sandbox failed: %s", exc)
            self._wake(everyone=True)  # each waiter starts its own sandbox instead
            return
        ready = future.result()
        assert isinstance(ready, tuple)
        ws, sandbox = ready
        self.stats.started += 1
        if self._closed:
            self._background(lambda: _dispose(ws, sandbox))
            return
        self._ready.append((ws, sandbox))
        self._wake()

    def _wake(self, everyone: bool = False) -> None:
        """Wake one waiter for a sandbox that is ready (or all of them after a failed start)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not everyone:
                    return

    def _background(self, action: Callable[[], object]) -> asyncio.Future[object]:
        future: asyncio.Future[object] = off_loop_detached(action)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        future.add_done_callback(_log_failure)
        return future


class PoolsByKey:
    """Sandbox pools for a stream of episodes whose keys are not known up front (a worker
    process, a long-lived event loop serving jobs as they come): one :class:`SandboxPool` of
    ``size`` per key, made when an episode first asks for it (:meth:`get`); ``expected`` and
    ``reuse`` are each pool's (see :class:`SandboxPool`). At most ``max_keys`` pools; episodes
    with further keys start their own sandboxes, as without a pool. Pass it as ``pool=`` to
    :func:`~harnessgrid.engine.runtime.run_episode`; close it (``async with``) on the loop that used
    it."""

    def __init__(self, size: int, *, expected: int | None = None, reuse: int = DEFAULT_REUSE,
                 max_keys: int = 4) -> None:
        SandboxPool(size, expected=expected, reuse=reuse)  # the same checks; starts nothing
        self.size, self.expected, self.reuse, self.max_keys = size, expected, reuse, max_keys
        self._pools: dict[PoolKey, SandboxPool] = {}
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def get(self, key: PoolKey) -> SandboxPool | None:
        """The pool for ``key`` (started now if it is new); None when closed or full."""
        pool = self._pools.get(key)
        if pool is None and not self._closed and len(self._pools) < self.max_keys:
            pool = self._pools[key] = SandboxPool(self.size, key, expected=self.expected,
                                                  reuse=self.reuse)
            pool._refill()  # what `async with` does: its first sandboxes start now
        return pool

    async def close(self) -> None:
        """Close every pool (see :meth:`SandboxPool.close`); idempotent."""
        self._closed = True
        await asyncio.gather(*(pool.close() for pool in self._pools.values()))


_INLINE_FILES = 32
_INLINE_BYTES = 256 * 1024


def _small(files: Mapping[str, str | bytes] | None) -> bool:
    """Few and small enough to write on the event loop (well under a millisecond)."""
    if not files:
        return True
    return len(files) <= _INLINE_FILES and sum(map(len, files.values())) <= _INLINE_BYTES


def _log_failure(future: asyncio.Future[object]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.debug("sandbox pool background step failed: %s", future.exception())
