"""Token bookkeeping shared by the token policies (``hf:``, ``vllm:``).

A token policy must record, per turn, exactly the prompt ids the model saw, the ids it produced
and their log-probabilities, and it must *never re-tokenise history*: re-encoding a conversation
does not in general give back the ids the model produced (BPE merges differently across the old
completion boundary, a truncated turn gets closed by the template, ...), and a trainer that
scores other ids than the ones sampled is off-policy. This module owns that bookkeeping so the
backends only have to turn prompt ids into completion ids + logprobs (:data:`Generate`).

Per episode (keyed by ``request.state.episode_id``) a :class:`TokenConversation` keeps the last
turn's view, prompt ids and completion ids. Each turn:

* **First turn of a segment** (no conversation yet, or ``request.new_segment``): the prompt is a
  fresh rendering, ``tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=
  True, tokenize=True)``.
* **Later turns**: ``prompt = previous prompt + previous completion + encode(missing_close +
  appended)``, where

  - ``appended`` is what the harness added since the previous turn, as text:
    ``render(messages, gen_prompt=True)[len(render(messages[:n+1], gen_prompt=False)):]`` with
    ``n = len(previous view)`` and ``messages[n]`` the assistant reply to the previous turn. The
    second rendering must be a string prefix of the first (checked), i.e. the template is
    append-only for this conversation.
  - ``missing_close`` is the part of the template's assistant-turn *closing* that the completion
    did not produce. The closing is probed once per tokenizer by rendering
    ``[user, assistant(PROBE)]`` and taking the text after ``PROBE`` (ChatML: ``<|im_end|>\\n``).
    A completion that ended on a stop token whose text starts the closing (``<|im_end|>``) lacks
    only the rest (``\\n``); one cut at ``max_tokens``, or ended by another stop token such as
    ``<|endoftext|>``, lacks the whole closing, which is then appended after its last token.

  If the view does not extend the previous view + one assistant message, the tools changed, the
  rendering of the previous messages is not a prefix of the new rendering, or it does not end
  with the probed closing, the ids cannot be extended faithfully: the conversation starts a new
  segment from a fresh rendering instead (counted in :attr:`TokenConversation.restarts`, logged
  at debug) -- never wrong ids.

Segments are numbered ``max(request.segment, previous + 1)`` on a restart and keep the previous
number otherwise, so a segment number is never reused within an episode.

Conversations are dropped when their episode's state says ``finished``, when the state object
is gone, when an episode id reappears with another state object, and beyond ``max_episodes``
(least recently used first), so a long-running policy does not grow without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import re
import threading
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, ModelTurn, TokenRecord, ToolCall, ToolSpec
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.batching import GenerationBatcher, GenerationRequest, GenerationStats
from harnessgrid.policies.streaming import TextSink, TokenTextStream
from harnessgrid.policies.tiny_model import (
    ToolCallParseError,
    parse_chatml_tool_calls,
    split_tool_calls,
)

__all__ = [
    "Generate",
    "Generation",
    "PendingTurn",
    "TokenBookkeeper",
    "TokenConversation",
    "TokenPolicy",
    "derive_seed",
    "parse_tool_calls",
    "stop_token_ids",
]

logger = logging.getLogger(__name__)

_PROBE = "HGPROBE7c1e"
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')


@dataclass(frozen=True)
class Generation:
    """What a backend produced for one prompt: the sampled ids (including a final stop token,
    if any), one log-probability per id, and ``"stop"`` or ``"length"``."""

    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: str


#: ``generate(prompt_ids, max_new_tokens, seed)``: a backend's blocking generation call. ``seed``
#: is a per-turn seed (:func:`derive_seed`) or None for unseeded sampling.
Generate = Callable[[list[int], int, int | None], Generation]


def derive_seed(seed: int | None, key: str) -> int | None:
    """A 63-bit seed for one turn from the policy's seed and ``episode_id/turn``.

    Seeding each turn by its key (not one stream per policy) keeps sampling deterministic when
    concurrent episodes interleave in any order. ``sha256`` because ``hash()`` is salted.
    """
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def stop_token_ids(tokenizer: Any, extra: object = None) -> frozenset[int]:
    """Ids that end a turn: the tokenizer's eos, ``<|im_end|>`` when the vocabulary has it, and
    ``extra`` (an id or list of ids, e.g. a model's ``generation_config.eos_token_id``)."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, extra):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return frozenset(ids)


def parse_tool_calls(text: str, id_prefix: str = "call") -> tuple[str, tuple[ToolCall, ...]]:
    """Split ChatML assistant text into ``(content, tool_calls)``; never raises.

    Each ``<tool_call>{json}</tool_call>`` block becomes a :class:`ToolCall` (through
    :func:`parse_chatml_tool_calls`, one block at a time so one bad block does not hide the good
    ones). A block that is not a valid call (JSON too deep or with too long a number
    included), or an unclosed ``<tool_call>`` left by a truncated generation, becomes a call
    with ``parse_error`` and ``raw_arguments`` set, so the harness can report a format error.
    ``content`` is the text without the blocks, stripped. Linear in the length of the text.
    """
    calls: list[ToolCall] = []

    def add(block: str, error: str | None) -> None:
        call_id = f"{id_prefix}_{len(calls)}"
        if error is None:
            try:
                (parsed,) = parse_chatml_tool_calls(f"<tool_call>{block}</tool_call>")
            except ToolCallParseError as exc:
                error = str(exc)
            else:
                calls.append(ToolCall(id=call_id, name=parsed["name"],
                                      arguments=parsed["arguments"]))
                return
        name = _NAME.search(block)
        calls.append(ToolCall(id=call_id, name=name.group(1) if name else "",
                              raw_arguments=block.strip(), parse_error=error))

    blocks, content, unclosed = split_tool_calls(text)
    for block in blocks:
        add(block, None)
    if unclosed is not None:
        add(unclosed, "unclosed <tool_call> block (generation truncated?)")
    return content.strip(), tuple(calls)


@dataclass
class TokenConversation:
    """One episode's token state: what the next turn's prompt ids extend."""

    episode_id: str
    state: Callable[[], object | None]
    segment: int = 0
    view: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    turns: int = 0
    restarts: int = 0  # segments started here because the history could not be extended


@dataclass(frozen=True)
class PendingTurn:
    """A turn between :meth:`TokenBookkeeper.begin` and :meth:`TokenBookkeeper.finish`."""

    request: PolicyRequest
    conversation: TokenConversation
    prompt_ids: list[int]
    segment: int
    max_new_tokens: int  # the policy's limit, cut to the request's max_tokens
    seed: int | None  # the per-turn seed (derive_seed), None for unseeded sampling


def _state_ref(state: object) -> Callable[[], object | None]:
    """A weak reference when the state allows one (so we never keep an episode alive)."""
    try:
        return weakref.ref(state)
    except TypeError:
        return lambda: state


class TokenBookkeeper:
    """Builds each turn's prompt ids, calls the backend, and turns its ids into a ModelTurn.

    Thread-safe across episodes (token policies run :meth:`begin` in worker threads and
    :meth:`finish` on the event loop; :meth:`turn` is both around a blocking ``generate``);
    turns of one episode are sequential by construction.
    """

    def __init__(self, tokenizer: Any, *, stop_ids: frozenset[int] | None = None,
                 max_episodes: int = 1024) -> None:
        self.tokenizer = tokenizer
        self.stop_ids = stop_ids if stop_ids is not None else stop_token_ids(tokenizer)
        self.max_episodes = max_episodes
        self._conversations: OrderedDict[str, TokenConversation] = OrderedDict()
        self._lock = threading.Lock()
        # Fast tokenizers may reconfigure their Rust object while encoding ("Already borrowed"
        # when two threads do so at once): every tokenizer call goes through this lock.
        self._tokenizer_lock = threading.RLock()
        self.closing = self._probe_closing()

    # -- public ---------------------------------------------------------------------------

    def turn(self, request: PolicyRequest, generate: Generate, *, max_new_tokens: int,
             seed: int | None = None) -> ModelTurn:
        """Run one turn: prompt ids, ``generate``, then content/tool calls and the TokenRecord."""
        pending = self.begin(request, max_new_tokens=max_new_tokens, seed=seed)
        out = generate(pending.prompt_ids, pending.max_new_tokens, pending.seed)
        return self.finish(pending, out)

    def begin(self, request: PolicyRequest, *, max_new_tokens: int,
              seed: int | None = None) -> PendingTurn:
        """First half of :meth:`turn`: this turn's prompt ids, token limit and per-turn seed.
        Hand them to a backend, then pass its :class:`Generation` to :meth:`finish`."""
        conv = self.conversation(request)
        prompt, segment = self.prompt_ids(conv, request)
        limit = min(max_new_tokens, request.max_tokens or max_new_tokens)
        return PendingTurn(request=request, conversation=conv, prompt_ids=prompt,
                           segment=segment, max_new_tokens=limit,
                           seed=derive_seed(seed, f"{conv.episode_id}/{conv.turns}"))

    def reply(self, pending: PendingTurn, out: Generation) -> tuple[str, tuple[ToolCall, ...]]:
        """The turn's ``(content, tool_calls)`` from its completion, recording nothing."""
        text = self._decode(out.completion_ids, skip_special=True)
        if pending.request.native_tools:
            return parse_tool_calls(text, f"call_{pending.conversation.turns}")
        return text, ()

    def finish(self, pending: PendingTurn, out: Generation) -> ModelTurn:
        """Second half of :meth:`turn`: record the completion and build the ModelTurn."""
        request, conv, prompt = pending.request, pending.conversation, pending.prompt_ids
        content, calls = self.reply(pending, out)
        conv.view = list(request.messages)
        conv.tools = self._tools(request)
        conv.prompt_ids, conv.completion_ids = prompt, list(out.completion_ids)
        conv.segment = pending.segment
        conv.turns += 1
        return ModelTurn(
            content=content, tool_calls=calls, tokens_in=len(prompt),
            tokens_out=len(out.completion_ids), finish_reason=out.finish_reason,
            tokens=TokenRecord(prompt_ids=tuple(prompt), completion_ids=tuple(out.completion_ids),
                               logprobs=tuple(out.logprobs), segment=pending.segment))

    def count_tokens(self, messages: Sequence[Message],
                     tools: Sequence[ToolSpec] | None = None) -> int:
        """Exact prompt length of ``messages`` (with the generation prompt) for this tokenizer.
        The runtime's budget passes no tools; pass them to count a native-tools system turn."""
        tool_dicts = [t.openai() for t in tools] if tools else None
        return len(self._encode_chat([m.openai() for m in messages], tool_dicts))

    def conversation(self, request: PolicyRequest) -> TokenConversation:
        """The episode's conversation, created on its first turn; sweeps finished episodes."""
        key, state = request.state.episode_id, request.state
        with self._lock:
            for old_key, old in list(self._conversations.items()):
                old_state = old.state()
                if old_state is None or getattr(old_state, "finished", False):
                    del self._conversations[old_key]
            conv = self._conversations.get(key)
            if conv is None or conv.state() is not state:
                conv = TokenConversation(episode_id=key, state=_state_ref(state))
                self._conversations[key] = conv
            self._conversations.move_to_end(key)
            while len(self._conversations) > self.max_episodes:
                self._conversations.popitem(last=False)
            return conv

    @property
    def episodes(self) -> tuple[str, ...]:
        """Ids of the episodes whose conversations are kept, least recently used first."""
        with self._lock:
            return tuple(self._conversations)

    def forget(self, episode_id: str) -> None:
        """Drop an episode's conversation (e.g. when the caller knows it ended)."""
        with self._lock:
            self._conversations.pop(episode_id, None)

    def prompt_ids(self, conv: TokenConversation, request: PolicyRequest) -> tuple[list[int], int]:
        """This turn's prompt ids and segment number (see the module docstring)."""
        messages = [m.openai() for m in request.messages]
        tools = self._tools(request)
        if conv.turns and not request.new_segment:
            extension, why = self._extension(conv, request, messages, tools)
            if extension is not None:
                return conv.prompt_ids + conv.completion_ids + extension, conv.segment
            conv.restarts += 1
            logger.debug("episode %s: new token segment after turn %d: %s",
                         conv.episode_id, conv.turns, why)
        segment = max(request.segment, conv.segment + 1) if conv.turns else request.segment
        return self._encode_chat(messages, tools), segment

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _tools(request: PolicyRequest) -> list[dict[str, Any]] | None:
        return [t.openai() for t in request.tools] if request.native_tools else None

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                generation_prompt: bool) -> str:
        with self._tokenizer_lock:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=generation_prompt, tokenize=False)
        assert isinstance(text, str)
        return text

    def _encode_chat(self, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None) -> list[int]:
        with self._tokenizer_lock:
            out = self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=True,
                return_dict=False)
        ids = out["input_ids"] if hasattr(out, "keys") else out  # BatchEncoding in some versions
        return [int(i) for i in ids]

    def _encode_text(self, text: str) -> list[int]:
        with self._tokenizer_lock:
            return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def _decode(self, ids: list[int], *, skip_special: bool) -> str:
        with self._tokenizer_lock:
            text = self.tokenizer.decode(ids, skip_special_tokens=skip_special)
        assert isinstance(text, str)
        return text

    def _probe_closing(self) -> str | None:
        """The text the template puts after an assistant message's content (``<|im_end|>\\n``
        for ChatML); None when the template does not render the content verbatim."""
        probe = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _PROBE}]
        try:
            text = self._render(probe, None, generation_prompt=False)
        except Exception as exc:  # noqa: BLE001 - any template failure: never extend ids
            logger.debug("chat template probe failed (%s); every turn starts a segment", exc)
            return None
        at = text.rfind(_PROBE)
        return text[at + len(_PROBE):] if at >= 0 else None

    def _missing_close(self, completion: list[int]) -> str:
        """The part of the closing the completion did not produce (module docstring)."""
        assert self.closing is not None
        if completion and completion[-1] in self.stop_ids:
            produced = self._decode(completion[-1:], skip_special=False)
            if produced and self.closing.startswith(produced):
                return self.closing[len(produced):]
        return self.closing

    def _extension(self, conv: TokenConversation, request: PolicyRequest,
                   messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   ) -> tuple[list[int] | None, str]:
        """The ids to append to the previous prompt + completion, or None and why not."""
        n = len(conv.view)
        if self.closing is None:
            return None, "the chat template's assistant closing could not be probed"
        if tools != conv.tools:
            return None, "the tools changed"
        if list(request.messages[:n]) != conv.view:
            return None, "the view does not extend the previous view"
        if len(messages) <= n or messages[n]["role"] != "assistant":
            return None, "the previous reply is not the next message of the view"
        before = self._render(messages[: n + 1], tools, generation_prompt=False)
        full = self._render(messages, tools, generation_prompt=True)
        if not full.startswith(before):
            return None, "the chat template is not append-only for this conversation"
        if not before.endswith(self.closing):
            return None, f"the assistant turn does not end with {self.closing!r}"
        text = self._missing_close(conv.completion_ids) + full[len(before):]
        return self._encode_text(text), ""


class TokenPolicy(ABC):
    """What the hf and vLLM backends share: the bookkeeping, batched generation off the event
    loop, and exact token counting.

    A backend sets ``spec``, ``max_new_tokens`` and ``seed``, calls :meth:`_init_tokens` and
    implements :meth:`_generate_batch` (blocking; always called from the one generation thread
    of the policy's :class:`~harnessgrid.policies.batching.GenerationBatcher`).

    :meth:`act` prepares the prompt ids in a small tokenizer pool (tokenizer calls stay under
    the bookkeeper's lock), then *awaits* a future that the generation thread completes, so any
    number of concurrent episodes can wait for generation without holding a thread, whichever
    event loop they run on; the turns pending when the model is free are generated together.
    A turn is pending from the moment ``act`` is called (it is announced to the batcher before
    its prompt ids are built).

    Streaming (``PolicyRequest.on_text``, backends with ``streams_text``): the generation
    thread hands each sampled id to the turn's :class:`_TurnStream`, which wakes the turn's
    event loop; there the completion so far is decoded and its new text sent
    (:class:`~harnessgrid.policies.streaming.TokenTextStream`), before the turn's result is
    delivered. The ids, logprobs and TokenRecord are those of the unstreamed turn. An
    exception raised by ``on_text`` ends the turn's wait at once with that exception (the
    batch still finishes the row; nothing is recorded for the turn). A backend without
    ``streams_text`` ignores ``on_text``.

    Public attributes: ``max_batch_size`` (1 = one turn per forward, the unbatched behaviour),
    ``context_limit`` (the longest prompt that leaves room for ``max_new_tokens``, None when the
    backend does not know its maximum length), ``stats`` (a
    :class:`~harnessgrid.policies.batching.GenerationStats`), ``generation_lock`` (held for
    each batch; a trainer holds it while it updates the weights) and ``batcher`` (the queue:
    ``pending`` and ``in_flight`` say how many turns wait and how many are being generated).
    """

    spec: str
    max_new_tokens: int
    seed: int | None
    book: TokenBookkeeper
    max_batch_size: int
    context_limit: int | None
    stats: GenerationStats
    generation_lock: threading.RLock
    batcher: GenerationBatcher
    #: Whether the backend samples step by step and calls ``GenerationRequest.on_token``.
    streams_text: bool = False

    def _init_tokens(self, tokenizer: Any, eos: Any, max_episodes: int, *,
                     max_batch_size: int = 64, max_length: int | None = None,
                     lock: threading.RLock | None = None) -> None:
        """Set up bookkeeping and batching. ``max_length``: the model's maximum sequence length
        (prompt + completion), None when unknown."""
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) \
                or max_batch_size < 1:
            raise ConfigError(f"{self.spec}: max_batch_size must be an integer >= 1, got "
                              f"{max_batch_size!r}", hint="1 decodes one turn at a time; "
                              "the default 64 batches up to 64 concurrent turns")
        if max_length is not None and max_length <= self.max_new_tokens:
            raise ConfigError(f"{self.spec}: max_new_tokens={self.max_new_tokens} leaves no "
                              f"room for a prompt in the model's maximum length {max_length}",
                              hint="lower max_new_tokens")
        self.book = TokenBookkeeper(tokenizer, stop_ids=stop_token_ids(tokenizer, eos),
                                    max_episodes=max_episodes)
        self.max_batch_size = max_batch_size
        self.context_limit = None if max_length is None else max_length - self.max_new_tokens
        self.generation_lock = lock if lock is not None else threading.RLock()
        self.stats = GenerationStats()
        self.batcher = GenerationBatcher(self._generate_batch, max_batch_size=max_batch_size,
                                          stats=self.stats, name=self.spec)
        # Tokenizer work runs here, not in the loop's default executor (shared with graders
        # and other blocking calls). It is serialised by the tokenizer lock anyway.
        self._tokens_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hg-tokens")

    async def act(self, request: PolicyRequest) -> ModelTurn:
        """One turn: prompt ids in a worker thread, then wait (without a thread) for the batch
        that generates it, then decode and record."""
        loop = asyncio.get_running_loop()
        begin = functools.partial(self.book.begin, request, max_new_tokens=self.max_new_tokens,
                                  seed=self.seed)
        self.batcher.announce()  # a batch forming now waits for this turn's prompt ids
        try:
            pending = await loop.run_in_executor(self._tokens_pool, begin)
        except BaseException:
            self.batcher.withdraw()
            raise
        stream: _TurnStream | None = None
        if pending.max_new_tokens < 1:
            self.batcher.withdraw()
            out = Generation([], [], "length")
        else:
            if request.on_text is not None and self.streams_text:
                decode = functools.partial(self.book._decode, skip_special=True)
                stream = _TurnStream(loop, TokenTextStream(TextSink(request.on_text), decode,
                                                           request.native_tools))
            waiter = self.batcher.submit_async(GenerationRequest(
                prompt_ids=pending.prompt_ids, max_new_tokens=pending.max_new_tokens,
                seed=pending.seed, on_token=stream.on_token if stream else None),
                announced=True)
            if stream is not None:
                stream.waiter = waiter  # set before any of its tokens reach this loop
            out = await waiter
        if stream is not None:
            stream.text.close(self.book.reply(pending, out)[0])  # the callback may raise
        # Decoding the reply is quick (well under a millisecond), so it runs right here: the
        # episode gets its turn, and may ask for the next one, without another thread hop that
        # would let the generation thread start a batch before the episode's next turn is
        # announced (see harnessgrid.policies.batching on which turns are pending).
        return self.book.finish(pending, out)

    def _generate(self, prompt_ids: list[int], max_new_tokens: int,
                  seed: int | None) -> Generation:
        """Blocking :data:`Generate` through the batcher (for ``TokenBookkeeper.turn``)."""
        if max_new_tokens < 1:
            return Generation([], [], "length")
        return self.batcher.generate(GenerationRequest(prompt_ids, max_new_tokens, seed))

    def count_tokens(self, messages: Sequence[Message],
                     tools: Sequence[ToolSpec] | None = None) -> int:
        """Exact prompt length through the tokenizer's chat template."""
        return self.book.count_tokens(messages, tools)

    @abstractmethod
    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Generate every request together (blocking; one :class:`Generation` per request, in
        order). Each row samples from its own ``seed`` so its result does not depend on the
        other rows."""


class _TurnStream:
    """Carries one streamed turn's ids from the generation thread to its event loop.

    :meth:`on_token` (generation thread) only queues the id and, if no wake-up is pending,
    schedules one; :meth:`_flush` (event loop) decodes every id queued since. The loop runs
    these callbacks in order, and all of them before the batch's result, which the
    generation thread schedules after the last id. Nothing is sent once the turn's wait is
    over (cancelled, or ended by the callback's exception)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, text: TokenTextStream) -> None:
        self.loop, self.text = loop, text
        self.waiter: asyncio.Future[Generation] | None = None
        self._lock = threading.Lock()
        self._ids: list[int] = []
        self._scheduled = False

    def on_token(self, token: int) -> None:
        with self._lock:
            self._ids.append(token)
            if self._scheduled:
                return
            self._scheduled = True
        # RuntimeError: the loop is closed; nobody is waiting any more
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            ids, self._ids, self._scheduled = self._ids, [], False
        if self.waiter is None or self.waiter.done():
            return
        try:
            self.text.add(ids)
        except Exception as exc:  # noqa: BLE001 - the embedder's callback: the turn ends with it
            self.waiter.set_exception(exc)

