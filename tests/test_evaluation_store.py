"""The result store: a killed evaluation resumes with nothing lost or counted twice; torn lines
and orphaned trajectories are repaired; incompatible runs are refused; two writers never share
a directory."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import sigint_default
from test_evaluation import ORIGINAL, config, install_plugin, plugin  # noqa: F401 (fixture)

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.manifest import read_manifest
from harnessgrid.evaluation.report import load_report
from harnessgrid.evaluation.results import ResultKey
from harnessgrid.evaluation.run import evaluate
from harnessgrid.evaluation.store import RESULTS, TRAJECTORIES, EvalStore, read_results

#: `harnessgrid` with the eval and report commands registered (if core does not yet).
CLI = """
import harnessgrid.cli as cli
from harnessgrid.cli.eval_cmd import eval_command, report_command
names = {c.name for c in cli.app.registered_commands}
if "eval" not in names:
    cli.app.command("eval")(eval_command)
if "report" not in names:
    cli.app.command("report")(report_command)
cli.main()
"""


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


#: Seconds a process may take, or a running evaluation may store nothing new, before it
#: counts as hung. Only a guard against a hang (issue 28: under load 5-14 on 2 cores an
#: evaluation stored its first results only after the 60 s these tests once allowed).
HANG_S = 600.0


def wait_for_results(out: Path, n: int, proc: subprocess.Popen[str],
                     stall_s: float = HANG_S) -> None:
    """Until ``out`` holds at least ``n`` results. Fails when ``proc`` ends first, or when it
    stores no new result for ``stall_s`` seconds (it hangs): progress, not speed, is checked."""
    stored, progressed = -1, time.monotonic()
    while (count := len(lines(out / RESULTS))) < n:
        assert proc.poll() is None, proc.communicate()
        if count != stored:
            stored, progressed = count, time.monotonic()
        assert time.monotonic() - progressed < stall_s, (
            f"the evaluation stored no new result for {stall_s:g}s ({count} of {n}): it hangs")
        time.sleep(0.02)


def test_killed_evaluation_resumes_with_exactly_one_result_per_key(tmp_path: Path) -> None:
    """Interrupt (Ctrl-C), then kill -9 mid-run, then finish: 76 keys, each stored once, the
    results stored before each interruption kept as they were, and the same numbers as an
    uninterrupted run."""
    env = install_plugin(tmp_path / "plugin")
    out = tmp_path / "run"
    # 0.05 s per model call: the whole evaluation takes several seconds, so a test process
    # that a busy machine does not schedule for a moment still interrupts it mid-run (at
    # 0.01 s it once finished all 76 keys before the Ctrl-C arrived)
    args = [sys.executable, "-c", CLI, "eval", "--policy", "xmlfail", "--policy-opt",
            "delay=0.05", "--suites", "evaltest", "--settings", "in-space,original",
            "--original", ORIGINAL, "--runs", "2", "--concurrency", "2", "--out", str(out),
            "--max-turns", "12", "--no-report", "--quiet"]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=sigint_default)

    proc = start()
    wait_for_results(out, 8, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130, err
    assert "re-run the same command to resume" in err
    first = lines(out / RESULTS)
    assert 8 <= len(first) < 76

    proc = start()
    wait_for_results(out, len(first) + 8, proc)
    proc.kill()  # SIGKILL: no clean-up at all
    proc.wait()
    second = lines(out / RESULTS)
    assert second[:len(first)] == first
    assert len(second) < 76

    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=HANG_S,
                          check=False)
    assert done.returncode == 0, done.stderr
    final = lines(out / RESULTS)
    assert final[:len(second) - 1] == second[:-1]  # at most a torn last line was cut
    results = read_results(out)
    keys = [r.key for r in results]
    assert len(final) == len(keys) == len(set(keys)) == 76  # 2 tasks × 19 harnesses × 2 runs
    manifest = read_manifest(out)
    assert manifest is not None
    assert set(keys) == manifest.expected_keys()
    trajectories = [json.loads(line) for line in lines(out / TRAJECTORIES)]
    traj_keys = [tuple(t["meta"]["eval"][k] for k in ResultKey._fields) for t in trajectories]
    assert len(traj_keys) == len(set(traj_keys)) == 76
    report = load_report(out)
    assert report.suite_cell("evaltest", "in-space").pass_rate.mean == 0.5  # type: ignore[union-attr]
    assert report.suite_cell("evaltest", "original").pass_rate.mean == 1.0  # type: ignore[union-attr]
    assert report.missing == 0


def small(**update: object) -> object:
    return config(**{"suites": ("evaltest",), "settings": ("original",), "runs": 1, **update})


@pytest.mark.usefixtures("plugin")
def test_torn_last_lines_are_cut_and_kept_aside(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    (out / RESULTS).open("ab").write(b'{"setting": "orig')
    (out / TRAJECTORIES).open("ab").write(b'{"episode_id": "abc", "turns": [')
    with pytest.warns(UserWarning, match="torn last line"):
        outcome = evaluate(small(runs=2), out)  # type: ignore[arg-type]
    assert (outcome.skipped, outcome.ran) == (2, 2)
    assert len(read_results(out)) == len(lines(out / RESULTS)) == 4
    assert len(lines(out / TRAJECTORIES)) == 4
    assert (out / (RESULTS + ".torn")).read_bytes() == b'{"setting": "orig\n'


@pytest.mark.usefixtures("plugin")
def test_trajectory_without_result_is_recovered_not_rerun(tmp_path: Path) -> None:
    """Killed between the two appends: the trajectory's own key rebuilds its result."""
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    stored = lines(out / RESULTS)
    (out / RESULTS).write_bytes(stored[0] + b"\n")  # the second result never made it
    outcome = evaluate(small(), out)  # type: ignore[arg-type]
    assert (outcome.recovered, outcome.ran, outcome.skipped) == (1, 0, 2)
    assert lines(out / RESULTS) == stored  # rebuilt byte for byte
    assert len(lines(out / TRAJECTORIES)) == 2
    assert {r.key for r in read_results(out)} == {
        ResultKey("original", "evaltest", t, ORIGINAL, 0) for t in ("upper", "config")}


@pytest.mark.usefixtures("plugin")
def test_incompatible_parameters_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    cases: list[tuple[dict[str, object], str]] = [
        ({"policy": "scripted"}, 'policy: stored "xmlfail", now "scripted"'),
        ({"limits": EpisodeLimits(max_turns=5)}, "limits:"),
        ({"original": "S1-T0-O0-C2-W2"}, "original harnesses"),
        ({"policy_options": {"temperature": 0.5}}, "policy_options"),
    ]
    for update, message in cases:
        with pytest.raises(ConfigError) as err:
            evaluate(small(**update), out)  # type: ignore[arg-type]
        assert message in str(err.value)
        assert "fresh --out DIR" in str(err.value)
    assert len(read_results(out)) == 2  # nothing was run or written


@pytest.mark.usefixtures("plugin")
def test_a_run_may_grow_by_runs_suites_and_settings(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    grown = evaluate(small(runs=2, suites=("evaltest", "examples"),  # type: ignore[arg-type]
                           settings=("original", "out-of-space")), out)
    assert (grown.skipped, grown.ran) == (2, 22)  # (2 + 2 tasks) × 3 harnesses × 2 runs - 2
    manifest = read_manifest(out)
    assert manifest is not None
    assert manifest.runs == 2
    assert set(manifest.suites) == {
        "evaltest", "examples"}
    assert len(manifest.expected_keys()) == 24 == len(read_results(out))


@pytest.mark.usefixtures("plugin")
def test_secrets_in_policy_options_are_not_written(tmp_path: Path) -> None:
    evaluate(small(policy_options={"api_key": "sk-123", "temperature": 0}),  # type: ignore[arg-type]
             tmp_path / "run")
    text = (tmp_path / "run" / "manifest.json").read_text()
    assert "sk-123" not in text
    assert '"temperature": 0' in text


def test_two_writers_never_share_a_directory(tmp_path: Path) -> None:
    with EvalStore(tmp_path / "run"), pytest.raises(
            ConfigError, match="being written by another evaluation"):
        EvalStore(tmp_path / "run").open()
    with EvalStore(tmp_path / "run") as store:  # released: usable again
        assert store.done == set()


@pytest.mark.usefixtures("plugin")
def test_results_without_manifest_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    (out / "manifest.json").unlink()
    with pytest.raises(ConfigError, match=r"holds results but no manifest\.json"):
        evaluate(small(), out)  # type: ignore[arg-type]


def test_a_result_carries_every_field_it_shares_with_its_trajectory() -> None:
    """Issue 42: the results record copied the trajectory's fields by hand, one line each. The
    fields both models declare are copied as they stand, whatever is added to both later; the
    four both declare with another meaning are the result's own."""
    from harnessgrid.evaluation.results import COPIED, EvalResult, tag_trajectory
    from harnessgrid.trajectory import Trajectory

    assert {"score", "passed", "subscores", "termination", "grading", "tokens_in",
            "tokens_out", "wall_s", "model_s", "tools_s", "harness_s", "wait_s", "grade_s",
            "episode_id"} <= set(COPIED)
    assert not {"harness", "suite", "error", "turns"} & set(COPIED)
    traj = Trajectory(episode_id="e1", harness="Shell 1.0", task_id="t", suite="s",
                      policy="p", termination="finished", score=0.5, passed=False,
                      subscores={"a": 0.5}, tokens_in=7, tokens_out=3, wall_s=2.0,
                      model_s=1.25, tools_s=0.5, harness_s=0.125, wait_s=0.0625, grade_s=0.25,
                      error="x" * 600)
    tag_trajectory(traj, ResultKey("in-space", "spec", "t", "S0-T0-O0-C0-W0", 1), ("tag",),
                   "general")
    result = EvalResult.from_trajectory(traj, offset=9)
    assert {name: getattr(result, name) for name in COPIED} == {
        name: getattr(traj, name) for name in COPIED}
    assert (result.harness, result.harness_name, result.suite) == ("S0-T0-O0-C0-W0",
                                                                   "Shell 1.0", "spec")
    assert result.error == "x" * 500
    assert (result.turns, result.traj_offset, result.finished_at) == (0, 9, traj.started_at + 2)
