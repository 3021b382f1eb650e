"""Every one of the 243 built-in configurations runs end to end: the scripted oracle solves
tasks covering every abstract action through each of them, and the null policy does not.
Also: the levels of one factor really differ for the same input."""

from __future__ import annotations

import asyncio

import pytest
from probe_suite import EDIT_TASK, UPPER_TASK

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.models import Action, FormatError, ToolResult
from harnessgrid.plugin_system.composition import compose
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.space import FactorSpace
from harnessgrid.trajectory import Trajectory

SPACE = FactorSpace.default()
# Two hand-written tasks covering every abstract action, plus generated grid-bench tasks from
# two families with longer plans.
TASKS = (UPPER_TASK, EDIT_TASK,
         *[t for t in hg.load_suite("grid-bench").tasks()
           if t.metadata.get("family") in {"log_triage", "json_config_fix"}][:2])


@pytest.fixture(scope="module")
def oracle_runs() -> list[Trajectory]:
    jobs = [(compose(config), task) for config in SPACE for task in TASKS]
    return asyncio.run(run_episodes(jobs, ScriptedPolicy(), concurrency=4))


def test_oracle_scores_one_in_all_243_configurations(oracle_runs: list[Trajectory]) -> None:
    assert len({t.harness for t in oracle_runs}) == 243
    failed = [(t.harness, t.task_id, t.termination, t.score, t.error) for t in oracle_runs
              if not t.passed]
    assert failed == []
    kinds = {c.action.kind for t in oracle_runs for turn in t.turns for c in turn.calls}
    assert kinds == {"read", "write", "edit", "list", "search", "shell", "finish"}


def test_null_policy_fails_in_all_243_configurations() -> None:
    jobs = [(compose(config), task) for config in SPACE for task in TASKS]
    trajs = asyncio.run(run_episodes(jobs, ScriptedPolicy(empty=True), concurrency=4))
    assert all(t.score is not None and t.score < 1.0 for t in trajs)
    # null sends nothing: every harness gives up on its empty replies, none crashes on them
    assert {t.termination for t in trajs} == {"format_errors"}


def _levels(factor: str) -> list[object]:
    registry = hg.get_registry()
    return [registry.level(factor, name)() for name in SPACE.factor(factor).levels]


def test_levels_of_a_factor_render_differently() -> None:
    """No two levels of a factor give the same prompt, tool spec, rendered call or
    observation for the same input."""
    configs = [SPACE.parse(f"S{i}-T0-O0-C0-W0") for i in range(3)]
    prompts = {compose(c).system_prompt_text("/workspace") for c in configs}
    assert len(prompts) == 3
    interfaces = [compose(SPACE.parse(f"S0-T{i}-O0-C0-W0")) for i in range(3)]
    specs = {tuple(t.name for t in h.tools()) or h.tool_interface.prompt_section()
             for h in interfaces}
    assert len(specs) == 3
    action = Action.of("read", path="a.txt")
    assert len({h.render_action(action, "c1").model_dump_json() for h in interfaces}) == 3
    result = ToolResult(output="line one\nline two\n", exit_code=0)
    assert len({o.format(action, result) for o in _levels("observation")}) == 3  # type: ignore[attr-defined]
    error = FormatError("no such tool")
    assert len({o.format_error(error) for o in _levels("observation")}) == 3  # type: ignore[attr-defined]
    workflows = [compose(SPACE.parse(f"S0-T0-O0-C0-W{i}")) for i in range(3)]
    assert len({h.system_prompt_text("/workspace") for h in workflows}) == 3
    assert len({h.protocol for h in workflows}) == 3
