"""Sessions (issue 18): follow-up messages in one conversation, streamed events that match the
trajectory, product tools, approvals, cancellation and budgets - through composed harnesses
and both emulated shells, with a plan-playing policy (the oracle's mechanism: each action
rendered by the harness itself) and with real HTTP to a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from servers import OpenAICompatServer, openai_text, openai_tool_call

import harnessgrid as hg
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.session import CANCELLED_CALL
from harnessgrid.episode import EpisodeState
from harnessgrid.errors import ConfigError
from harnessgrid.events import (
    Finished,
    ModelReply,
    ToolCallStarted,
    ToolDenied,
    ToolResultEvent,
    TurnStarted,
    UserMessage,
)
from harnessgrid.models import Action, ModelTurn
from harnessgrid.plugins.adapters.claude_code import (
    COMMAND_ABORTED,
    INTERRUPTED,
    INTERRUPTED_FOR_TOOL_USE,
    NOT_STARTED,
)
from harnessgrid.policies import PolicyRequest
from harnessgrid.sandboxing.sandbox import SandboxLimits, sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")

#: Seconds after which a wait for something that must happen counts as hung: only a guard
#: against a hang. The tests check what happened, never how fast (issue 28: under load 5-14 on
#: 2 cores, "within a second" failed although nothing was wrong).
HANG_S = 600.0
#: How long the "long" commands and replies take: far longer than a prompt cancellation under
#: any load, and shorter than the limits below, so a cancellation that *waited* for one would
#: let it finish (and write late.txt) instead of being cut short by a limit.
LONG_S = 120
LIMITS = EpisodeLimits(max_turns=8, wall_s=600, sandbox=SandboxLimits(wall_s=300))
HARNESSES = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W0", "S2-T2-O2-C2-W0", "adapter:claude-code",
             "adapter:openclaw"]


class PlanPolicy(EpisodeStub):
    """Plays one plan of abstract actions per user message, each action rendered by the
    harness (``render_action``), then finishes with ``Done <n>.``; the workflow's required
    turns (a plan, a check) are answered like the scripted oracle answers them."""

    spec = "plan"

    def __init__(self, *plans: list[Action]) -> None:
        self.plans = [list(p) for p in plans]
        self.requests: list[PolicyRequest] = []

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        self.requests.append(request)
        state: EpisodeState = request.state
        harness = episode.harness
        run = sum(m.kind in ("task", "followup") for m in state.history) - 1
        call_id = f"call_{state.turn + 1}"
        expected = harness.protocol.expected_turn(state)
        if expected is not None:
            if expected.kind in ("plan", "text"):
                return ModelTurn(content=expected.text or "Plan: do the steps, then finish.")
            return harness.render_action(expected.action, call_id, state)
        cursor = state.scratch.setdefault("plan.cursor", {})
        step = cursor.get(run, 0)
        cursor[run] = step + 1
        plan = self.plans[run] if run < len(self.plans) else []
        action = plan[step] if step < len(plan) else Action.of("finish", message=f"Done {run}.")
        return harness.render_action(action, call_id, state)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\n")
    return root


def write(path: str, content: str) -> Action:
    return Action.of("write", path=path, content=content)


def collect(session: hg.Session, text: str) -> list[Any]:
    return list(session.stream(text))


@pytest.mark.parametrize("harness", HARNESSES)
def test_follow_ups_continue_one_conversation_and_events_match_the_trajectory(
        project: Path, harness: str) -> None:
    policy = PlanPolicy([write("a.txt", "one\n")],
                        [Action.of("read", path="a.txt"), write("b.txt", "two\n")])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS) as session:
        first = collect(session, "Write a.txt")
        assert isinstance(first[0], UserMessage)
        assert isinstance(first[-1], Finished)
        assert first[-1].termination == "finished", first[-1].error
        assert (session.workspace / "a.txt").read_text() == "one\n"
        second = collect(session, "Now read it back and write b.txt")
        assert second[-1].termination == "finished", second[-1].error
        assert (session.workspace / "b.txt").read_text() == "two\n"
        traj = session.trajectory()
        history = session.history
        workspace = session.workspace
    assert not workspace.exists(), "the session's copy is removed at close"
    assert not (project / "a.txt").exists(), "the user's directory is untouched (a copy)"
    # One conversation: the follow-up is in the same history, after the first run's turns,
    # and the second run's first view extends the first run's last view.
    followups = [m for m in history if m.kind == "followup"]
    assert [m.content for m in followups] == ["Now read it back and write b.txt"]
    runs = [first, second]
    turns_per_run = [sum(isinstance(e, TurnStarted) for e in events) for events in runs]
    assert sum(turns_per_run) == len(traj.turns)
    boundary = traj.turns[turns_per_run[0]]
    assert boundary.view[: len(traj.turns[turns_per_run[0] - 1].view)] == \
        traj.turns[turns_per_run[0] - 1].view
    # Events agree with the trajectory: one model_reply per turn, with its text; each tool
    # result is a message the harness appended, in order.
    events = first + second
    replies = [e for e in events if isinstance(e, ModelReply)]
    assert [r.text for r in replies] == [t.assistant.content for t in traj.turns]
    assert [r.turn for r in replies] == [t.index for t in traj.turns]
    results = [e.text for e in events if isinstance(e, ToolResultEvent)]
    observed = [m.content for t in traj.turns for m in t.appended
                if m.role == "tool" or m.kind in ("observation", "tool_error")]
    assert results == observed
    assert results
    # Order inside a turn: turn_started, model_reply, then its calls and results.
    kinds = [e.type for e in events]
    for i, kind in enumerate(kinds):
        if kind == "model_reply":
            assert kinds[i - 1] in ("turn_started", "text_delta", "context_rewrite")
        if kind == "tool_call":
            assert "model_reply" in kinds[:i]
    assert all(json.dumps(e.model_dump(mode="json")) for e in events)


def test_sync_run_returns_the_reply_and_async_session_is_the_same_api(project: Path) -> None:
    policy = PlanPolicy([write("x.txt", "x")], [])
    with hg.Session(project, harness="S0-T0-O0-C0-W0", policy=policy, limits=LIMITS) as s:
        reply = s.run("write x")
        assert reply.finished
        assert reply.text == "Done 0."
        assert len(reply.turns) == 2
        again = s.send("anything else?")
        assert again.text == "Done 1."
        assert again.turns[0].index == 2

    async def main() -> list[str]:
        policy = PlanPolicy([write("y.txt", "y")])
        async with hg.AsyncSession(project, harness="adapter:openclaw", policy=policy,
                                   limits=LIMITS) as session:
            types = [e.type async for e in session.stream("write y")]
            assert (session.workspace / "y.txt").read_text() == "y"
            return types

    types = asyncio.run(main())
    assert types[0] == "user_message"
    assert types[-1] == "finished"


def lookup_order(order_id: str, include_items: bool = False) -> dict[str, Any]:
    """Look up an order in the shop's database."""
    if order_id == "missing":
        raise KeyError(order_id)
    return {"id": order_id, "status": "shipped", "items": ["mug"] if include_items else None}


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_product_tool_is_called_through_every_interface_and_its_result_reaches_the_model(
        project: Path, harness: str) -> None:
    calls: list[str] = []

    def tracked(order_id: str, include_items: bool = False) -> dict[str, Any]:
        """Look up an order in the shop's database."""
        calls.append(order_id)
        return lookup_order(order_id, include_items)

    tool = hg.product_tool(tracked, name="lookup_order")
    policy = PlanPolicy([Action.of("tool", name="lookup_order",
                                   arguments=json.dumps({"order_id": "A17",
                                                         "include_items": True})),
                         Action.of("tool", name="lookup_order",
                                   arguments=json.dumps({"order_id": "missing"}))])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS,
                    tools=[tool]) as session:
        events = collect(session, "Is order A17 shipped?")
    assert events[-1].termination == "finished", events[-1].error
    assert calls == ["A17", "missing"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert "shipped" in results[0].text
    assert "mug" in results[0].text
    assert "KeyError" in results[1].text  # the product's exception, as an observation
    # ... and what the model read next holds it
    later = policy.requests[2].messages
    assert any("shipped" in m.content for m in later)
    # The model was told about the tool in the harness's own syntax.
    first = policy.requests[0]
    described = json.dumps([t.model_dump() for t in first.tools]) + first.messages[0].content
    assert "lookup_order" in described


@pytest.mark.parametrize("harness", ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W0", "adapter:claude-code",
                                     "adapter:openclaw"])
def test_denied_call_is_not_run_and_modified_call_runs_instead(project: Path,
                                                               harness: str) -> None:
    seen: list[hg.ToolCallRequest] = []

    def on_tool_call(request: hg.ToolCallRequest) -> hg.Approval:
        seen.append(request)
        if request.action is not None and request.action.kind == "write":
            if request.action.args["path"] == "secret.txt":
                return hg.deny("writing secret.txt is not allowed here")
            call = request.call.model_copy(update={"arguments": {
                **request.call.arguments, "content": "safe\n"}})
            return hg.modify(call)
        return hg.allow()

    policy = PlanPolicy([write("secret.txt", "leak"), write("ok.txt", "unsafe")])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS,
                    on_tool_call=on_tool_call) as session:
        events = collect(session, "write files")
        assert not (session.workspace / "secret.txt").exists()
        assert (session.workspace / "ok.txt").read_text() == "safe\n"
    denied = [e for e in events if isinstance(e, ToolDenied)]
    assert [d.reason for d in denied] == ["writing secret.txt is not allowed here"]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert started[0].arguments["content"] == "safe\n"  # the modified call is what ran
    assert any("not allowed" in m.content for m in policy.requests[1].messages)
    assert [r.turn for r in seen][:2] == [0, 1]


def test_async_approval_callback_and_a_bad_answer_is_a_clear_error(project: Path) -> None:
    async def slow_ok(request: hg.ToolCallRequest) -> hg.Approval:
        await asyncio.sleep(0.01)
        return hg.allow()

    with hg.Session(project, harness="S0-T0-O0-C0-W0", on_tool_call=slow_ok, limits=LIMITS,
                    policy=PlanPolicy([write("a", "b")])) as session:
        assert session.run("go").finished
    with hg.Session(project, harness="S0-T0-O0-C0-W0", limits=LIMITS,
                    on_tool_call=lambda r: "yes",  # type: ignore[arg-type,return-value]
                    policy=PlanPolicy([write("a", "b")])) as session, \
            pytest.raises(ConfigError, match="returned 'yes'"):
        session.run("go")


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (sandboxed ones included)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def unique(marker: str) -> str:
    """``marker`` made unique to this call: other test runs on the machine (a shared checkout)
    use the same markers, and their processes must not count as this test's."""
    return f"{marker}-{uuid.uuid4().hex[:12]}"


def runs_as(marker: str) -> bool:
    """Whether a process named ``marker`` runs (argv[0], the ``exec -a`` of long_command): the
    command got as far as its long sleep. (Its shell's command line holds ``marker`` too, from
    before it wrote ``pid``, so :func:`processes_with` would say so too early.)"""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0", 1)[0] == marker.encode():
                    return True
            except OSError:
                pass
    return False


def long_command(marker: str) -> str:
    """A ``LONG_S`` command findable on the host by ``marker`` in its command line, which
    writes late.txt if it is allowed to finish."""
    return f"echo $$ > pid; (exec -a {marker} sleep {LONG_S}) && echo late > late.txt"


def cancel_once(session: hg.Session, ready: Callable[[], object]) -> Callable[[], None]:
    """Cancel ``session`` as soon as ``ready()`` holds (e.g. the command runs on the host): a
    condition, not a delay, so a slow start under load cannot make it cancel too early.
    Returns ``done``, to call once the run has returned: it stops the watch (a run that ended
    by itself is then not cancelled, and the test fails at once rather than after HANG_S)."""
    stop = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + HANG_S
        while not ready():
            if stop.wait(0.02) or time.monotonic() > deadline:
                return
        session.cancel()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()

    def done() -> None:
        stop.set()
        thread.join()

    return done


@pytest.mark.parametrize("harness", ["S0-T0-O0-C0-W0", "adapter:claude-code"])
def test_cancel_during_a_long_command_ends_it(project: Path, harness: str) -> None:
    """Cancelled while the command runs, the command is killed rather than waited for: it
    never writes late.txt (it would, finishing well within the sandbox's limit) and its
    process is gone when ``run`` returns."""
    marker = unique(f"hg-cancel-{harness.replace(':', '-')}")
    policy = PlanPolicy([Action.of("shell", command=long_command(marker))],
                        [write("after.txt", "fine")])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS) as session:
        done = cancel_once(session, lambda: runs_as(marker))
        reply = session.run("run the long job")
        done()
        assert reply.termination == "cancelled"
        assert (session.workspace / "pid").exists()
        assert not (session.workspace / "late.txt").exists()
        assert processes_with(marker) == [], "the cancelled command is gone"
        traj = session.trajectory()
        assert traj.termination == "cancelled"
        assert len(traj.turns) == 1
        # The conversation stays usable: the next message runs in a fresh sandbox.
        after = session.send("go on")
        assert after.termination == "finished", after.error
        assert (session.workspace / "after.txt").read_text() == "fine"
        time.sleep(0.2)
        assert not (session.workspace / "late.txt").exists()
    # Native calls left without an answer got one (APIs refuse such a history), in the form
    # of the harness: Claude Code's own (its Bash result for an aborted command, then the
    # user's interruption marker, as cli.js records them), a plain one elsewhere.
    answered = {m.tool_call_id: m for m in traj.history if m.role == "tool"}
    assert all(c.id in answered for m in traj.history for c in m.tool_calls)
    shell_call = next(c for m in traj.history for c in m.tool_calls)
    answer = answered[shell_call.id]
    added = traj.history[traj.history.index(answer) + 1:]  # (traj: taken before the follow-up)
    if harness.startswith("adapter"):
        assert answer.content == COMMAND_ABORTED
        assert answer.kind == "tool_error"
        assert [(m.role, m.content) for m in added] == [("user", INTERRUPTED_FOR_TOOL_USE)]
    else:
        assert answer.content == CANCELLED_CALL, "nothing but the answer"
        assert added == [], "nothing but the answer"


def test_asyncio_cancellation_of_run_cancels_the_run(project: Path) -> None:
    marker = unique("hg-asyncio-cancel")

    async def main() -> tuple[str, list[int], list[int]]:
        policy = PlanPolicy([Action.of("shell", command=long_command(marker))])
        async with hg.AsyncSession(project, harness="S0-T2-O0-C0-W0", policy=policy,
                                   limits=LIMITS) as session:
            run = asyncio.ensure_future(session.run("sleep"))
            deadline = time.monotonic() + HANG_S
            while time.monotonic() < deadline:  # until the command runs
                await asyncio.sleep(0.05)
                if runs_as(marker):
                    break
            running = processes_with(marker)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            return session.trajectory().termination, running, processes_with(marker)

    termination, running, left = asyncio.run(main())
    assert running, "the command was running when the run was cancelled"
    assert termination == "cancelled"
    assert left == []


def test_session_budgets_stop_further_runs_without_calling_the_model(project: Path) -> None:
    script = [openai_text("<done>\nfirst\n</done>", prompt_tokens=60, completion_tokens=10)]
    with OpenAICompatServer(script) as server, hg.Session(
            project, harness="S0-T1-O0-C0-W0", policy="openai:test-model",
            policy_options={"base_url": server.base_url + "/v1", "max_retries": 0},
            limits=LIMITS, max_total_tokens=50) as session:
        first = session.run("answer")
        assert first.termination == "finished"  # the run that spends the budget finishes
        assert (first.turns[0].tokens_in, first.turns[0].tokens_out) == (60, 10)
        second = session.send("again")
        assert second.termination == "token_budget"
        assert second.turns == []
        assert len(server.requests) == 1


def test_streamed_text_and_product_tool_over_real_http(project: Path) -> None:
    """openai: policy against a local server: text deltas stream in pieces and join to the
    reply; a native product-tool call reaches the host function and its result is in the
    next request the server receives."""
    script = [
        openai_tool_call("lookup_order", {"order_id": "A17"}),
        openai_text("Order A17 has shipped; nothing else to do here."),
    ]
    with OpenAICompatServer(script) as server, hg.Session(
            project, harness="adapter:openclaw", policy="openai:test-model",
            policy_options={"base_url": server.base_url + "/v1", "max_retries": 0},
            limits=LIMITS, tools=[lookup_order]) as session:
        events = collect(session, "Is A17 shipped?")
        requests = [r.json for r in server.requests]
    assert events[-1].termination == "finished", events[-1].error
    assert events[-1].text == "Order A17 has shipped; nothing else to do here."
    deltas = [e.text for e in events if e.type == "text_delta" and e.turn == 1]
    assert len(deltas) > 1
    assert "".join(deltas) == events[-1].text
    assert any(t["function"]["name"] == "lookup_order" for t in requests[0]["tools"])
    tool_messages = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert "shipped" in json.dumps(tool_messages)


def test_mistakes_are_clear_errors(project: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="scripted"):
        hg.Session(project, harness="S0-T0-O0-C0-W0", policy="scripted")
    with pytest.raises(ConfigError, match="not a directory"):
        hg.Session(tmp_path / "nope", harness="S0-T0-O0-C0-W0", policy=PlanPolicy())
    with pytest.raises(ConfigError, match="max_total_tokens=0"):
        hg.Session(project, harness="S0-T0-O0-C0-W0", policy=PlanPolicy(),
                   max_total_tokens=0)
    with pytest.raises(ConfigError, match="no type hint"):
        hg.product_tool(lambda x: x, name="f", description="d")
    with pytest.raises(ConfigError, match="two product tools"):
        hg.Session(project, harness="S0-T0-O0-C0-W0", policy=PlanPolicy(),
                   tools=[lookup_order, lookup_order])
    with hg.Session(project, harness="S0-T0-O0-C0-W0", policy=PlanPolicy([]),
                    limits=LIMITS) as session:
        with pytest.raises(ConfigError, match="empty"):
            session.run("  ")
        session.run("go")
        with pytest.raises(ConfigError, match="before the session's first run"):
            session.tool(lookup_order)


def test_events_of_an_iterator_left_early_cancel_the_run(project: Path) -> None:
    """Leaving the event iterator cancels the run: the running command is killed, not waited
    for (it would write late.txt, finishing well within the sandbox's limit)."""
    marker = unique("hg-iterator-left")
    policy = PlanPolicy([Action.of("shell", command=long_command(marker))])
    with hg.Session(project, harness="S0-T0-O0-C0-W0", policy=policy, limits=LIMITS) as s:
        for event in s.stream("sleep"):
            if isinstance(event, ToolCallStarted):
                break
        assert s.trajectory().termination == "cancelled"
        assert not (s.workspace / "late.txt").exists()
        assert processes_with(marker) == [], "the command of the cancelled run is gone"


@pytest.fixture
def first_token_policy(tiny_model_dir: Path) -> Any:
    pytest.importorskip("torch")
    return hg.make_policy(f"hf:{tiny_model_dir}", {"temperature": 0.7, "max_new_tokens": 24,
                                                    "seed": 0})


def test_hf_token_records_stay_on_policy_across_follow_ups(project: Path,
                                                          first_token_policy: Any) -> None:
    """The same check as the trainer's on-policy test: each row's recorded logprobs equal a
    fresh forward pass, and a follow-up extends the same token segment (one row)."""
    import torch

    policy = first_token_policy
    limits = EpisodeLimits(max_turns=2, wall_s=120, max_context_tokens=6000)
    with hg.Session(project, harness="S0-T1-O0-C0-W0", policy=policy, limits=limits) as s:
        s.run("Say hello.")
        s.send("And now goodbye.")
        traj = s.trajectory()
    assert len(traj.turns) >= 2
    assert all(t.tokens is not None for t in traj.turns)
    rows = traj.token_rows()
    assert len(rows) == 1, "a follow-up is appended: the segment goes on"
    assert len(rows[0].turns) == len(traj.turns)
    model = policy.model
    for row in rows:
        ids = torch.tensor([list(row.prompt_ids) + list(row.completion_ids)])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()
        p = len(row.prompt_ids)
        logp = torch.log_softmax(logits[p - 1:-1] / 0.7, dim=-1)
        fresh = logp.gather(1, torch.tensor(row.completion_ids)[:, None])[:, 0]
        mask = torch.tensor(row.mask, dtype=torch.bool)
        assert torch.allclose(fresh[mask], torch.tensor(row.logprobs)[mask], atol=1e-4, rtol=0)


def test_embed_chat_example_against_a_local_server(project: Path) -> None:
    """examples/embed_chat.py as a user runs it: a message on stdin, a denied write (the
    approval prompt answered "n"), the product tool saving a note on the host, a finish."""
    import subprocess
    import sys

    script = [
        openai_tool_call("write_file", {"path": "x.txt", "content": "x"}),
        openai_tool_call("save_note", {"note": "x.txt was not written"}),
        openai_tool_call("finish", {"summary": "Could not write x.txt; noted it."}),
    ]
    example = Path(__file__).resolve().parents[1] / "examples" / "embed_chat.py"
    with OpenAICompatServer(script) as server:
        out = subprocess.run(
            [sys.executable, str(example), str(project), "--policy", "openai:test-model",
             "--policy-opt", f"base_url={server.base_url}/v1", "--harness", "S0-T0-O0-C0-W0"],
            input="write x.txt please\nn\n\n", capture_output=True, text=True, timeout=HANG_S,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, check=False)
        requests = [r.json for r in server.requests]
    assert out.returncode == 0, out.stderr[-2000:]
    assert "allow write_file" in out.stdout
    assert "denied: the user said no" in out.stdout
    assert "note 1: x.txt was not written" in out.stdout
    assert "[finished; 3 turns" in out.stdout
    assert not (project / "x.txt").exists()
    assert "the user said no" in json.dumps(requests[1]["messages"][-1])


def test_the_session_wall_budget_spans_runs(project: Path) -> None:
    policy = PlanPolicy([Action.of("shell", command="sleep 5")], [])
    with hg.Session(project, harness="S0-T0-O0-C0-W0", policy=policy, limits=LIMITS,
                    wall_s=1.0) as session:
        first = session.run("sleep")
        assert first.termination == "timeout"
        assert first.error is not None
        assert "time budget (1 s)" in first.error
        second = session.send("more")
        assert second.termination == "timeout"
        assert second.turns == []
    assert len(policy.requests) == 1


def test_cancel_during_a_slow_model_call_is_prompt_and_the_session_goes_on(project: Path) -> None:
    from dataclasses import replace

    from servers import openai_completion

    slow = replace(openai_completion(content="<done>\nlate\n</done>"), delay_s=LONG_S)
    script = [slow, openai_text("<done>\nsecond\n</done>")]
    with OpenAICompatServer(script) as server, hg.Session(
            project, harness="S0-T1-O0-C0-W0", policy="openai:test-model",
            policy_options={"base_url": server.base_url + "/v1", "max_retries": 0},
            limits=LIMITS) as session:
        done = cancel_once(session, lambda: server.requests)  # the call is under way
        started = time.monotonic()
        first = session.run("answer slowly")
        done()
        assert first.termination == "cancelled"
        assert first.turns == []
        # Not waited for: the reply would have taken LONG_S (a bound no load reaches).
        assert time.monotonic() - started < LONG_S
        second = session.send("now answer")
        assert second.termination == "finished"
        assert second.text == "second"


def test_claude_code_records_an_interruption_as_cli_js_does(project: Path) -> None:
    """Claude Code's own record of an interruption (cli.js 1.0.98): calls that had not
    started are answered with its "doesn't want to take this action" text, the running Bash
    command as aborted, then "[Request interrupted by user for tool use]"; an interrupted
    reply leaves "[Request interrupted by user]". The next request is a valid Anthropic
    conversation (the marker and the follow-up merge into one user turn)."""
    from servers import AnthropicCompatServer, anthropic_message, anthropic_text

    marker = unique("hg-cc-interrupt")
    two_calls = anthropic_message([
        {"type": "tool_use", "id": None, "name": "Bash",
         "input": {"command": long_command(marker), "description": "Run the long job"}},
        {"type": "tool_use", "id": None, "name": "Read",
         "input": {"file_path": "/workspace/notes.txt"}}])
    with AnthropicCompatServer([two_calls, anthropic_text("resumed")]) as server, hg.Session(
            project, harness="adapter:claude-code", policy="anthropic:claude-test",
            policy_options={"base_url": server.base_url, "max_retries": 0},
            limits=LIMITS) as session:
        done = cancel_once(session, lambda: runs_as(marker))  # Bash runs
        interrupted = session.run("do two things")
        done()
        assert interrupted.termination == "cancelled"
        history = session.trajectory().history
        calls = [c for m in history for c in m.tool_calls]
        answers = {m.tool_call_id: m.content for m in history if m.role == "tool"}
        assert [answers[c.id] for c in calls] == [COMMAND_ABORTED, NOT_STARTED]
        assert history[-1].role == "user"
        assert history[-1].content == INTERRUPTED_FOR_TOOL_USE
        assert session.send("go on").text == "resumed"
        sent = server.requests[-1].json["messages"]
        assert sent[-1]["role"] == "user"
        assert sent[-2]["role"] == "assistant"
        texts = [b.get("text") for b in sent[-1]["content"] if b.get("type") == "text"]
        assert INTERRUPTED_FOR_TOOL_USE in texts
        assert "go on" in " ".join(map(str, texts))
    assert processes_with(marker) == []

    harness = hg.resolve_harness("adapter:claude-code")
    assert [(m.role, m.content) for m in harness.interrupted_messages([])] == [
        ("user", INTERRUPTED)]


def test_context_rewrites_are_announced_before_the_turn_that_sees_them(project: Path) -> None:
    """The window context level drops old turns: each turn whose view is not an extension of
    the previous one gets a ``context_rewrite`` event (with its segment) before its reply."""
    (project / "big.txt").write_text("word " * 400)
    reads = [Action.of("read", path="big.txt") for _ in range(6)]
    with hg.Session(project, harness="S0-T0-O0-C1-W0", policy=PlanPolicy(reads, reads),
                    limits=EpisodeLimits(max_turns=10, wall_s=60)) as session:
        events = collect(session, "read it") + collect(session, "read it again")
        traj = session.trajectory()
    rewrites = [e for e in events if e.type == "context_rewrite"]
    rewritten = [t.index for t in traj.turns if t.new_segment]
    assert rewritten
    assert [e.turn for e in rewrites] == rewritten
    assert [e.segment for e in rewrites] == list(range(1, len(rewrites) + 1))
    for event in rewrites:
        i = events.index(event)
        assert events[i - 1].type == "turn_started"
        assert events[i - 1].turn == event.turn


def test_follow_up_over_real_http_through_the_claude_code_shell(project: Path) -> None:
    """anthropic: policy, local Messages-API server, adapter:claude-code: the follow-up's
    request carries the whole first exchange and then the new user message; streamed text
    deltas join to each reply; a product tool is an MCP tool of the shell."""
    from servers import AnthropicCompatServer, anthropic_text, anthropic_tool_use

    script = [
        anthropic_tool_use("Bash", {"command": "wc -l notes.txt"}),
        anthropic_text("notes.txt has two lines."),
        anthropic_tool_use("mcp__product__lookup_order", {"order_id": "A17"}),
        anthropic_text("A17 has shipped."),
    ]
    with AnthropicCompatServer(script) as server, hg.Session(
            project, harness="adapter:claude-code", policy="anthropic:claude-test",
            policy_options={"base_url": server.base_url, "api_key": "x", "max_retries": 0},
            limits=LIMITS, tools=[lookup_order]) as session:
        first = collect(session, "How many lines in notes.txt?")
        second = collect(session, "And is order A17 shipped?")
        requests = [r.json for r in server.requests]
    assert first[-1].text == "notes.txt has two lines."
    assert second[-1].text == "A17 has shipped."
    assert second[-1].termination == "finished"
    for events in (first, second):
        deltas = "".join(e.text for e in events if e.type == "text_delta")
        assert deltas.endswith(events[-1].text)
    followup = requests[2]["messages"]
    assert followup[: len(requests[1]["messages"])] == requests[1]["messages"]
    assert "And is order A17 shipped?" in json.dumps(followup[-1])
    assert "mcp__product__lookup_order" in {t["name"] for t in requests[0]["tools"]}
    assert "shipped" in json.dumps(requests[3]["messages"][-1])


def test_cancel_between_runs_and_after_close_does_nothing(project: Path) -> None:
    session = hg.Session(project, harness="S0-T0-O0-C0-W0", policy=PlanPolicy([], []),
                         limits=LIMITS)
    with session:
        session.cancel()  # idle: the next run is not affected
        assert session.run("go").finished
        session.cancel()
        assert session.send("again").finished
    session.cancel()  # closed
    session.close()  # twice is harmless
