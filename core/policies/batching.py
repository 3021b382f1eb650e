"""Batched generation across concurrent episodes for the token policies.

A trainer runs many episodes at once on one model (GRPO: 16 tasks x 8 rollouts = 128 episodes
per step). Decoding their turns one at a time wastes the accelerator (and, on CPU, most of the
time goes to per-forward overhead): one batch-8 decode costs about a third of eight batch-1
decodes. So a token policy does not generate in the caller's thread; it hands each turn to a
:class:`GenerationBatcher`, whose single generation thread repeatedly takes *every* request
pending at the moment the model is free (up to ``max_batch_size``), runs them through the
backend's batch call (one padded decode for ``hf:``, one ``LLM.generate`` for ``vllm:``), and
completes each request's future. Requests that arrive while a batch is decoding wait for the
next one (no continuous batching: a batch runs to completion).

Why futures instead of a thread per waiting caller: ``asyncio.to_thread`` runs on the event
loop's default executor, ``min(32, cpus + 4)`` threads, so at most that many episodes could even
*wait* for generation. Here a coroutine awaits an asyncio future of its own loop
(:meth:`GenerationBatcher.submit_async`); the generation thread completes the futures of a
batch with ONE ``loop.call_soon_threadsafe`` per event loop, so all the batch's episodes resume
in the same loop iteration (and can announce their next turns before any of them is queued).
Any number of episodes can wait, on any number of event loops, and the batcher outlives them
(a trainer calls ``asyncio.run`` once per step). Blocking callers use
:meth:`~GenerationBatcher.submit` (a :class:`concurrent.futures.Future`) instead.

The generation thread is started on the first request and exits after ``idle_s`` without work
(a new one starts on the next request), so an idle policy holds no thread. A request whose
caller was cancelled before its batch started is skipped; the backend's exception, if any, is
set on every future of the failed batch.

Which turns are *pending*: a turn counts from the moment it is asked for. A caller announces
the turn (:meth:`GenerationBatcher.announce`) before it builds the prompt ids (a tokenizer call
of a few milliseconds, serialised across episodes), and a batch being formed waits (at most
``gather_timeout_s``) for the announced turns still in preparation. Without that, episodes that
ask at the same moment would be split by their tokenisation order into a batch of the first
one or two and a batch of the rest, and stay out of step for the whole episode (half the batch
size, twice the forwards). Turns asked for while a batch decodes still wait for the next one.

What batching must not change is each sequence's result: the backends seed every row from its
own per-turn seed (:func:`~harnessgrid.policies.token.derive_seed`), so a sequence samples the
same ids whichever sequences share its batch -- up to floating-point rounding: a padded batch's
logits differ from another batch's by about 1e-7, which now and then moves a sampled token
across its uniform (see :mod:`harnessgrid.policies.hf`), and a trainer's run then drifts from
the same run repeated.

Lockstep (what makes a run repeat): the episodes an executor runs together form a
:class:`Lockstep` group, one slot per concurrent runner (:func:`lockstep_slot`). The first
request from the group makes its live slots participants of this batcher, and from then on a
batch is formed only when *every* participant has a turn pending (or its runner has ended);
the turns are taken in a fixed order (by prompt ids, then seed) and decoded in chunks of
``max_batch_size``. Which turns share a batch then depends only on the episodes themselves --
how many turns each takes -- not on how fast tools, graders or the machine are, so the same
run makes the same batches and the same floating-point rounding. A participant's runner starts
its next episode in the slot its last one held, so the round after an episode ends waits for
its successor's first turn. The cost: a batch waits for the slowest tool call of the round
(milliseconds against a decode's hundreds). Turns from outside the group (a session on the same
model, say) ride along in the next batch without being waited for. A participant that has
not asked for ``lockstep_wait_s`` (a very long tool call) no longer holds the batch back: the
batch goes without it and a warning says that this run may not repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # token.py imports this module
    from harnessgrid.policies.token import Generation

__all__ = ["BatchGenerate", "GenerationBatcher", "GenerationRequest", "GenerationStats",
           "Lockstep", "lockstep_slot"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationRequest:
    """One turn to generate: its exact prompt ids, its own token limit and per-turn seed.

    ``on_token``, when set, is called from the generation thread with each id as it is
    sampled (a backend that samples step by step does; one that cannot ignores it). It must
    be quick and must not raise: it runs inside the batch of every other episode too."""

    prompt_ids: list[int]
    max_new_tokens: int
    seed: int | None
    on_token: Callable[[int], None] | None = field(default=None, compare=False, repr=False)


#: A backend's blocking batch call: one :class:`Generation` per request, in request order.
BatchGenerate = Callable[[Sequence[GenerationRequest]], "list[Generation]"]


@dataclass
class GenerationStats:
    """Counters of what a policy's generation did, for tests, benchmarks and logs.

    Updated by the generation thread only; read them from anywhere (:meth:`snapshot` for a
    consistent copy). ``batches < requests`` means requests were batched together.
    """

    requests: int = 0       #: requests served (one per turn)
    batches: int = 0        #: batches run: one padded decode (hf) or engine call (vLLM) each
    forwards: int = 0       #: model forward calls (hf: prefill + decode steps; vLLM: = batches)
    tokens: int = 0         #: completion tokens produced
    largest_batch: int = 0  #: the most requests decoded together
    failed_batches: int = 0  #: batches whose backend call raised
    #: requests whose prompt another request of the same batch shared, so that it was not
    #: computed again (hf: one prefill row per distinct prompt, copied to the others)
    shared_prefills: int = 0
    #: prompt tokens run through the model's prefill (hf; shared prompts counted once)
    prefilled_tokens: int = 0
    #: prompt tokens whose keys and values came from the prefix cache instead (hf's
    #: ``prefix_cache_mb`` option: an episode's earlier turns)
    reused_tokens: int = 0

    @property
    def mean_batch(self) -> float:
        """Average requests per batch (0.0 before the first batch)."""
        return self.requests / self.batches if self.batches else 0.0

    def snapshot(self) -> dict[str, float]:
        """The counters (and ``mean_batch``) as a plain dict."""
        return {**asdict(self), "mean_batch": self.mean_batch}


class Lockstep:
    """The runners of one run that generate in lockstep (module docstring): ``slots`` of them,
    each entering with :func:`lockstep_slot`. The group joins the first batcher it asks (one
    only: a slot that asks another batcher is an ordinary caller there, so two models never
    wait for each other)."""

    def __init__(self, slots: int) -> None:
        self._live = slots
        self._lock = threading.Lock()
        self._batcher: GenerationBatcher | None = None

    def attach(self, batcher: GenerationBatcher) -> bool:
        """Whether ``batcher`` is this group's (joining it, with every live slot, if the
        group has none yet)."""
        with self._lock:
            if self._batcher is None:
                self._batcher = batcher
                batcher._change_participants(self._live)
            return self._batcher is batcher

    def slot_ended(self) -> None:
        """A runner is done: its batcher no longer waits for it."""
        with self._lock:
            self._live -= 1
            if self._batcher is not None:
                self._batcher._change_participants(-1)


_SLOT: contextvars.ContextVar[Lockstep | None] = contextvars.ContextVar("harnessgrid_lockstep",
                                                                        default=None)


@contextlib.contextmanager
def lockstep_slot(group: Lockstep) -> Iterator[None]:
    """Run the body (a runner's episodes, one after another) as one slot of ``group``: its
    turns join the group's lockstep, and the slot ends when the body does."""
    token = _SLOT.set(group)
    try:
        yield
    finally:
        _SLOT.reset(token)
        group.slot_ended()


@dataclass
class _Pending:
    """A queued request and how its result goes back: a thread-safe ``future`` (blocking
    callers) or an asyncio ``waiter`` on ``loop``. ``grouped``: it comes from a slot of this
    batcher's lockstep group."""

    request: GenerationRequest
    future: Future[Generation] | None = None
    waiter: asyncio.Future[Generation] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    grouped: bool = False

    def waiting(self) -> bool:
        """The caller still wants the result (not cancelled)."""
        if self.future is not None:
            return not self.future.cancelled()
        return self.waiter is not None and not self.waiter.done()

    def order(self) -> tuple[list[int], int, int]:
        """The fixed order of a lockstep round."""
        request = self.request
        return request.prompt_ids, request.max_new_tokens, request.seed or 0

    def start(self) -> bool:
        """Mark as taken into a batch; False when the caller has given up (cancelled)."""
        if self.future is not None:
            return self.future.set_running_or_notify_cancel()
        return self.waiter is not None and not self.waiter.done()


def _deliver(results: list[tuple[asyncio.Future[Generation], Generation | None,
                                  BaseException | None]]) -> None:
    """On the waiters' event loop: complete all of them in one callback, so every episode of
    the batch resumes in the same loop iteration (module docstring)."""
    for waiter, result, error in results:
        if waiter.done():  # cancelled while its batch ran
            continue
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(result)  # type: ignore[arg-type]


class GenerationBatcher:
    """Queues generation requests and serves them in batches from one thread (module doc)."""

    def __init__(self, run_batch: BatchGenerate, *, max_batch_size: int = 64,
                 stats: GenerationStats | None = None, name: str = "generation",
                 idle_s: float = 5.0, gather_timeout_s: float = 2.0,
                 lockstep_wait_s: float = 600.0) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.stats = stats if stats is not None else GenerationStats()
        self.name = name
        self.idle_s = idle_s
        self.gather_timeout_s = gather_timeout_s
        self.lockstep_wait_s = lockstep_wait_s
        self._queue: deque[_Pending] = deque()
        self._cond = threading.Condition()
        self._running = False  # a generation thread is alive (or about to start)
        self._in_flight = 0
        self._preparing = 0  # announced turns whose prompt ids are still being built
        self._participants = 0  # lockstep slots a batch waits for (module doc)

    # -- callers ----------------------------------------------------------------------------

    def announce(self) -> None:
        """A turn was asked for and its request will follow (``submit...(announced=True)``,
        or :meth:`withdraw`): until then, a batch being formed waits for it (module doc)."""
        with self._cond:
            self._preparing += 1

    def withdraw(self) -> None:
        """An announced request will not come (its preparation failed or was cancelled)."""
        with self._cond:
            self._preparing -= 1
            self._cond.notify_all()

    def submit(self, request: GenerationRequest, *,
               announced: bool = False) -> Future[Generation]:
        """Queue ``request`` for a blocking caller; the future completes when its batch is
        decoded. Never blocks. ``announced``: it was announced with :meth:`announce`."""
        future: Future[Generation] = Future()
        self._enqueue(_Pending(request, future=future), announced)
        return future

    def submit_async(self, request: GenerationRequest, *,
                     announced: bool = False) -> asyncio.Future[Generation]:
        """Queue ``request`` from a coroutine; await the returned future (of the running
        loop). Cancelling it before its batch starts drops the request."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Generation] = loop.create_future()
        self._enqueue(_Pending(request, waiter=waiter, loop=loop), announced)
        return waiter

    def generate(self, request: GenerationRequest) -> Generation:
        """Blocking: submit and wait (for callers outside an event loop)."""
        return self.submit(request).result()

    @property
    def pending(self) -> int:
        """Requests queued and not yet taken into a batch."""
        with self._cond:
            return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Requests in the batch being generated now (0 when the model is free)."""
        with self._cond:
            return self._in_flight

    def _change_participants(self, delta: int) -> None:
        with self._cond:
            self._participants += delta
            self._cond.notify_all()

    def _enqueue(self, item: _Pending, announced: bool) -> None:
        group = _SLOT.get()
        item.grouped = group is not None and group.attach(self)
        with self._cond:
            if announced:
                self._preparing -= 1
            self._queue.append(item)
            if self._running:
                self._cond.notify_all()
                return
            thread = threading.Thread(target=self._serve, name=f"hg-{self.name}", daemon=True)
            try:
                thread.start()
            except BaseException:  # no thread could start: the request is not queued
                self._queue.pop()
                raise
            self._running = True

    # -- the generation thread --------------------------------------------------------------

    def _take(self) -> list[_Pending] | None:
        """The next batch (in lockstep: the next round, see :meth:`_serve`): every live
        request pending now, up to ``max_batch_size``, after waiting (bounded) for announced
        ones; None when the thread should exit (idle)."""
        with self._cond:
            if not self._queue:
                self._cond.wait(self.idle_s)
            lockstep = self._participants > 0 and any(item.grouped for item in self._queue)
            if lockstep:
                self._wait_for_participants()
            elif self._queue:  # gather the turns still being prepared
                deadline = time.monotonic() + self.gather_timeout_s
                while self._preparing > 0 and len(self._queue) < self.max_batch_size:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            batch: list[_Pending] = []
            limit = len(self._queue) if lockstep else self.max_batch_size
            while self._queue and len(batch) < limit:
                item = self._queue.popleft()
                if item.start():
                    batch.append(item)
            if not batch and not self._queue:
                self._running = False
                return None
            if lockstep:
                batch.sort(key=_Pending.order)
            self._in_flight = len(batch)
            return batch

    def _wait_for_participants(self) -> None:
        """Until every lockstep participant has a turn pending (caller holds ``_cond``)."""
        deadline = time.monotonic() + self.lockstep_wait_s
        while sum(item.grouped and item.waiting() for item in self._queue) \
                < self._participants:
            left = deadline - time.monotonic()
            if left <= 0:
                logger.warning(
                    "%s: a batch waited %.0f s for %d lockstep participants and goes with "
                    "the %d turns pending; this run may not repeat exactly", self.name,
                    self.lockstep_wait_s, self._participants, len(self._queue))
                return
            self._cond.wait(left)

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            try:
                for start in range(0, len(batch), self.max_batch_size):
                    self._run(batch[start:start + self.max_batch_size])
            finally:
                with self._cond:
                    self._in_flight = 0

    def _run(self, batch: list[_Pending]) -> None:
        stats = self.stats
        results: list[Generation | None]
        error: BaseException | None = None
        try:
            done = self.run_batch([item.request for item in batch])
            if len(done) != len(batch):
                raise RuntimeError(f"{self.name}: the backend returned {len(done)} "
                                   f"generations for {len(batch)} requests")
            results = list(done)
        except BaseException as exc:  # delivered to every waiting caller
            error, results = exc, [None] * len(batch)
            stats.failed_batches += 1
            logger.debug("%s: a batch of %d failed", self.name, len(batch), exc_info=True)
        else:
            stats.batches += 1
            stats.requests += len(batch)
            stats.largest_batch = max(stats.largest_batch, len(batch))
            stats.tokens += sum(len(r.completion_ids) for r in done)
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for item, result in zip(batch, results, strict=True):
            if item.future is not None:
                if error is not None:
                    item.future.set_exception(error)
                else:
                    item.future.set_result(result)  # type: ignore[arg-type]
            elif item.loop is not None and item.waiter is not None:
                by_loop.setdefault(item.loop, []).append((item.waiter, result, error))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                logger.debug("%s: results for a closed event loop dropped", self.name)
