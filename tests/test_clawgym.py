"""The ClawGym layout: the fixture suite loads, runs and grades through real sandboxes;
untrusted graders are contained; any suite exports to the layout and loads back.

External tasks have no oracle plans, so :data:`SOLUTIONS` holds hand-written ones: the
scripted policy plays them through a real harness to show each grader passes a correct
workspace and fails an untouched one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import harnessgrid as hg
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError
from harnessgrid.harness import Harness
from harnessgrid.models import Action
from harnessgrid.plugins.tasks import clawgym
from harnessgrid.plugins.tasks._clawgym_export import RegeneratedGrader
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import UNKNOWN_CATEGORY, GraderError, Task, TaskSuite, task_score
from harnessgrid.trajectory import Trajectory

FIXTURES = Path(__file__).parent / "fixtures" / "clawgym"
A = Action.of
SOLUTIONS: dict[str, tuple[Action, ...]] = {
    "sum_sales": (A("shell", command="ls -a /root/.openclaw/workspace"),
                  A("read", path="/root/.openclaw/workspace/data/sales.csv"),
                  A("write", path="/root/.openclaw/workspace/total.txt", content="150.25\n")),
    "archive_logs": (A("shell", command="mkdir archive && mv logs/*.log archive/"),),
    "fix_port": (A("edit", path="conf/server.ini", old="port = 8000", new="port = 9090"),),
    "hello_note": (A("write", path="note.md", content="# Hello\nWritten by the test oracle.\n"),),
}


def harness(code: str = "S0-T0-O0-C0-W0") -> Harness:
    return hg.compose(hg.FactorSpace.default().parse(code))


def play(task: Task, plan: tuple[Action, ...] | None = None, code: str = "S0-T0-O0-C0-W0",
         limits: EpisodeLimits | None = None) -> Trajectory:
    """The scripted oracle playing ``plan`` (None: the null policy)."""
    policy = ScriptedPolicy(empty=plan is None)
    if plan is not None:
        task = task.model_copy(update={"plan": plan})
    return asyncio.run(run_episode(harness(code), task, policy, limits))


@pytest.fixture(scope="module")
def suite() -> TaskSuite:
    return clawgym.load(str(FIXTURES))


def test_fixture_suite_loads(suite: TaskSuite) -> None:
    assert suite.name == f"clawgym:{FIXTURES}"
    tasks = {t.id: t for t in suite.tasks("eval")}
    assert sorted(tasks) == sorted(SOLUTIONS)
    assert tasks["fix_port"].mount_path == "/home/user/project"  # input_mount_dir
    assert tasks["archive_logs"].mount_path == clawgym.DEFAULT_MOUNT  # the default
    assert tasks["sum_sales"].category == "data"
    assert tasks["sum_sales"].plan == ()
    graders = {i: t.grader for i, t in tasks.items()}
    assert all(isinstance(g, clawgym.ClawGymGrader) for g in graders.values())
    assert {i: g.entry for i, g in graders.items()  # type: ignore[union-attr]
            } == {"sum_sales": "check.py", "archive_logs": "reward.sh",
                  "fix_port": "check.py", "hello_note": "check.py"}
    assert tasks["sum_sales"].source_dir == FIXTURES / "sum_sales" / "input_files"
    assert tasks["hello_note"].source_dir is None


@pytest.mark.parametrize(("task_id", "code"), [("sum_sales", "S0-T0-O0-C0-W0"),
                                               ("archive_logs", "S1-T2-O1-C0-W0"),
                                               ("fix_port", "S0-T1-O2-C0-W0"),
                                               ("hello_note", "S2-T0-O0-C0-W2")])
def test_fixture_solved_passes_and_untouched_fails(suite: TaskSuite, task_id: str,
                                                   code: str) -> None:
    task = suite.get(task_id)
    solved = play(task, SOLUTIONS[task_id], code)
    assert solved.grade_error is None, (solved.grade_error, solved.subscores)
    assert solved.passed, (solved.grade_error, solved.subscores)
    untouched = play(task, None, code)
    assert untouched.grade_error is None
    assert untouched.score is not None
    assert untouched.score < 1.0
    assert not untouched.passed


def test_paths_hold_and_the_agent_never_sees_reward(suite: TaskSuite) -> None:
    traj = play(suite.get("sum_sales"), SOLUTIONS["sum_sales"])
    listing = traj.turns[0].calls[0].result.output
    assert "data" in listing
    assert "reward" not in listing
    assert traj.subscores == {"total_written": 1.0, "total_correct": 1.0, "read_the_data": 1.0}


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / f"ws-{uuid.uuid4().hex[:6]}"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(exist_ok=True)
    return root


def test_reward_sh_entry_and_script_only_check(tmp_path: Path) -> None:
    """``grader="reward.sh"`` runs the canonical wrapper (check.py by absolute path under the
    mount); a check.py without grade() runs as ``python3 check.py WORKSPACE``."""
    task = clawgym.load(str(FIXTURES), grader="reward.sh").get("fix_port")
    assert task.grader is not None
    good = "[server]\nhost = 127.0.0.1\nport = 9090\nworkers = 2\n"
    assert task.grader.grade(workspace(tmp_path, {"conf/server.ini": good}), []) == {
        "reward": 1.0}
    half = good.replace("workers = 2", "workers = 3")
    assert task.grader.grade(workspace(tmp_path, {"conf/server.ini": half}), []) == {
        "reward": 0.5}
    note = clawgym.load(str(FIXTURES)).get("hello_note")
    assert note.grader is not None
    scores = note.grader.grade(workspace(tmp_path, {"note.md": "# Hello\nme\n"}), [])
    assert scores == {"heading": 1.0, "author_line": 1.0}


# --- untrusted graders ---------------------------------------------------------------------

def make_task(root: Path, check: str | None = None, reward_sh: str | None = None,
              **options: Any) -> Task:
    folder = root / f"task-{uuid.uuid4().hex[:6]}"
    (folder / "reward").mkdir(parents=True)
    (folder / "data_entry.json").write_text(json.dumps(
        {"task_id": folder.name, "user_query": "Do nothing.", "metadata": {}}))
    if check is not None:
        (folder / "reward" / "check.py").write_text(textwrap.dedent(check))
    if reward_sh is not None:
        (folder / "reward" / "reward.sh").write_text(textwrap.dedent(reward_sh))
    return clawgym.load(str(folder), **options).tasks()[0]


MALICIOUS = {
    "reads /etc/shadow": ("def grade(t, ws):\n    return {'x': float(len(open('/etc/shadow').read()) > 0)}\n",
                          "No such file or directory: '/etc/shadow'"),
    "reads /work": ("def grade(t, ws):\n    open('/work/shared/DESIGN.md').read()\n    return {'x': 1.0}\n",
                    "No such file or directory"),
    "network": ("import socket\ndef grade(t, ws):\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n    return {'x': 1.0}\n",
                "unreachable"),
    "infinite loop": ("def grade(t, ws):\n    while True:\n        pass\n", "timed out"),
    "huge output": ("def grade(t, ws):\n    print('x' * 20_000_000)\n    return {'x': 1.0}\n",
                    "output"),
    "not JSON": ("print('all good, full marks')\n", "printed no JSON scores"),
    "not a dict": ("def grade(t, ws):\n    return 'great'\n", "non-empty dict"),
    "exits non-zero": ("import sys\nsys.exit(3)\n", "exit code 3"),
    "raises": ("def grade(t, ws):\n    raise ValueError('bad grader')\n", "ValueError: bad grader"),
    "out of range": ("def grade(t, ws):\n    return {'x': 1.5}\n", "not a number in [0, 1]"),
    "NaN": ("def grade(t, ws):\n    return {'x': float('nan')}\n", "not a number in [0, 1]"),
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_check_is_a_grade_error(tmp_path: Path, case: str) -> None:
    source, message = MALICIOUS[case]
    task = make_task(tmp_path, check=source, grader_timeout_s=2)
    traj = play(task, None)
    # the (null) episode ran its course; only grading failed
    assert not traj.infra_failure
    assert traj.score is None
    assert traj.grading == "ungraded"
    assert traj.grade_error is not None
    assert message in traj.grade_error, traj.grade_error
    assert traj.grade_error.startswith("reward/check.py")


@pytest.mark.parametrize(("script", "message"), [
    ("echo 'looks fine'\n", "is not a number"),
    ("echo 2\n", "outside [0, 1]"),
    ("echo 1.0; exit 4\n", "exit code 4"),
    ("", "printed nothing"),
])
def test_bad_reward_sh_is_a_grade_error(tmp_path: Path, script: str, message: str) -> None:
    traj = play(make_task(tmp_path, reward_sh=script), None)
    assert traj.grade_error is not None
    assert message in traj.grade_error, traj.grade_error


def test_grader_cannot_reach_host_files_or_services(tmp_path: Path) -> None:
    """A grader that swallows its errors still sees nothing of the host and changes nothing:
    the score it reports is its own business, the host's state is not."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    planted = Path("/tmp") / f"hg-grader-canary-{uuid.uuid4().hex[:8]}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    hits: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            hits.append(listener.accept())

    thread = threading.Thread(target=accept)
    thread.start()
    check = f"""
    import os, socket
    def grade(t, ws):
        seen = 0
        for path in {[str(secret), "/work/main/pyproject.toml", "/etc/shadow",
                      os.path.expanduser("~/.bash_history")]!r}:
            try:
                open(path).read()
                seen += 1
            except OSError:
                pass
        try:
            socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=1)
            seen += 1
        except OSError:
            pass
        try:
            open({str(planted)!r}, "w").write("x")
        except OSError:
            pass
        return {{"nothing_seen": float(seen == 0)}}
    """
    try:
        traj = play(make_task(tmp_path, check=check), None)
    finally:
        thread.join()
        listener.close()
    assert traj.grade_error is None
    assert traj.subscores == {"nothing_seen": 1.0}
    assert not hits
    assert not planted.exists()
    assert secret.read_text() == "host secret\n"


# --- loader mistakes --------------------------------------------------------------------------

def entry_folder(root: Path, entry: object, raw: str | None = None) -> str:
    folder = root / "t1"
    folder.mkdir(parents=True)
    (folder / "data_entry.json").write_text(raw if raw is not None else json.dumps(entry))
    return str(folder)


@pytest.mark.parametrize(("entry", "raw", "message"), [
    ({"task_id": "a"}, None, "'user_query' is missing"),
    (None, "{not json", "cannot read it as JSON"),
    ([1, 2], None, "expected a JSON object"),
    ({"task_id": "a", "user_query": "x", "input_mount_dir": "input"}, None, "not an absolute path"),
    ({"task_id": "a", "user_query": "x", "input_mount_dir": "/usr/local/ws"}, None,
     "would hide /usr"),
    ({"task_id": "a", "user_query": "x", "input_mount_dir": os.path.realpath(sys.base_prefix)},
     None, f"would hide {os.path.realpath(sys.base_prefix)}"),
])
def test_bad_task_folders_are_broken_tasks(tmp_path: Path, entry: object, raw: str | None,
                                           message: str) -> None:
    """A folder that does not load is a broken task with the loader's error as its reason
    (the suite itself loads); asking for it is a ConfigError that gives the reason."""
    suite = clawgym.load(entry_folder(tmp_path, entry, raw))
    (bad,) = suite.broken
    assert suite.tasks() == []
    assert message in bad.reason
    assert bad.id == (entry.get("task_id") if isinstance(entry, dict) else "t1")
    with pytest.raises(ConfigError, match="is broken: .*" + re.escape(message)):
        suite.get(bad.id)


def test_bad_suite_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        clawgym.load(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="no task folders"):
        clawgym.load(str(tmp_path))
    with pytest.raises(ConfigError, match="unknown option"):
        clawgym.load(str(FIXTURES), judge="x")
    with pytest.raises(ConfigError, match="is not one of"):
        clawgym.load(str(FIXTURES), grader="make")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data_entry.json").write_text(
            json.dumps({"task_id": "same", "user_query": "x"}))
    with pytest.raises(ConfigError, match="task id 'same' is used by"):
        clawgym.load(str(tmp_path))
    assert clawgym.load(str(FIXTURES), split="train").splits.keys() == {"train"}


# --- export -----------------------------------------------------------------------------------

def test_export_in_process_graders_rebuild_by_id(tmp_path: Path) -> None:
    """``examples`` (Python graders) exports to check.py files that rebuild the task through
    harnessgrid; read back, the tasks keep their oracle plans and grade natively."""
    out = tmp_path / "out"
    report = clawgym.export_clawgym(hg.load_suite("examples"), out)
    assert report.exported == {"upper": "upper", "config": "config"}
    assert not report.skipped
    entry = json.loads((out / "upper" / "data_entry.json").read_text())
    assert entry["user_query"].startswith("Write the upper-cased")
    assert entry["input_mount_dir"] == "/workspace"
    assert (out / "upper" / "input_files" / "in.txt").read_text() == "hello world\n"
    assert "load_suite(SUITE).get(TASK_ID)" in (out / "upper" / "reward" / "check.py").read_text()
    # The exported check.py runs as a script wherever harnessgrid is installed.
    ws = workspace(tmp_path, {"out.txt": "HELLO WORLD\n"})
    run = subprocess.run([sys.executable, str(out / "upper" / "reward" / "check.py"), str(ws)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == {"exists": 1.0, "content": 1.0}
    back = clawgym.load(str(out))
    upper = back.get("upper")
    assert upper.plan == hg.load_suite("examples").get("upper").plan
    assert isinstance(upper.grader, RegeneratedGrader)
    assert play(upper, upper.plan).passed
    assert not play(upper, None).passed
    # Without native graders the check.py runs sandboxed, where harnessgrid is not installed:
    # a clear grade error, not a score.
    sandboxed = clawgym.load(str(out), native_graders=False).get("upper")
    traj = play(sandboxed, sandboxed.plan)
    assert traj.grade_error is not None
    assert "No module named 'harnessgrid'" in traj.grade_error


def test_export_file_graders_roundtrip_and_refusals(tmp_path: Path, suite: TaskSuite) -> None:
    out = tmp_path / "again"
    report = clawgym.export_clawgym(suite, out)
    assert sorted(report.exported) == sorted(SOLUTIONS)
    assert (out / "fix_port" / "reward" / "reward.sh").read_text() == \
        (FIXTURES / "fix_port" / "reward" / "reward.sh").read_text()
    assert os.access(out / "archive_logs" / "reward" / "reward.sh", os.X_OK)
    back = clawgym.load(str(out))
    task = back.get("fix_port")
    assert task.mount_path == "/home/user/project"
    assert isinstance(task.grader,
                                                                   clawgym.ClawGymGrader)
    assert play(task, SOLUTIONS["fix_port"]).passed
    with pytest.raises(ConfigError, match="not empty"):
        clawgym.export_clawgym(suite, out)
    # A function grader of a suite that cannot be rebuilt by name is skipped, with the reason.
    adhoc = TaskSuite(name="adhoc", splits={"eval": (hg.load_suite("examples").get("upper"),)})
    skipped = clawgym.export_clawgym(adhoc, tmp_path / "adhoc")
    assert not skipped.exported
    assert "cannot be rebuilt by name" in skipped.skipped["upper"]


@pytest.mark.slow
def test_export_generated_tasks_roundtrip(tmp_path: Path) -> None:
    """Generated ``grid-bench`` tasks (ids with '/') export, load back and still validate."""
    bench = hg.load_suite("grid-bench")
    report = clawgym.export_clawgym(bench, tmp_path / "bench", limit=3)
    assert all("/" not in folder for folder in report.exported.values())
    back = clawgym.load(str(tmp_path / "bench"))
    for original in bench.tasks()[:3]:
        task = back.get(original.id)
        assert task.plan == original.plan
        assert task.mount_path == original.mount_path
        assert play(task, task.plan).passed
        assert not play(task, None).passed


# --- fidelity (issue 14): the check's own reward, and categories the data does not give -----

SCRIPTS = Path(__file__).parent / "fixtures" / "clawgym_scripts"
REPORT = "orders: 3\ntotal: 20.00\n"


def test_an_empty_category_is_unknown_and_exports_back_empty(tmp_path: Path) -> None:
    """ClawGym's data leaves ``category`` empty and says no way to derive one: ``unknown``,
    never a made-up ``general``; a category the data gives is kept."""
    suite = clawgym.load(str(SCRIPTS))
    assert suite.get("weighted_report").category == UNKNOWN_CATEGORY == "unknown"
    assert suite.get("script_mean").category == "files"
    clawgym.export_clawgym(suite, tmp_path / "out")
    entry = json.loads((tmp_path / "out" / "weighted_report" / "data_entry.json").read_text())
    assert entry["metadata"]["category"] == ""


def test_a_script_check_is_scored_by_its_own_reward(tmp_path: Path) -> None:
    """The check prints an indented dict with its checks, two counts and its weighted
    ``reward``: the reward scores the task (0.8, where the mean of the checks is 0.67), the
    checks stay as sub-scores and the counts are left out with a warning."""
    task = clawgym.load(str(SCRIPTS)).get("weighted_report")
    traj = play(task, (A("write", path="report.txt", content=REPORT),))
    assert traj.grade_error is None
    assert traj.subscores == {"file_exists": 1.0, "totals_correct": 1.0, "summary_line": 0.0,
                              "reward": 0.8}
    assert traj.score == pytest.approx(0.8)
    assert not traj.passed
    assert [w.split(" = ")[0] for w in traj.meta["grade_warnings"]] == [
        "reward/check.py: 'passed'", "reward/check.py: 'total'"]
    full = play(task, (A("write", path="report.txt", content=REPORT + "summary: ok\n"),))
    assert full.score == 1.0
    assert full.passed


def test_reward_sh_averages_every_value_where_the_check_reports_a_reward(tmp_path: Path
                                                                        ) -> None:
    """ClawGym's canonical ``reward.sh`` averages every value the check prints — counts and
    the reward included — so here it leaves [0, 1] (a grade error); the check's own reward
    is what ``check.py`` grading uses."""
    ws = workspace(tmp_path, {"report.txt": REPORT})
    task = clawgym.load(str(SCRIPTS), grader="reward.sh").get("weighted_report")
    assert task.grader is not None
    with pytest.raises(GraderError, match="outside"):
        task.grader.grade(ws, [])
    by_check = clawgym.load(str(SCRIPTS)).get("weighted_report").grader
    assert by_check is not None
    assert task_score(by_check.grade(ws, [])) == pytest.approx(0.8)


def test_a_script_check_without_reward_is_the_mean_of_what_it_prints(tmp_path: Path) -> None:
    task = clawgym.load(str(SCRIPTS)).get("script_mean")
    assert task.grader is not None
    scores = task.grader.grade(workspace(tmp_path, {"done.txt": "done\n"}), [])
    assert scores == {"done_file": 1.0, "notes_file": 0.0}
    assert task_score(scores) == 0.5


@pytest.mark.parametrize(("printed", "expected", "total"), [
    ('{"a": 1, "reward": 0.25}', {"a": 1.0, "reward": 0.25}, 0.25),
    ("progress 1/2\n0.75", {"reward": 0.75}, 0.75),
    ('{"a": 1.0, "notes": "x", "reward": 1}', {"a": 1.0, "reward": 1.0}, 1.0),
    ('{"a": 0.5, "b": 1.0}', {"a": 0.5, "b": 1.0}, 0.75),
])
def test_check_output_rule(printed: str, expected: dict[str, float], total: float) -> None:
    from harnessgrid.plugins.tasks._sandboxed_grader import check_output_scores
    from harnessgrid.sandboxing.sandbox import CommandResult

    result = CommandResult(stdout=printed + "\n", stderr="", exit_code=0, timed_out=False,
                           truncated=False, duration_s=0.0)
    scores = check_output_scores(result, "reward/check.py")
    assert scores == expected
    assert task_score(scores) == pytest.approx(total)


def test_a_broken_folder_leaves_the_others_loaded(tmp_path: Path) -> None:
    root = tmp_path / "suite"
    shutil.copytree(SCRIPTS, root)
    (root / "zz_bad").mkdir()
    (root / "zz_bad" / "data_entry.json").write_text('{"task_id": "zz_bad"}')
    suite = clawgym.load(str(root))
    assert [t.id for t in suite.tasks()] == ["script_mean", "weighted_report"]
    (bad,) = suite.broken
    assert bad.id == "zz_bad"
    assert "'user_query' is missing" in bad.reason
    report = clawgym.export_clawgym(suite, tmp_path / "out")
    assert sorted(report.exported) == ["script_mean", "weighted_report"]
    assert report.skipped["zz_bad"].startswith("broken: ")


def test_the_report_says_when_a_category_is_unknown_and_lists_skipped_tasks() -> None:
    """Per-category tables show ``unknown (not in the data)`` with a note; broken tasks
    recorded in the manifest are listed as skipped with their reasons."""
    from harnessgrid.evaluation.manifest import Manifest, SuiteEntry
    from harnessgrid.evaluation.report import build_report
    from harnessgrid.evaluation.results import EvalResult
    from harnessgrid.evaluation.tables import render_markdown

    def result(task: str, category: str, passed: bool) -> EvalResult:
        return EvalResult(setting="in-space", suite="clawgym:x", task=task,
                          harness="S0-T0-O0-C0-W0", run=0, category=category,
                          termination="finished", score=float(passed), passed=passed)

    results = [result("a", "unknown", True), result("b", "unknown", False),
               result("c", "files", True)]
    manifest = Manifest(harnessgrid_version="0", created_at="", updated_at="", policy="p",
                        limits={}, space={}, holdout_seed=0, settings={}, runs=1,
                        suites={"clawgym:x": SuiteEntry(name="x", version="1",
                                                        tasks={"a": "", "b": "", "c": ""},
                                                        broken={"d": "no user_query"})})
    report = build_report(results, manifest)
    overall = {c.category: c for c in report.categories if c.setting == "overall"}
    assert list(overall) == ["files", "unknown"]  # the unknown one last
    assert overall["unknown"].pass_rate.mean == 0.5
    assert not overall["unknown"].known
    assert overall["files"].known
    assert overall["files"].tasks == 1
    assert [(s.suite, s.task, s.reason) for s in report.skipped] == [
        ("clawgym:x", "d", "no user_query")]
    text = render_markdown(report)
    assert "| unknown (not in the data) | 2 |" in text
    assert "no rule to derive one" in text
    assert "1 task(s) skipped" in text
    assert "| clawgym:x | d | no user_query |" in text
