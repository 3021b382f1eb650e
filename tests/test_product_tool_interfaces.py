"""An embedding product's tools in each built-in tool interface: presented in the interface's
own syntax, parsed into ``tool`` actions, checked against their schemas, and run on the host
through a real harness step with a real sandbox."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Annotated, Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field
from test_tool_interfaces import error_of

from harnessgrid.errors import ConfigError
from harnessgrid.levels import ToolInterfaceLevel
from harnessgrid.models import Action, FormatError, ModelTurn, ToolCall
from harnessgrid.plugin_system.composition import compose, resolve_config
from harnessgrid.plugins.factors.tool_interface.bash_only import BashOnly
from harnessgrid.plugins.factors.tool_interface.function_calling import FunctionCalling
from harnessgrid.plugins.factors.tool_interface.xml_tags import XmlTags
from harnessgrid.product_tools import ProductTool
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.tool_hooks import ToolHooks
from harnessgrid.sandboxing.tools import Environment, as_shell
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task

CALLS: list[dict[str, Any]] = []  # what the host function was called with, newest last


def _lookup_order(order_id: Annotated[str, Field(description="the order's id, e.g. A17")],
                 count: int = 1, express: bool = False, tags: list[str] | None = None,
                 note: Any = None) -> dict[str, Any]:
    """Look up an order in the shop's database."""
    CALLS.append({"order_id": order_id, "count": count, "express": express, "tags": tags})
    return {"id": order_id, "status": "shipped", "items": count}


lookup_order = ProductTool(_lookup_order, name="lookup_order", timeout_s=5)


SPEC = lookup_order.spec()


def with_tools(cls: type[ToolInterfaceLevel]) -> ToolInterfaceLevel:
    ti = cls()
    ti.add_product_tools([SPEC])
    return ti


def call_action(**arguments: Any) -> Action:
    return Action.of("tool", name="lookup_order", arguments=json.dumps(arguments))


# -- presenting the tools --------------------------------------------------------------------

def test_without_product_tools_the_tool_tag_and_kind_do_not_exist() -> None:
    fc, xml, bash = FunctionCalling(), XmlTags(), BashOnly()
    assert not any(ti.supports("tool") for ti in (fc, xml, bash))
    assert "lookup_order" not in fc.prompt_section() + xml.prompt_section()
    assert "lookup_order" not in bash.prompt_section()
    assert "unknown tool <tool>" in error_of(
        xml, ModelTurn(content='<tool name="lookup_order">\n{}\n</tool>'))
    assert "unknown tool 'lookup_order'" in error_of(
        fc, ModelTurn(tool_calls=(ToolCall(id="c", name="lookup_order"),)))


def test_function_calling_offers_the_spec_as_a_native_tool() -> None:
    fc = with_tools(FunctionCalling)
    assert fc.tools()[-1] == SPEC
    assert len(fc.tools()) == len(FunctionCalling().tools()) + 1
    assert fc.supports("tool")
    assert "`lookup_order`" in fc.prompt_section()
    for spec in fc.tools():
        jsonschema.Draft202012Validator.check_schema(spec.parameters)


def test_xml_prompt_documents_each_tool_and_its_example_is_a_valid_call() -> None:
    xml = with_tools(XmlTags)
    prompt = xml.prompt_section()
    assert prompt.startswith(XmlTags().prompt_section())  # only added to
    for text in ("lookup_order: Look up an order in the shop's database.",
                 "order_id (string, required): the order's id, e.g. A17",
                 "count (integer, optional, default 1)", "express (boolean, optional",
                 "tags (list of string or null, optional"):
        assert text in prompt
    calls = xml.parse(ModelTurn(content=prompt))
    assert [c.name for c in calls][-2:] == ["replace", "lookup_order"]
    assert xml.to_action(calls[-1]) == call_action(order_id="text")
    assert xml.tools()[-1] == SPEC
    assert xml.supports("tool")


def test_bash_prompt_lists_the_command_and_both_call_forms() -> None:
    bash = with_tools(BashOnly)
    prompt = bash.prompt_section()
    assert prompt.startswith(BashOnly().prompt_section())
    assert "- `lookup_order`: Look up an order in the shop's database." in prompt
    assert "order_id (string, required): the order's id, e.g. A17" in prompt
    assert "lookup_order '{\"order_id\": \"text\"}'\nlookup_order --order_id text\n" in prompt
    # the shell and the sentinel stay the only calls; a product command is a shell command
    assert [t.name for t in bash.tools()] == ["bash", "finish_task"]
    assert not bash.supports("tool")


def test_a_name_clash_with_an_own_tool_is_refused() -> None:
    for cls, own in ((FunctionCalling, "read_file"), (XmlTags, "view"), (BashOnly, "bash"),
                     (BashOnly, "finish_task")):
        clash = SPEC.model_copy(update={"name": own})
        with pytest.raises(ConfigError, match=f"product tool '{own}' has the name"):
            cls().add_product_tools([clash])
    ti = with_tools(XmlTags)
    ti.add_product_tools([SPEC])  # presenting the same tools again is not a clash
    assert [t.name for t in ti.tools()].count("lookup_order") == 1


# -- round trips -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)
arguments = st.fixed_dictionaries(
    {"order_id": st.text()},
    optional={"count": st.integers(), "express": st.booleans(),
              "tags": st.none() | st.lists(st.text(), max_size=3), "note": json_values})


@pytest.mark.parametrize("cls", [FunctionCalling, XmlTags], ids=["fc", "xml"])
@settings(max_examples=200, deadline=None)
@given(args=arguments)
def test_tool_action_round_trip(cls: type[ToolInterfaceLevel], args: dict[str, Any]) -> None:
    ti = with_tools(cls)
    action = call_action(**args)
    calls = ti.parse(ti.render(action, "call_1"))
    assert len(calls) == 1
    assert calls[0].arguments == args
    assert ti.to_action(calls[0]) == action


@settings(max_examples=200, deadline=None)
@given(args=arguments)
def test_bash_renders_a_tool_action_as_the_command(args: dict[str, Any]) -> None:
    bash = with_tools(BashOnly)
    action = call_action(**args)
    (call,) = bash.parse(bash.render(action, "call_1"))
    command = bash.to_action(call)
    assert command == as_shell(action)
    assert shlex.split(command.args["command"]) == ["lookup_order", json.dumps(args)]


# -- wrong calls -----------------------------------------------------------------------------

def fc_call(arguments: dict[str, Any] | None = None, **fields: Any) -> ModelTurn:
    call = ToolCall(id="c", name="lookup_order", arguments=arguments or {}, **fields)
    return ModelTurn(tool_calls=(call,))


def xml_call(body: str, name: str = "lookup_order") -> ModelTurn:
    return ModelTurn(content=f'Checking.\n<tool name="{name}">\n{body}\n</tool>')


@pytest.mark.parametrize("cls", [FunctionCalling, XmlTags], ids=["fc", "xml"])
def test_schema_violations_name_the_argument_and_what_it_takes(
        cls: type[ToolInterfaceLevel]) -> None:
    ti = with_tools(cls)

    def message(args: dict[str, Any]) -> str:
        turn = fc_call(args) if cls is FunctionCalling else xml_call(json.dumps(args))
        return error_of(ti, turn)

    takes = ("It takes: order_id (string), count (integer, optional), express (boolean, "
             "optional), tags (list of string or null, optional), note (value, optional)")
    wrong_type = message({"order_id": "A1", "count": "3"})
    assert "invalid arguments for tool 'lookup_order'" in wrong_type
    assert "argument 'count' must be integer, got str \"3\"" in wrong_type
    assert takes in wrong_type
    assert "missing required argument 'order_id' (string)" in message({"count": 2})
    assert "unexpected argument 'colour'" in message({"order_id": "A1", "colour": "red"})
    assert "argument 'tags[1]' must be string, got int 5" in message(
        {"order_id": "A1", "tags": ["a", 5]})
    assert "argument 'express' must be boolean" in message({"order_id": "A", "express": 1})


def test_function_calling_reports_broken_json_with_an_example() -> None:
    fc = with_tools(FunctionCalling)
    text = error_of(fc, fc_call(raw_arguments='{"order_id": ', parse_error="Expecting value"))
    assert "the arguments of the 'lookup_order' call were not valid JSON (Expecting value)" in text
    assert 'send a JSON object such as {"order_id": "text"}' in text
    unknown = error_of(fc, ModelTurn(tool_calls=(ToolCall(id="c", name="lookup"),)))
    assert "unknown tool 'lookup'" in unknown
    assert "lookup_order" in unknown


def test_function_calling_renders_a_broken_action_as_a_broken_call() -> None:
    fc = with_tools(FunctionCalling)
    turn = fc.render(Action.of("tool", name="lookup_order", arguments="[1]"), "c")
    assert turn.tool_calls[0].raw_arguments == "[1]"
    assert "not valid JSON" in error_of(fc, turn)


@pytest.mark.parametrize(("turn", "expected"), [
    (xml_call('{"order_id": "A1"}', name="lookup"),
     "unknown tool 'lookup' in <tool name=...>; the application tools are lookup_order"),
    (xml_call('{"order_id": A1}'), 'the arguments of <tool name="lookup_order"> are not '
     "valid JSON (Expecting value: line 1 column 14 (char 13)); write one JSON object"),
    (xml_call('["A1"]'), 'the arguments of <tool name="lookup_order"> must be one JSON object'),
    (ModelTurn(content='<tool>\n{"order_id": "A1"}\n</tool>'),
     "<tool> is missing its 'name' parameter; write it as '<tool name=\"lookup_order\">"),
    (ModelTurn(content='<tool name="lookup_order">\n{"order_id": "A1"}'),
     "<tool> is never closed: end it with </tool>"),
    (ModelTurn(content='<tool name=lookup_order>{}</tool>'),
     "attribute values must be in quotes"),
    (ModelTurn(content='<toolz name="lookup_order">\n{}\n</toolz>'),
     'unknown tool <toolz>; the tools are <view>, <create>, <replace>, <ls>, <grep>, <exec>, '
     '<done>, and <tool name="..."> for lookup_order'),
], ids=["unknown-name", "bad-json", "not-object", "no-name", "unclosed", "unquoted", "tag"])
def test_xml_rejects_malformed_tool_calls(turn: ModelTurn, expected: str) -> None:
    assert expected in error_of(with_tools(XmlTags), turn)


def test_xml_tool_calls_mix_with_the_own_tags_in_order() -> None:
    xml = with_tools(XmlTags)
    turn = ModelTurn(content='<view path="a.txt"/> then <tool name="lookup_order"/>\n'
                             '<tool name="lookup_order">{"order_id": "B&amp;lt;2"}</tool>')
    calls = xml.parse(turn)
    assert [c.arguments for c in calls] == [{"path": "a.txt"}, {}, {"order_id": "B&lt;2"}]
    assert xml.to_action(calls[0]) == Action.of("read", path="a.txt")
    assert xml.to_action(calls[2]) == call_action(order_id="B&lt;2")
    # a self-closing call has no arguments, which this tool's schema rejects by name
    with pytest.raises(FormatError, match="missing required argument 'order_id'"):
        xml.to_action(calls[1])


# -- through a harness, with a real sandbox --------------------------------------------------

CODES = {"function_calling": "S0-T0-O0-C0-W0", "xml_tags": "S0-T1-O0-C0-W0",
         "bash_only": "S0-T2-O0-C0-W0"}


def run_turns(code: str, turns: list[ModelTurn | Action]) -> list[Any]:
    """Steps of a composed harness given product tools, with a real sandbox: the outcomes
    and the message the model sees after each turn."""
    harness = compose(resolve_config(code))
    harness.add_product_tools([SPEC])
    task = Task(id="t", instruction="Is order A17 shipped?", files={"a.txt": "x\n"})

    async def go() -> list[Any]:
        with Workspace.create(task.files) as ws, Sandbox(ws) as sandbox:
            env = Environment(ws, sandbox, hooks=ToolHooks(
                harness=code, product_tools={"lookup_order": lookup_order}))
            state = harness.start(task, "ep")
            out = []
            for i, turn in enumerate(turns):
                if isinstance(turn, Action):
                    turn = harness.render_action(turn, f"call_{i}", state)
                outcome, _ = await harness.step(state, turn, env)
                out.append((outcome, state.history[-1].content))
            return out

    return asyncio.run(go())


@pytest.mark.parametrize("interface", ["function_calling", "xml_tags", "bash_only"])
def test_a_product_tool_runs_on_the_host_and_its_result_reaches_the_model(
        interface: str) -> None:
    CALLS.clear()
    steps = run_turns(CODES[interface], [
        call_action(order_id="A17", count=2, tags=["gift"]),
        Action.of("finish", message="A17 is shipped.")])
    (outcome, seen), (last, _) = steps
    assert CALLS == [{"order_id": "A17", "count": 2, "express": False, "tags": ["gift"]}]
    result = outcome.executed[0].result
    assert result.ok
    assert json.loads(result.output) == {"id": "A17", "status": "shipped",
                                                       "items": 2}
    assert '"status": "shipped"' in seen
    assert last.finish is not None
    kind = "shell" if interface == "bash_only" else "tool"
    assert outcome.executed[0].action.kind == kind


def test_bash_flag_form_runs_the_tool() -> None:
    CALLS.clear()
    ((_, seen),) = run_turns(CODES["bash_only"], [ModelTurn(
        content="```bash\nlookup_order --order_id A9 --count 3 --express true | tr a-z A-Z\n```")])
    assert CALLS == [{"order_id": "A9", "count": 3, "express": True, "tags": None}]
    assert '"STATUS": "SHIPPED"' in seen


@pytest.mark.parametrize("interface", ["function_calling", "xml_tags"])
def test_a_call_breaking_the_schema_is_not_run(interface: str) -> None:
    CALLS.clear()
    bad = Action.of("tool", name="lookup_order", arguments='{"count": "many"}')
    ((outcome, seen),) = run_turns(CODES[interface], [bad])
    assert CALLS == []
    assert not outcome.executed
    assert outcome.format_error is not None
    assert "missing required argument 'order_id'" in seen
    assert "argument 'count' must be integer" in seen
