"""The built-in tool interfaces: round trips, distinctness and error messages on bad input.

Round trips run over arbitrary strings, NUL and other control characters included (hypothesis
``text()`` only leaves out lone surrogates, which cannot be sent to a model anyway).
"""

from __future__ import annotations

import random
from itertools import combinations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.levels import ToolInterfaceLevel
from harnessgrid.models import ACTION_ARGS, Action, FormatError, ModelTurn, ToolCall
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins.factors.tool_interface.bash_only import BashOnly
from harnessgrid.plugins.factors.tool_interface.function_calling import FunctionCalling
from harnessgrid.plugins.factors.tool_interface.xml_tags import XmlTags
from harnessgrid.sandboxing.tools import as_shell

MODULES = [f"harnessgrid.plugins.factors.tool_interface.{m}"
           for m in ("function_calling", "xml_tags", "bash_only")]
FC, XML, BASH = FunctionCalling(), XmlTags(), BashOnly()
INTERFACES: list[ToolInterfaceLevel] = [FC, XML, BASH]


def actions(kinds: tuple[str, ...] = tuple(ACTION_ARGS)) -> st.SearchStrategy[Action]:
    return st.sampled_from(kinds).flatmap(lambda kind: st.fixed_dictionaries(
        {a: st.text() for a in ACTION_ARGS[kind]}).map(
            lambda args: Action(kind=kind, args=args)))  # type: ignore[arg-type]


def roundtrip(ti: ToolInterfaceLevel, action: Action) -> Action:
    calls = ti.parse(ti.render(action, "call_1"))
    assert len(calls) == 1
    return ti.to_action(calls[0])


def text_turn(text: str) -> ModelTurn:
    return ModelTurn(content=text)


def actions_of(ti: ToolInterfaceLevel, turn: ModelTurn) -> list[Action]:
    """What the harness does with a turn: parse it, then turn each call into an action."""
    return [ti.to_action(call) for call in ti.parse(turn)]


def error_of(ti: ToolInterfaceLevel, turn: ModelTurn) -> str:
    with pytest.raises(FormatError) as info:
        actions_of(ti, turn)
    return info.value.message


# -- registration and declared tools ---------------------------------------------------------

def test_each_module_registers_its_level_as_a_plugin() -> None:
    reg = PluginManager(builtins=MODULES, load_external=False).registry()
    assert reg.levels("tool_interface") == ["bash_only", "function_calling", "xml_tags"]
    assert reg.level("tool_interface", "xml_tags") is XmlTags
    assert reg.origin[("factor level", "tool_interface:bash_only")] == MODULES[2]


def test_native_flag() -> None:
    assert (FC.native_tools, XML.native_tools, BASH.native_tools) == (True, False, False)


def test_tool_names_differ_across_interfaces() -> None:
    names = {ti.name: {t.name for t in ti.tools()} for ti in INTERFACES}
    assert names["function_calling"] >= {"read_file", "run_command", "finish"}
    for a, b in combinations(names, 2):
        assert not names[a] & names[b], (a, b, names[a] & names[b])


@pytest.mark.parametrize("ti", INTERFACES, ids=lambda t: t.name)
def test_schemas_are_valid_draft_2020_12(ti: ToolInterfaceLevel) -> None:
    for spec in ti.tools():
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.parameters["additionalProperties"] is False
        assert spec.openai()["function"]["name"] == spec.name


def test_supported_kinds() -> None:
    assert all(FC.supports(k) and XML.supports(k) for k in ACTION_ARGS)
    assert [k for k in ACTION_ARGS if BASH.supports(k)] == ["shell", "finish"]


def test_text_interfaces_document_their_syntax() -> None:
    xml, bash = XML.prompt_section(), BASH.prompt_section()
    for tool in XML.tools():
        assert f"<{tool.name}" in xml
    assert "```bash" in bash
    assert "finish_task" in bash
    # every syntax line and the example in the prompt parse as calls
    assert [c.name for c in XML.parse(text_turn(xml))] == [
        "view", "create", "replace", "ls", "grep", "exec", "done", "replace"]
    assert [BASH.to_action(c).kind for c in BASH.parse(text_turn(bash))] == ["finish"]
    assert 0 < len(FC.prompt_section()) < 400


# -- round trips -----------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(actions())
def test_function_calling_round_trip(action: Action) -> None:
    assert roundtrip(FC, action) == action


@settings(max_examples=300, deadline=None)
@given(actions())
def test_xml_round_trip(action: Action) -> None:
    assert roundtrip(XML, action) == action


@settings(max_examples=300, deadline=None)
@given(actions(("shell", "finish")))
def test_bash_round_trip(action: Action) -> None:
    assert roundtrip(BASH, action) == action


@settings(max_examples=100, deadline=None)
@given(actions(("read", "write", "edit", "list", "search")))
def test_bash_lowers_file_actions_to_their_shell_command(action: Action) -> None:
    assert roundtrip(BASH, action) == as_shell(action)


@pytest.mark.parametrize("text", ["", "\n", "\n\n", "\r", "\r\n", "\x00", "```", "````\n```",
                                  "finish_task", "finish_task\nx", " finish_task now", "\nls",
                                  "</exec>", "&amp;", "&#0;", "&lt;/", '"', "'", "]]>",
                                  "é ☃ 𝄞",
                                  "<done>", "  \t  ", "&#xD800;", "&#99999999;"])
@pytest.mark.parametrize("ti", INTERFACES, ids=lambda t: t.name)
def test_round_trip_edge_strings(ti: ToolInterfaceLevel, text: str) -> None:
    for kind in ("shell", "finish", "write", "edit", "search"):
        args = {a: text for a in ACTION_ARGS[kind]}
        action = Action(kind=kind, args=args)  # type: ignore[arg-type]
        expected = action if ti.supports(kind) else as_shell(action)
        assert roundtrip(ti, action) == expected


@settings(max_examples=150, deadline=None)
@given(actions())
def test_no_two_interfaces_render_an_action_alike(action: Action) -> None:
    turns = [ti.render(action, "call_1") for ti in INTERFACES]
    for a, b in combinations(turns, 2):
        assert a != b


# -- function_calling: malformed calls -------------------------------------------------------

def test_function_calling_text_only_turn_has_no_calls() -> None:
    assert FC.parse(text_turn("I will read the file next.")) == []


def test_function_calling_invalid_json_arguments() -> None:
    call = ToolCall(id="c", name="write_file", raw_arguments='{"path": "a.txt", "content": "x',
                    parse_error="Unterminated string starting at: line 1 column 30")
    message = error_of(FC, ModelTurn(tool_calls=(call,)))
    assert "'write_file'" in message
    assert "not valid JSON" in message
    assert "Unterminated string" in message
    assert '"path"' in message


def test_function_calling_unknown_tool_lists_the_tools() -> None:
    message = error_of(FC, ModelTurn(tool_calls=(ToolCall(id="c", name="Bash",
                                                          arguments={"command": "ls"}),)))
    assert "unknown tool 'Bash'" in message
    for name in ("read_file", "write_file", "edit_file", "list_directory", "search_files",
                 "run_command", "finish"):
        assert name in message


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("read_file", {}, "missing required argument 'path' (a string)"),
    ("read_file", {"path": 3}, "argument 'path' must be a string, got int 3"),
    ("edit_file", {"path": "a", "old": "x", "new_text": "y"}, "unexpected argument 'old'"),
    ("edit_file", {"path": "a", "old": "x", "new_text": "y"},
     "missing required argument 'old_text'"),
    ("run_command", {"command": ["ls", "-la"]}, "argument 'command' must be a string, got list"),
    ("finish", {"message": "done"}, "unexpected argument 'message'"),
])
def test_function_calling_schema_errors_name_tool_and_field(
        name: str, arguments: dict[str, object], expected: str) -> None:
    message = error_of(FC, ModelTurn(tool_calls=(ToolCall(id="c", name=name,
                                                          arguments=arguments),)))
    assert f"invalid arguments for tool {name!r}" in message
    assert expected in message
    assert "It takes:" in message


def test_function_calling_optional_path_defaults_to_workspace_root() -> None:
    call = ToolCall(id="c", name="search_files", arguments={"pattern": "TODO"})
    assert FC.to_action(call) == Action.of("search", pattern="TODO")
    assert FC.to_action(ToolCall(id="c", name="list_directory")) == Action.of("list")


def test_function_calling_renders_one_native_call_with_the_given_id() -> None:
    turn = FC.render(Action.of("edit", path="a.py", old="x", new="y"), "call_7")
    assert turn.content == ""
    assert turn.tool_calls == (ToolCall(id="call_7", name="edit_file", arguments={
        "path": "a.py", "old_text": "x", "new_text": "y"}),)


# -- xml_tags: lenient and strict parsing ----------------------------------------------------

def test_xml_text_without_calls_is_no_call() -> None:
    assert XML.parse(text_turn("Let me think: if a < b and b > c then a & c differ.")) == []
    assert XML.parse(text_turn("mid-line html <div class='x'> is just prose")) == []


def test_xml_lenient_forms() -> None:
    text = ("First I look around.\n"
            "  <LS   path = 'src' />\n"
            "<grep path=\"lib\" pattern='a&&b'/> and then\n"
            "<exec>cd src && make 2>&1 | tail -n 3</exec>\r\n"
            "<create path=\"x.txt\">\r\nline\r\n</create>")
    calls = XML.parse(text_turn(text))
    assert [XML.to_action(c) for c in calls] == [
        Action.of("list", path="src"),
        Action.of("search", pattern="a&&b", path="lib"),
        Action.of("shell", command="cd src && make 2>&1 | tail -n 3"),
        Action.of("write", path="x.txt", content="line"),
    ]


def test_xml_defaults_and_empty_finish() -> None:
    calls = XML.parse(text_turn('<ls/>\n<grep pattern="x"/>\n<done/>'))
    assert [XML.to_action(c) for c in calls] == [
        Action.of("list"), Action.of("search", pattern="x"), Action.of("finish")]


def test_xml_think_blocks_are_ignored() -> None:
    text = "<think>\nmaybe <exec>rm -rf /</exec>, or <bogus/>\n</think>\n<view path=\"a\"/>"
    assert [XML.to_action(c) for c in XML.parse(text_turn(text))] == [
        Action.of("read", path="a")]


@pytest.mark.parametrize(("text", "expected"), [
    ('<read path="a.txt"/>', "unknown tool <read>; the tools are <view>, <create>"),
    ("  <bash>\nls\n</bash>", "unknown tool <bash>"),
    ("<exec>\nls -la\n", "<exec> is never closed: end it with </exec>"),
    ('<create path="a">\nhello', "<create> is never closed"),
    ("<view/>", "<view> is missing its 'path' parameter; write it as '<view path=\"FILE\"/>'"),
    ("<exec/>", "<exec> is missing its 'command' parameter"),
    ('<view file="a"/>', "<view> has no attribute 'file' (it takes path)"),
    ("<view path=a.txt/>", "attribute values must be in quotes"),
    ('<view path="a" path="b"/>', "sets the attribute 'path' twice"),
    ('<view path="a">junk</view>', "<view> takes no text between tags"),
    ('<replace path="a">\n<old>x</old>\n</replace>', "<replace> is missing its 'new' parameter"),
    ('<replace path="a">\n<old>x</old><mid/>\n</replace>',
     "inside <replace> only <old> and <new> elements may appear"),
    ('<replace path="a">\n<old>x\n</replace>', "<old> inside <replace> is never closed"),
    ('<view path="a"', "the tag is cut off"),
])
def test_xml_malformed_calls_are_explained(text: str, expected: str) -> None:
    assert expected in error_of(XML, text_turn(text))


def test_xml_to_action_checks_calls_built_elsewhere() -> None:
    with pytest.raises(FormatError, match="unknown tool <read_file>"):
        XML.to_action(ToolCall(id="c", name="read_file", arguments={"path": "a"}))
    with pytest.raises(FormatError, match="missing parameter 'content'"):
        XML.to_action(ToolCall(id="c", name="create", arguments={"path": "a"}))


def test_xml_several_calls_run_in_order() -> None:
    actions_ = [Action.of("write", path="a", content="1"), Action.of("shell", command="cat a"),
                Action.of("finish", message="ok")]
    text = "\n\nsome notes\n".join(XML.render(a, "c").content for a in actions_)
    assert [XML.to_action(c) for c in XML.parse(text_turn(text))] == actions_


def test_xml_render_escapes_only_what_it_must() -> None:
    turn = XML.render(Action.of("shell", command="a && b < c > d"), "c")
    assert turn.content == "<exec>\na && b < c > d\n</exec>"
    turn = XML.render(Action.of("write", path='q"', content="</create>&lt;\x00"), "c")
    assert turn.content == '<create path="q&quot;">\n&lt;/create>&amp;lt;&#0;\n</create>'


# -- bash_only -------------------------------------------------------------------------------

def test_bash_text_only_is_no_call() -> None:
    assert BASH.parse(text_turn("I am not sure yet; `ls` might help.")) == []


def test_bash_finish_sentinel() -> None:
    turn = text_turn("All good.\n```bash\nfinish_task\nFixed the parser.\nTests pass.\n```\n")
    assert [BASH.to_action(c) for c in BASH.parse(turn)] == [
        Action.of("finish", message="Fixed the parser.\nTests pass.")]
    assert BASH.to_action(BASH.parse(text_turn("```bash\nfinish_task\n```"))[0]) == \
        Action.of("finish")
    assert BASH.render(Action.of("finish", message="m"), "c").content == \
        "```bash\nfinish_task\nm\n```"


def test_bash_one_block_with_prose_and_other_blocks_around() -> None:
    turn = text_turn("Output looked like\n```\nfoo\n```\nso:\n```sh\ncat a.txt | wc -l\n```")
    assert [BASH.to_action(c) for c in BASH.parse(turn)] == [
        Action.of("shell", command="cat a.txt | wc -l")]


def test_bash_fence_grows_past_backticks_in_the_command() -> None:
    command = "cat > r.md <<'EOF'\n```python\nprint(1)\n```\nEOF"
    turn = BASH.render(Action.of("shell", command=command), "c")
    assert turn.content.startswith("````bash\n")
    assert turn.content.endswith("\n````")
    assert BASH.to_action(BASH.parse(turn)[0]).args["command"] == command


@pytest.mark.parametrize(("text", "expected"), [
    ("```bash\nls\n```\nthen\n```bash\npwd\n```", "found 2 ```bash blocks, but only one"),
    ("```bash\nls -la\n", "the ```bash block is not closed"),
    ("```python\nprint(1)\n```", "found a python code block but no ```bash block"),
    ("```\nls\n```", "found a unlabelled code block but no ```bash block"),
    ("```bash\nfinish_task All done\n```", "first line is exactly 'finish_task', alone"),
    ("```bash\nmake test\nfinish_task\n```", "first line is exactly 'finish_task'"),
])
def test_bash_malformed_turns_are_explained(text: str, expected: str) -> None:
    assert expected in error_of(BASH, text_turn(text))


def test_bash_unknown_tool() -> None:
    with pytest.raises(FormatError, match="unknown tool 'run_command'"):
        BASH.to_action(ToolCall(id="c", name="run_command", arguments={"command": "ls"}))


# -- garbage ---------------------------------------------------------------------------------

def _garbage(seed: int, size: int = 100_000) -> str:
    rnd = random.Random(seed)
    alphabet = "abc xyz<>/=\"'&;`\n\t#!-_\x00é☃{}[]"
    return "".join(rnd.choice(alphabet) for _ in range(size))


@pytest.mark.timeout(120)  # a hang guard for catastrophic backtracking, not a speed claim
@pytest.mark.parametrize("ti", INTERFACES, ids=lambda t: t.name)
@pytest.mark.parametrize("seed", [0, 1])
def test_100kb_garbage_is_handled(ti: ToolInterfaceLevel, seed: int) -> None:
    """Any text parses to calls or to one short format error (the time it takes is measured
    in benchmarks/fuzz_turns.py, not here)."""
    error: FormatError | None = None
    try:
        actions_of(ti, text_turn(_garbage(seed)))
    except FormatError as exc:
        error = exc
    if error is not None:
        assert error.message
        assert len(error.message) < 1_000


@pytest.mark.parametrize(("ti", "prefix", "expected"), [
    (XML, "<exec>\n", "<exec> is never closed"),
    (XML, "<create path='a'>", "<create> is never closed"),
    (BASH, "```bash\n", "the ```bash block is not closed"),
], ids=["xml-exec", "xml-create", "bash"])
def test_unclosed_call_before_100kb_of_garbage(ti: ToolInterfaceLevel, prefix: str,
                                               expected: str) -> None:
    body = _garbage(2).replace("<", "(").replace("`", "'")
    message = error_of(ti, text_turn(prefix + body))
    assert expected in message
    assert len(message) < 1_000


# -- end to end ------------------------------------------------------------------------------

def test_oracle_solves_a_task_through_every_interface_and_observation() -> None:
    """The scripted oracle's plan, rendered through each interface (bash_only lowering file
    actions to shell commands), parses, runs in the sandbox and passes the grader under each
    built-in observation level."""
    import asyncio

    from probe_suite import UPPER_TASK

    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.plugin_system.composition import compose
    from harnessgrid.plugins import BUILTIN_PLUGINS
    from harnessgrid.policies.scripted import ScriptedPolicy
    from harnessgrid.space import FactorSpace

    observations = [f"harnessgrid.plugins.factors.observation.{m}"
                    for m in ("raw", "structured", "annotated")]
    reg = PluginManager(builtins=[*BUILTIN_PLUGINS, "levels_for_tests", *MODULES, *observations],
                        load_external=False).registry()
    space = FactorSpace.from_levels({
        "system_prompt": ["probe"], "tool_interface": [ti.name for ti in INTERFACES],
        "observation": ["raw", "structured", "annotated"], "context": ["probe"],
        "workflow": ["probe"]})
    for config in space:
        traj = asyncio.run(run_episode(compose(config, reg), UPPER_TASK, ScriptedPolicy()))
        assert (traj.termination, traj.score) == ("finished", 1.0), (config.code, traj.error)
        kinds = [c.action.kind for t in traj.turns for c in t.calls]
        if config.levels["tool_interface"] == "bash_only":
            assert kinds == ["shell", "shell", "shell", "finish"]
        else:
            assert kinds == ["read", "shell", "read", "finish"]
