"""Product tools and approvals in the emulated shells (issue 18): Claude Code presents product
tools as MCP tools and answers a denied call with its permission-denied result; OpenClaw
presents them as plugin tools and answers a denied call as a ``before_tool_call`` block;
mini-bash offers them as commands in the sandbox and answers a denial with mini-swe-agent's
rejection. Every episode here runs in a real sandbox with the host functions on the host."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harnessgrid.errors import ConfigError
from harnessgrid.events import ToolCallStarted, ToolDenied
from harnessgrid.models import Action, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugins.adapters._claude_code_mcp import REJECTED as CC_REJECTED
from harnessgrid.plugins.adapters._claude_code_tools import tool_specs as cc_tool_specs
from harnessgrid.plugins.adapters._openclaw_tools import tool_specs as oc_tool_specs
from harnessgrid.plugins.adapters.claude_code import ClaudeCodeHarness
from harnessgrid.plugins.adapters.mini_bash import REJECTED as MB_REJECTED
from harnessgrid.plugins.adapters.mini_bash import SYSTEM_PROMPT, MiniBashHarness
from harnessgrid.plugins.adapters.openclaw import OpenClawHarness
from harnessgrid.product_tools import ProductTool, product_tools
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.tool_hooks import (
    Approval,
    ToolCallRequest,
    ToolHooks,
    allow,
    deny,
    modify,
)
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task

W = "/workspace"
Harness = ClaudeCodeHarness | OpenClawHarness | MiniBashHarness


def shop(seen: list[str]) -> ProductTool:
    def lookup_order(order_id: str, include_items: bool = False) -> dict[str, Any]:
        """Look up an order in the shop's database."""
        seen.append(order_id)
        if order_id == "missing":
            raise KeyError(order_id)
        return {"id": order_id, "status": "shipped", "items": 2 if include_items else None}

    return ProductTool(lookup_order)


class Rig:
    """One episode of ``harness`` with product tools and an approval callback, driven turn by
    turn through ``harness.step`` (what a session does)."""

    def __init__(self, harness: Harness, *, files: dict[str, str] | None = None,
                 approve: Callable[[ToolCallRequest], Approval] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.seen: list[str] = []
        self.requests: list[ToolCallRequest] = []
        self.events: list[Any] = []
        tools = product_tools([shop(self.seen)])
        self.harness = harness
        harness.add_product_tools([t.spec() for t in tools.values()])

        def approval(request: ToolCallRequest) -> Approval:
            self.requests.append(request)
            return approve(request) if approve is not None else allow()

        self.ws = Workspace.create(files or {})
        self.sandbox = Sandbox(self.ws)
        hooks = ToolHooks(harness=harness.name, product_tools=tools, approve=approval,
                          emit=self.events.append)
        self.env = Environment(self.ws, self.sandbox, hooks=hooks)
        self.state = harness.start(Task(id="t", instruction="Do it.", files=dict(files or {})),
                                   "ep")
        self.calls = 0

    def step(self, turn: ModelTurn) -> list[Message]:
        """One turn; the messages it added after the model's own."""
        before = len(self.state.history)
        outcome, _ = self.loop.run_until_complete(self.harness.step(self.state, turn,
                                                                    self.env))
        self.outcome = outcome
        return self.state.history[before + 1:]

    def call(self, name: str, **arguments: Any) -> Message:
        """One native call; the tool message answering it."""
        self.calls += 1
        added = self.step(ModelTurn(tool_calls=(
            ToolCall(id=f"call_{self.calls}", name=name, arguments=arguments),)))
        return next(m for m in added if m.tool_call_id == f"call_{self.calls}")

    def bash(self, command: str) -> Message:
        """One mini-bash turn; the observation."""
        added = self.step(ModelTurn(content=f"Next.\n```bash\n{command}\n```"))
        assert len(added) == 1, added
        return added[0]

    def close(self) -> None:
        self.loop.run_until_complete(self.sandbox.close())
        self.loop.close()
        self.ws.cleanup()


@pytest.fixture
def rig() -> Iterator[Callable[..., Rig]]:
    made: list[Rig] = []

    def make(harness: Harness, **options: Any) -> Rig:
        made.append(Rig(harness, **options))
        return made[-1]

    yield make
    for r in made:
        r.close()


def deny_writes(request: ToolCallRequest) -> Approval:
    """Deny file writes and commands that create files; the reason names the call."""
    if request.action is not None and request.action.kind == "write":
        return deny()  # no reason of the product's own
    if "touch" in json.dumps(request.arguments):
        return deny(f"no new files from {request.name}")
    return allow()


ORDER = '{"id": "A17", "status": "shipped", "items": null}'


# ------------------------------------------------------------------------------- Claude Code


def test_claude_code_presents_product_tools_as_mcp_tools(rig: Callable[..., Rig]) -> None:
    plain = ClaudeCodeHarness()
    assert plain.tools() == cc_tool_specs(plain.version)  # no product tools: as before
    h = ClaudeCodeHarness()
    rig(h)
    names = [t.name for t in h.tools()]
    assert names == [*(t.name for t in cc_tool_specs(h.version)), "mcp__product__lookup_order"]
    wire = h.anthropic_tools()[-1]
    spec = shop([]).spec()
    assert wire == {"name": "mcp__product__lookup_order", "description": spec.description,
                    "input_schema": spec.parameters}
    assert h.openai_tools()[-1]["function"]["name"] == "mcp__product__lookup_order"
    other = ClaudeCodeHarness(mcp_server="acme shop")  # sanitized as the CLI does
    other.add_product_tools([spec])
    assert other.tools()[-1].name == "mcp__acme_shop__lookup_order"
    with pytest.raises(ConfigError, match="mcp_server"):
        ClaudeCodeHarness(mcp_server=" ")


def test_claude_code_runs_product_tools_on_the_host(rig: Callable[..., Rig]) -> None:
    r = rig(ClaudeCodeHarness())
    msg = r.call("mcp__product__lookup_order", order_id="A17")
    assert (msg.content, msg.kind, msg.role) == (ORDER, "observation", "tool")
    assert r.seen == ["A17"]
    executed = r.outcome.executed[0]
    assert executed.action == Action.of("tool", name="lookup_order",
                                        arguments='{"order_id": "A17"}')
    # the product function's failure and the server's argument check are is_error results
    failed = r.call("mcp__product__lookup_order", order_id="missing")
    assert (failed.content, failed.kind) == ("tool 'lookup_order' failed: KeyError: 'missing'",
                                             "tool_error")
    wrong = r.call("mcp__product__lookup_order", order="A17")
    assert wrong.kind == "tool_error"
    assert wrong.content.startswith(
        "invalid arguments for tool 'lookup_order'")
    assert r.seen == ["A17", "missing"]
    unknown = r.call("mcp__product__refund", order_id="A17")
    assert unknown.content == ("<tool_use_error>Error: No such tool available: "
                               "mcp__product__refund</tool_use_error>")
    assert [q.name for q in r.requests] == ["mcp__product__lookup_order"] * 3


def test_claude_code_denials_are_permission_results(rig: Callable[..., Rig]) -> None:
    r = rig(ClaudeCodeHarness(), approve=deny_writes)
    rejected = r.call("Write", file_path=f"{W}/notes.md", content="hi")
    assert (rejected.content, rejected.kind) == (CC_REJECTED, "tool_error")
    assert not (r.ws.root / "notes.md").exists()
    assert r.outcome.executed[0].result.error is not None
    reason = r.call("Bash", command="touch made.txt")
    assert (reason.content, reason.kind) == ("no new files from Bash", "tool_error")
    assert not (r.ws.root / "made.txt").exists()
    assert [type(e) for e in r.events] == [ToolDenied, ToolDenied]
    # invalid calls stay input errors: the approval callback never sees them
    invalid = r.call("Write", file_path=f"{W}/notes.md")
    assert invalid.kind == "format_error"
    assert "content" in invalid.content
    assert len(r.requests) == 2
    fine = r.call("Bash", command="echo ok")
    assert fine.content == "ok"
    assert isinstance(r.events[-1], ToolCallStarted)


def test_claude_code_runs_the_modified_call(rig: Callable[..., Rig]) -> None:
    def safer(request: ToolCallRequest) -> Approval:
        command = request.arguments.get("command", "")
        return modify(request.call.model_copy(update={"arguments": {
            "command": command.replace("first", "second")}}))

    r = rig(ClaudeCodeHarness(), approve=safer)
    msg = r.call("Bash", command="touch first.txt && echo done")
    assert msg.content == "done"
    assert msg.tool_call_id == "call_1"
    assert (r.ws.root / "second.txt").exists()
    assert not (r.ws.root / "first.txt").exists()
    assert r.outcome.executed[0].action == Action.of("shell",
                                                     command="touch second.txt && echo done")


def test_claude_code_bash_commands_reach_product_tools(rig: Callable[..., Rig]) -> None:
    r = rig(ClaudeCodeHarness())
    msg = r.call("Bash", command="lookup_order '{\"order_id\": \"B2\"}'")
    assert msg.kind == "observation"
    assert json.loads(msg.content)["id"] == "B2"
    assert r.seen == ["B2"]
    # the command inside the sandbox is approved like any call
    assert [q.name for q in r.requests] == ["Bash", "lookup_order"]


def test_claude_code_render_action_is_the_mcp_call() -> None:
    h = ClaudeCodeHarness()
    h.add_product_tools([shop([]).spec()])
    action = Action.of("tool", name="lookup_order", arguments='{"order_id": "A17"}')
    turn = h.render_action(action, "c1")
    assert turn.tool_calls == (ToolCall(id="c1", name="mcp__product__lookup_order",
                                        arguments={"order_id": "A17"}),)
    assert h.to_action(turn.tool_calls[0]) == action


# ---------------------------------------------------------------------------------- OpenClaw


def test_openclaw_presents_product_tools_as_plugin_tools(rig: Callable[..., Rig]) -> None:
    plain = OpenClawHarness(version="2026.2.26")
    assert plain.tools() == oc_tool_specs()
    task = Task(id="t", instruction="x")
    r = rig(OpenClawHarness(version="2026.2.26"))
    spec = shop([]).spec()
    assert r.harness.tools() == [*oc_tool_specs(), spec]
    prompt = r.state.history[0].content
    assert "- process: " in prompt
    assert f"\n- lookup_order: {spec.description}\n" in prompt
    assert prompt.index("- process: ") < prompt.index("- lookup_order: ")
    assert "lookup_order" not in plain.system_prompt_text(task)
    for name in ("exec", "Read", "bash"):
        with pytest.raises(ConfigError, match="OpenClaw's own tools"):
            OpenClawHarness(version="2026.2.26").add_product_tools([spec.model_copy(update={"name": name})])


def test_openclaw_runs_plugin_tools_and_shows_their_errors(rig: Callable[..., Rig]) -> None:
    r = rig(OpenClawHarness(version="2026.2.26"))
    msg = r.call("lookup_order", order_id="A17")
    assert (msg.content, msg.kind) == (ORDER, "observation")
    assert r.outcome.executed[0].action == Action.of("tool", name="lookup_order",
                                                     arguments='{"order_id": "A17"}')
    failed = r.call("lookup_order", order_id="missing")
    assert failed.kind == "observation"  # a thrown tool error is a normal result in OpenClaw
    assert failed.content == ('{\n  "status": "error",\n  "tool": "lookup_order",\n  '
                              '"error": "tool \'lookup_order\' failed: KeyError: \'missing\'"\n}')
    assert r.outcome.executed[0].result.error == "tool 'lookup_order' failed: KeyError: 'missing'"
    wrong = r.call("lookup_order", order_id=17)
    assert wrong.kind == "format_error"
    assert wrong.content.startswith("Invalid arguments for tool 'lookup_order':\n  - order_id")
    assert r.seen == ["A17", "missing"]


def test_openclaw_denials_are_blocked_calls(rig: Callable[..., Rig]) -> None:
    r = rig(OpenClawHarness(version="2026.2.26"), approve=deny_writes)
    blocked = r.call("write", path="notes.md", content="hi")
    assert blocked.kind == "observation"  # a blocked call throws: a normal JSON result
    assert blocked.content == ('{\n  "status": "error",\n  "tool": "write",\n  "error": "'
                               + deny().reason + '"\n}')
    assert r.outcome.executed[0].result.error is not None  # the record knows it failed
    assert not (r.ws.root / "notes.md").exists()
    reason = r.call("exec", command="touch made.txt")
    assert reason.content == ('{\n  "status": "error",\n  "tool": "exec",\n  "error": '
                              '"no new files from exec"\n}')
    assert not (r.ws.root / "made.txt").exists()
    invalid = r.call("exec", command=3)
    assert invalid.kind == "format_error"
    assert len(r.requests) == 2
    assert [type(e) for e in r.events] == [ToolDenied, ToolDenied]


def test_openclaw_runs_the_modified_call_and_exec_reaches_products(
        rig: Callable[..., Rig]) -> None:
    def redirect(request: ToolCallRequest) -> Approval:
        if request.name == "write":
            return modify(request.call.model_copy(update={"arguments": {
                **request.arguments, "path": "safe/notes.md"}}))
        return allow()

    r = rig(OpenClawHarness(version="2026.2.26"), approve=redirect)
    msg = r.call("write", path="notes.md", content="hi")
    assert msg.content == "Successfully wrote 2 bytes to safe/notes.md"
    assert (r.ws.root / "safe/notes.md").read_text() == "hi"
    assert not (r.ws.root / "notes.md").exists()
    out = r.call("exec", command="lookup_order '{\"order_id\": \"C3\"}'")
    assert json.loads(out.content)["id"] == "C3"
    assert r.seen == ["C3"]
    assert [q.name for q in r.requests] == ["write", "exec", "lookup_order"]


def test_openclaw_render_action_is_the_plugin_call() -> None:
    h = OpenClawHarness(version="2026.2.26")
    action = Action.of("tool", name="lookup_order", arguments='{"order_id": "A17", "name": "x"}')
    assert h.render_action(action, "c1").tool_calls == (
        ToolCall(id="c1", name="lookup_order", arguments={"order_id": "A17", "name": "x"}),)


# --------------------------------------------------------------------------------- mini-bash


def test_mini_bash_lists_product_commands_in_the_prompt(rig: Callable[..., Rig]) -> None:
    plain = MiniBashHarness().start(Task(id="t", instruction="x"), "ep")
    assert plain.history[0].content == SYSTEM_PROMPT.format(mount=W, sentinel="MINI_BASH_DONE")
    r = rig(MiniBashHarness())
    prompt = r.state.history[0].content
    assert prompt.startswith(plain.history[0].content)
    assert "e.g. `lookup_order '{\"order_id\": \"text\"}'`" in prompt
    assert ("- lookup_order: Look up an order in the shop's database. Arguments: order_id "
            "(string), include_items (boolean, optional).") in prompt
    with pytest.raises(ConfigError, match="shadow bash"):
        MiniBashHarness().add_product_tools([ToolSpec(name="bash", description="x",
                                                      parameters={})])


def test_mini_bash_product_commands_run_on_the_host(rig: Callable[..., Rig]) -> None:
    r = rig(MiniBashHarness())
    command = r.harness.render_action(
        Action.of("tool", name="lookup_order", arguments='{"order_id": "A17"}'), "c"
    ).content.split("\n")[2]
    assert command == "lookup_order '{\"order_id\": \"A17\"}'"
    obs = r.bash(command)
    assert obs.content == f"[exit code 0]\n{ORDER}\n"
    failed = r.bash("lookup_order '{\"order_id\": \"missing\"}'")
    assert failed.content.startswith("[exit code 1]\n")
    assert "KeyError" in failed.content
    assert r.seen == ["A17", "missing"]
    assert [q.name for q in r.requests] == ["bash", "lookup_order", "bash", "lookup_order"]


def test_mini_bash_denial_is_the_rejection_and_modify_runs(rig: Callable[..., Rig]) -> None:
    r = rig(MiniBashHarness(), approve=deny_writes)
    obs = r.bash("touch made.txt")
    assert (obs.role, obs.kind) == ("user", "tool_error")
    assert obs.content == MB_REJECTED + "no new files from bash"
    assert MB_REJECTED.startswith("Commands not executed. The user rejected your commands")
    assert not (r.ws.root / "made.txt").exists()
    assert r.outcome.executed[0].result.error is not None

    def quieter(request: ToolCallRequest) -> Approval:
        return modify(request.call.model_copy(update={"arguments": {"command": "echo quiet"}}))

    m = rig(MiniBashHarness(), approve=quieter)
    assert m.bash("echo loud").content == "[exit code 0]\nquiet\n"
    assert m.outcome.executed[0].action == Action.of("shell", command="echo quiet")
