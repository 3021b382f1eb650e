"""Batched generation across concurrent episodes (hf: on the tiny model, vLLM on a fake engine).

To make "these turns share one batch" deterministic, :func:`batched` parks the generation thread
first: it holds the policy's ``generation_lock`` (public; a trainer holds it while it updates the
weights), lets one *plug* turn start (the thread then waits for the lock inside that batch),
queues the turns under test until ``policy.batcher.pending`` counts them all, and releases the
lock. The plug finishes, and the next batch takes every queued turn.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from token_state import State

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, ModelTurn
from harnessgrid.policies import PolicyRequest, make_policy
from harnessgrid.policies.batching import (
    GenerationBatcher,
    GenerationRequest,
    GenerationStats,
)
from harnessgrid.policies.hf import HFPolicy
from harnessgrid.policies.token import Generation, TokenPolicy, derive_seed

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def loaded(tiny_model_dir: Path) -> tuple[Any, Any]:
    """One loaded model + tokenizer, shared by the policies below (the trainer's path)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return model, transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def make(loaded: tuple[Any, Any], **options: Any) -> HFPolicy:
    model, tokenizer = loaded
    options = {"temperature": TEMPERATURE, "max_new_tokens": 12, "seed": 0, **options}
    return HFPolicy("tiny", model=model, tokenizer=tokenizer, **options)


def request(state: State, messages: Sequence[Message], *,
            max_tokens: int | None = None) -> PolicyRequest:
    return PolicyRequest(messages=list(messages), tools=[], native_tools=False,
                         state=state,  # type: ignore[arg-type]
                         new_segment=False, max_tokens=max_tokens)


def conversation(i: int) -> list[Message]:
    """Prompts of clearly different lengths, so the batch is padded."""
    return [Message(role="system", content="You are a helpful assistant." + " Be brief." * i),
            Message(role="user", content=f"Task {i}: " + "fix the failing test. " * (1 + 3 * i))]


async def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the batcher"
        await asyncio.sleep(0.002)


async def batched(policy: TokenPolicy, calls: Sequence[Callable[[], Awaitable[ModelTurn]]],
                  ) -> list[ModelTurn]:
    """Run ``calls`` (each one ``policy.act``) so that all their turns share ONE batch."""
    lock = policy.generation_lock
    lock.acquire()
    try:
        plug = asyncio.ensure_future(policy.act(request(State("plug"), conversation(0),
                                                        max_tokens=1)))
        await wait_for(lambda: policy.batcher.in_flight == 1)
        tasks = [asyncio.ensure_future(call()) for call in calls]
        await wait_for(lambda: policy.batcher.pending == len(calls))
    finally:
        lock.release()
    await plug
    return list(await asyncio.gather(*tasks))


def ids(turns: Sequence[ModelTurn]) -> list[tuple[int, ...]]:
    return [t.tokens.completion_ids for t in turns if t.tokens is not None]


# -- (a) on-policy ----------------------------------------------------------------------------


def test_batched_logprobs_equal_a_plain_unbatched_forward(loaded: tuple[Any, Any]) -> None:
    """Rows of different prompt lengths and limits, some ending on stop ids mid-batch."""
    policy = make(loaded, max_new_tokens=16)
    # Make a third of the vocabulary "stop" ids so rows end at different steps by stopping,
    # not only by reaching their limits (a random model almost never samples <|im_end|>).
    policy.book.stop_ids = policy.book.stop_ids | frozenset(range(0, 2000, 3))
    states = [State(f"on-policy-{i}") for i in range(6)]
    limits = [16, 3, 9, 16, 1, 12]

    async def run() -> list[ModelTurn]:
        first = await batched(policy, [
            lambda s=s, i=i: policy.act(request(s, conversation(i), max_tokens=limits[i]))
            for i, s in enumerate(states)])
        follow = [[*conversation(i), t.message(), Message(role="user", content="Go on.")]
                  for i, t in enumerate(first)]
        second = await batched(policy, [
            lambda s=s, m=m: policy.act(request(s, m))
            for s, m in zip(states, follow, strict=True)])
        return first + second

    before = policy.stats.snapshot()
    turns = asyncio.run(run())
    assert policy.stats.batches - before["batches"] == 4  # two plugs + two batches of 6
    assert policy.stats.largest_batch == 6
    assert {t.finish_reason for t in turns} == {"stop", "length"}
    for batch in (turns[:6], turns[6:]):  # really padded: no two prompts of one length
        assert len({len(t.tokens.prompt_ids) for t in batch if t.tokens}) == 6
    model = loaded[0]
    for i, turn in enumerate(turns):
        rec = turn.tokens
        assert rec is not None
        assert rec.completion_ids
        assert len(rec.completion_ids) <= (limits[i] if i < 6 else 16)
        full = torch.tensor([rec.prompt_ids + rec.completion_ids])
        with torch.no_grad():
            logits = model(input_ids=full).logits[0].float()
        p, c = len(rec.prompt_ids), len(rec.completion_ids)
        logp = torch.log_softmax(logits[p - 1: p + c - 1] / TEMPERATURE, dim=-1)
        fresh = logp.gather(1, torch.tensor(rec.completion_ids)[:, None])[:, 0]
        assert torch.allclose(fresh, torch.tensor(rec.logprobs), atol=1e-5, rtol=0), i
        stopped = rec.completion_ids[-1] in policy.book.stop_ids
        assert (turn.finish_reason == "stop") == stopped
        assert not policy.book.stop_ids & set(rec.completion_ids[:-1])


def test_greedy_records_temperature_one_logprobs(loaded: tuple[Any, Any]) -> None:
    policy = make(loaded, temperature=0.0, max_new_tokens=6)
    turns = asyncio.run(batched(policy, [
        lambda i=i: policy.act(request(State(f"greedy-{i}"), conversation(i)))
        for i in range(3)]))
    for turn in turns:
        rec = turn.tokens
        assert rec is not None
        with torch.no_grad():
            logits = loaded[0](input_ids=torch.tensor([rec.prompt_ids + rec.completion_ids]))
        p = len(rec.prompt_ids)
        logp = torch.log_softmax(logits.logits[0, p - 1:-1].float(), dim=-1)
        assert list(rec.completion_ids) == logp.argmax(-1).tolist()
        fresh = logp.gather(1, torch.tensor(rec.completion_ids)[:, None])[:, 0]
        assert torch.allclose(fresh, torch.tensor(rec.logprobs), atol=1e-5, rtol=0)


# -- (b) batch independence, (d) max_batch_size=1 ---------------------------------------------


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_a_sequence_samples_the_same_alone_and_in_a_batch_of_8(
        loaded: tuple[Any, Any], top_p: float) -> None:
    options = {"temperature": 1.0, "top_p": top_p, "max_new_tokens": 24}
    alone = make(loaded, **options)
    target = conversation(2)
    solo = asyncio.run(alone.act(request(State("target"), target)))
    assert alone.stats.largest_batch == 1

    crowd = make(loaded, **options)  # a fresh policy: the same (seed, episode id, turn)
    others = [conversation(i) for i in (0, 1, 3, 4, 5, 6, 7)]
    turns = asyncio.run(batched(crowd, [
        lambda: crowd.act(request(State("target"), target)),
        *(lambda i=i, m=m: crowd.act(request(State(f"other-{i}"), m))
          for i, m in enumerate(others))]))
    assert crowd.stats.largest_batch == 8
    assert ids(turns[:1]) == ids([solo])
    assert len(set(ids(turns))) == 8  # the others really sampled other things


def test_a_prompt_shared_by_a_group_is_prefilled_once(loaded: tuple[Any, Any]) -> None:
    """A GRPO group's rollouts of one (task, harness) pair ask with the same prompt: with
    ``shared_prefill`` the batch computes it once and copies its cache row (the prefill's
    rows are counted, not timed), and each rollout still samples what it samples alone, with
    the logprobs of a plain forward. Off (the default), every request has its row."""
    model = loaded[0]
    rows: list[int] = []
    forward = model.forward

    def counting(*args: Any, **kwargs: Any) -> Any:
        rows.append(int(kwargs["input_ids"].shape[0]))
        return forward(*args, **kwargs)

    group, other = conversation(3), conversation(1)
    policy = make(loaded, max_new_tokens=12, shared_prefill=True)
    model.forward = counting
    try:
        turns = asyncio.run(batched(policy, [
            *(lambda i=i: policy.act(request(State(f"rollout-{i}"), group)) for i in range(4)),
            lambda: policy.act(request(State("other"), other))]))
    finally:
        del model.forward
    assert rows[1] == 2  # after the plug's batch: one prefill row per distinct prompt
    assert policy.stats.shared_prefills == 3
    unshared = make(loaded, max_new_tokens=12)  # the default: a row per request, as before
    rows.clear()
    model.forward = counting
    try:
        again = asyncio.run(batched(unshared, [
            *(lambda i=i: unshared.act(request(State(f"rollout-{i}"), group))
              for i in range(4)),
            lambda: unshared.act(request(State("other"), other))]))
    finally:
        del model.forward
    assert rows[1] == 5
    assert unshared.stats.shared_prefills == 0
    assert ids(again) == ids(turns)
    assert len(set(ids(turns[:4]))) > 1  # the rollouts still sample apart
    for i, turn in enumerate(turns):
        alone = make(loaded, max_new_tokens=12)
        solo = asyncio.run(alone.act(request(State(f"rollout-{i}" if i < 4 else "other"),
                                             group if i < 4 else other)))
        assert ids([turn]) == ids([solo])
        assert turn.tokens is not None
        assert solo.tokens is not None
        assert torch.allclose(torch.tensor(turn.tokens.logprobs),
                              torch.tensor(solo.tokens.logprobs), atol=1e-5, rtol=0)


def test_max_batch_size_1_reproduces_the_batched_ids(loaded: tuple[Any, Any]) -> None:
    def play(policy: HFPolicy) -> list[tuple[int, ...]]:
        async def episode(i: int) -> list[ModelTurn]:
            state, messages, out = State(f"mbs-{i}"), conversation(i), []
            for turn_no in range(3):
                turn = await policy.act(request(state, messages))
                out.append(turn)
                messages += [turn.message(), Message(role="user", content=f"Step {turn_no}.")]
            return out

        async def all_episodes() -> list[list[ModelTurn]]:
            return list(await asyncio.gather(*(episode(i) for i in range(8))))

        return [c for turns in asyncio.run(all_episodes()) for c in ids(turns)]

    one, many = make(loaded, max_batch_size=1), make(loaded)
    assert play(one) == play(many)
    assert one.stats.largest_batch == 1
    assert one.stats.batches == one.stats.requests == 24
    assert many.stats.batches < many.stats.requests == 24


# -- (c) concurrency --------------------------------------------------------------------------


@pytest.mark.parametrize("max_batch_size", [64, 8])
def test_32_concurrent_turns_wait_without_threads_and_share_batches(
        loaded: tuple[Any, Any], max_batch_size: int) -> None:
    """More turns wait at once than the default executor has threads (min(32, cpus + 4))."""
    policy = make(loaded, max_new_tokens=4, max_batch_size=max_batch_size)
    turns = asyncio.run(batched(policy, [
        lambda i=i: policy.act(request(State(f"many-{i}"), conversation(i % 5)))
        for i in range(32)]))
    assert len(turns) == 32
    assert all(t.tokens is not None for t in turns)
    stats = policy.stats
    assert stats.requests == 33  # and the plug
    assert stats.batches == 1 + 32 // min(32, max_batch_size) < stats.requests
    assert stats.largest_batch == min(32, max_batch_size)
    assert stats.forwards <= 1 + 4 * (stats.batches - 1)  # <= 4 steps a batch, not a turn


def test_turns_asked_for_together_share_one_batch_without_help(
        loaded: tuple[Any, Any]) -> None:
    """No parking: a turn counts as pending from the moment ``act`` is called, so turns asked
    for together are not split by the order in which their prompts were tokenised, and
    episodes stay in step turn after turn."""
    policy = make(loaded, max_new_tokens=8)

    async def episode(i: int) -> None:
        state, messages = State(f"free-{i}"), conversation(i % 4)
        for _ in range(3):
            turn = await policy.act(request(state, messages))
            messages += [turn.message(), Message(role="user", content="Continue.")]

    async def run() -> None:
        await asyncio.gather(*(episode(i) for i in range(16)))

    asyncio.run(run())
    assert policy.stats.requests == 48
    assert policy.stats.batches == 3
    assert policy.stats.largest_batch == 16


def test_works_from_several_event_loops_and_threads(loaded: tuple[Any, Any]) -> None:
    """A trainer calls asyncio.run once per step; other callers may run their own loops."""
    policy = make(loaded, max_new_tokens=4)
    first = asyncio.run(policy.act(request(State("loop-1"), conversation(1))))
    second = asyncio.run(policy.act(request(State("loop-2"), conversation(2))))
    results: dict[int, ModelTurn] = {}

    def in_thread(i: int) -> None:
        results[i] = asyncio.run(policy.act(request(State(f"thread-{i}"), conversation(i))))

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert first.tokens
    assert second.tokens
    assert sorted(results) == [0, 1, 2, 3]
    # The blocking path (no event loop at all) goes through the same batcher.
    out = policy._generate(list(first.tokens.prompt_ids), 3, 7)
    assert len(out.completion_ids) == 3
    assert out.finish_reason == "length"


def test_a_cancelled_turn_is_not_generated(loaded: tuple[Any, Any]) -> None:
    policy = make(loaded, max_new_tokens=4)

    async def run() -> None:
        lock = policy.generation_lock
        with lock:
            plug = asyncio.ensure_future(policy.act(request(State("p"), conversation(0))))
            await wait_for(lambda: policy.batcher.in_flight == 1)
            doomed = asyncio.ensure_future(policy.act(request(State("c"), conversation(1))))
            await wait_for(lambda: policy.batcher.pending == 1)
            doomed.cancel()
            await asyncio.sleep(0)
        await plug
        with pytest.raises(asyncio.CancelledError):
            await doomed

    asyncio.run(run())
    assert policy.stats.requests == 1


# -- (e) train mode ---------------------------------------------------------------------------


def test_a_model_in_train_mode_generates_in_eval_mode_and_is_restored(tiny_model_dir: Path) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    model.train()
    modes: list[bool] = []
    model.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    policy = HFPolicy("live", model=model, tokenizer=tokenizer, max_new_tokens=3, seed=0)

    async def run() -> list[ModelTurn]:
        return list(await asyncio.gather(*(
            policy.act(request(State(f"train-{i}"), conversation(i))) for i in range(3))))

    assert len(asyncio.run(run())) == 3
    assert modes
    assert not any(modes)
    assert model.training
    # Every policy on this model object shares one lock (a trainer holds it to update).
    twin = HFPolicy("live", model=model, tokenizer=tokenizer, max_new_tokens=3)
    assert twin.generation_lock is policy.generation_lock


# -- options, context_limit -------------------------------------------------------------------


def test_options_and_context_limit(tiny_model_dir: Path, loaded: tuple[Any, Any]) -> None:
    made = make_policy(f"hf:{tiny_model_dir}", {"max_batch_size": 1, "max_new_tokens": 5})
    assert isinstance(made, HFPolicy)
    assert made.max_batch_size == 1
    assert made.context_limit == loaded[0].config.max_position_embeddings - 5 == 4091
    with pytest.raises(ConfigError) as err:
        make_policy(f"hf:{tiny_model_dir}", {"max_batchsize": 4})
    assert "max_batchsize" in err.value.message
    assert "max_batch_size" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="max_batch_size"):
        make(loaded, max_batch_size=0)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        make(loaded, max_new_tokens=4096)


# -- the batcher on its own -------------------------------------------------------------------


def test_batcher_splits_by_max_batch_size_reports_failures_and_restarts() -> None:
    seen: list[int] = []
    gate = threading.Event()

    def run_batch(requests: Sequence[GenerationRequest]) -> list[Generation]:
        gate.wait(10)
        seen.append(len(requests))
        if any(r.seed == -1 for r in requests):
            raise ValueError("backend failed")
        return [Generation(list(r.prompt_ids), [0.0] * len(r.prompt_ids), "stop")
                for r in requests]

    stats = GenerationStats()
    batcher = GenerationBatcher(run_batch, max_batch_size=3, stats=stats, idle_s=0.05)
    futures = [batcher.submit(GenerationRequest([i], 1, i)) for i in range(7)]
    gate.set()
    assert [f.result(10).completion_ids for f in futures] == [[i] for i in range(7)]
    assert max(seen) == 3
    assert sum(seen) == 7
    assert stats.requests == 7
    time.sleep(0.3)  # the idle thread exits; the next request starts a new one
    # Announced requests are waited for: these two share a batch, and both see its failure.
    batcher.announce()
    batcher.announce()
    bad = [batcher.submit(GenerationRequest([1], 1, -1), announced=True)]
    time.sleep(0.05)
    bad.append(batcher.submit(GenerationRequest([2], 1, 2), announced=True))
    for f in bad:
        with pytest.raises(ValueError, match="backend failed"):
            f.result(10)
    assert stats.failed_batches == 1
    assert seen[-1] == 2
    assert batcher.generate(GenerationRequest([5], 1, 5)).completion_ids == [5]
    assert stats.snapshot()["mean_batch"] == stats.requests / stats.batches


# -- (f) vLLM, on a fake engine ---------------------------------------------------------------


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeSamplingParams:
    temperature: float
    top_p: float
    max_tokens: int
    seed: int | None
    logprobs: int
    stop_token_ids: list[int]


@dataclass
class FakeLLM:
    """Records every ``generate`` call and answers each prompt with ``max_tokens`` ids taken
    from its seed (so a test can tell which request got which answer)."""

    max_model_len: int = 2048
    calls: list[tuple[list[dict[str, list[int]]], list[FakeSamplingParams]]] = \
        field(default_factory=list)

    def __post_init__(self) -> None:
        self.llm_engine = types.SimpleNamespace(
            model_config=types.SimpleNamespace(max_model_len=self.max_model_len))

    def generate(self, prompts: list[dict[str, list[int]]], params: list[FakeSamplingParams],
                 use_tqdm: bool = True) -> list[Any]:
        assert isinstance(params, list)
        assert len(params) == len(prompts)
        assert not use_tqdm
        self.calls.append((prompts, params))
        out = []
        for sp in params:
            assert sp.seed is not None
            token_ids = [10 + (sp.seed + k) % 500 for k in range(sp.max_tokens)]
            logprobs = [{t: FakeLogprob(-0.25 * (k + 1))} for k, t in enumerate(token_ids)]
            out.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(
                token_ids=token_ids, logprobs=logprobs, finish_reason="length")]))
        return out


def test_vllm_batches_pending_turns_into_one_generate_call(
        monkeypatch: pytest.MonkeyPatch, loaded: tuple[Any, Any]) -> None:
    """vLLM cannot run here (no GPU, not installed): a fake ``vllm`` module and engine object
    stand in for it, recording the calls. Checked: pending turns go to ONE ``LLM.generate``
    with one tokens prompt and one SamplingParams (own seed, own limit) each, the records and
    the next turn's prompt ids come from the exact ids, and ``context_limit``."""
    monkeypatch.setitem(sys.modules, "vllm",
                        types.SimpleNamespace(SamplingParams=FakeSamplingParams))
    from harnessgrid.policies.vllm import VLLMPolicy

    tokenizer, llm = loaded[1], FakeLLM()
    policy = VLLMPolicy("fake", llm=llm, tokenizer=tokenizer, temperature=0.5,
                        max_new_tokens=6, seed=3)
    assert policy.context_limit == 2048 - 6
    states = [State(f"v-{i}") for i in range(5)]
    limits = [None, 2, None, 4, None]

    def first_turn(i: int) -> Callable[[], Awaitable[ModelTurn]]:
        return lambda: policy.act(request(states[i], conversation(i), max_tokens=limits[i]))

    turns = asyncio.run(batched(policy, [first_turn(i) for i in range(5)]))
    (plug_prompts, _), (prompts, params) = llm.calls
    assert len(plug_prompts) == 1
    assert len(prompts) == 5
    # The batch holds the turns in the order their prompt ids were ready (a tokenizer pool
    # prepares them), which need not be submission order: match each turn by its seed.
    by_seed = {sp.seed: (prompt, sp) for prompt, sp in zip(prompts, params, strict=True)}
    for i, turn in enumerate(turns):
        prompt, sp = by_seed[derive_seed(3, f"v-{i}/0")]
        expected = tokenizer.apply_chat_template(
            [m.openai() for m in conversation(i)], add_generation_prompt=True, tokenize=True,
            return_dict=False)
        assert prompt == {"prompt_token_ids": list(expected)}
        assert sp.seed == derive_seed(3, f"v-{i}/0")
        assert sp.max_tokens == (limits[i] or 6)
        assert (sp.temperature, sp.top_p, sp.logprobs) == (0.5, 1.0, 0)
        assert set(sp.stop_token_ids) == policy.book.stop_ids
        rec = turn.tokens
        assert rec is not None
        assert list(rec.prompt_ids) == list(expected)
        assert len(rec.completion_ids) == sp.max_tokens
        assert rec.completion_ids[0] == \
            10 + sp.seed % 500
        assert rec.logprobs == tuple(-0.25 * (k + 1) for k in range(sp.max_tokens))
        assert turn.finish_reason == "length"

    follow = [[*conversation(i), t.message(), Message(role="user", content="Next.")]
              for i, t in enumerate(turns)]
    again = asyncio.run(batched(policy, [
        lambda i=i: policy.act(request(states[i], follow[i])) for i in range(5)]))
    _, (prompts2, params2) = llm.calls[2:]
    assert len(prompts2) == 5
    assert len(llm.calls) == 4
    by_seed = {sp.seed: (prompt, sp) for prompt, sp in zip(prompts2, params2, strict=True)}
    for i, turn in enumerate(again):
        prompt, sp = by_seed[derive_seed(3, f"v-{i}/1")]
        prev = turns[i].tokens
        assert prev is not None
        history = list(prev.prompt_ids + prev.completion_ids)
        assert prompt["prompt_token_ids"][: len(history)] == history  # extended, not re-encoded
        assert sp.seed == derive_seed(3, f"v-{i}/1")
        assert turn.tokens is not None
        assert turn.tokens.segment == 0
    assert policy.stats.batches == 4
    assert policy.stats.requests == 12
