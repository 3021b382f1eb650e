"""``adapter:mini-bash``, and the test template for a new adapter (CONTRIBUTING.md, "Writing an
adapter"): register it, run the scripted oracle through it in a real sandbox, pin how it reads
a model's reply and what it shows back, and check that graders see its tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError
from harnessgrid.harness import Harness
from harnessgrid.models import Action, ModelTurn
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.adapters.mini_bash import SENTINEL, MiniBashHarness
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import FunctionGrader, Task
from harnessgrid.trajectory import Trajectory

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Script:
    """Replays fixed model turns; then gives up with plain text (a format error here)."""

    spec = "script"

    def __init__(self, turns: list[str]) -> None:
        self.turns = list(turns)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        return ModelTurn(content=self.turns.pop(0) if self.turns else "I give up.")


def play(turns: list[str], files: Mapping[str, str | bytes] | None = None,
         **limits: Any) -> Trajectory:
    task = Task(id="t", instruction="Do the thing.", files=dict(files or {}))
    return run(run_episode(MiniBashHarness(), task, Script(turns), EpisodeLimits(**limits)))


def bash(command: str, thought: str = "Next.") -> str:
    return f"{thought}\n```bash\n{command}\n```"


# 1. Registration: the plugin module registers the adapter under its name.
def test_registered_through_the_adapter_hook() -> None:
    registry = PluginManager(builtins=[*BUILTIN_PLUGINS, "harnessgrid.plugins.adapters.mini_bash"],
                             load_external=False).registry()
    spec = registry.adapter("mini-bash")
    harness = spec.create()
    assert isinstance(harness, Harness)
    assert harness.name == "adapter:mini-bash"
    with pytest.raises(ConfigError):
        spec.create(colour="red")


# 2. The scripted oracle solves the example tasks through the adapter; the null policy fails.
@pytest.mark.parametrize("task", [UPPER_TASK, EDIT_TASK], ids=lambda t: t.id)
def test_oracle_scores_one(task: Task) -> None:
    traj = run(run_episode(MiniBashHarness(), task, ScriptedPolicy()))
    assert traj.termination == "finished", (traj.error, traj.subscores)
    assert traj.score == 1.0, (traj.error, traj.subscores)
    null = run(run_episode(MiniBashHarness(), task, ScriptedPolicy(empty=True)))
    assert null.score is not None
    assert null.score < 1.0


# 3. What the model writes and what it reads back.
def test_one_block_runs_and_the_observation_is_plain() -> None:
    traj = play([bash("echo hi; echo oops >&2; exit 4")])
    obs = traj.history[3]
    assert obs.role == "user"
    assert obs.kind == "observation"
    assert obs.content == "[exit code 4]\nhi\noops\n"
    assert [c.action for c in traj.turns[0].calls] == [
        Action.of("shell", command="echo hi; echo oops >&2; exit 4")]


def test_zero_or_two_blocks_are_format_errors() -> None:
    traj = play(["Just thinking.", bash("ls") + "\n" + bash("pwd")], max_turns=2)
    errors = [t.format_error for t in traj.turns]
    assert errors == ["expected exactly one ```bash block, found 0",
                      "expected exactly one ```bash block, found 2"]
    assert all(m.kind == "format_error" for m in traj.history if m.content.startswith("Format"))
    stuck = play(["no block"] * 5, max_format_errors=3)
    assert stuck.termination == "format_errors"


def test_sentinel_output_finishes_with_the_rest_as_message() -> None:
    traj = play([bash(f"echo {SENTINEL} && echo 'all good' && echo 'line two'")])
    assert traj.termination == "finished"
    assert len(traj.turns) == 1
    finish = MiniBashHarness().render_action(Action.of("finish", message="it's done"), "x")
    assert SENTINEL in finish.content
    traj = play([finish.content])
    assert traj.termination == "finished"


def test_long_output_is_clipped_in_the_middle() -> None:
    traj = play([bash("python3 -c \"print('a' * 30000 + 'TAIL')\"")])
    obs = traj.history[3].content
    assert len(obs) < 11_000
    assert "characters cut" in obs
    assert obs.rstrip().endswith("TAIL")


def test_commands_with_backtick_fences_round_trip() -> None:
    action = Action.of("write", path="doc.md", content="```bash\nls\n```\n")
    turn = MiniBashHarness().render_action(action, "x")
    traj = play([turn.content])
    # Said in full when it fails: the episode's end and the turn's error say which part broke.
    assert traj.turns[0].calls, (traj.termination, traj.error, traj.turns[0].format_error)
    assert traj.turns[0].calls[0].result.exit_code == 0
    assert traj.turns[0].format_error is None


# 4. Graders read the transcript: the text-protocol calls appear as toolCall parts.
def test_transcript_carries_the_bash_calls() -> None:
    def used_bash(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        calls = [p for e in transcript if e.get("type") == "message"
                 for p in e["message"]["content"] if p.get("type") == "toolCall"]
        results = [e for e in transcript if e.get("message", {}).get("role") == "toolResult"]
        return {"calls": float(len(calls) == 4 and {c["name"] for c in calls} == {"bash"}),
                "results": float(len(results) == 3)}

    task = UPPER_TASK.model_copy(update={"grader": FunctionGrader(used_bash)})
    traj = run(run_episode(MiniBashHarness(), task, ScriptedPolicy()))
    assert traj.subscores == {"calls": 1.0, "results": 1.0}
