"""``harnessgrid tasks list|show|validate|export`` through a tiny Typer app, with the
``clawgym`` and ``pinchbench`` suite plugins installed as real entry points (unless they are
built in already)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from servers import OpenAICompatServer, openai_text
from typer.testing import CliRunner, Result

from harnessgrid.cli.tasks_cmd import tasks_app
from harnessgrid.errors import ConfigError
from harnessgrid.plugins import BUILTIN_PLUGINS

TESTS = Path(__file__).parent
CLAWGYM = TESTS / "fixtures" / "clawgym"
PINCHBENCH = TESTS / "fixtures" / "pinchbench"
app = typer.Typer()
app.add_typer(tasks_app, name="tasks")
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")


@pytest.fixture
def plugins(tmp_path: Path, on_sys_path: Callable[[Path], None]) -> Path:
    """A folder with a dist-info declaring the two suite plugins as entry points (the folder
    goes on sys.path here, and on PYTHONPATH for subprocesses)."""
    root = tmp_path / "entry-points"
    info = root / "hg_task_formats-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hg-task-formats\n"
                                   "Version: 0.1.0\n")
    lines = [f"{name} = harnessgrid.plugins.tasks.{name}" for name in ("clawgym", "pinchbench")
             if f"harnessgrid.plugins.tasks.{name}" not in BUILTIN_PLUGINS]
    (info / "entry_points.txt").write_text("[harnessgrid]\n" + "\n".join(lines) + "\n")
    on_sys_path(root)
    return root


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["tasks", *args])


def as_json(*args: str, code: int = 0) -> Any:
    result = invoke(*args, "--json")
    assert result.exit_code == code, (result.output, result.exception)
    return json.loads(result.output)


def fails_with(message: str, *args: str) -> None:
    result = invoke(*args)
    assert isinstance(result.exception, ConfigError), (result.output, result.exception)
    assert message in result.exception.message, result.exception.message


def test_list_suites_and_tasks(plugins: Path) -> None:
    addresses = {s["address"] for s in as_json("list")}
    assert {"clawgym:PATH", "pinchbench:PATH", "examples", "grid-bench"} <= addresses
    rows = as_json("list", f"clawgym:{CLAWGYM}")
    assert [r["id"] for r in rows] == ["archive_logs", "fix_port", "hello_note", "sum_sales"]
    assert rows[0] == {"address": f"clawgym:{CLAWGYM}/archive_logs", "id": "archive_logs",
                       "split": "eval", "category": "files", "tags": [], "difficulty": 1,
                       "grading": "automated", "plan_length": 0, "sessions": 1}
    assert as_json("list", "--suite", f"clawgym:{CLAWGYM}") == rows  # the older spelling
    fails_with("two suites given", "list", "examples", "--suite", "grid-bench")
    table = invoke("list", f"pinchbench:{PINCHBENCH}").output
    assert "3 tasks" in table
    assert "automated_only" in table
    assert "ungraded" in table
    assert len(as_json("list", "--suite", "examples", "--limit", "1")) == 1


def test_listed_grading_uses_the_words_results_use(plugins: Path) -> None:
    """Found: ``tasks list`` said ``function`` (and ``none``), words no result or page uses;
    a listed grading is one of GRADINGS, and a judge the loader is given turns PinchBench's
    judged tasks into ``judge`` / ``hybrid``, the words their results will carry."""
    from harnessgrid.tasks import GRADINGS

    for suite in ("examples", "micro", "grid-bench", f"clawgym:{CLAWGYM}",
                  f"pinchbench:{PINCHBENCH}"):
        assert {r["grading"] for r in as_json("list", suite)} <= set(GRADINGS), suite
    assert {r["grading"] for r in as_json("list", "examples")} == {"automated"}
    judged = {r["id"]: r["grading"] for r in as_json("list", f"pinchbench:{PINCHBENCH}",
                                                      "--judge", "openai/gpt-4o-mini")}
    assert set(judged.values()) <= {"automated", "judge", "hybrid"}
    assert "judge" in judged.values() or "hybrid" in judged.values()
    fails_with("has no split 'train'", "list", "--suite", f"clawgym:{CLAWGYM}", "--split",
               "train")
    assert as_json("list", "--suite", f"clawgym:{CLAWGYM}", "-o", "split=train")[0][
        "split"] == "train"


def test_listed_addresses_are_what_show_and_run_take(plugins: Path) -> None:
    """Every suite's listed address (first, last) opens that task, and ``run --task`` runs the
    first; a table shows addresses whole, one row per line, when piped."""
    from harnessgrid.cli import app as main_app

    for suite in ("examples", "grid", "grid-bench", "grid-long", "micro",
                  f"clawgym:{CLAWGYM}", f"pinchbench:{PINCHBENCH}"):
        rows = as_json("list", suite)
        for row in (rows[0], rows[-1]):
            assert row["address"] == f"{suite}/{row['id']}"
            assert as_json("show", row["address"])["id"] == row["id"], row
        policy = "scripted" if rows[0]["plan_length"] else "null"
        ran = CliRunner().invoke(main_app, ["run", "--task", rows[0]["address"], "--policy",
                                            policy, "--harness", "S0-T0-O0-C0-W0", "--json"])
        assert ran.exit_code == 0, (suite, ran.output, ran.exception)
        episode = json.loads(ran.output)
        # null sends nothing: the harness ends it after its run of empty replies
        ended = "finished" if policy == "scripted" else "format_errors"
        assert episode["termination"] == ended, (suite, episode)
        # The oracle passes; doing nothing does not (a check may hold on an untouched file).
        assert (episode["score"] == 1.0) == (policy == "scripted"), (suite, episode)
    table = invoke("list", "grid-bench", "--limit", "3").output.splitlines()
    assert table[0] == "grid-bench (version 1): 200 tasks"
    assert table[1].split()[0] == "address"
    assert [line.split()[0] for line in table[2:5]] == [r["address"] for r in
                                                        as_json("list", "grid-bench")[:3]]
    assert table[5] == "… 197 more (--limit N, or --json)"


def test_show(plugins: Path, tmp_path: Path) -> None:
    upper = as_json("show", "examples/upper")
    assert upper["plan"][0] == "read(path='in.txt')"
    assert upper["grading"] == "automated"  # the words results use (was "function")
    assert upper["files"] == [{"path": "in.txt", "bytes": 12}]
    port = as_json("show", f"clawgym:{CLAWGYM}/fix_port")
    assert port["mount_path"] == "/home/user/project"
    assert port["grader"] == "ClawGymGrader"
    assert port["files"] == [{"path": "conf/server.ini", "bytes": 50}]
    assert "Change its port" in invoke("show", f"clawgym:{CLAWGYM}/fix_port").output
    # Task ids may hold '/', suite paths always do.
    folder = tmp_path / "suite" / "one"
    folder.mkdir(parents=True)
    (folder / "data_entry.json").write_text(json.dumps({"task_id": "grp/one",
                                                        "user_query": "Do it."}))
    assert as_json("show", f"clawgym:{tmp_path / 'suite'}/grp/one")["id"] == "grp/one"
    fails_with("has no task 'nope'", "show", "examples/nope")
    fails_with("bad task reference", "show", "examples")
    fails_with("unknown task suite 'nosuite'", "show", "nosuite/x")


def test_validate_external_suites(plugins: Path) -> None:
    claw = as_json("validate", f"clawgym:{CLAWGYM}")
    assert claw["summary"]["ok"] == 4
    assert claw["summary"]["no_plan"] == 4
    assert {t["null"] for t in claw["tasks"]} == {"fails"}
    assert all(t["deterministic"] for t in claw["tasks"])
    pinch = as_json("validate", f"pinchbench:{PINCHBENCH}")
    assert pinch["summary"]["ungraded"] == 1
    assert pinch["summary"]["automated_only"] == 1
    assert pinch["summary"]["ok"] == 3
    text = invoke("validate", f"pinchbench:{PINCHBENCH}").output
    assert "1 task(s) ungraded and 1 graded on their automated part only" in text


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs litellm")
def test_validate_with_a_judge(plugins: Path) -> None:
    reply = openai_text(json.dumps({"scores": {"1": 0.0, "2": 0.0}}))
    with OpenAICompatServer([reply] * 6) as srv:
        report = as_json("validate", f"pinchbench:{PINCHBENCH}", "--judge", "openai/judge",
                         "-o", f"judge_api_base={srv.base_url}/v1", "-o", "judge_api_key=x")
    assert report["summary"]["ungraded"] == 0
    assert report["summary"]["automated_only"] == 0
    assert report["summary"]["ok"] == 3
    assert {t["grading"] for t in report["tasks"]} == {"automated", "judge", "hybrid"}
    assert len(srv.requests) == 4  # two tasks judged, each graded twice (determinism)


def broken_suite(root: Path) -> Path:
    checks = {
        "always_full": "def grade(t, ws):\n    return {'x': 1.0}\n",
        "crashes": "def grade(t, ws):\n    raise RuntimeError('grader bug')\n",
        "random": "import random\ndef grade(t, ws):\n    return {'x': random.random() / 2}\n",
    }
    for name, check in checks.items():
        (root / name / "reward").mkdir(parents=True)
        (root / name / "reward" / "check.py").write_text(check)
        (root / name / "data_entry.json").write_text(json.dumps(
            {"task_id": name, "user_query": "Do nothing."}))
    return root


def test_validate_reports_bad_tasks_and_oracle_runs(plugins: Path, tmp_path: Path) -> None:
    report = as_json("validate", f"clawgym:{broken_suite(tmp_path / 'bad')}", code=1)
    by_id = {t["id"]: t for t in report["tasks"]}
    assert by_id["always_full"]["null"] == "passes"
    assert not by_id["always_full"]["ok"]
    assert by_id["crashes"]["null"] == "grade error"
    assert "RuntimeError: grader bug" in by_id["crashes"]["note"]
    assert by_id["random"]["deterministic"] is False
    assert report["summary"] == {"tasks": 3, "ok": 0, "oracle_pass": 0, "oracle_fail": 0,
                                 "no_plan": 3, "null_passes": 1, "broken": 0,
                                 "grade_errors": 1,
                                 "ungraded": 0, "automated_only": 0, "nondeterministic": 1}
    examples = as_json("validate", "examples", "--harness", "S1-T2-O1-C1-W1")
    assert examples["harness"] == "S1-T2-O1-C1-W1"
    assert examples["summary"]["oracle_pass"] == 2
    assert examples["summary"]["ok"] == 2
    assert len(as_json("validate", "examples", "--sample", "1", "--seed", "3")["tasks"]) == 1


def test_export(plugins: Path, tmp_path: Path) -> None:
    out = as_json("export", "examples", str(tmp_path / "ex"), "--format", "clawgym")
    assert out["exported"] == {"upper": "upper", "config": "config"}
    assert out["skipped"] == {}
    assert (tmp_path / "ex" / "config" / "reward" / "check.py").exists()
    assert as_json("list", "--suite", f"clawgym:{tmp_path / 'ex'}")[0]["plan_length"] == 5
    text = invoke("export", f"pinchbench:{PINCHBENCH}", str(tmp_path / "pb")).output
    assert "exported 1 task(s)" in text
    assert "skipped task_02_meeting_notes" in text
    fails_with("unknown export format 'jsonl'", "export", "examples", str(tmp_path / "x"),
               "--format", "jsonl")
    fails_with("exists and is not empty", "export", "examples", str(tmp_path / "ex"))


def test_through_the_real_command_line(plugins: Path) -> None:
    """Once the lead registers ``tasks`` in harnessgrid.cli, the real entry point works and
    user mistakes are one-line errors."""
    env = {**os.environ, "PYTHONPATH": f"{plugins}{os.pathsep}{TESTS}"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harnessgrid", "tasks", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    listed = run("list", "--suite", f"clawgym:{CLAWGYM}", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 4
    bad = run("show", f"clawgym:{CLAWGYM}/missing")
    assert bad.returncode == 2
    assert "has no task 'missing'" in bad.stderr
    assert "Traceback" not in bad.stderr
    broken = CLAWGYM.parent / "does-not-exist"
    assert "does not exist" in run("list", "--suite", f"clawgym:{broken}").stderr


PINCHBENCH_REPO = TESTS / "fixtures" / "pinchbench_repo"


def test_a_broken_task_is_listed_and_the_others_show(plugins: Path) -> None:
    """The public layout with task_20's asset missing: ``list`` shows every good task (the
    multi-session one with its sessions) and the broken one with its reason, ``show`` works
    for a good task and says why for the broken one (issue 14)."""
    suite = f"pinchbench:{PINCHBENCH_REPO}"
    rows = {r["id"]: r for r in as_json("list", suite)}
    assert {i for i, r in rows.items() if r["grading"] != "broken"} == {
        "task_00_sanity", "task_15_hybrid_weighted", "task_16_notes_in_scores",
        "task_19_sales_total", "task_22_second_brain"}
    assert "GPT4.pdf" in rows["task_20_eli5_pdf_summary"]["broken"]
    assert rows["task_22_second_brain"]["sessions"] == 3
    assert rows["task_00_sanity"]["sessions"] == 1
    text = invoke("list", suite).output
    assert "5 tasks, 1 broken" in text
    assert "sessions" in text
    assert f"broken, skipped: {suite}/task_20_eli5_pdf_summary" in text
    shown = as_json("show", f"{suite}/task_19_sales_total")
    assert shown["files"] == [{"path": "sales.csv", "bytes": 41}]
    fails_with("is broken", "show", f"{suite}/task_20_eli5_pdf_summary")
    from harnessgrid.cli import app as main_app

    ran = CliRunner().invoke(main_app, ["run", "--task", f"{suite}/task_00_sanity", "--harness",
                                        "S0-T0-O0-C0-W0", "--policy", "null", "--json"])
    assert ran.exit_code == 0, (ran.output, ran.exception)
    episode = json.loads(ran.output)
    # the address, which run and show take again (was the bare id); the id beside it
    assert episode["task"] == f"{suite}/task_00_sanity"
    assert episode["task_id"] == "task_00_sanity"
    assert episode["score"] == 0.0


def test_validate_skips_a_broken_task_with_its_reason(plugins: Path, tmp_path: Path) -> None:
    root = tmp_path / "pb" / "tasks"
    root.mkdir(parents=True)
    for name in ("task_00_sanity.md", "task_20_eli5_pdf_summary.md"):
        (root / name).write_text((PINCHBENCH_REPO / "tasks" / name).read_text())
    report = as_json("validate", f"pinchbench:{root.parent}", code=1)
    by_id = {t["id"]: t for t in report["tasks"]}
    assert by_id["task_00_sanity"]["ok"]
    assert by_id["task_00_sanity"]["null"] == "fails"
    skipped = by_id["task_20_eli5_pdf_summary"]
    assert skipped["grading"] == "broken"
    assert skipped["oracle"] == "skipped"
    assert "GPT4.pdf" in skipped["note"]
    assert not skipped["ok"]
    assert report["summary"]["broken"] == 1
    assert report["summary"]["ok"] == 1
