"""Streamed replies (``PolicyRequest.on_text``): text pieces arrive as the backend produces
them, join to exactly the turn's content, and the turn equals the unstreamed one.

The API policies run through their real clients against the scripted local servers, which
answer ``stream: true`` with server-sent events (and can break a stream off mid-reply); the
``hf:`` policy runs on the offline tiny model.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from servers import (
    AnthropicCompatServer,
    Canned,
    OpenAICompatServer,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    http_error,
    openai_call,
    openai_completion,
    openai_text,
    stream_cut,
)
from token_state import State

from harnessgrid.errors import PolicyError
from harnessgrid.models import Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.policies import Policy, PolicyRequest
from harnessgrid.policies.streaming import TextSink, TokenTextStream, visible_text

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")

API = all(importlib.util.find_spec(name) for name in ("litellm", "anthropic", "openai"))
needs_api = pytest.mark.skipif(not API, reason="needs the api extra")

TOOLS = (ToolSpec(name="read_file", description="Read a file.",
                  parameters={"type": "object", "properties": {"path": {"type": "string"}},
                              "required": ["path"]}),)
MESSAGES = (Message(role="system", content="You are a coding agent."),
            Message(role="user", content="Read a.txt", kind="task"))
FAST = {"backoff_s": 0.01, "timeout_s": 10.0}
LONG = "The file a.txt holds one line; I will read it now and then report what it says."


class Pieces(list[str]):
    """An ``on_text`` callback that keeps the pieces it got."""

    def __call__(self, piece: str) -> None:
        self.append(piece)


def request(on_text: Any = None, *, native: bool = True,
            messages: Sequence[Message] = MESSAGES) -> PolicyRequest:
    stand_in: Any = SimpleNamespace()
    return PolicyRequest(messages=list(messages), tools=TOOLS, native_tools=native,
                         state=stand_in, new_segment=False,
                         on_text=on_text)


def act(policy: Policy, req: PolicyRequest) -> ModelTurn:
    return asyncio.run(policy.act(req))


def make(backend: str, srv: Any, **options: Any) -> Policy:
    from harnessgrid.policies.api import AnthropicPolicy, LiteLLMPolicy
    from harnessgrid.policies.openai_compat import OpenAIPolicy

    options = {**FAST, **options}
    if backend == "litellm":
        return LiteLLMPolicy("openai/test-model", api_base=srv.base_url + "/v1", api_key="x",
                             **options)
    if backend == "openai":
        return OpenAIPolicy("test-model", base_url=srv.base_url + "/v1", api_key="x", **options)
    return AnthropicPolicy("claude-test", base_url=srv.base_url, api_key="x", **options)


def server(backend: str, script: Sequence[Any]) -> Any:
    return (AnthropicCompatServer if backend == "anthropic" else OpenAICompatServer)(script)


def text_reply(backend: str, text: str, **usage: int) -> Canned:
    if backend == "anthropic":
        return anthropic_text(text, **usage)
    return openai_text(text, **usage)


def tool_reply(backend: str) -> Canned:
    """Text, then a call (and for the OpenAI shape a malformed and an argument-less one)."""
    if backend == "anthropic":
        blocks = [{"type": "text", "text": LONG}, {"type": "text", "text": "Second block."},
                  {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                   "input": {"path": "a.txt"}},
                  {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}]
        return anthropic_message(blocks, input_tokens=50, output_tokens=20)
    calls = [openai_call("read_file", {"path": "a.txt"}, "c1"),
             openai_call("read_file", '{"path": "a.t', "c2"),  # truncated JSON
             openai_call("run", "", "c3")]  # no arguments
    return openai_completion(LONG, calls, prompt_tokens=50, completion_tokens=20)


BACKENDS = [pytest.param(b, marks=needs_api) for b in ("litellm", "openai", "anthropic")]


def wire_usage(backend: str, body: dict[str, Any]) -> None:
    """What a streamed request carries on the wire."""
    assert body["stream"] is True
    if backend != "anthropic":  # the usage chunk is asked for, so tokens stay counted
        assert body["stream_options"] == {"include_usage": True}


# --- API policies ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_streamed_text_reply_equals_the_unstreamed_turn(backend: str) -> None:
    canned = text_reply(backend, LONG, **({"input_tokens": 31, "output_tokens": 17}
                                         if backend == "anthropic"
                                         else {"prompt_tokens": 31, "completion_tokens": 17}))
    with server(backend, [canned, canned]) as srv:
        policy, pieces = make(backend, srv), Pieces()
        plain = act(policy, request(native=False))
        streamed = act(policy, request(pieces, native=False))
    assert streamed == plain
    assert streamed.content == LONG
    assert (streamed.tokens_in, streamed.tokens_out) == (31, 17)  # usage from the stream
    assert len(pieces) > 1
    assert "".join(pieces) == LONG
    assert all(pieces)
    unstreamed, sent = (r.json for r in srv.requests)
    assert "stream" not in unstreamed
    assert "stream_options" not in unstreamed  # as before
    wire_usage(backend, sent)
    assert {k: v for k, v in sent.items() if k not in ("stream", "stream_options")} == unstreamed


@pytest.mark.parametrize("backend", BACKENDS)
def test_streamed_tool_calls_equal_the_unstreamed_turn(backend: str) -> None:
    canned = tool_reply(backend)
    with server(backend, [canned, canned]) as srv:
        policy, pieces = make(backend, srv), Pieces()
        plain = act(policy, request())
        streamed = act(policy, request(pieces))
    assert streamed == plain
    assert (streamed.tokens_in, streamed.tokens_out) == (50, 20)
    assert "".join(pieces) == streamed.content
    assert len(pieces) > 1
    if backend == "anthropic":  # text blocks are joined by a newline, streamed with them
        assert streamed.content == LONG + "\nSecond block."
        assert streamed.tool_calls == (
            ToolCall(id="toolu_1", name="read_file", arguments={"path": "a.txt"}),
            ToolCall(id="toolu_2", name="read_file"))
    else:
        good, bad, blank = streamed.tool_calls
        assert good == ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
        assert bad.raw_arguments == '{"path": "a.t'
        assert bad.parse_error
        assert blank == ToolCall(id="c3", name="run")
        assert streamed.finish_reason == "tool_calls"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_that_breaks_off_after_text_is_a_policy_error(backend: str) -> None:
    """Part of the reply was shown: no retry (the retry could answer otherwise), a
    PolicyError that says so, and the pieces shown are a prefix of the lost reply."""
    error = ({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
             if backend == "anthropic" else {"error": {"message": "busy", "type": "server"}})
    for broken in (stream_cut(text_reply(backend, LONG), 4, error),  # an error event
                   stream_cut(text_reply(backend, LONG), 4)):  # the connection just closes
        with server(backend, [broken, text_reply(backend, "unused")]) as srv:
            pieces = Pieces()
            with pytest.raises(PolicyError, match="broke off after part of it was streamed"):
                act(make(backend, srv), request(pieces))
        assert len(srv.requests) == 1
        assert pieces
        assert LONG.startswith("".join(pieces))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_that_breaks_off_before_any_text_is_retried(backend: str) -> None:
    """Nothing shown yet: as a lost connection before a reply, it is retried, and the
    consumer gets the text of the attempt that succeeded, once."""
    error = ({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
             if backend == "anthropic" else None)
    broken = stream_cut(text_reply(backend, "lost"), 1, error)  # only the opening event
    with server(backend, [broken, http_error(503), text_reply(backend, LONG)]) as srv:
        pieces = Pieces()
        turn = act(make(backend, srv), request(pieces))
    assert turn.content == LONG == "".join(pieces)
    assert len(srv.requests) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_in_on_text_propagates_as_itself(backend: str) -> None:
    class Stop(Exception):
        pass

    seen: list[str] = []
    raised = Stop("the UI is gone")

    def on_text(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 2:
            raise raised

    with (server(backend, [text_reply(backend, LONG), text_reply(backend, LONG)]) as srv,
          pytest.raises(Stop) as excinfo):
        act(make(backend, srv), request(on_text))
    assert excinfo.value is raised
    assert len(seen) == 2
    assert len(srv.requests) == 1  # not retried


@pytest.mark.parametrize("backend", BACKENDS)
def test_streamed_rejections_and_broken_answers_fail_as_before(backend: str) -> None:
    rejected = anthropic_error(400, "nope") if backend == "anthropic" else http_error(400,
                                                                                      message="nope")
    with server(backend, [rejected]) as srv, pytest.raises(PolicyError, match="request rejected"):
        act(make(backend, srv), request(Pieces()))
    if backend == "anthropic":
        empty = anthropic_message([])
        empty.body["stop_reason"] = None
        broken, match = empty, "no content and no stop reason"
    else:
        broken, match = Canned(body={**openai_text("x").body, "choices": []}), "no choices"
        if backend == "litellm":  # litellm itself calls a stream without choices broken off
            match = "finish_reason"
    with server(backend, [broken]) as srv, pytest.raises(PolicyError, match=match):
        act(make(backend, srv, max_retries=0), request(Pieces()))


@needs_api
def test_a_slow_stream_is_cut_at_the_timeout_and_retried() -> None:
    """The whole streamed call is bounded by timeout_s, as the unstreamed one: the slow
    reply is given up (nothing of it reaches the pieces) and the retry's is the turn."""
    slow = Canned(body=openai_text("too late").body, delay_s=30.0)
    with OpenAICompatServer([slow, openai_text("ok")]) as srv:
        pieces = Pieces()
        turn = act(make("openai", srv, timeout_s=0.3), request(pieces))
        assert len(srv.requests) == 2
    assert turn.content == "ok" == "".join(pieces)


# --- token policies ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_policy(tiny_model_dir: Path) -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from harnessgrid.policies.hf import HFPolicy

    return HFPolicy(str(tiny_model_dir), temperature=0.9, max_new_tokens=24, seed=3)


def token_request(state: State, messages: Sequence[Message], on_text: Any,
                  native: bool) -> PolicyRequest:
    return PolicyRequest(messages=list(messages), tools=list(TOOLS) if native else [],
                         native_tools=native,
                         state=state,  # type: ignore[arg-type]
                         new_segment=False, on_text=on_text)


async def token_episode(policy: Any, episode_id: str, stream: bool, native: bool,
                        ) -> tuple[list[ModelTurn], list[Pieces]]:
    """Three turns with growing history; same id and seed give the same samples."""
    state, messages = State(episode_id), list(MESSAGES)
    turns, pieces = [], []
    for i in range(3):
        got = Pieces()
        turn = await policy.act(token_request(state, messages, got if stream else None, native))
        turns.append(turn)
        pieces.append(got)
        messages += [turn.message(), Message(role="user", content=f"Go on ({i}).")]
    return turns, pieces


@pytest.mark.parametrize("native", [False, True])
def test_hf_streamed_turns_equal_the_unstreamed_ones(hf_policy: Any, native: bool) -> None:
    plain, _ = asyncio.run(token_episode(hf_policy, f"hf-{native}", False, native))
    streamed, pieces = asyncio.run(token_episode(hf_policy, f"hf-{native}", True, native))
    assert streamed == plain  # content, calls, finish reason and the whole TokenRecord
    for turn, got in zip(streamed, pieces, strict=True):
        assert "".join(got) == turn.content
        assert all(got)
    assert max(len(got) for got in pieces) > 1  # text arrived while it was sampled


def test_hf_concurrent_streamed_turns_get_their_own_text(hf_policy: Any) -> None:
    """Episodes decoded in one batch: each callback gets its own episode's text only."""
    async def both() -> list[tuple[list[ModelTurn], list[Pieces]]]:
        return list(await asyncio.gather(*(token_episode(hf_policy, f"batch-{k}", True, False)
                                           for k in range(3))))

    for turns, pieces in asyncio.run(both()):
        assert ["".join(p) for p in pieces] == [t.content for t in turns]


def test_hf_an_exception_in_on_text_propagates_and_records_nothing(hf_policy: Any) -> None:
    class Stop(Exception):
        pass

    def on_text(piece: str) -> None:
        raise Stop(piece)

    state = State("hf-raise")
    with pytest.raises(Stop):
        asyncio.run(hf_policy.act(token_request(state, MESSAGES, on_text, False)))
    assert hf_policy.book.conversation(token_request(state, MESSAGES, None, False)).turns == 0
    turn = asyncio.run(hf_policy.act(token_request(state, MESSAGES, Pieces(), False)))
    assert turn.tokens is not None  # the policy goes on serving


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'


@pytest.mark.parametrize("text", [
    "  Voilà — naïve café, 文字 and 🙂 emoji.  \n" + CALL + "\n and after the call. ",
    "Let me look.\n" + CALL,
    "Half a call: <tool_call>\n{\"name\": \"read_",
    "a < b and <tool without a call",
])
@pytest.mark.parametrize("native", [False, True])
def test_token_text_pieces_join_to_the_content(tokenizer: Any, text: str, native: bool) -> None:
    """Ids fed one at a time (as the sampler produces them), with the real tokenizer: no
    piece ever shows part of a tool call or an unfinished character, and the pieces join to
    exactly the content the turn reports."""
    from harnessgrid.policies.token import parse_tool_calls

    ids = list(tokenizer.encode(text, add_special_tokens=False))
    ids.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))

    def decode(some: list[int]) -> str:
        out = tokenizer.decode(some, skip_special_tokens=True)
        assert isinstance(out, str)
        return out

    pieces = Pieces()
    stream = TokenTextStream(TextSink(pieces), decode, native)
    for token in ids:
        stream.add([token])
        assert ("\ufffd" not in "".join(pieces) and "<tool_call" not in "".join(pieces)) or \
            not native
    final = decode(ids)
    content = parse_tool_calls(final)[0] if native else final
    stream.close(content)
    assert "".join(pieces) == content
    assert not stream.diverged


def test_visible_text_holds_back_what_may_still_change() -> None:
    assert visible_text("Hello <tool", True) == "Hello"
    assert visible_text("Hello <tool", False) == "Hello <tool"
    assert visible_text("  x <tool_call>{}</tool_call> y\ufffd", True) == "x  y"
    assert visible_text("ends with space ", False) == "ends with space"
