"""Every parser of model output is total: deep nesting, huge numbers, invalid UTF-8 and lone
surrogates are a format error (the agent's mistake, scored) or a well-defined refusal, never
an exception out of a policy, a harness step, a product-tool call or ``Session.run``.

The findings: ``decode_call`` raised ``RecursionError`` on ``"[" * 100000`` (the episode became
``policy_error``, unscored: a model could drop its own failures from the scores); through the
``xml_tags`` product-tool tag the same text raised out of ``Session.run`` into the product;
``int()`` of a 100,000-digit number (a character reference, a JSON literal) raised
``ValueError``. The fuzz test drives the generators of ``tests/nested_inputs.py`` (also played
by ``benchmarks/fuzz_turns.py``) through every tool interface, every adapter and the product
tools, one harness step at a time in a real sandbox.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from nested_inputs import (
    DEEP_ARRAY,
    DEEP_OBJECT,
    HUGE_NUMBER,
    INVALID_UTF8,
    LONE_SURROGATES,
    deep_dict,
    json_payloads,
    nested_turns,
    text_payloads,
)

import harnessgrid as hg
from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.models import MAX_ARGUMENT_DEPTH, Action, FormatError, ModelTurn, ToolCall
from harnessgrid.plugins.factors.tool_interface.bash_only import BashOnly
from harnessgrid.plugins.factors.tool_interface.function_calling import FunctionCalling
from harnessgrid.plugins.factors.tool_interface.xml_tags import XmlTags, parse_calls
from harnessgrid.product_tools import ProductTool, product_tools
from harnessgrid.sandboxing.sandbox import Sandbox, sandbox_available
from harnessgrid.sandboxing.tool_hooks import ToolHooks, run_product_tool, sandbox_tool_call
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task

ORDERS: list[Any] = []  # what the product function was called with


def lookup_order(order_id: str, count: int = 1) -> dict[str, Any]:
    """Look up an order in the shop's database."""
    ORDERS.append(order_id)
    return {"id": order_id, "count": count}


def scale(n: int) -> int:
    """Scale a number up (its result is too long for any JSON reader)."""
    return n * 10**5_000


LOOKUP = ProductTool(lookup_order, timeout_s=30)
PAYLOADS = json_payloads(random.Random(0))
TOO_DEEP = "[" * (MAX_ARGUMENT_DEPTH + 1) + "]" * (MAX_ARGUMENT_DEPTH + 1)


def _label(value: object) -> str:
    """A short test id (a deep dict has no repr)."""
    if isinstance(value, str | bytes):
        return repr(value[:24])
    return type(value).__name__


# -- the shared bounded decoder -----------------------------------------------------------------


@pytest.mark.parametrize(("text", "why"), [
    (DEEP_ARRAY, "nested deeper than 64 levels"),
    (DEEP_OBJECT, "nested deeper than 64 levels"),
    (TOO_DEEP, "nested deeper than 64 levels"),
    ('{"a": ' + HUGE_NUMBER + "}", "a number 100,000 characters long"),
    ("-" + "9" * 401, "a number 402 characters long"),
    (b'{"a": "\xc3("}', "not valid UTF-8"),
    (b'{"a": "\xed\xa0\x80"}', "not valid UTF-8"),
    ("[" * 10 + '"' + "\\" * 9_999, "Unterminated string"),
    ('"' + '\\"' * 50_000, "Unterminated string"),
    ("]" + "[" * 100_000, "Expecting value"),
    ("{not json", "Expecting property name"),
    (None, "not JSON text but a NoneType"),
])
def test_the_bounded_decoder_refuses_what_would_crash_json_loads(text: Any, why: str) -> None:
    from harnessgrid import safe_json

    with pytest.raises(safe_json.JSONError, match=why):
        safe_json.loads(text)


def test_the_bounded_decoder_refuses_text_past_its_size_bound() -> None:
    from harnessgrid import safe_json

    with pytest.raises(safe_json.JSONError, match="121 characters long, more than the 100"):
        safe_json.loads("[" + "1," * 59 + "1]", max_chars=100)
    assert len(safe_json.loads("[" + "1," * 59 + "1]", max_chars=None)) == 60


def test_the_bounded_decoder_reads_everything_within_the_bounds() -> None:
    from harnessgrid import safe_json

    depth = MAX_ARGUMENT_DEPTH
    assert safe_json.loads("[" * depth + "]" * depth) is not None
    text = json.dumps({"s": "[[[{{{" * 1_000 + '"\\"]]]', "n": -12.5e3, "big": 10**399,
                       "u": "\u00e9\ud800", "t": [True, False, None]})
    assert safe_json.loads(text) == json.loads(text)
    assert safe_json.loads(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert math.isnan(safe_json.loads('{"a": NaN}')["a"])  # as json.loads; ToolCall flags it
    assert safe_json.loads('{"a": 1}', object_hook=lambda d: sorted(d)) == ["a"]


# -- the policies' decoders ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", [*PAYLOADS, deep_dict(5_000), {"n": 10**5_000},
                                 INVALID_UTF8.encode("utf-8", "surrogateescape"), 12, [1]],
                         ids=lambda raw: _label(raw))
def test_decode_call_never_raises(raw: object) -> None:
    from harnessgrid.policies.api import decode_call

    call = decode_call("c1", "read_file", raw)
    assert call.parse_error, call
    assert call.name == "read_file"
    assert call.id == "c1"
    assert call.model_dump_json()  # storable


def test_decode_call_keeps_what_it_always_decoded() -> None:
    from harnessgrid.policies.api import decode_call

    assert decode_call("c", "f", '{"path": "a\\u00e9"}').arguments == {"path": "a\u00e9"}
    assert decode_call("c", "f", {"path": "x"}).arguments == {"path": "x"}
    assert decode_call(None, None, "").name == ""
    assert "lone surrogate" in (decode_call("c", "f", '{"a": "\\ud800"}').parse_error or "")


def test_an_api_reply_with_nested_arguments_decodes_to_a_format_error() -> None:
    """The whole provider reply, as the litellm / openai / anthropic policies decode it."""
    from harnessgrid.policies.api import _anthropic_turn, openai_turn

    calls = [SimpleNamespace(id=f"c{i}", function=SimpleNamespace(name="run_command",
                                                                  arguments=payload))
             for i, payload in enumerate(PAYLOADS)]
    reply = SimpleNamespace(choices=[SimpleNamespace(
        message=SimpleNamespace(content=None, tool_calls=calls), finish_reason="tool_calls")],
        usage=None)
    turn = openai_turn("openai:test", reply)
    assert len(turn.tool_calls) == len(PAYLOADS)
    assert all(c.parse_error for c in turn.tool_calls)
    blocks = [SimpleNamespace(type="tool_use", id="t", name="Bash", input=deep_dict(5_000))]
    message = SimpleNamespace(content=blocks, stop_reason="tool_use", usage=None)
    assert "deeper than 64 levels" in (_anthropic_turn("anthropic:test", message)
                               .tool_calls[0].parse_error or "")


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: _label(p))
def test_token_policies_chatml_parsing_never_raises(payload: str) -> None:
    from harnessgrid.policies.tiny_model import ToolCallParseError, parse_chatml_tool_calls
    from harnessgrid.policies.token import parse_tool_calls

    for arguments in (payload, json.dumps(payload)):
        text = f'<tool_call>{{"name": "read", "arguments": {arguments}}}</tool_call>'
        _, calls = parse_tool_calls("before " + text)
        assert len(calls) == 1, calls
        assert calls[0].parse_error, calls
        error: ToolCallParseError | None = None
        try:  # a number too large or a lone surrogate is decoded: ToolCall flags it
            parse_chatml_tool_calls(text)
        except ToolCallParseError as exc:
            error = exc
        if error is not None:
            assert str(error)
    content, calls = parse_tool_calls("<tool_call>" * 20_000 + "x")
    assert content == ""
    assert len(calls) == 1
    assert "unclosed" in (calls[0].parse_error or "")


def test_a_python_int_no_json_reader_can_read_is_a_parse_error() -> None:
    for value in (10**5_000, -(10**400), 2**1024):
        call = ToolCall(id="c", name="read_file", arguments={"path": value, "x": [value]})
        assert "too large" in (call.parse_error or ""), value
        assert call.model_dump_json()
        assert json.loads(call.model_dump_json())
    assert ToolCall(id="c", name="f", arguments={"n": 2**1000}).parse_error is None


# -- the tool interfaces and the product-tool parsers -------------------------------------------


def _interfaces() -> list[Any]:
    out = []
    for cls in (FunctionCalling, XmlTags, BashOnly):
        ti = cls()
        ti.add_product_tools([LOOKUP.spec()])
        out.append(ti)
    return out


def _parse_and_convert(ti: Any, turn: ModelTurn) -> str | None:
    """What the harness does with a turn: parse, then each call to an action. The format
    error's message, or None when every call is an action."""
    try:
        for call in ti.parse(turn):
            ti.to_action(call)
    except FormatError as exc:
        error = exc
    else:
        return None
    assert isinstance(error.message, str)
    assert error.message
    return error.message


@pytest.mark.parametrize("ti", _interfaces(), ids=lambda ti: ti.name)
def test_every_tool_interface_parses_nested_input_totally(ti: Any) -> None:
    from harnessgrid.policies.api import decode_call

    rng = random.Random(ti.name)
    texts = text_payloads(rng, LOOKUP.name)
    for text in texts:
        _parse_and_convert(ti, ModelTurn(content=text))
    if ti.native_tools:
        for payload in PAYLOADS:
            for name in ("read_file", LOOKUP.name):
                turn = ModelTurn(tool_calls=(decode_call("c", name, payload),))
                assert _parse_and_convert(ti, turn) is not None, payload[:40]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: _label(p))
def test_the_xml_product_tag_is_a_format_error_for_nested_arguments(payload: str) -> None:
    ti = _interfaces()[1]
    turn = ModelTurn(content=f'<tool name="lookup_order">\n{payload}\n</tool>')
    message = _parse_and_convert(ti, turn)
    assert message is not None
    assert "lookup_order" in message


def test_a_character_reference_too_long_to_be_a_character_is_left_as_written() -> None:
    for ref in ("&#" + HUGE_NUMBER + ";", "&#x" + "f" * 50_000 + ";", "&#0000000065;"):
        [call] = parse_calls(f'<view path="{ref}"/>')
        assert call.arguments["path"] == (ref if len(ref) > 20 else "A")


def test_openclaw_reads_tool_output_that_mimics_its_error_payload_totally() -> None:
    """A command may print the start of OpenClaw's thrown-error JSON and then anything."""
    from harnessgrid.plugins.adapters._openclaw_tools import thrown_payload, thrown_text

    prefix = '{\n  "status": "error",'
    for rest in (' "tool": ' + DEEP_ARRAY, ' "n": ' + HUGE_NUMBER + "}", INVALID_UTF8):
        assert thrown_payload(prefix + rest) is None
    assert thrown_payload(thrown_text("read", "no such file")) is not None


def test_product_tool_calls_never_raise() -> None:
    env = Environment(workspace=None, sandbox=None,  # type: ignore[arg-type]
                      hooks=ToolHooks(harness="h", product_tools=product_tools(
                          [LOOKUP, ProductTool(scale)])))

    async def main() -> list[tuple[bool, str]]:
        results = []
        for payload in PAYLOADS:
            result = await run_product_tool(env, "lookup_order", payload)
            results.append((result.error is None, result.error or result.output))
        for n in (12, "1" * 4_000, HUGE_NUMBER):
            result = await run_product_tool(env, "scale", {"n": n})
            results.append((result.error is None, result.error or result.output))
        for arguments in (deep_dict(2_000), {"order_id": 10**5_000},
                          {"order_id": LONE_SURROGATES}):
            results.append(await sandbox_tool_call(env, "lookup_order", arguments))
        return results

    results = asyncio.run(main())
    refused = results[:len(PAYLOADS)] + results[-3:]
    assert not any(ok for ok, _ in refused), refused
    assert all(isinstance(text, str) and text for _, text in results)


# -- every harness, one step at a time, in a real sandbox ---------------------------------------

SPECS = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2", "S1-T1-O0-C2-W0",
         "adapter:claude-code", "adapter:openclaw", "adapter:mini-bash"]


class StepRig:
    """One harness with the product tool, stepped turn by turn (what a session does) in a
    real sandbox; a new episode starts when one finishes."""

    def __init__(self, spec: str) -> None:
        self.harness = resolve_harness(spec)
        self.harness.add_product_tools([LOOKUP.spec()])
        self.ws = Workspace.create({"notes.txt": "alpha\n"})
        self.sandbox = Sandbox(self.ws)
        hooks = ToolHooks(harness=self.harness.name, product_tools=product_tools([LOOKUP]))
        self.env = Environment(self.ws, self.sandbox, hooks=hooks)
        self.task = Task(id="t", instruction="Do it.", files={"notes.txt": "alpha\n"})
        self.state = self.harness.start(self.task, "ep")

    async def step(self, turn: ModelTurn) -> Any:
        outcome, decision = await self.harness.step(self.state, turn, self.env)
        if decision.finished or self.state.finished:
            self.state = self.harness.start(self.task, "ep")
        return outcome


@pytest.fixture
def rigs() -> Iterator[list[StepRig]]:
    made: list[StepRig] = []
    yield made
    for rig in made:
        asyncio.run(rig.sandbox.close())
        rig.ws.cleanup()


@pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")
@pytest.mark.parametrize("spec", SPECS)
def test_fuzz_nested_turns_through_every_harness(spec: str, rigs: list[StepRig]) -> None:
    """Seeded nested turns through each tool interface and adapter: no exception escapes a
    step, and every call whose arguments a decoder refused is the turn's format error."""
    rig = StepRig(spec)
    rigs.append(rig)
    turns = nested_turns(rig.harness, seed=sum(map(ord, spec)), product=LOOKUP.name)
    assert len(turns) >= 12

    async def play() -> list[tuple[ModelTurn, Any]]:
        return [(turn, await rig.step(turn)) for turn in turns]

    for turn, outcome in asyncio.run(play()):
        if any(c.parse_error for c in turn.tool_calls):
            assert outcome.format_error is not None, turn.tool_calls[0].parse_error
        for executed in outcome.executed:  # what ran is storable
            assert executed.result.model_dump_json()


@pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")
def test_session_run_through_the_xml_product_tag_never_raises(tmp_path: Any) -> None:
    """The embedding product's entry point: nested arguments in ``<tool name=...>`` are a
    format error the model reads, the run goes on and finishes, the tool is never called."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("alpha\n")
    texts = [f'<tool name="lookup_order">\n{payload}\n</tool>'
             for payload in (DEEP_ARRAY, DEEP_OBJECT, '{"order_id": ' + HUGE_NUMBER + "}",
                             '{"order_id": "' + INVALID_UTF8 + '", "count": 1' + "0" * 350
                             + "}")]
    texts.append('<view path="&#' + HUGE_NUMBER + ';"/>')

    class Replay:
        spec = "replay"

        async def act(self, request: Any) -> ModelTurn:
            return ModelTurn(content=texts.pop(0) if texts else "<done>\nok\n</done>")

    before = len(ORDERS)
    limits = EpisodeLimits(max_turns=10, max_format_errors=10, wall_s=300,
                           max_context_tokens=10**8)
    with hg.Session(project, harness="S0-T1-O0-C0-W0", policy=Replay(), limits=limits,
                    tools=[LOOKUP]) as session:
        reply = session.run("Look up order A1.")
    assert reply.termination == "finished", reply.error
    errors = [t.format_error for t in reply.turns[:4]]
    assert all(errors), errors
    assert "deeper than 64 levels" in errors[0], errors
    assert "number" in errors[2], errors
    assert "too large" in errors[3], errors
    assert reply.turns[4].format_error is None  # the reference stays text: a missing file
    assert len(ORDERS) == before


@pytest.mark.parametrize("transport", ["sdk", "http"])
def test_an_api_episode_with_nested_arguments_is_scored_not_a_policy_error(
        transport: str) -> None:
    """Over real HTTP: the model's too-deep call is a format error of a scored episode (it
    used to raise in the policy, an unscored ``policy_error``)."""
    if transport == "sdk":
        pytest.importorskip("openai")
    from probe_suite import UPPER_TASK
    from servers import OpenAICompatServer, openai_raw_tool_call, openai_tool_call

    script = [
        openai_raw_tool_call("run_command", DEEP_ARRAY),
        openai_raw_tool_call("run_command", '{"command": ' + HUGE_NUMBER + "}"),
        openai_tool_call("run_command", {"command": "tr a-z A-Z < in.txt > out.txt"}),
        openai_tool_call("finish", {"summary": "done"}),
    ]
    with OpenAICompatServer(script) as server:
        policy = hg.make_policy("openai:test-model", {"base_url": f"{server.base_url}/v1",
                                                      "max_retries": 0,
                                                      "transport": transport})
        traj = asyncio.run(hg.run_episode(resolve_harness("S0-T0-O0-C0-W0"), UPPER_TASK,
                                          policy))
    assert traj.termination == "finished", traj.error
    assert not traj.infra_failure, traj.error
    assert traj.score == 1.0
    assert "deeper than 64 levels" in (traj.turns[0].format_error or "")
    assert "number" in (traj.turns[1].format_error or "")


def test_an_action_replayed_with_nested_arguments_renders_without_raising() -> None:
    """A stored or hand-written ``tool`` action whose text no decoder would accept is
    rendered as written by every interface and adapter (its call then fails parsing)."""
    action = Action.of("tool", name="lookup_order", arguments=DEEP_ARRAY)
    for ti in _interfaces():
        ti.render(action, "c1")
    for spec in ("adapter:claude-code", "adapter:openclaw"):
        harness = resolve_harness(spec)
        harness.add_product_tools([LOOKUP.spec()])
        try:
            harness.render_action(action, "c1")
        except ValueError as exc:  # a documented refusal: not a JSON object
            refusal = str(exc)
        else:
            continue
        assert "JSON" in refusal
