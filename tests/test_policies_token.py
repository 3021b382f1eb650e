"""Token policies: exact ids and logprobs, never re-tokenised history.

Everything runs on the offline tiny model through the real loading path; the few tests that
need a particular completion (a clean ``<|im_end|>`` ending, a tool call) feed the real
tokenizer's ids through :class:`TokenBookkeeper` in place of a sampler, since a randomly
initialised model almost never ends its turn.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from token_state import State

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.policies import PolicyRequest, TokenCounter
from harnessgrid.policies.hf import HFPolicy
from harnessgrid.policies.token import Generation, TokenBookkeeper, parse_tool_calls

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEMPERATURE = 0.7
READ = ToolSpec(name="read_file", description="Read a file.",
                parameters={"type": "object", "properties": {"path": {"type": "string"}},
                            "required": ["path"]})


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> HFPolicy:
    return HFPolicy(str(tiny_model_dir), temperature=TEMPERATURE, max_new_tokens=12, seed=0)


def request(state: State, messages: Sequence[Message], *, native: bool = False,
            new_segment: bool = False, segment: int = 0) -> PolicyRequest:
    return PolicyRequest(messages=list(messages), tools=[READ] if native else [],
                         native_tools=native,
                         state=state,  # type: ignore[arg-type]
                         new_segment=new_segment, segment=segment)


def start() -> list[Message]:
    return [Message(role="system", content="You are a helpful assistant."),
            Message(role="user", content="Fix the failing test in main.py.")]


def observation(i: int) -> list[Message]:
    """What a harness appends after a turn: a tool result and sometimes a reminder."""
    out = [Message(role="tool", content=f"exit code: {i}\nAll tests passed.",
                   tool_call_id=f"call_{i}")]
    if i % 2:
        out.append(Message(role="user", content="Keep going."))
    return out


async def episode(policy: HFPolicy, state: State, turns: int, *,
                  native: bool = False) -> tuple[list[ModelTurn], list[list[Message]]]:
    """Play ``turns`` turns with growing history; return the turns and each turn's view."""
    messages, out, views = start(), [], []
    for i in range(turns):
        views.append(list(messages))
        turn = await policy.act(request(state, messages, native=native))
        out.append(turn)
        messages += [turn.message(), *observation(i)]
    return out, views


def render(tokenizer: Any, messages: Sequence[Message], native: bool) -> str:
    text = tokenizer.apply_chat_template([m.openai() for m in messages],
                                         tools=[READ.openai()] if native else None,
                                         add_generation_prompt=True, tokenize=False)
    assert isinstance(text, str)
    return text


def chat_ids(tokenizer: Any, messages: Sequence[Message], native: bool) -> list[int]:
    return list(tokenizer.encode(render(tokenizer, messages, native), add_special_tokens=False))


# -- the hf: policy on the tiny model ---------------------------------------------------------


def test_logprobs_equal_a_fresh_forward_pass(policy: HFPolicy) -> None:
    turns, _ = asyncio.run(episode(policy, State("logprobs"), 3, native=True))
    for turn in turns:
        rec = turn.tokens
        assert rec is not None
        assert len(rec.completion_ids) > 0
        ids = torch.tensor([rec.prompt_ids + rec.completion_ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0].float()
        p, c = len(rec.prompt_ids), len(rec.completion_ids)
        logp = torch.log_softmax(logits[p - 1: p + c - 1] / TEMPERATURE, dim=-1)
        fresh = logp.gather(1, torch.tensor(rec.completion_ids)[:, None])[:, 0]
        assert torch.allclose(fresh, torch.tensor(rec.logprobs), atol=1e-4, rtol=0)
        assert (turn.tokens_in, turn.tokens_out) == (p, c)


@pytest.mark.parametrize("native", [False, True])
def test_later_turns_extend_the_previous_ids_and_match_the_template_text(
        policy: HFPolicy, native: bool) -> None:
    turns, views = asyncio.run(episode(policy, State(f"extend-{native}"), 4, native=native))
    tok = policy.tokenizer
    special = set(tok.all_special_ids)
    first = turns[0].tokens
    assert first is not None
    assert list(first.prompt_ids) == chat_ids(tok, views[0], native=native)
    for prev_turn, turn, view in zip(turns, turns[1:], views[1:], strict=False):
        prev, rec = prev_turn.tokens, turn.tokens
        assert prev is not None
        assert rec is not None
        assert rec.segment == prev.segment == 0
        history = prev.prompt_ids + prev.completion_ids
        assert rec.prompt_ids[: len(history)] == history
        if native:
            continue  # native content is stripped and split into calls: not the raw text
        # Raw content without special tokens inside: the extended ids decode to what a fresh
        # rendering of the view says, whether the completion stopped or was cut.
        body = prev.completion_ids[:-1] if prev_turn.finish_reason == "stop" \
            else prev.completion_ids
        assert not special & set(body), "seed gave a completion with special tokens inside"
        assert tok.decode(rec.prompt_ids) == render(tok, view, native=False)


def test_new_segment_restarts_from_a_fresh_rendering(policy: HFPolicy) -> None:
    state, tok = State("segments"), policy.tokenizer

    async def play() -> list[ModelTurn]:
        messages = start()
        t0 = await policy.act(request(state, messages))
        messages += [t0.message(), *observation(0)]
        rewritten = [messages[0], Message(role="user", content="Summary: tests were run.")]
        t1 = await policy.act(request(state, rewritten, new_segment=True, segment=1))
        rewritten += [t1.message(), *observation(1)]
        t2 = await policy.act(request(state, rewritten, segment=1))
        return [t0, t1, t2]

    t0, t1, t2 = (t.tokens for t in asyncio.run(play()))
    assert t0 is not None
    assert t1 is not None
    assert t2 is not None
    assert (t0.segment, t1.segment, t2.segment) == (0, 1, 1)
    rewritten = [start()[0], Message(role="user", content="Summary: tests were run.")]
    assert list(t1.prompt_ids) == chat_ids(tok, rewritten, native=False)
    assert t2.prompt_ids[: len(t1.prompt_ids) + len(t1.completion_ids)] == \
        t1.prompt_ids + t1.completion_ids


def test_a_view_that_does_not_extend_starts_a_segment_by_itself(policy: HFPolicy) -> None:
    """The runtime flags rewrites, but a policy must not trust it blindly."""
    state = State("unflagged")

    async def play() -> tuple[ModelTurn, ModelTurn]:
        t0 = await policy.act(request(state, start()))
        other = [*start(), Message(role="user", content="(history rewritten, not flagged)")]
        return t0, await policy.act(request(state, other))

    t0, t1 = asyncio.run(play())
    assert t0.tokens is not None
    assert t1.tokens is not None
    assert t1.tokens.segment == 1
    other = [*start(), Message(role="user", content="(history rewritten, not flagged)")]
    assert list(t1.tokens.prompt_ids) == chat_ids(policy.tokenizer, other, native=False)


def test_seeded_sampling_is_deterministic_and_episodes_stay_apart(
        policy: HFPolicy, tiny_model_dir: Path) -> None:
    def ids(turns: list[ModelTurn]) -> list[tuple[int, ...]]:
        return [t.tokens.completion_ids for t in turns if t.tokens is not None]

    alone_a = ids(asyncio.run(episode(policy, State("ep-a"), 3))[0])
    alone_b = ids(asyncio.run(episode(policy, State("ep-b"), 3))[0])
    assert alone_a != alone_b

    async def both() -> tuple[Any, Any]:
        return await asyncio.gather(episode(policy, State("ep-a"), 3),
                                    episode(policy, State("ep-b"), 3))

    (turns_a, _), (turns_b, _) = asyncio.run(both())
    assert (ids(turns_a), ids(turns_b)) == (alone_a, alone_b)
    # Another instance sharing the loaded weights (the trainer's path) samples the same.
    twin = HFPolicy(str(tiny_model_dir), model=policy.model, tokenizer=policy.tokenizer,
                    temperature=TEMPERATURE, max_new_tokens=12, seed=0)
    assert ids(asyncio.run(episode(twin, State("ep-a"), 3))[0]) == alone_a
    other = HFPolicy(str(tiny_model_dir), model=policy.model, tokenizer=policy.tokenizer,
                     temperature=TEMPERATURE, max_new_tokens=12, seed=1)
    assert ids(asyncio.run(episode(other, State("ep-a"), 3))[0]) != alone_a


def test_finished_episodes_are_dropped(policy: HFPolicy) -> None:
    done, live = State("done"), State("live")
    asyncio.run(policy.act(request(done, start())))
    assert "done" in policy.book.episodes
    done.finished = True
    asyncio.run(policy.act(request(live, start())))
    assert "done" not in policy.book.episodes
    assert "live" in policy.book.episodes


def test_count_tokens_is_the_prompt_length(policy: HFPolicy) -> None:
    assert isinstance(policy, TokenCounter)
    turn = asyncio.run(policy.act(request(State("count"), start())))
    assert policy.count_tokens(start()) == turn.tokens_in
    assert policy.count_tokens(start(), [READ]) > turn.tokens_in


def test_made_through_the_registry(tiny_model_dir: Path) -> None:
    from harnessgrid.policies import make_policy

    made = make_policy(f"hf:{tiny_model_dir}", {"max_new_tokens": 3, "seed": 0})
    assert made.spec == f"hf:{tiny_model_dir}"
    assert asyncio.run(made.act(request(State("made"), start()))).tokens_out <= 3


def test_missing_model_directory_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A path that plainly is a missing folder fails fast: before any loading (which could
    look the name up on the hub). A spy on the loader shows that, where a clock would depend
    on the machine's load (issue 28)."""
    loads: list[str] = []
    monkeypatch.setattr(HFPolicy, "_load", lambda self, what, *a, **k: loads.append(what))
    with pytest.raises(ConfigError) as err:
        HFPolicy("/no/such/dir")
    assert loads == [], "the loader was called"
    assert "no such model directory '/no/such/dir'" in err.value.message
    assert "hf:/no/such/dir" in str(err.value)
    assert err.value.hint
    assert "build_tiny_model" in err.value.hint


def test_unknown_hub_name_offline_is_a_config_error() -> None:
    code = ("from harnessgrid.errors import ConfigError\n"
            "from harnessgrid.policies.hf import HFPolicy\n"
            "try:\n    HFPolicy('harnessgrid-no-such-org/no-such-model')\n"
            "except ConfigError as e:\n    print('CONFIG', e.message)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert "CONFIG hf:harnessgrid-no-such-org/no-such-model: cannot load" in out.stdout, \
        out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_vllm_without_vllm_says_how_to_install() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed")
    from harnessgrid.policies.vllm import VLLMPolicy

    with pytest.raises(ConfigError) as err:
        VLLMPolicy("Qwen/Qwen3-4B-Instruct-2507")
    assert "vllm:Qwen/Qwen3-4B-Instruct-2507" in err.value.message
    assert err.value.hint
    assert "pip install 'harnessgrid[vllm]'" in err.value.hint


# -- the bookkeeping with chosen completions (real tokenizer) ---------------------------------


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def forced(tokenizer: Any, text: str, *, stop: bool) -> Any:
    """A backend that 'samples' exactly ``text`` (and ``<|im_end|>`` when ``stop``)."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if stop:
        ids.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))

    def generate(prompt_ids: list[int], max_new_tokens: int, seed: int | None) -> Generation:
        return Generation(ids, [-1.0] * len(ids), "stop" if stop else "length")

    return generate


CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'


def test_clean_ending_gives_exactly_the_fresh_template_ids(tokenizer: Any) -> None:
    book, state, messages = TokenBookkeeper(tokenizer), State("clean"), start()
    turn = book.turn(request(state, messages, native=True),
                     forced(tokenizer, "Let me look.\n" + CALL, stop=True), max_new_tokens=64)
    assert turn.content == "Let me look."
    assert turn.tool_calls == (ToolCall(id="call_0_0", name="read_file",
                                        arguments={"path": "a.txt"}),)
    messages += [turn.message(), *observation(1)]
    nxt = book.turn(request(state, messages, native=True),
                    forced(tokenizer, "Done.", stop=True), max_new_tokens=64)
    assert nxt.tokens is not None
    assert turn.tokens is not None
    history = turn.tokens.prompt_ids + turn.tokens.completion_ids
    assert nxt.tokens.prompt_ids[: len(history)] == history
    # Only "\n" was missing after <|im_end|>: identical to tokenising the whole conversation.
    assert list(nxt.tokens.prompt_ids) == chat_ids(tokenizer, messages, native=True)
    assert nxt.tokens.prompt_ids[len(history)] == tokenizer.encode("\n")[0]


def test_truncated_completion_is_closed_after_its_last_token(tokenizer: Any) -> None:
    book, state, messages = TokenBookkeeper(tokenizer), State("cut"), start()
    turn = book.turn(request(state, messages), forced(tokenizer, "I will rea", stop=False),
                     max_new_tokens=4)
    assert turn.finish_reason == "length"
    assert turn.content == "I will rea"
    messages += [turn.message(), *observation(0)]
    nxt = book.turn(request(state, messages), forced(tokenizer, "ok", stop=True),
                    max_new_tokens=4)
    assert nxt.tokens is not None
    assert turn.tokens is not None
    history = turn.tokens.prompt_ids + turn.tokens.completion_ids
    closing = tokenizer.encode("<|im_end|>\n", add_special_tokens=False)
    assert list(nxt.tokens.prompt_ids[len(history): len(history) + len(closing)]) == closing
    assert tokenizer.decode(nxt.tokens.prompt_ids) == render(tokenizer, messages, native=False)


def test_a_template_that_is_not_append_only_starts_a_new_segment(tiny_model_dir: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    # A template that numbers the turns in the system prompt rewrites its start every turn.
    tok.chat_template = ("{{ '<|im_start|>system\\n' ~ (messages | length) ~ '<|im_end|>\\n' }}"
                         "{% for m in messages %}{{ '<|im_start|>' ~ m.role ~ '\\n' ~ m.content"
                         " ~ '<|im_end|>\\n' }}{% endfor %}"
                         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                         "{% endif %}")
    book, state, messages = TokenBookkeeper(tok), State("rewrite"), start()
    turn = book.turn(request(state, messages), forced(tok, "Hi.", stop=True), max_new_tokens=8)
    messages += [turn.message(), *observation(0)]
    nxt = book.turn(request(state, messages), forced(tok, "Ok.", stop=True), max_new_tokens=8)
    assert nxt.tokens is not None
    assert nxt.tokens.segment == 1
    assert list(nxt.tokens.prompt_ids) == chat_ids(tok, messages, native=False)
    assert book.conversation(request(state, messages)).restarts == 1


def test_non_native_content_is_the_raw_text(tokenizer: Any) -> None:
    turn = TokenBookkeeper(tokenizer).turn(request(State("raw"), start()),
                                           forced(tokenizer, " Plan:\n" + CALL, stop=True),
                                           max_new_tokens=64)
    assert turn.content == " Plan:\n" + CALL
    assert turn.tool_calls == ()


# -- parsing native tool calls ----------------------------------------------------------------


def test_parse_tool_calls_valid_invalid_and_truncated() -> None:
    text = ("I will read two files.\n" + CALL +
            '\n<tool_call>\n{"name": "read_file", "arguments": "{\\"path\\": \\"b\\"}"}\n'
            "</tool_call>\n<tool_call>\n{\"name\": \"edit\", \"arguments\": {\"path\": }\n"
            "</tool_call>\n<tool_call>\n{\"name\": \"run_sh")
    content, calls = parse_tool_calls(text, "c")
    assert content == "I will read two files."
    assert [c.id for c in calls] == ["c_0", "c_1", "c_2", "c_3"]
    assert calls[0] == ToolCall(id="c_0", name="read_file", arguments={"path": "a.txt"})
    assert calls[1].arguments == {"path": "b"}
    assert calls[1].parse_error is None
    assert calls[2].name == "edit"
    assert calls[2].parse_error
    assert "JSON" in calls[2].parse_error
    assert calls[2].raw_arguments == '{"name": "edit", "arguments": {"path": }'
    assert calls[3].parse_error
    assert "unclosed" in calls[3].parse_error
    assert calls[3].raw_arguments == '{"name": "run_sh'
    assert parse_tool_calls("just text  ") == ("just text", ())
    assert parse_tool_calls("<tool_call>[1, 2]</tool_call>")[1][0].parse_error
