"""Oracle plans in the ClawGym layout (``metadata.harnessgrid.plan``) and how a suite loaded
from a path is named.

A plan that does not read is an error naming the task and the action: before, it silently
became "no plan" and ``tasks validate`` reported the suite as fine.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import harnessgrid as hg
from harnessgrid.cli.tasks_cmd import tasks_app
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action
from harnessgrid.plugins.tasks.clawgym import plan_metadata, read_plan
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.suites import suite_name, suite_path

PLAN = (Action.of("read", path="in.txt"), Action.of("shell", command="sort in.txt > out.txt"))
CHECK = '''
def grade(transcript, workspace_path):
    import pathlib
    out = pathlib.Path(workspace_path) / "out.txt"
    return {"sorted": float(out.is_file() and out.read_text() == "a\\nb\\n")}
'''


def write_task(root: Path, task_id: str, plan: Any) -> Path:
    folder = root / task_id
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "in.txt").write_text("b\na\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "check.py").write_text(CHECK)
    metadata: dict[str, Any] = {"category": "files"}
    if plan is not None:
        metadata["harnessgrid"] = {"plan": plan}
    (folder / "data_entry.json").write_text(json.dumps({
        "task_id": task_id, "user_query": "Write the lines of in.txt, sorted, to out.txt.",
        "input_mount_dir": "/workspace", "metadata": metadata}))
    return root


def test_a_recorded_plan_round_trips_and_solves(tmp_path: Path) -> None:
    root = write_task(tmp_path / "suite", "sort", plan_metadata(PLAN)["plan"])
    suite = hg.load_suite(f"clawgym:{root}")
    (task,) = suite.tasks()
    assert task.plan == PLAN
    assert suite.name == task.suite == suite_name("clawgym", str(root)) == f"clawgym:{root}"
    assert hg.load_suite(suite.name).tasks()[0].plan == PLAN  # the name loads it again
    harness = hg.resolve_harness("S0-T2-O1-C0-W1")
    solved = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy()))
    assert solved.passed, (solved.termination, solved.error, solved.grade_error)


@pytest.mark.parametrize(("plan", "named"), [
    ([{"kind": "read", "args": {"path": "in.txt"}}, {"kind": "read", "args": {"file": "x"}}],
     'action 2 of metadata.harnessgrid.plan, {"kind": "read", "args": {"file": "x"}}'),
    ([{"kind": "teleport", "args": {}}], 'action 1 of metadata.harnessgrid.plan, {"kind": '
                                         '"teleport"'),
    (["read in.txt"], 'action 1 of metadata.harnessgrid.plan, "read in.txt"'),
    ({"kind": "read"}, "must be a list of actions, got dict"),
])
def test_a_malformed_plan_is_an_error_naming_task_and_action(tmp_path: Path, plan: Any,
                                                             named: str) -> None:
    root = write_task(tmp_path / "suite", "broken-task", plan)
    suite = hg.load_suite(f"clawgym:{root}")
    (bad,) = suite.broken  # the suite loads; the task is broken, with the loader's error
    assert bad.id == "broken-task"
    assert "task 'broken-task'" in bad.reason
    assert named in bad.reason
    with pytest.raises(ConfigError) as caught:
        suite.get("broken-task")
    assert named in caught.value.message
    assert caught.value.hint


def test_validate_fails_on_a_malformed_plan(tmp_path: Path) -> None:
    """``tasks validate`` no longer says ok: the task is reported broken, skipped, naming the
    task and the action, and the check fails."""
    root = write_task(tmp_path / "suite", "broken-task", [{"kind": "edit", "args": {}}])
    app = typer.Typer()
    app.add_typer(tasks_app, name="tasks")
    result = CliRunner().invoke(app, ["tasks", "validate", f"clawgym:{root}", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    (row,) = report["tasks"]
    assert row["id"] == "broken-task"
    assert row["grading"] == "broken"
    assert not row["ok"]
    assert '{"kind": "edit", "args": {}}' in row["note"]
    assert report["summary"]["broken"] == 1


def test_no_plan_is_still_no_plan() -> None:
    assert read_plan(None, "t") == ()
    assert read_plan([], "t") == ()


def test_suite_path_rejects_unknown_options_and_a_missing_path(tmp_path: Path) -> None:
    assert suite_path("mine", str(tmp_path), {"a": 1}, {"a"}) == tmp_path.resolve()
    with pytest.raises(ConfigError, match=r"unknown option.*colour") as caught:
        suite_path("mine", str(tmp_path), {"colour": "red"}, {"a"})
    assert caught.value.hint == "options: a"
    with pytest.raises(ConfigError, match="needs a path"):
        suite_path("mine", None, {}, ())
