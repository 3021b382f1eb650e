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
same ids whichever sequences share its batch (up to floating-point ties; see
:mod:`harnessgrid.policies.hf`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # token.py imports this module
    from harnessgrid.policies.token import Generation

__all__ = ["BatchGenerate", "GenerationBatcher", "GenerationRequest", "GenerationStats"]

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

    @property
    def mean_batch(self) -> float:
        """Average requests per batch (0.0 before the first batch)."""
        return self.requests / self.batches if self.batches else 0.0

    def snapshot(self) -> dict[str, float]:
        """The counters (and ``mean_batch``) as a plain dict."""
        return {**asdict(self), "mean_batch": self.mean_batch}


@dataclass
class _Pending:
    """A queued request and how its result goes back: a thread-safe ``future`` (blocking
    callers) or an asyncio ``waiter`` on ``loop``."""

    request: GenerationRequest
    future: Future[Generation] | None = None
    waiter: asyncio.Future[Generation] | None = None
    loop: asyncio.AbstractEventLoop | None = None

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
                 idle_s: float = 5.0, gather_timeout_s: float = 2.0) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.stats = stats if stats is not None else GenerationStats()
        self.name = name
        self.idle_s = idle_s
        self.gather_timeout_s = gather_timeout_s
        self._queue: deque[_Pending] = deque()
        self._cond = threading.Condition()
        self._running = False  # a generation thread is alive (or about to start)
        self._in_flight = 0
        self._preparing = 0  # announced turns whose prompt ids are still being built

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

    def _enqueue(self, item: _Pending, announced: bool) -> None:
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
        """The next batch: every live request pending now, up to ``max_batch_size``, after
        waiting (bounded) for announced ones; None when the thread should exit (idle)."""
        with self._cond:
            if not self._queue:
                self._cond.wait(self.idle_s)
            if self._queue:  # gather the turns still being prepared
                deadline = time.monotonic() + self.gather_timeout_s
                while self._preparing > 0 and len(self._queue) < self.max_batch_size:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            batch: list[_Pending] = []
            while self._queue and len(batch) < self.max_batch_size:
                item = self._queue.popleft()
                if item.start():
                    batch.append(item)
            if not batch and not self._queue:
                self._running = False
                return None
            self._in_flight = len(batch)
            return batch

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            try:
                if batch:
                    self._run(batch)
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
