"""The PinchBench format: tolerant parsing, sandboxed automated checks, and LLM-judge grading
over real HTTP against the scripted local server (canned judge replies).

External tasks have no oracle plans, so :data:`SOLUTIONS` holds hand-written ones that the
scripted policy plays through a real harness."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from servers import Canned, OpenAICompatServer, http_error, openai_text

import harnessgrid as hg
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action, ModelTurn
from harnessgrid.plugins.tasks import clawgym, pinchbench
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task, TaskSuite
from harnessgrid.trajectory import Trajectory

FIXTURES = Path(__file__).parent / "fixtures" / "pinchbench"
A = Action.of
SUMMARY = ("# Meeting summary\n\nDecisions: ship on Friday; drop the legacy CSV export.\n\n"
           "Action items: Ana - changelog; Bo - migration script; Chen - customer email.\n")
SOLUTIONS: dict[str, tuple[Action, ...]] = {
    "task_01_word_count": (A("read", path="poem.txt"), A("write", path="count.txt",
                                                         content="19\n")),
    "task_02_meeting_notes": (A("read", path="notes.txt"),
                              A("write", path="summary.md", content=SUMMARY)),
    "task_03_todo_cleanup": (
        A("write", path="done.txt", content="[x] renew passport\n[x] pay rent\n"),
        A("write", path="todo.txt",
          content="[ ] call the plumber\n[ ] book dentist\n[ ] fix bike light\n")),
}
needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                   reason="the judge needs the api extra (litellm)")
# litellm's pydantic models warn at import time about their own TypedDicts; not our concern.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")


def play(task: Task, plan: tuple[Action, ...] | None, code: str = "S0-T0-O0-C0-W0") -> Trajectory:
    harness = hg.compose(hg.FactorSpace.default().parse(code))
    if plan is not None:
        task = task.model_copy(update={"plan": plan})
    return asyncio.run(run_episode(harness, task, ScriptedPolicy(empty=plan is None)))


@pytest.fixture(scope="module")
def suite() -> TaskSuite:
    return pinchbench.load(str(FIXTURES))


def test_fixture_suite_parses(suite: TaskSuite) -> None:
    tasks = {t.id: t for t in suite.tasks("eval")}
    assert sorted(tasks) == sorted(SOLUTIONS)
    count, notes, todo = (tasks[i] for i in sorted(SOLUTIONS))
    # fenced front matter, {source, dest} from assets/, fenced python, extra section
    assert count.files == {"poem.txt": (FIXTURES / "assets/texts/poem.txt").read_bytes()}
    assert count.limits.wall_s == 90
    assert count.category == "text_processing"
    assert count.instruction.startswith("There is a short poem")
    assert "---" not in count.instruction
    assert count.metadata["graded_as"] == "automated"
    assert count.metadata["extra_sections"] == ["Additional Notes"]
    # unfenced front matter, bare-name file from the task's folder, weighted rubric
    assert notes.metadata["name"] == "Summarise Meeting Notes"
    assert set(notes.files) == {"notes.txt"}
    assert notes.metadata["graded_as"] == "ungraded"
    assert notes.metadata["criteria"] == [
        {"number": 1, "title": "Decisions captured", "weight": 0.6},
        {"number": 2, "title": "Owners of action items", "weight": 0.4}]
    # hybrid with bare (unfenced) check code: graded on the automated part without a judge
    assert todo.metadata["graded_as"] == "automated_only"
    grader = todo.grader
    assert isinstance(grader, pinchbench.PinchBenchGrader)
    assert grader.code is not None
    assert grader.code.startswith("def grade(transcript, workspace_path):")


@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_fixtures_without_a_judge(suite: TaskSuite, task_id: str) -> None:
    task = suite.get(task_id)
    solved, untouched = play(task, SOLUTIONS[task_id]), play(task, None)
    if task_id == "task_02_meeting_notes":  # judge-only: ungraded, never a silent 0
        for traj in (solved, untouched):
            assert traj.score is None
            assert traj.grade_error is not None
            assert traj.grade_error.startswith("ungraded: llm_judge task and no judge given")
        return
    assert untouched.grade_error is None
    assert not untouched.passed
    if task_id == "task_03_todo_cleanup":  # hybrid: the automated part only, never a pass
        assert set(solved.subscores) == {"done_file", "todo_file"}
        assert solved.score == 1.0
        assert solved.passed is None
        assert solved.grading == "automated_only"
        assert "judge's 50% of the rubric was not assessed" in str(solved.grading_note)
        return
    assert solved.passed, (solved.grade_error, solved.subscores)
    assert solved.grading == "automated", (solved.grade_error, solved.subscores)


def judge_reply(scores: dict[str, Any]) -> Canned:
    return openai_text(json.dumps({"scores": scores, "notes": "checked"}))


def judged(srv: OpenAICompatServer) -> TaskSuite:
    return pinchbench.load(str(FIXTURES), judge="openai/test-judge",
                           judge_api_base=srv.base_url + "/v1", judge_api_key="x")


@needs_litellm
def test_llm_judge_grades_with_weights_over_http(suite: TaskSuite) -> None:
    with OpenAICompatServer([judge_reply({"1": 1.0, "2": 0.5})]) as srv:
        task = judged(srv).get("task_02_meeting_notes")
        assert task.metadata["graded_as"] == "llm_judge"
        traj = play(task, SOLUTIONS["task_02_meeting_notes"])
    assert traj.grade_error is None
    assert traj.subscores == {"llm_judge": pytest.approx(0.8)}  # 0.6 * 1.0 + 0.4 * 0.5
    (request,) = srv.requests
    assert request.json["model"] == "test-judge"
    assert request.json["temperature"] == 0.0
    prompt = request.json["messages"][-1]["content"]
    for expected in ("Criterion 1: Decisions captured", "Owners of action items",
                     "summary.md", "Action items: Ana", "[assistant] CALL", "notes.txt"):
        assert expected in prompt, expected


@needs_litellm
def test_hybrid_is_the_mean_of_automated_and_judge() -> None:
    reply = openai_text('Here you go:\n```json\n{"scores": {"Correct split": 1, '
                        '"criterion 2": {"score": 0.5}}}\n```')
    with OpenAICompatServer([reply]) as srv:
        traj = play(judged(srv).get("task_03_todo_cleanup"), SOLUTIONS["task_03_todo_cleanup"])
    assert traj.subscores == {"automated": 1.0, "llm_judge": 0.75}
    assert traj.score == pytest.approx(0.875)
    assert not traj.passed


@needs_litellm
@pytest.mark.parametrize(("reply", "message"), [
    (openai_text("The agent did great, 10/10."), "not a JSON object"),
    (judge_reply({"1": 1.0}), "no score for criteria [2]"),
    (judge_reply({"1": 1.0, "2": 7}), "not a number in [0, 1]"),
    (http_error(400, message="bad model", retry_after_ms=None), "judge openai/test-judge failed"),
])
def test_judge_failures_are_grade_errors(reply: Canned, message: str) -> None:
    with OpenAICompatServer([reply]) as srv:
        traj = play(judged(srv).get("task_02_meeting_notes"), None)
    assert traj.score is None
    assert traj.grade_error is not None
    assert message in traj.grade_error, traj.grade_error


def test_automated_checks_run_sandboxed(tmp_path: Path) -> None:
    task_file = write(tmp_path, "task_09_peek.md", """\
        ---
        id: task_09_peek
        grading_type: automated
        ---
        ## Prompt
        Do nothing.
        ## Automated Checks
        ```python
        def grade(transcript, workspace_path):
            return {"peeked": float(len(open("/etc/shadow").read()) > 0)}
        ```
        """)
    traj = play(pinchbench.load(str(task_file)).tasks()[0], None)
    assert traj.grade_error is not None
    assert traj.grade_error.startswith(
        "automated checks failed with exit code 1: FileNotFoundError")


# --- tolerant parsing, and what is still refused ------------------------------------------

def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_tolerated_variations(tmp_path: Path) -> None:
    write(tmp_path, "kit/data/in.csv", "a,b\n")
    path = write(tmp_path, "suite/task_05_misc.md", """\
        id: task_05_misc
        grading_type: hybrid
        workspace_files:
          - {source: data/in.csv, dest: input/in.csv}
          - {path: notes/readme.txt, content: "inline\\n"}
        ## Prompt
        Read input/in.csv.
        ***
        ## Automated Checks
        Checked by the function below.
        ```python
        def grade(transcript, workspace_path):
            ## a comment that looks like a section heading
            return {"ok": 1.0}
        ```
        ## Grading Criteria
        - [ ] reads the file
        - [x] says what is in it
        ## Something Else
        ignored
        """)
    task = pinchbench.load(str(path.parent), assets=str(tmp_path / "kit")).tasks()[0]
    assert task.files == {"input/in.csv": b"a,b\n", "notes/readme.txt": "inline\n"}
    assert task.instruction == "Read input/in.csv."
    grader = task.grader
    assert isinstance(grader, pinchbench.PinchBenchGrader)
    assert grader.code is not None
    assert "## a comment" in grader.code
    assert task.metadata["extra_sections"] == ["Something Else"]
    assert [(c.number, c.title, c.weight) for c in grader.criteria] == [
        (1, "reads the file", None), (2, "says what is in it", None)]


def test_rubric_parsing() -> None:
    rubric = ("### Criterion 1: Accuracy (Weight: 70%)\nright numbers\n\n"
              "### Criterion 2: Style (weight: 0.2)\n\n### Criterion 3: Brevity\nshort\n")
    parsed = pinchbench.parse_rubric(rubric)
    assert [(c.number, c.title, c.weight, c.text) for c in parsed] == [
        (1, "Accuracy", 0.7, "right numbers"), (2, "Style", 0.2, ""), (3, "Brevity", None, "short")]
    from harnessgrid.plugins.tasks._judge import resolved_weights

    assert resolved_weights(parsed) == pytest.approx({1: 0.7, 2: 0.2, 3: 0.1})
    assert [c.title for c in pinchbench.parse_rubric("Judge the tone.")] == ["overall"]


@pytest.mark.parametrize(("text", "message"), [
    ("---\nid: x\n## Prompt\nhi\n", "never closed"),
    ("---\nid: [x\n---\n## Prompt\nhi\n", "not valid YAML"),
    ("---\nid: x\n---\n## Expected Behavior\nhi\n", "no '## Prompt' section"),
    ("---\nid: x\ngrading_type: vibes\n---\n## Prompt\nhi\n", "grading_type 'vibes'"),
    ("---\nid: x\ntimeout_seconds: soon\n---\n## Prompt\nhi\n", "timeout_seconds 'soon'"),
    ("---\nid: x\nworkspace_files: [missing.txt]\n---\n## Prompt\nhi\n", "not found"),
    ("---\nid: x\nworkspace_files: [{source: ../secret.txt}]\n---\n## Prompt\nhi\n",
     "outside the suite's folders"),
    ("---\nid: x\nworkspace_files: [{path: /etc/x, content: y}]\n---\n## Prompt\nhi\n",
     "must be a relative path"),
])
def test_broken_task_files_are_broken_tasks(tmp_path: Path, text: str, message: str) -> None:
    """The suite loads; the bad file is a broken task whose reason is the loader's error."""
    (tmp_path / "secret.txt").write_text("a host file beside the suite\n")
    path = tmp_path / "suite" / "task_x.md"
    path.parent.mkdir()
    path.write_text(text)
    suite = pinchbench.load(str(path.parent))
    (bad,) = suite.broken
    assert suite.tasks() == []
    assert message in bad.reason
    assert bad.source == str(path)
    assert bad.id == ("task_x" if message in ("never closed", "not valid YAML") else "x")
    with pytest.raises(ConfigError, match="is broken"):
        suite.get(bad.id)


def test_grader_problems_show_at_grading_time(tmp_path: Path) -> None:
    path = write(tmp_path, "task_06_nocheck.md", """\
        ---
        id: task_06_nocheck
        grading_type: automated
        ---
        ## Prompt
        Do nothing.
        ## Automated Checks
        Checked by hand.
        """)
    traj = play(pinchbench.load(str(path)).tasks()[0], None)
    assert traj.grade_error is not None
    assert "define no grade(" in traj.grade_error


def test_bad_suite_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        pinchbench.load(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="no task_"):
        pinchbench.load(str(tmp_path))
    with pytest.raises(ConfigError, match="unknown option"):
        pinchbench.load(str(FIXTURES), native_graders=True)
    with pytest.raises(ConfigError, match="assets folder"):
        pinchbench.load(str(FIXTURES), assets=str(tmp_path / "none"))


def test_export_to_clawgym(tmp_path: Path, suite: TaskSuite) -> None:
    """Automated checks become a ClawGym check.py (plus reward.sh); judged tasks are skipped
    with the reason. The exported task grades the same, through either entry point."""
    report = clawgym.export_clawgym(suite, tmp_path / "out")
    assert list(report.exported) == ["task_01_word_count"]
    assert "needs an LLM judge" in report.skipped["task_02_meeting_notes"]
    assert "needs an LLM judge" in report.skipped["task_03_todo_cleanup"]
    assert not (tmp_path / "out" / "task_02_meeting_notes").exists()
    for entry in ("check.py", "reward.sh"):
        task = clawgym.load(str(tmp_path / "out"), grader=entry).get("task_01_word_count")
        assert task.files == {}
        assert task.source_dir is not None
        assert play(task, SOLUTIONS["task_01_word_count"]).passed, entry
        assert not play(task, None).passed


# --- the public repository's layout, with one task's asset missing (issue 14) ---------------

REPO = Path(__file__).parent / "fixtures" / "pinchbench_repo"
REPO_SOLUTIONS: dict[str, tuple[Action, ...]] = {
    "task_00_sanity": (A("write", path="hello.txt", content="ready\n"),),
    "task_15_hybrid_weighted": (
        A("write", path="release.md", content="# Release 2.1\nStart-up is twice as fast.\n"),),
    "task_16_notes_in_scores": (
        A("write", path="checklist.txt", content="[x] backup\n[ ] restore test\n"),),
    "task_19_sales_total": (A("read", path="sales.csv"), A("write", path="total.txt",
                                                             content="250\n")),
}


@pytest.fixture(scope="module")
def repo() -> TaskSuite:
    return pinchbench.load(str(REPO))


def test_one_missing_asset_breaks_only_its_task(repo: TaskSuite) -> None:
    """task_20's ``GPT4.pdf`` is missing: the other tasks load and task_20 is reported broken
    with the missing file as its reason; asking for it says so."""
    assert [t.id for t in repo.tasks()] == sorted([*REPO_SOLUTIONS, "task_22_second_brain"])
    broken = {b.id: b.reason for b in repo.broken}
    assert set(broken) == {"task_20_eli5_pdf_summary"}
    assert "GPT4.pdf" in broken["task_20_eli5_pdf_summary"]
    assert "not found" in broken["task_20_eli5_pdf_summary"]
    with pytest.raises(ConfigError, match=r"task_20_eli5_pdf_summary.*is broken.*GPT4\.pdf"):
        repo.get("task_20_eli5_pdf_summary")
    sales = repo.get("task_19_sales_total")  # {source, dest} from the repository's assets/
    assert sales.files == {"sales.csv": (REPO / "assets/csvs/sales.csv").read_bytes()}


def test_multi_session_task_loads_with_its_sessions(repo: TaskSuite) -> None:
    """A ``sessions`` task is runnable: its first prompt is the instruction and the others
    follow in order; ``new_session`` is kept as upstream's runner keeps it (same workspace,
    same conversation)."""
    task = repo.get("task_22_second_brain")
    assert task.instruction.startswith("Please remember that my build server")
    assert task.followups == ("What is my build server called?",
                              "Which port does my build server use?")
    assert [s["id"] for s in task.metadata["sessions"]] == [
        "store", "recall_same_session", "recall_new_session"]
    assert task.metadata["sessions"][2]["new_session"] is True
    assert "multi-session" not in " ".join(b.reason for b in repo.broken)


SESSIONS_TASK = """\
    ---
    id: task_23_three_sessions
    grading_type: automated
    multi_session: true
    sessions:
      - id: first
        prompt: Write `a.txt` saying `one`.
      - id: second
        prompt: |
          Now write `b.txt` saying `two`.
      - id: third
        new_session: true
        prompt: Finally write `c.txt` saying `three`.
    ---
    ## Prompt
    This is a multi-session task; see the sessions in the front matter.
    ## Automated Checks
    ```python
    def grade(transcript, workspace_path):
        import os
        def said(name):
            path = os.path.join(workspace_path, name)
            return open(path).read().strip() if os.path.exists(path) else ""
        asked = [part.get("text", "") for event in transcript if event.get("type") == "message"
                 and event["message"]["role"] == "user" for part in event["message"]["content"]]
        return {"a": float(said("a.txt") == "one"), "b": float(said("b.txt") == "two"),
                "c": float(said("c.txt") == "three"),
                "asked_in_order": float(any("Finally write" in text for text in asked[2:]))}
    ```
    """


class SessionPlanPolicy(EpisodeStub):
    """Plays one plan per user message (the first instruction, then each follow-up), each
    action rendered by the harness, then finishes: a stand-in for a model that does what each
    session asks."""

    spec = "session-plans"

    def __init__(self, *plans: tuple[Action, ...]) -> None:
        self.plans = plans

    async def play(self, request: Any, episode: Bound) -> Any:
        state = request.state
        harness = episode.harness
        expected = harness.protocol.expected_turn(state)
        if expected is not None:
            if expected.kind in ("plan", "text"):
                return ModelTurn(content=expected.text or "Plan: do it, then finish.")
            return harness.render_action(expected.action, f"call_{state.turn + 1}", state)
        run = sum(m.kind in ("task", "followup") for m in state.history) - 1
        step = state.scratch.setdefault("session-plan", {}).get(run, 0)
        state.scratch["session-plan"][run] = step + 1
        plan = self.plans[run] if run < len(self.plans) else ()
        action = plan[step] if step < len(plan) else A("finish", message=f"session {run} done")
        return harness.render_action(action, f"call_{state.turn + 1}", state)


SESSION_PLANS = ((A("write", path="a.txt", content="one\n"),),
                 (A("write", path="b.txt", content="two\n"),),
                 (A("write", path="c.txt", content="three\n"),))


@pytest.mark.parametrize("code", ["S0-T0-O0-C0-W0", "adapter:openclaw"])
def test_multi_session_task_runs_each_session_then_grades_once(tmp_path: Path,
                                                               code: str) -> None:
    """As upstream's runner: each session's prompt is a further user message in the same
    conversation and workspace (``Session.send``), and the task is graded once, on the final
    workspace and the whole transcript."""
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.engine.runtime import run_task_episode

    task = pinchbench.load(str(write(tmp_path, "task_23_three_sessions.md",
                                     SESSIONS_TASK))).tasks()[0]
    assert len(task.followups) == 2
    traj = asyncio.run(run_task_episode(resolve_harness(code), task,
                                        SessionPlanPolicy(*SESSION_PLANS)))
    assert traj.task_id == "task_23_three_sessions"
    assert traj.suite == task.suite
    assert traj.grade_error is None, (traj.error, traj.subscores)
    assert traj.passed, (traj.error, traj.subscores)
    assert traj.meta["sessions"] == {"sent": 3, "total": 3}
    followups = [m.content for m in traj.history if m.kind == "followup"]
    assert followups == list(task.followups)


def test_run_episode_plays_every_session_so_every_runner_grades_the_whole_task(
        tmp_path: Path) -> None:
    """``eval`` (in-process, workers, Ray) and training rollouts all call ``run_episode``: a
    multi-session task must reach its grader with every session sent."""
    task = pinchbench.load(str(write(tmp_path, "task_23_three_sessions.md",
                                     SESSIONS_TASK))).tasks()[0]
    harness = hg.compose(hg.FactorSpace.default().parse("S0-T0-O0-C0-W0"))
    traj = asyncio.run(run_episode(harness, task, SessionPlanPolicy(*SESSION_PLANS)))
    assert traj.meta["sessions"] == {"sent": 3, "total": 3}
    assert traj.grade_error is None, (traj.error, traj.subscores)
    assert traj.passed, (traj.error, traj.subscores)


def test_a_multi_session_task_run_as_one_instruction_is_ungraded(tmp_path: Path) -> None:
    """A runner that sends only the first prompt (plain ``run_episode``) gets no score for it,
    saying why, rather than a score for a third of the task."""
    task = pinchbench.load(str(write(tmp_path, "task_23_three_sessions.md",
                                     SESSIONS_TASK))).tasks()[0]
    traj = play(task, SESSION_PLANS[0])
    assert traj.score is None
    assert traj.grade_error is not None
    assert traj.grade_error.startswith("ungraded:")
    assert "1 of its 3 sessions" in traj.grade_error


class ReplayFirstPlan(SessionPlanPolicy):
    """An oracle by capability, not by name: it declares that it plays the task's plan
    (``OraclePolicy``), as a plugin's replay policy would."""

    spec = "replay-plans"

    def plays_plan(self) -> bool:
        return True


def test_the_engine_asks_a_policy_whether_it_plays_the_plan_not_its_name(
        tmp_path: Path) -> None:
    """Found: the engine recognised the oracle by the name "scripted" (three places). Any
    policy that declares it plays the task's plan gets the one-instruction episode (ungraded,
    saying why) and is refused for sessions and ad-hoc instructions, naming itself; a policy
    named like the oracle that does not declare it plays every session."""
    from harnessgrid.engine.runtime import run_task_episode

    task = pinchbench.load(str(write(tmp_path, "task_23_three_sessions.md",
                                     SESSIONS_TASK))).tasks()[0]
    harness = hg.compose(hg.FactorSpace.default().parse("S0-T0-O0-C0-W0"))
    replay = ReplayFirstPlan(*SESSION_PLANS)
    traj = asyncio.run(run_episode(harness, task, replay))
    assert traj.meta.get("sessions") is None
    assert traj.grade_error is not None
    assert "1 of its 3 sessions" in traj.grade_error
    with pytest.raises(ConfigError, match="replay-plans policy plays one oracle plan"):
        asyncio.run(run_task_episode(harness, task, replay))
    with pytest.raises(ConfigError, match="replay-plans policy plays a task's oracle plan"):
        hg.run_agent("Write a.txt", tmp_path, harness="S0-T0-O0-C0-W0", policy=replay)
    named_like_it = SessionPlanPolicy(*SESSION_PLANS)
    named_like_it.spec = "scripted"
    whole = asyncio.run(run_episode(harness, task, named_like_it))
    assert whole.meta["sessions"] == {"sent": 3, "total": 3}
    assert whole.passed, (whole.error, whole.subscores)


@pytest.mark.parametrize("task_id", sorted(REPO_SOLUTIONS))
def test_every_good_task_runs(repo: TaskSuite, task_id: str) -> None:
    task = repo.get(task_id)
    solved = play(task, REPO_SOLUTIONS[task_id])
    assert solved.grade_error is None, (solved.grade_error, solved.subscores)
    assert solved.score == 1.0, (solved.grade_error, solved.subscores)
    # a hybrid without its judge has full marks on its automated part, and is still no pass
    partial = task.metadata["graded_as"] == "automated_only"
    assert solved.passed is (None if partial else True)
    assert solved.grading == task.metadata["graded_as"]


def test_non_numeric_sub_scores_are_skipped_with_a_warning(repo: TaskSuite) -> None:
    """Upstream averages only the numbers a check returns; so do we, and the trajectory
    records what was skipped."""
    traj = play(repo.get("task_16_notes_in_scores"), REPO_SOLUTIONS["task_16_notes_in_scores"])
    assert traj.subscores == {"backup_done": 1.0, "restore_listed": 1.0}
    assert traj.passed
    warnings = traj.meta["grade_warnings"]
    assert len(warnings) == 2
    assert "'reviewer_note'" in warnings[0]
    assert "skipped" in warnings[0]
    assert "'line_count' = None" in warnings[1]
    half = play(repo.get("task_16_notes_in_scores"),
                (A("write", path="checklist.txt", content="[x] backup\n"),))
    assert half.score == 0.5
    assert "grade_warnings" in half.meta


def test_a_check_with_no_numeric_score_is_a_grade_error(tmp_path: Path) -> None:
    path = write(tmp_path, "task_07_words.md", """\
        ---
        id: task_07_words
        grading_type: automated
        ---
        ## Prompt
        Do nothing.
        ## Automated Checks
        ```python
        def grade(transcript, workspace_path):
            return {"verdict": "fine"}
        ```
        """)
    traj = play(pinchbench.load(str(path)).tasks()[0], None)
    assert traj.grade_error is not None
    assert "no sub-score is a number" in traj.grade_error


@needs_litellm
def test_hybrid_applies_grading_weights(repo: TaskSuite) -> None:
    """grading_weights 0.4/0.6: automated 1.0 and judge 0.5 score 0.7 (the plain mean would be
    0.75); both parts stay as sub-scores."""
    with OpenAICompatServer([judge_reply({"1": 0.5})]) as srv:
        judged_repo = pinchbench.load(str(REPO), judge="openai/test-judge",
                                      judge_api_base=srv.base_url + "/v1", judge_api_key="x")
        task = judged_repo.get("task_15_hybrid_weighted")
        assert task.metadata["grading_weights"] == {"automated": 0.4, "llm_judge": 0.6}
        traj = play(task, REPO_SOLUTIONS["task_15_hybrid_weighted"])
    assert traj.grade_error is None
    assert traj.subscores == {"automated": 1.0, "llm_judge": 0.5}
    assert traj.score == pytest.approx(0.7)
    assert not traj.passed


@pytest.mark.parametrize(("weights", "expected"), [
    (None, (0.5, 0.5)), ({"automated": 0.6}, (0.6, 0.5)),
    ({"automated": 0, "llm_judge": 0}, (0.5, 0.5)), ({"automated": "x"}, "not numbers"),
    ([0.4, 0.6], "must map"), ({"automated": -1, "llm_judge": 2}, "must not be negative"),
])
def test_grading_weights_are_read_as_upstream(tmp_path: Path, weights: Any,
                                              expected: Any) -> None:
    front: dict[str, Any] = {"id": "task_08_w", "grading_type": "hybrid"}
    if weights is not None:
        front["grading_weights"] = weights
    path = tmp_path / "task_08_w.md"
    path.write_text("---\n" + json.dumps(front) + "\n---\n## Prompt\nhi\n## Automated Checks\n"
                    "def grade(transcript, workspace_path):\n    return {'x': 1.0}\n")
    suite = pinchbench.load(str(path))
    if isinstance(expected, str):
        assert expected in suite.broken[0].reason
        return
    grader = suite.tasks()[0].grader
    assert isinstance(grader, pinchbench.PinchBenchGrader)
    assert grader.weights == expected


@pytest.mark.slow
def test_an_evaluation_runs_the_good_tasks_and_reports_the_broken(tmp_path: Path) -> None:
    """End to end: ``evaluate`` over the public layout runs the good tasks and its report lists
    task_20 (missing asset) as skipped, with its reason. The tasks have no oracle plans, so
    the null policy runs them (the scripted one is refused: see test_cli_run)."""
    from harnessgrid.evaluation.manifest import read_manifest
    from harnessgrid.evaluation.report import build_report
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.evaluation.tables import render_markdown

    spec = f"pinchbench:{REPO}"
    config = EvalConfig(policy="null", suites=(spec,), settings=("in-space",),
                        harnesses=("S0-T0-O0-C0-W0",), runs=1)
    outcome = evaluate(config, tmp_path / "run")
    results = {r.task: r for r in outcome.results}
    assert sorted(results) == sorted([*REPO_SOLUTIONS, "task_22_second_brain"])
    assert not any(r.infra_failure or r.passed for r in results.values())
    manifest = read_manifest(tmp_path / "run")
    assert manifest is not None
    report = build_report(outcome.results, manifest)
    skipped = {s.task: s.reason for s in report.skipped}
    assert set(skipped) == {"task_20_eli5_pdf_summary"}
    assert "GPT4.pdf" in skipped["task_20_eli5_pdf_summary"]
    assert "1 task(s) skipped" in render_markdown(report, brief=True)


# --- file names that differ from the declared id (upstream: task_18_market_research.md declares
# task_16_market_research, task_19_spreadsheet_summary.md task_18_spreadsheet_summary) --------

RENAMED = """\
    ---
    id: {id}
    grading_type: automated
    {extra}
    ---
    ## Prompt
    Write `done.txt` saying `ok`.
    ## Automated Checks
    ```python
    def grade(transcript, workspace_path):
        import os
        path = os.path.join(workspace_path, "done.txt")
        return {{"done": float(os.path.exists(path) and open(path).read().strip() == "ok")}}
    ```
    """


def renamed_task(root: Path, file_name: str, task_id: str, extra: str = "") -> Path:
    return write(root, f"tasks/{file_name}.md", RENAMED.format(id=task_id, extra=extra))


def test_a_task_is_addressed_by_its_declared_id_or_its_file_name(tmp_path: Path) -> None:
    """The id wins (it names the task in results); the file name is an alias that finds the
    same task, also through the CLI's SUITE/ID address and for a broken task."""
    import shutil

    from harnessgrid.cli.tasks_cmd import find_task

    root = Path(shutil.copytree(REPO, tmp_path / "repo"))
    renamed_task(root, "task_18_market_research", "task_16_market_research")
    renamed_task(root, "task_19_spreadsheet_summary", "task_18_spreadsheet_summary")
    renamed_task(root, "task_30_missing_asset", "task_29_missing_asset",
                 "workspace_files: [nowhere.csv]")
    suite = pinchbench.load(str(root))
    ids = [t.id for t in suite.tasks()]
    assert {"task_16_market_research", "task_18_spreadsheet_summary"} <= set(ids)
    assert not {"task_18_market_research", "task_19_spreadsheet_summary"} & set(ids)
    market = suite.get("task_18_market_research")
    assert market.id == "task_16_market_research"
    assert suite.get("task_16_market_research") is market
    assert suite.split_of("task_19_spreadsheet_summary") == "eval"
    # task_18_spreadsheet_summary is an id (of task_19_spreadsheet_summary.md) and no file's
    # name clashes with it; the id is what it finds.
    assert suite.get("task_18_spreadsheet_summary").id == "task_18_spreadsheet_summary"
    _, by_address = find_task(f"pinchbench:{root}/task_18_market_research", [])
    assert by_address.id == "task_16_market_research"
    with pytest.raises(ConfigError, match=r"task_29_missing_asset.*is broken.*nowhere\.csv"):
        suite.get("task_30_missing_asset")
    traj = play(market, (A("write", path="done.txt", content="ok\n"),))
    assert traj.task_id == "task_16_market_research"
    assert traj.passed


def test_when_a_file_name_is_another_task_id_the_id_wins(tmp_path: Path) -> None:
    renamed_task(tmp_path, "task_40_first", "task_41_second")
    renamed_task(tmp_path, "task_41_second", "task_40_first")
    suite = pinchbench.load(str(tmp_path))
    for task_id in ("task_40_first", "task_41_second"):
        assert suite.get(task_id).id == task_id
