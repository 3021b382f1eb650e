"""A ``tool_result`` event says whether its call went well: ``ok`` is false for a call the
approval callback denied, a call that failed (a product tool that raised, a missing file, a
command that exited non-zero) and a call a cancel() stopped; true for the calls that worked.
(Security issue, finding 7: a denied call's result said ``"ok": true``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_session import (
    LIMITS,
    PlanPolicy,
    cancel_once,
    collect,
    long_command,
    lookup_order,
    runs_as,
    unique,
    write,
)

import harnessgrid as hg
from harnessgrid.engine.session import CANCELLED_CALL
from harnessgrid.events import ToolResultEvent
from harnessgrid.models import Action
from harnessgrid.sandboxing.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")

DENIABLE = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W0", "adapter:claude-code", "adapter:openclaw",
            "adapter:gemini-cli", "adapter:mini-bash"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\n")
    return root


def results(events: list[object]) -> list[ToolResultEvent]:
    return [e for e in events if isinstance(e, ToolResultEvent)]


def deny_secret(request: hg.ToolCallRequest) -> hg.Approval:
    if "secret.txt" in json.dumps(request.arguments):
        return hg.deny("writing secret.txt is not allowed here")
    return hg.allow()


@pytest.mark.parametrize("harness", DENIABLE)
def test_a_denied_call_is_not_ok_and_an_allowed_one_is(project: Path, harness: str) -> None:
    policy = PlanPolicy([write("secret.txt", "leak"), write("ok.txt", "fine")])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS,
                    on_tool_call=deny_secret) as session:
        events = collect(session, "write files")
    shown = results(events)
    denied = [r for r in shown if "not allowed" in r.text]
    assert len(denied) == 1, shown
    assert denied[0].ok is False, shown
    assert any(r.ok for r in shown if r is not denied[0]), "the allowed write is ok"


@pytest.mark.parametrize("harness", ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W0", "adapter:claude-code",
                                     "adapter:openclaw"])
def test_a_product_tool_that_raised_is_not_ok(project: Path, harness: str) -> None:
    tool = hg.product_tool(lookup_order, name="lookup_order")
    policy = PlanPolicy([Action.of("tool", name="lookup_order",
                                   arguments=json.dumps({"order_id": "A17"})),
                         Action.of("tool", name="lookup_order",
                                   arguments=json.dumps({"order_id": "missing"}))])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS,
                    tools=[tool]) as session:
        events = collect(session, "Is A17 shipped?")
    found, raised = [r for r in results(events) if "lookup_order" in (r.name or "")
                     or "shipped" in r.text or "KeyError" in r.text][:2]
    assert "shipped" in found.text
    assert found.ok is True
    assert "KeyError" in raised.text
    assert raised.ok is False


@pytest.mark.parametrize("harness", ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W0", "adapter:mini-bash",
                                     "adapter:openclaw", "adapter:gemini-cli"])
def test_a_failed_read_and_a_failing_command_are_not_ok(project: Path, harness: str) -> None:
    policy = PlanPolicy([Action.of("read", path="notes.txt"),
                         Action.of("read", path="no-such-file.txt"),
                         Action.of("shell", command="echo fine"),
                         Action.of("shell", command="exit 3")])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS) as session:
        events = collect(session, "read and run")
    assert [r.ok for r in results(events)][:4] == [True, False, True, False]


@pytest.mark.parametrize("harness", ["S0-T0-O0-C0-W0", "adapter:claude-code"])
def test_a_cancelled_call_is_not_ok(project: Path, harness: str) -> None:
    marker = unique(f"hg-ok-cancel-{harness.replace(':', '-')}")
    policy = PlanPolicy([Action.of("shell", command=long_command(marker))])
    with hg.Session(project, harness=harness, policy=policy, limits=LIMITS) as session:
        done = cancel_once(session, lambda: runs_as(marker))
        events = collect(session, "run the long job")
        done()
    assert events[-1].termination == "cancelled"
    [answer] = results(events)  # the cancelled call's answer (the harness's own wording)
    assert answer.ok is False
    if not harness.startswith("adapter"):
        assert answer.text == CANCELLED_CALL
