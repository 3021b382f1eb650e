"""The ``hf:`` policy's ``prefix_cache_mb`` option (:mod:`harnessgrid.policies.prefix_cache`):
an episode's later turns prefill only their new tokens, over the keys and values kept from its
last turn, and sample what they would have sampled with the whole prompt prefilled.

The model is the offline tiny one; what is counted is prompt tokens run through the model
(``stats.prefilled_tokens``) and read from the cache instead (``stats.reused_tokens``), and
what is checked is that every recorded logprob equals a fresh, unbatched forward of prompt +
completion with the weights of the moment.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from test_batched_generation import batched, loaded, make  # noqa: F401 - fixture
from test_policies_token import episode, observation, request, start
from token_state import State

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, TokenRecord
from harnessgrid.policies import make_policy
from harnessgrid.policies.prefix_cache import PrefixCache

torch = pytest.importorskip("torch")

TEMPERATURE = 0.7  # as make() samples


def fresh_logprobs(model: Any, record: TokenRecord) -> Any:
    ids = torch.tensor([record.prompt_ids + record.completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    p, c = len(record.prompt_ids), len(record.completion_ids)
    logp = torch.log_softmax(logits[p - 1:p + c - 1] / TEMPERATURE, dim=-1)
    return logp.gather(1, torch.tensor(record.completion_ids)[:, None])[:, 0]


def assert_on_policy(model: Any, records: list[TokenRecord]) -> None:
    for record in records:
        assert torch.allclose(fresh_logprobs(model, record), torch.tensor(record.logprobs),
                              atol=1e-4, rtol=0)


def play(policy: Any, episodes: int, turns: int) -> list[list[TokenRecord]]:
    async def together() -> list[Any]:
        return await asyncio.gather(*(episode(policy, State(f"episode-{i}"), turns, native=True)
                                      for i in range(episodes)))

    out = []
    for played, _ in asyncio.run(together()):
        records = [turn.tokens for turn in played]
        assert all(r is not None for r in records)
        out.append(records)
    return out


def test_later_turns_prefill_only_their_new_tokens_and_sample_the_same(
        loaded: tuple[Any, Any]) -> None:  # noqa: F811 - the fixture
    """Three concurrent episodes of four turns, with and without the cache: the same ids, the
    logprobs of a fresh forward, and from the second turn on only the tokens after the last
    turn's (prompt + completion less its last token) are prefilled."""
    plain, cached = make(loaded), make(loaded, prefix_cache_mb=64)
    without, with_cache = play(plain, 3, 4), play(cached, 3, 4)
    for a, b in zip(without, with_cache, strict=True):
        assert [(r.prompt_ids, r.completion_ids) for r in a] == \
            [(r.prompt_ids, r.completion_ids) for r in b]
        assert_on_policy(loaded[0], b)
    prompts = sum(len(r.prompt_ids) for records in with_cache for r in records)
    kept = sum(len(prev.prompt_ids) + len(prev.completion_ids) - 1
               for records in with_cache for prev in records[:-1])
    assert cached.stats.reused_tokens == kept > 0
    assert cached.stats.prefilled_tokens == prompts - kept
    assert plain.stats.prefilled_tokens == prompts
    assert plain.stats.reused_tokens == 0


def test_a_batch_of_new_and_continuing_episodes_is_merged_row_by_row(
        loaded: tuple[Any, Any]) -> None:  # noqa: F811 - the fixture
    """One batch holding a continuing episode's second turn (its prefix from the cache) and
    two new episodes' first turns (prefilled whole, one of them short): the two groups'
    caches are merged into one batch, and every row samples on policy."""
    policy = make(loaded, prefix_cache_mb=64)
    state = State("continuing")
    messages = start()
    first = asyncio.run(policy.act(request(state, messages, native=True)))
    messages += [first.message(), *observation(0)]
    short = [Message(role="user", content="Hi.")]
    turns = asyncio.run(batched(policy, [
        lambda: policy.act(request(State("new"), start(), native=True)),
        lambda: policy.act(request(state, messages, native=True)),  # not first: rows reorder
        lambda: policy.act(request(State("short"), short))]))
    assert first.tokens is not None
    records = [turn.tokens for turn in turns if turn.tokens is not None]
    assert len(records) == 3
    assert records[1].prompt_ids[:len(first.tokens.prompt_ids)] == first.tokens.prompt_ids
    assert policy.stats.reused_tokens == (len(first.tokens.prompt_ids)
                                          + len(first.tokens.completion_ids) - 1)
    assert_on_policy(loaded[0], [first.tokens, *records])


def test_a_weight_update_empties_the_cache(loaded: tuple[Any, Any]) -> None:  # noqa: F811
    """A trainer updates the live model's weights in place between steps: keys and values
    computed by the old weights must not serve the new model. After an in-place update, the
    next turn prefills its whole prompt and its logprobs are the new weights'."""
    model = copy.deepcopy(loaded[0])
    policy = make((model, loaded[1]), prefix_cache_mb=64)
    state = State("trained")
    messages = start()
    first = asyncio.run(policy.act(request(state, messages, native=True)))
    messages += [first.message(), *observation(0)]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.25)
    second = asyncio.run(policy.act(request(state, messages, native=True)))
    assert second.tokens is not None
    assert policy.stats.reused_tokens == 0
    assert first.tokens is not None
    assert policy.stats.prefilled_tokens == (len(first.tokens.prompt_ids)
                                             + len(second.tokens.prompt_ids))
    assert_on_policy(model, [second.tokens])


def test_a_history_that_was_rewritten_is_prefilled_whole(
        loaded: tuple[Any, Any]) -> None:  # noqa: F811 - the fixture
    """A context level that drops a turn makes a prompt that does not extend the last one (a
    new token segment): nothing kept is a prefix of it, so it is prefilled whole."""
    policy = make(loaded, prefix_cache_mb=64)
    state = State("rewritten")
    messages = start()
    first = asyncio.run(policy.act(request(state, messages, native=True)))
    rewritten = [messages[0], Message(role="user", content="Summary: a test fails in main.py.")]
    second = asyncio.run(policy.act(request(state, rewritten, native=True, new_segment=True,
                                            segment=1)))
    assert first.tokens is not None
    assert second.tokens is not None
    assert policy.stats.reused_tokens == 0
    assert policy.stats.prefilled_tokens == (len(first.tokens.prompt_ids)
                                             + len(second.tokens.prompt_ids))
    assert_on_policy(loaded[0], [second.tokens])


def _layers(length: int, width: int = 4) -> list[tuple[Any, Any]]:
    """One layer's keys and values for ``length`` tokens: 2 heads x ``width`` floats."""
    return [(torch.zeros(2, length, width), torch.zeros(2, length, width))]


def test_the_longest_kept_strict_prefix_serves_and_the_budget_drops_the_oldest() -> None:
    stamp = [0]
    cache = PrefixCache(budget_bytes=2 * 2 * 2 * 40 * 4 * 4, stamp=lambda: stamp[0])
    history = list(range(100, 200))
    cache.put(history[:20], _layers(20))
    cache.put(history[:40], _layers(40))
    found = cache.longest(history[:60])
    assert found is not None
    assert len(found.tokens) == 40
    assert cache.longest(history[:40]) is not None  # a strict prefix: the 20-token turn
    assert len(cache.longest(history[:40]).tokens) == 20  # type: ignore[union-attr]
    assert cache.longest([1, *history[1:60]]) is None  # first token differs
    cache.put(history[:10], _layers(10))  # shorter than the index's tail: not worth keeping
    assert len(cache) == 2
    cache.put(history[:80], _layers(80))  # over the budget: the oldest leave first
    assert [len(e.tokens) for e in cache._entries.values()] == [80]
    assert cache.nbytes == 2 * 2 * 80 * 4 * 4
    cache.put(list(range(1000)), _layers(1000))  # larger than the whole budget: not kept
    assert len(cache) == 1
    stamp[0] = 1  # the weights changed
    cache.check_weights()
    assert len(cache) == 0
    assert cache.nbytes == 0


@pytest.mark.parametrize("value", [-1, "lots", True])
def test_a_bad_budget_is_a_config_error(tiny_model_dir: Path, value: object) -> None:
    with pytest.raises(ConfigError, match="prefix_cache_mb must be a number of MB >= 0"):
        make_policy(f"hf:{tiny_model_dir}", {"prefix_cache_mb": value})


def test_the_options_are_accepted_where_users_give_them(tiny_model_dir: Path) -> None:
    """``--policy-opt prefix_cache_mb=256`` and ``shared_prefill=true`` reach the policy (the
    hf backend names unknown options, so each one must be listed)."""
    policy = make_policy(f"hf:{tiny_model_dir}", {"prefix_cache_mb": 256,
                                                  "shared_prefill": True})
    assert policy.shared_prefill is True  # type: ignore[attr-defined]
    assert policy._prefix_cache.budget_bytes == 256 * 2**20  # type: ignore[attr-defined]


# -- the growing cache (harnessgrid.policies.kv_cache) ---------------------------------------


def _multi_head_copy(model: Any) -> Any:
    """The tiny model's architecture with as many key/value heads as query heads (no grouped
    attention, so attention reads the cache's views directly), random weights."""
    config = copy.deepcopy(model.config)
    config.num_key_value_heads = config.num_attention_heads
    torch.manual_seed(0)
    return type(model)(config).eval()


@pytest.mark.parametrize("attention", ["grouped", "multi-head"])
def test_the_growing_cache_samples_bit_for_bit_what_transformers_cache_does(
        loaded: tuple[Any, Any], attention: str) -> None:  # noqa: F811 - the fixture
    """Decoding into buffers with room (written in place) instead of transformers' cache
    (``torch.cat`` per step) gives the same ids and the same logprobs, bit for bit, through
    rows that stop early and leave the batch, prompts shared by a group, and the prefix
    cache's merged batches; only the cache's type differs."""
    model = loaded[0] if attention == "grouped" else _multi_head_copy(loaded[0])
    runs = []
    for growing in (True, False):
        policy = make((model, loaded[1]), shared_prefill=True, prefix_cache_mb=64)
        assert policy._growing is True  # a plain full-attention model
        policy._growing = growing
        runs.append(play(policy, 3, 3))
    for a, b in zip(*runs, strict=True):
        assert [(r.prompt_ids, r.completion_ids, r.logprobs) for r in a] == \
            [(r.prompt_ids, r.completion_ids, r.logprobs) for r in b]


def test_a_sliding_window_model_keeps_transformers_cache(
        loaded: tuple[Any, Any]) -> None:  # noqa: F811 - the fixture
    """A model whose own cache has sliding-window layers is not given growing full layers
    (they would hold, and attend over, more than its window), and the prefix cache turns
    itself off, saying so, rather than copy rows of a cache it does not know."""
    from harnessgrid.policies.kv_cache import growing_cache_fits

    config = copy.deepcopy(loaded[0].config)
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    config.sliding_window = 64
    config.use_sliding_window = True
    sliding = type(loaded[0])(config).eval()
    assert growing_cache_fits(loaded[0]) is True
    assert growing_cache_fits(sliding) is False
    assert make((sliding, loaded[1]))._growing is False
    policy = make((sliding, loaded[1]), prefix_cache_mb=64)  # its rows cannot be kept either
    with pytest.warns(RuntimeWarning, match="prefix_cache_mb is ignored"):
        turns = play(policy, 1, 2)
    assert policy._prefix_cache is None
    assert policy.stats.reused_tokens == 0
    assert_on_policy(sliding, turns[0])
