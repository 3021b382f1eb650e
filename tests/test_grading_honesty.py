"""Issue 30: every result says how it was graded, and nothing is scored silently.

- a PinchBench hybrid graded without its judge is ``automated_only``: its score is kept, it is
  never a pass, and results, ``run --json`` and the report say so;
- ``eval --judge MODEL -o KEY=VALUE`` reaches every suite loader (worker processes too), is
  recorded in the manifest, and a resume with another judge is refused;
- a judge without an API key is a usage error before the first episode (``run`` and ``eval``);
- the scripted oracle on tasks without a plan is refused, never a silent 0;
- the null policy sends nothing, so a check that any reply satisfies fails it, and ``tasks
  validate`` names a task that passes it as a weak grader.

Judges are real HTTP servers on 127.0.0.1 (:mod:`servers`), episodes real sandboxed ones.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from cli_in_process import hg_cli
from servers import OpenAICompatServer, openai_text

import harnessgrid as hg
from harnessgrid.engine.runtime import run_episode
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.plugin_system.registry import load_suite
from harnessgrid.policies.scripted import ScriptedPolicy

needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                   reason="the judge needs the api extra (litellm)")
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning",
                                        "ignore:the task declares environment:RuntimeWarning")

HYBRID = """\
    ---
    id: task_01_keep_notes
    grading_type: hybrid
    grading_weights: {automated: 0.6, llm_judge: 0.4}
    workspace_files:
      - {content: "keep me\\n", dest: notes.txt}
    ---
    ## Prompt
    Summarise notes.txt in summary.md, keeping notes.txt.
    ## Automated Checks
    ```python
    def grade(transcript, workspace_path):
        import os
        return {"notes_kept": float(os.path.exists(os.path.join(workspace_path, "notes.txt")))}
    ```
    ## LLM Judge Rubric
    ### Criterion 1: A faithful summary (Weight: 100%)
    **Score 1.0**: summary.md summarises notes.txt.
    """
REPLIED = """\
    ---
    id: task_02_replied
    grading_type: automated
    ---
    ## Prompt
    Say hello.
    ## Automated Checks
    ```python
    def grade(transcript, workspace_path):
        said = any(e.get("type") == "message" and e["message"].get("role") == "assistant"
                   and any(p.get("type") == "text" and str(p.get("text", "")).strip()
                           for p in e["message"].get("content") or [])
                   for e in transcript)
        return {"replied": float(said)}
    ```
    """
ANYTHING = """\
    ---
    id: task_03_anything
    grading_type: automated
    ---
    ## Prompt
    Write done.txt.
    ## Automated Checks
    ```python
    def grade(transcript, workspace_path):
        return {"done": 1.0}
    ```
    """


def suite_dir(root: Path, *texts: str) -> Path:
    (root / "tasks").mkdir(parents=True)
    for text in texts:
        task_id = text.split("id: ", 1)[1].split("\n", 1)[0].strip()
        (root / "tasks" / f"{task_id}.md").write_text(textwrap.dedent(text))
    return root


def judge_reply(score: float) -> dict:
    return openai_text(json.dumps({"scores": {"1": score}, "notes": "ok"}))


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        *args: str) -> tuple[int, str, str]:
    return hg_cli(capsys, monkeypatch, *args)


# -- 1. a hybrid without its judge: automated_only, never a pass ------------------------------


def test_hybrid_without_judge_is_automated_only_everywhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = f"pinchbench:{suite_dir(tmp_path / 'pb', HYBRID)}"
    code, out, err = cli(capsys, monkeypatch, "run", "--task", f"{suite}/task_01_keep_notes",
                         "--harness", "adapter:openclaw", "--policy", "null", "--json")
    assert code == 0, err
    ran = json.loads(out)
    # full marks on the automated part (notes.txt untouched), but 40 % was never assessed
    assert ran["score"] == 1.0
    assert ran["passed"] is None
    assert ran["grade_error"] is None
    assert ran["grading"] == "automated_only"
    assert "judge's 40% of the rubric was not assessed" in ran["grading_note"]

    out_dir = tmp_path / "eval"
    code, _, err = cli(capsys, monkeypatch, "eval", "--policy", "null", "--suites", suite,
                       "--settings", "out-of-space", "--adapters", "openclaw", "--runs", "1",
                       "--out", str(out_dir), "--quiet", "--no-plots")
    assert code == 0, err
    record = json.loads((out_dir / "results.jsonl").read_text().splitlines()[0])
    assert record["grading"] == "automated_only"
    assert record["passed"] is None
    assert record["score"] == 1.0
    assert "not assessed" in record["grading_note"]
    report = json.loads((out_dir / "report.json").read_text())
    assert report["passed"] == 0
    assert report["scored"] == 0
    assert report["partial"] == 1
    assert report["ungraded"] == 0
    assert report["gradings"] == {"automated_only": 1}
    [partial] = report["partial_tasks"]
    assert partial["task"] == "task_01_keep_notes"
    assert "not assessed" in partial["reason"]
    md = (out_dir / "report.md").read_text()
    assert "Tasks graded on part of their rubric" in md
    assert "graded: automated_only 1" in md
    assert "partially graded" in md
    html = (out_dir / "report.html").read_text()
    assert "Tasks graded on part of their rubric" in html
    assert "automated_only" in html
    assert (out_dir / "tables" / "partial.csv").exists()


def test_results_stored_before_the_grading_field_still_load() -> None:
    base = {"setting": "in-space", "suite": "s", "task": "t", "harness": "h", "run": 0,
            "termination": "finished"}
    plain = EvalResult.model_validate({**base, "score": 1.0, "passed": True,
                                       "subscores": {"x": 1.0}})
    hybrid = EvalResult.model_validate({**base, "score": 0.5, "passed": False, "subscores": {
        "automated": 1.0, "llm_judge": 0.0}})
    judged = EvalResult.model_validate({**base, "score": 1.0, "passed": True,
                                        "subscores": {"llm_judge": 1.0}})
    failed = EvalResult.model_validate({**base, "grade_error": "boom"})
    assert [r.grading for r in (plain, hybrid, judged, failed)] == [
        "automated", "hybrid", "judge", "ungraded"]
    assert plain.scored
    assert not plain.partial
    assert failed.ungraded


# -- 2. eval --judge and -o reach every loader, workers and the manifest ----------------------


@needs_litellm
def test_eval_grades_with_a_judge_in_workers_and_refuses_another_on_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = f"pinchbench:{suite_dir(tmp_path / 'pb', HYBRID)}"
    out_dir = tmp_path / "eval"
    with OpenAICompatServer([judge_reply(1.0)] * 4) as srv:
        base = ["eval", "--policy", "null", "--suites", suite, "--settings", "in-space",
                "--harnesses", "S0-T0-O0-C0-W0,S1-T0-O0-C0-W0", "--runs", "1", "--out",
                str(out_dir), "--quiet", "--no-report", "--workers", "2", "--concurrency", "2",
                "-o", f"judge_api_base={srv.base_url}/v1", "-o", "judge_api_key=secret"]
        code, _, err = cli(capsys, monkeypatch, *base, "--judge", "openai/test-judge")
        assert code == 0, err
        assert len(srv.requests) == 2  # each worker's episode was judged
    results = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert {r["grading"] for r in results} == {"hybrid"}
    assert all(r["passed"] is True and r["score"] == 1.0 for r in results)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["suite_options"]["judge"] == "openai/test-judge"
    assert manifest["suite_options"]["judge_api_key"] == "<redacted>"  # never written
    code, _, err = cli(capsys, monkeypatch, *base, "--judge", "openai/other-judge")
    assert code == 2, err
    assert "suite_options" in err, err
    assert "openai/test-judge" in err, err
    assert "Traceback" not in err


def test_eval_loader_options_a_suite_does_not_take_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = cli(capsys, monkeypatch, "eval", "--policy", "null", "--suites",
                       "grid-bench", "--settings", "in-space", "--harnesses", "S0-T0-O0-C0-W0",
                       "--out", str(tmp_path / "e"), "-o", "nonsense=1", "--quiet")
    assert code == 2
    assert "suite grid-bench" in err
    assert "nonsense" in err
    assert "go to every suite" in err
    assert "Traceback" not in err


# -- 3. a judge without credentials is found out before the first episode -----------------------


@needs_litellm
def test_a_judge_without_a_key_is_refused_before_any_episode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite = f"pinchbench:{suite_dir(tmp_path / 'pb', HYBRID)}"
    code, out, err = cli(capsys, monkeypatch, "run", "--task", f"{suite}/task_01_keep_notes",
                         "--harness", "adapter:openclaw", "--policy", "null",
                         "--judge", "openai/gpt-4o-mini")
    assert code == 2, (out, err)
    assert out == "", (out, err)
    assert "judge openai/gpt-4o-mini: no API key" in err
    assert "OPENAI_API_KEY" in err
    assert "Traceback" not in err
    out_dir = tmp_path / "eval"
    code, _, err = cli(capsys, monkeypatch, "eval", "--policy", "null", "--suites", suite,
                       "--settings", "out-of-space", "--adapters", "openclaw", "--out",
                       str(out_dir), "--judge", "openai/gpt-4o-mini", "--quiet")
    assert code == 2
    assert "OPENAI_API_KEY" in err
    assert "Traceback" not in err
    assert not (out_dir / "results.jsonl").exists()


@needs_litellm
def test_a_judge_at_a_local_server_needs_no_key_and_its_failure_is_a_grade_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    root = suite_dir(tmp_path / "pb", HYBRID)
    harness = hg.compose(hg.FactorSpace.default().parse("S0-T0-O0-C0-W0"))
    with OpenAICompatServer([judge_reply(0.5), openai_text("no json here")]) as srv:
        suite = load_suite(f"pinchbench:{root}", judge="openai/test-judge",
                           judge_api_base=srv.base_url + "/v1")
        task = suite.get("task_01_keep_notes")
        suite.get("task_01_keep_notes").grader.check_ready()  # type: ignore[union-attr]
        graded = asyncio.run(run_episode(harness, task, ScriptedPolicy(empty=True)))
        broken = asyncio.run(run_episode(harness, task, ScriptedPolicy(empty=True)))
    assert graded.grading == "hybrid"
    assert graded.score == pytest.approx(0.8)
    assert graded.passed is False
    assert broken.score is None
    assert broken.grading == "ungraded"
    assert "judge reply is not a JSON object" in str(broken.grade_error)


# -- 4. the scripted oracle on tasks without a plan -------------------------------------------


def test_scripted_on_tasks_without_a_plan_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = suite_dir(tmp_path / "pb", HYBRID, REPLIED)
    suite = f"pinchbench:{root}"
    code, out, err = cli(capsys, monkeypatch, "run", "--task", f"{suite}/task_02_replied",
                         "--harness", "S0-T0-O0-C0-W0", "--policy", "scripted")
    assert code == 2
    assert out == ""
    assert "no oracle plan" in err
    assert "task_02_replied" in err
    assert "use a model policy" in err
    assert "Traceback" not in err
    code, _, err = cli(capsys, monkeypatch, "eval", "--policy", "scripted", "--suites",
                       f"examples,{suite}", "--settings", "in-space", "--harnesses",
                       "S0-T0-O0-C0-W0", "--out", str(tmp_path / "e"), "--quiet")
    assert code == 2, err
    assert "2 of 4 task(s) have no oracle plan" in err, err
    assert not (tmp_path / "e" / "results.jsonl").exists()
    # the library policy says so too: a policy error, not a score of 0
    task = load_suite(suite).get("task_02_replied")
    harness = hg.compose(hg.FactorSpace.default().parse("S0-T0-O0-C0-W0"))
    traj = asyncio.run(run_episode(harness, task, ScriptedPolicy()))
    assert traj.termination == "policy_error"
    assert traj.score is None
    assert "has no oracle plan" in str(traj.error)


# -- 5. null sends nothing; validate names weak graders -----------------------------------------


def test_null_sends_nothing_so_any_reply_checks_fail_it(tmp_path: Path) -> None:
    task = load_suite(f"pinchbench:{suite_dir(tmp_path / 'pb', REPLIED)}").get(
        "task_02_replied")
    from harnessgrid.engine.api import resolve_harness

    for address in ("adapter:openclaw", "S0-T0-O0-C0-W0"):
        traj = asyncio.run(run_episode(resolve_harness(address), task,
                                       ScriptedPolicy(empty=True)))
        assert traj.grade_error is None, address
        assert traj.score == 0.0, address
        assert not traj.passed, address
        assert all(not t.assistant.content and not t.assistant.tool_calls for t in traj.turns)


def test_validate_names_tasks_that_pass_under_null_as_weak_graders(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = f"pinchbench:{suite_dir(tmp_path / 'pb', REPLIED, ANYTHING)}"
    code, out, err = cli(capsys, monkeypatch, "tasks", "validate", suite, "--json")
    assert code == 1, err
    report = json.loads(out)
    assert report["weak_graders"] == ["task_03_anything"]
    by_id = {t["id"]: t for t in report["tasks"]}
    assert by_id["task_02_replied"]["null"] == "fails"
    assert by_id["task_02_replied"]["ok"]
    assert "weak grader" in by_id["task_03_anything"]["note"]
    code, out, _ = cli(capsys, monkeypatch, "tasks", "validate", suite)
    assert code == 1
    assert "weak grader: 1 task(s) pass under the null policy" in out
