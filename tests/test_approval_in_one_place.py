"""Approval in one place (issue 39): the product's approval callback is enforced where tools
run, so an adapter that never mentions approvals cannot run a call the product denies.

The adapter under test is a third party's, registered the way any is (an installed
distribution's entry point), and written as CONTRIBUTING.md's adapter guide allows a harness
to act: ``execute(action, env)``, ``env.sandbox.run(...)`` and ``env.workspace``. It never
calls ``gate`` and never imports anything about approvals. Every call it makes is checked on
the filesystem: a denied command would leave a marker file, a denied write its file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from plugin_dist import make_plugin_dist  # tests/ is on sys.path (conftest.py)

import harnessgrid as hg
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.events import ToolCallStarted, ToolDenied
from harnessgrid.models import Action, ModelTurn, ToolCall
from harnessgrid.policies import PolicyRequest
from harnessgrid.sandboxing.sandbox import Sandbox, SandboxLimits, sandbox_available
from harnessgrid.sandboxing.tool_hooks import (
    Approval,
    Denied,
    ToolCallRequest,
    ToolHooks,
    allow,
    deny,
    gate,
    modify,
)
from harnessgrid.sandboxing.tools import Environment, execute
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import Task

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")

LIMITS = EpisodeLimits(max_turns=4, wall_s=300, sandbox=SandboxLimits(wall_s=60))

#: A third party's adapter that forgets approvals: one action per line of the model's reply,
#: run through each documented way of acting. ``done`` ends the episode.
FORGETFUL = '''
from harnessgrid import hookimpl
from harnessgrid.episode import Decision, EpisodeState, ExecutedCall, TurnOutcome
from harnessgrid.episode import WorkflowProtocol
from harnessgrid.harness import task_message
from harnessgrid.models import Action, Message, ModelTurn, ToolCall, ToolResult
from harnessgrid.observations import observation_message
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tools import execute
from harnessgrid.sandboxing.workspace import WorkspaceError


class Forgetful:
    name = "adapter:forgetful"
    protocol = WorkflowProtocol()
    native_tools = False

    def tools(self):
        return []

    def start(self, task, episode_id):
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.append(Message(role="system", content="One action per line.", kind="system",
                             pinned=True), task_message(task))
        return state

    def view(self, state, budget):
        return list(state.history)

    async def step(self, state, turn, env):
        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        for n, line in enumerate(turn.content.splitlines()):
            verb, _, rest = line.partition(" ")
            if verb == "done":
                outcome.finish = Action.of("finish", message=rest)
                return outcome, Decision(finished=True)
            call = ToolCall(id=f"c{state.turn}_{n}", name=verb, arguments={"line": rest})
            path, _, content = rest.partition(" ")
            if verb == "execute-shell":
                action = Action.of("shell", command=rest)
                result = await execute(action, env)
            elif verb == "execute-write":
                action = Action.of("write", path=path, content=content)
                result = await execute(action, env)
            elif verb == "sandbox-run":
                action = Action.of("shell", command=rest)
                res = await env.sandbox.run(rest)
                result = ToolResult(output=res.stdout, stderr=res.stderr,
                                    exit_code=res.exit_code)
            elif verb == "workspace-write":
                action = Action.of("write", path=path, content=content)
                try:
                    env.workspace.write_text(path, content)
                    result = ToolResult(output="written")
                except WorkspaceError as exc:
                    result = ToolResult(error=exc.message)
            else:
                raise AssertionError(verb)
            outcome.executed.append(ExecutedCall(call, action, result))
            text = result.error or (result.output + result.stderr) or "(no output)"
            state.append(observation_message(call, text, native=False))
        return outcome, Decision()

    def render_action(self, action, call_id, state=None):
        # what the scripted oracle would call; this adapter is driven by its own line policy
        return ModelTurn(content=f"execute-shell true  # {action.kind}")


@hookimpl
def harnessgrid_adapters():
    yield AdapterSpec(name="forgetful", create=lambda **options: Forgetful(), version="1",
                      description="Acts through execute, env.sandbox and env.workspace; never "
                                  "asks for approval.")
'''

#: One line per documented way of acting; each would leave its own file if it ran.
LINES = {
    "execute-shell": "execute-shell touch marker-execute.txt",
    "execute-write": "execute-write written-execute.txt leaked",
    "sandbox-run": "sandbox-run touch marker-sandbox.txt",
    "workspace-write": "workspace-write written-workspace.txt leaked",
}
FILES = {"execute-shell": "marker-execute.txt", "execute-write": "written-execute.txt",
         "sandbox-run": "marker-sandbox.txt", "workspace-write": "written-workspace.txt"}


class Lines:
    """A model that sends the given replies, then ``done``."""

    spec = "lines"

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[PolicyRequest] = []

    async def act(self, request: PolicyRequest) -> ModelTurn:
        self.requests.append(request)
        return ModelTurn(content=self.replies.pop(0) if self.replies else "done finished")


@pytest.fixture
def forgetful(tmp_path: Path, on_sys_path: Callable[[Path], None]) -> str:
    on_sys_path(make_plugin_dist(tmp_path / "plugin", "hg-forgetful", "hg_forgetful",
                                 FORGETFUL))
    return "adapter:forgetful"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\n")
    return root


def made(root: Path) -> set[str]:
    return {name for name in FILES.values() if (root / name).exists()}


class Recorder:
    """An approval callback that records what it is asked and answers with ``answer``."""

    def __init__(self, answer: Callable[[ToolCallRequest], Approval]) -> None:
        self.answer = answer
        self.requests: list[ToolCallRequest] = []

    def __call__(self, request: ToolCallRequest) -> Approval:
        self.requests.append(request)
        return self.answer(request)


def deny_all(request: ToolCallRequest) -> Approval:
    return deny("nothing runs in this product")


# ------------------------------------------------------------------------------------ sessions


@pytest.mark.parametrize("way", sorted(LINES))
def test_a_denied_call_never_runs_whichever_documented_way_the_adapter_acts(
        forgetful: str, project: Path, way: str) -> None:
    approver = Recorder(deny_all)
    policy = Lines(LINES[way])
    with hg.Session(project, harness=forgetful, policy=policy, limits=LIMITS,
                    on_tool_call=approver) as session:
        events = list(session.stream("go"))
        assert made(session.workspace) == set()  # the call never ran
        assert (session.workspace / "notes.txt").read_text() == "alpha\n"
    assert len(approver.requests) == 1  # asked about the one call, once
    request = approver.requests[0]
    assert request.harness == forgetful
    assert request.action is not None
    assert request.action.kind == ("shell" if "shell" in way or "run" in way else "write")
    denied = [e for e in events if isinstance(e, ToolDenied)]
    assert [d.reason for d in denied] == ["nothing runs in this product"]
    # the model was told, as a failed call
    seen = policy.requests[1].messages[-1].content
    assert "denied: nothing runs in this product" in seen


def test_each_unannounced_action_is_asked_about_on_its_own(forgetful: str,
                                                           project: Path) -> None:
    """An approval of one primitive covers that primitive only: a later one in the same turn
    is asked about again, and denied on its own merits."""
    def no_writes(request: ToolCallRequest) -> Approval:
        if request.action is not None and request.action.kind == "write":
            return deny("no writes")
        return allow()

    approver = Recorder(no_writes)
    policy = Lines("\n".join(LINES[w] for w in ("execute-shell", "workspace-write",
                                                "sandbox-run", "execute-write")))
    with hg.Session(project, harness=forgetful, policy=policy, limits=LIMITS,
                    on_tool_call=approver) as session:
        events = list(session.stream("go"))
        assert made(session.workspace) == {"marker-execute.txt", "marker-sandbox.txt"}
    assert [r.action.kind for r in approver.requests if r.action] == [
        "shell", "write", "shell", "write"]
    assert [type(e) for e in events if isinstance(e, ToolCallStarted | ToolDenied)] == [
        ToolCallStarted, ToolDenied, ToolCallStarted, ToolDenied]


def test_an_allowed_call_runs_and_a_modified_one_runs_as_modified(forgetful: str,
                                                                  project: Path) -> None:
    def safer(request: ToolCallRequest) -> Approval:
        if request.action is not None and request.action.kind == "write":
            return modify(request.call.model_copy(update={"arguments": {
                **request.call.arguments, "content": "safe"}}))
        return allow()

    approver = Recorder(safer)
    policy = Lines("\n".join(LINES.values()))
    with hg.Session(project, harness=forgetful, policy=policy, limits=LIMITS,
                    on_tool_call=approver) as session:
        assert session.run("go").finished
        assert made(session.workspace) == set(FILES.values())
        assert (session.workspace / "written-workspace.txt").read_text() == "safe"
        assert (session.workspace / "written-execute.txt").read_text() == "safe"
    assert len(approver.requests) == 4  # one question per call, none twice


def test_an_asynchronous_callback_cannot_be_skipped_by_a_synchronous_file_write(
        forgetful: str, project: Path) -> None:
    """``env.workspace`` is synchronous: it cannot wait for an asynchronous callback (a UI
    prompt), so an unannounced write under one fails closed; the asynchronous ways are asked."""
    asked: list[str] = []

    async def ui_prompt(request: ToolCallRequest) -> Approval:
        await asyncio.sleep(0)
        asked.append(request.name)
        return allow()

    policy = Lines("\n".join(LINES.values()))
    with hg.Session(project, harness=forgetful, policy=policy, limits=LIMITS,
                    on_tool_call=ui_prompt) as session:
        events = list(session.stream("go"))
        assert made(session.workspace) == set(FILES.values()) - {"written-workspace.txt"}
    assert asked == ["shell", "write", "shell"]
    denied = [e for e in events if isinstance(e, ToolDenied)]
    assert len(denied) == 1
    assert "not announced for approval" in denied[0].reason


# ------------------------------------------------------------------------- the episode runner


def test_run_episode_honours_an_approval_callback_for_any_adapter(forgetful: str) -> None:
    """The episode runner every evaluation executor ends in (``run_job`` → ``run_episode``)
    takes the same callback, enforced the same way."""
    approver = Recorder(deny_all)
    ws = Workspace.create({"notes.txt": "alpha\n"})
    try:
        traj = asyncio.run(run_episode(
            hg.resolve_harness(forgetful), Task(id="t", instruction="go"),
            Lines("\n".join(LINES.values())), LIMITS, workspace=ws, on_tool_call=approver))
        assert traj.termination == "finished", traj.error
        assert made(ws.root) == set()
        assert len(approver.requests) == 4
        results = [c.result for t in traj.turns for c in t.calls]
        assert len(results) == 4
        assert all(not r.ok for r in results)
    finally:
        ws.cleanup()


def test_without_a_callback_nothing_is_asked_and_everything_runs(forgetful: str) -> None:
    ws = Workspace.create({})
    try:
        traj = asyncio.run(run_episode(hg.resolve_harness(forgetful),
                                       Task(id="t", instruction="go"),
                                       Lines("\n".join(LINES.values())), LIMITS, workspace=ws))
        assert traj.termination == "finished", traj.error
        assert made(ws.root) == set(FILES.values())
    finally:
        ws.cleanup()


# ------------------------------------------------------------------- announced calls (gate)


class Rig:
    def __init__(self, answer: Callable[[ToolCallRequest], Approval]) -> None:
        self.approver = Recorder(answer)
        self.ws = Workspace.create({})
        self.sandbox = Sandbox(self.ws)
        self.env = Environment(self.ws, self.sandbox,
                               hooks=ToolHooks(harness="h", approve=self.approver))

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def close(self) -> None:
        asyncio.run(self.sandbox.close())
        self.ws.cleanup()


@pytest.fixture
def rig() -> Any:
    made_: list[Rig] = []

    def make(answer: Callable[[ToolCallRequest], Approval]) -> Rig:
        made_.append(Rig(answer))
        return made_[-1]

    yield make
    for r in made_:
        r.close()


def test_an_announced_call_is_asked_once(rig: Callable[..., Rig]) -> None:
    """A harness that announces its call (gate, as the built-ins do through approved_call)
    and then runs it is asked once, however many times it asks or acts for that call."""
    r = rig(lambda request: allow())
    call = ToolCall(id="c1", name="write_file", arguments={"path": "a.txt", "content": "x"})
    action = Action.of("write", path="a.txt", content="x")

    async def play() -> None:
        assert await gate(r.env, call, action) is call
        assert await gate(r.env, call, action) is call  # again: the same answer, not asked
        assert (await execute(action, r.env)).ok
        # its result recorded (execute did): the next unannounced action is asked about
        assert (await execute(Action.of("read", path="a.txt"), r.env)).output == "x"

    r.run(play())
    assert [q.call.name for q in r.approver.requests] == ["write_file", "read"]


def test_a_harness_that_ignores_a_denial_still_cannot_run_the_call(
        rig: Callable[..., Rig]) -> None:
    from harnessgrid.sandboxing.tools import ApprovalDenied

    r = rig(lambda request: deny("no"))
    call = ToolCall(id="c1", name="Bash", arguments={"command": "touch x"})
    action = Action.of("shell", command="touch x")

    async def play() -> None:
        assert isinstance(await gate(r.env, call, action), Denied)
        # run anyway, each documented way: refused under the denial, nobody asked again
        res = await r.env.sandbox.run("touch y")
        assert (res.exit_code, res.stderr) == (126, "denied: no\n")
        with pytest.raises(ApprovalDenied, match="denied: no"):
            r.env.workspace.write_text("z", "leak")
        result = await execute(action, r.env)
        assert result.error == "denied: no"

    r.run(play())
    assert not any((r.ws.root / name).exists() for name in ("x", "y", "z"))
    assert len(r.approver.requests) == 1


def test_an_unannounced_product_tool_call_is_asked_as_the_product_tool() -> None:
    from harnessgrid.product_tools import product_tools
    from harnessgrid.sandboxing.tool_hooks import run_product_tool

    ran: list[str] = []

    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    approver = Recorder(lambda request: deny("no refunds") if request.name == "refund"
                        else allow())
    ws = Workspace.create({})
    env = Environment(ws, Sandbox(ws), hooks=ToolHooks(
        harness="h", product_tools=product_tools([refund]), approve=approver))

    async def play() -> None:
        result = await run_product_tool(env, "refund", {"order_id": "A1"})
        assert result.error == "denied: no refunds"
        action = Action.of("tool", name="refund", arguments='{"order_id": "A2"}')
        assert (await execute(action, env)).error == "denied: no refunds"

    try:
        asyncio.run(play())
    finally:
        ws.cleanup()
    assert ran == []
    assert [(q.name, q.arguments) for q in approver.requests] == [
        ("refund", {"order_id": "A1"}), ("refund", {"order_id": "A2"})]
    assert all(q.action is not None and q.action.kind == "tool" for q in approver.requests)


# -------------------------------------------------------------------------------- evaluations

#: The forgetful adapter's plugin plus a policy that sends every way of acting at once, and a
#: product's approval module: what `harnessgrid eval --approve MODULE:FUNCTION` imports where
#: the episodes run.
LINES_POLICY = '''
from harnessgrid import hookimpl
from harnessgrid.models import ModelTurn
from harnessgrid.registrations import PolicyBackend

REPLY = REPLY_TEXT


class Lines:
    spec = "every-way"
    context_limit = None

    async def act(self, request):
        first = not any(m.role == "assistant" for m in request.messages)
        return ModelTurn(content=REPLY if first else "done finished")

    def count_tokens(self, messages):
        return 0


@hookimpl
def harnessgrid_policies():
    yield PolicyBackend(scheme="every-way", description="Acts every documented way, once.",
                        create=lambda rest, options: Lines())
'''.replace("REPLY_TEXT", repr("\n".join(LINES.values())))

PRODUCT = '''
from harnessgrid.sandboxing.tool_hooks import deny

ASKED = []


def review(request):
    ASKED.append(request.name)
    return deny("this product allows nothing")
'''


@pytest.mark.parametrize("workers", [1, 2])
def test_eval_approve_refuses_every_denied_call_of_an_adapter_that_never_asks(
        tmp_path: Path, on_sys_path: Callable[[Path], None], workers: int) -> None:
    """``eval --approve MODULE:FUNCTION`` (``EvalConfig.approver``): the callback is imported
    where the episodes run - this process, or worker processes (``workers=2``), which cannot
    be sent a Python callable - and the forgetful adapter's four ways of acting are all
    refused: each call's result is the denial, and the trajectory never shows one running."""
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.evaluation.store import load_trajectory

    on_sys_path(make_plugin_dist(tmp_path / "plugin", "hg-forgetful", "hg_forgetful",
                                 FORGETFUL))
    on_sys_path(make_plugin_dist(tmp_path / "policy", "hg-every-way", "hg_every_way",
                                 LINES_POLICY))
    product = tmp_path / "product"
    product.mkdir()
    (product / "product_approvals.py").write_text(PRODUCT)
    on_sys_path(product)
    config = EvalConfig(policy="every-way", suites=("examples",), settings=("out-of-space",),
                        adapters=("forgetful",), runs=1, limit=2, workers=workers,
                        approver="product_approvals:review", limits=LIMITS)
    outcome = evaluate(config, tmp_path / "out")
    assert len(outcome.results) == 2
    for result in outcome.results:
        trajectory = load_trajectory(tmp_path / "out", result)
        results = [c.result for t in trajectory.turns for c in t.calls]
        assert len(results) == 4, trajectory.error
        assert all(not r.ok for r in results)
        assert all("this product allows nothing" in (r.error or r.stderr) for r in results)
    stored = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert stored["approver"] == "product_approvals:review"
    # resuming without the approver would mix episodes graded under other rules
    with pytest.raises(hg.ConfigError, match="approver"):
        evaluate(config.model_copy(update={"approver": None}), tmp_path / "out")


def test_a_bad_approver_path_is_one_clear_error(tmp_path: Path) -> None:
    from harnessgrid.evaluation.run import EvalConfig, evaluate

    for spec, said in (("no_colon", "is not MODULE:FUNCTION"),
                       ("no_such_module_here:review", "cannot load the approver"),
                       ("json:__name__", "is not callable")):
        with pytest.raises(hg.ConfigError, match=said):
            evaluate(EvalConfig(policy="scripted", suites=("examples",), runs=1, limit=1,
                                settings=("in-space",), approver=spec), tmp_path / spec)
