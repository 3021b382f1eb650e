"""No wall-clock time reaches the model unless asked (``EpisodeLimits.durations``).

A harness that shows how long a command took (the ``annotated`` observation's header) would
put the machine's load into the prompt: the same seed would give other prompts, hence other
samples, on a busy machine, and a run would not repeat. So by default harnesses format
observations with durations unknown (the trajectory keeps the measured ones);
``durations="measured"`` shows them, as a real shell does. Checked here on real sandboxed
episodes whose one command takes no time in one run and over a second in the other, through
every built-in observation level and the emulated shells."""

from __future__ import annotations

import asyncio
import math
import re

import pytest

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.resolve import resolve_harness
from harnessgrid.engine.runtime import run_episode
from harnessgrid.models import Action
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory

HARNESSES = ["S0-T0-O0-C0-W0", "S0-T0-O1-C0-W0", "S0-T1-O2-C0-W0", "S0-T2-O2-C0-W0",
             "adapter:claude-code", "adapter:openclaw", "adapter:gemini-cli", "adapter:mini-bash"]


def played(harness: str, sleep_s: str, limits: EpisodeLimits) -> Trajectory:
    """The oracle's episode of a task whose one command sleeps as long as its file says."""
    task = Task(id="wait", instruction="Run the check and report when it is done.",
                files={"delay": sleep_s},
                plan=(Action.of("shell", command='sleep "$(cat delay)"; echo checked'),))
    return asyncio.run(run_episode(resolve_harness(harness), task, ScriptedPolicy(), limits))


def seen_by_the_model(traj: Trajectory) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in traj.history]


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_slow_command_leaves_the_prompts_as_a_fast_one_does(harness: str) -> None:
    fast, slow = (played(harness, s, EpisodeLimits()) for s in ("0", "1.2"))
    assert fast.termination == slow.termination
    assert any("checked" in content for _, content in seen_by_the_model(fast))
    assert seen_by_the_model(fast) == seen_by_the_model(slow)
    # the record keeps what was measured (a number, not the unknown the model was shown)
    measured = [c.result.duration_s for t in slow.turns for c in t.calls]
    assert measured
    assert all(math.isfinite(d) for d in measured)


def test_measured_durations_are_shown_when_asked() -> None:
    """The same pair under ``durations="measured"``: the annotated header carries each run's
    time, so the prompts differ (and the hidden default is what keeps them equal)."""
    limits = EpisodeLimits(durations="measured")
    fast, slow = (played("S0-T0-O2-C0-W0", s, limits) for s in ("0", "1.2"))
    assert seen_by_the_model(fast) != seen_by_the_model(slow)
    shown = [c for _, c in seen_by_the_model(slow) if c.startswith("[ok] shell")]
    assert shown
    assert re.fullmatch(r"\d+\.\d\ds", shown[0].split("\n")[0].split(" | ")[1])


def test_the_hidden_default_leaves_stored_limits_as_they_were() -> None:
    """Evaluations and training runs stored before the setting existed resume: at its default
    it is not written (their stored limits and fingerprints are unchanged)."""
    assert "durations" not in EpisodeLimits().model_dump(mode="json")
    assert EpisodeLimits(durations="measured").model_dump(mode="json")["durations"] == "measured"
