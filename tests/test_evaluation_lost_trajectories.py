"""A result whose trajectory is gone is run again on resume (security issue, finding 5).

``trajectories.jsonl`` may lose its tail other than by a killed writer (a full disk, a copy, a
sync tool) while ``results.jsonl`` keeps the results that point there; or a results line may
point past the end of the file. Resuming used to cut the torn line and keep those results as
done: never run again, and their trajectory failed to load. Now the store checks, on open, that
every stored result's trajectory reads back, and the episodes whose trajectory is lost run
again, with a line naming them and why."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

import pytest
from test_evaluation import ORIGINAL, install_plugin, plugin  # noqa: F401 (fixture)
from test_evaluation_cli import hg
from test_evaluation_store import lines, small

from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.run import evaluate
from harnessgrid.evaluation.store import (
    RESULTS,
    TRAJECTORIES,
    EvalStore,
    TrajectoryMissing,
    load_trajectory,
    read_results,
    read_superseded,
)

LOST = re.compile(r"re-running (\d+) episode\(s\) whose trajectory was lost")


def cut_to(path: Path, size: int) -> None:
    with path.open("rb+") as f:
        f.truncate(size)


def every_trajectory_loads(out: Path) -> list[EvalResult]:
    results = read_results(out)
    for result in results:
        assert load_trajectory(out, result).episode_id == result.episode_id
    return results


def lost_warnings(record: Iterable[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if LOST.search(str(w.message))]


@pytest.mark.usefixtures("plugin")
@pytest.mark.parametrize("cut", ["mid-line", "at a line end", "two lines"])
def test_a_trajectory_lost_from_the_tail_is_run_again(tmp_path: Path, cut: str) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    path = out / TRAJECTORIES
    first, second = lines(path)
    size = {"mid-line": len(first) + 1 + len(second) // 2,  # a copy stopped inside the line
            "at a line end": len(first) + 1,  # the whole last line gone
            "two lines": len(first) // 3}[cut]
    cut_to(path, size)
    before = read_results(out)
    lost = before[1:] if cut != "two lines" else before
    # the lost episodes, and (a line cut in the middle) the torn line set aside
    with pytest.warns(UserWarning, match=f"{LOST.pattern}|cut a torn last line") as record:
        outcome = evaluate(small(), out)  # type: ignore[arg-type]
    [said] = lost_warnings(record)
    assert LOST.search(said)[1] == str(len(lost))  # type: ignore[index]
    for result in lost:  # which episodes, and why
        assert result.episode_id in said
        assert result.task in said
    assert "trajectories.jsonl" in said
    assert (outcome.ran, outcome.skipped) == (len(lost), 2 - len(lost))
    results = every_trajectory_loads(out)
    assert len(results) == 2
    assert {r.key for r in results} == {r.key for r in before}
    assert {r.episode_id for r in results}.isdisjoint(r.episode_id for r in lost)
    # the lost results stay in the file for the audit trail, superseded
    assert {r.episode_id for r in read_superseded(out)} >= {r.episode_id for r in lost}

    with warnings.catch_warnings(record=True) as again:  # nothing lost: nothing run or said
        warnings.simplefilter("always")
        resumed = evaluate(small(), out)  # type: ignore[arg-type]
    assert not lost_warnings(again)
    assert (resumed.ran, resumed.skipped) == (0, 2)
    assert every_trajectory_loads(out) == results


@pytest.mark.usefixtures("plugin")
def test_a_result_pointing_past_the_end_of_the_file_is_run_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    stored = lines(out / RESULTS)
    record = json.loads(stored[0])
    record["traj_offset"] = 10**9
    (out / RESULTS).write_bytes(json.dumps(record).encode() + b"\n" + stored[1] + b"\n")
    with pytest.warns(UserWarning, match=LOST) as warned:
        outcome = evaluate(small(), out)  # type: ignore[arg-type]
    [said] = lost_warnings(warned)
    assert record["episode_id"] in said
    assert "beyond the end" in said
    assert (outcome.ran, outcome.skipped) == (1, 1)
    assert len(every_trajectory_loads(out)) == 2


@pytest.mark.usefixtures("plugin")
def test_a_lost_result_never_loads_another_episode_s_trajectory(tmp_path: Path) -> None:
    """After the cut and the re-run, the lost result's offset lies inside the new trajectory
    lines: loading it is refused, not answered with another episode's trajectory."""
    out = tmp_path / "run"
    evaluate(small(), out)  # type: ignore[arg-type]
    path = out / TRAJECTORIES
    first, _ = lines(path)
    cut_to(path, len(first) + 1)
    with pytest.warns(UserWarning, match=LOST):
        evaluate(small(), out)  # type: ignore[arg-type]
    superseded = read_superseded(out)  # the lost result, then the record saying so
    assert [r.trajectory_lost for r in superseded] == [False, True]
    gone, record = superseded
    assert record.episode_id == gone.episode_id
    assert record.traj_offset == -1
    assert gone.traj_offset < path.stat().st_size  # its offset holds something else now
    for result in superseded:
        with pytest.raises(TrajectoryMissing, match="not stored"):
            load_trajectory(out, result)
    with EvalStore(out) as store:  # and a later open counts nothing as lost or orphaned
        assert store.lost == set()
        assert store.recovered == 0


def test_the_cli_resume_says_what_it_runs_again(tmp_path: Path) -> None:
    env = install_plugin(tmp_path / "plugin")
    out = tmp_path / "run"
    args = ["eval", "--policy", "null", "--suites", "evaltest", "--settings", "original",
            "--original", ORIGINAL, "--runs", "1", "--max-turns", "12", "--out", str(out),
            "--no-report", "--quiet"]
    done = hg(env, *args)
    assert done.returncode == 0, done.stderr
    before = read_results(out)
    path = out / TRAJECTORIES
    cut_to(path, path.stat().st_size - 10)  # a sync tool stopped 10 bytes short
    resumed = hg(env, *args)
    assert resumed.returncode == 0, resumed.stderr
    said = LOST.search(resumed.stderr)
    assert said, resumed.stderr
    assert said[1] == "1", resumed.stderr
    assert before[-1].episode_id in resumed.stderr
    results = every_trajectory_loads(out)
    assert len(results) == 2
    assert results[-1].episode_id != before[-1].episode_id
    again = hg(env, *args)
    assert again.returncode == 0, again.stderr
    assert not LOST.search(again.stderr), again.stderr
    assert every_trajectory_loads(out) == results
