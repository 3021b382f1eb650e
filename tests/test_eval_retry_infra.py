"""Infrastructure failures (policy, sandbox or internal errors) are told apart from the agent
failing: ``harnessgrid run`` exits 3 and prints the error as text; ``harnessgrid eval`` says how
many episodes failed and why, and exits 3 when all did; a re-run of the same ``eval`` runs the
failed episodes again (``--keep-failures`` keeps them), appending, never rewriting: the failed
records stay in the files, reports count each episode once.

Policies fail for real: litellm against a local OpenAI-compatible server that answers 401 to a
wrong key or 500, and a policy object that raises while it is "down".
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub
from servers import OpenAICompatServer, http_error, openai_text

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.evaluation.report import load_report
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.run import EvalConfig, evaluate
from harnessgrid.evaluation.store import (
    RESULTS,
    TRAJECTORIES,
    EvalStore,
    read_history,
    read_results,
    read_superseded,
)
from harnessgrid.models import ModelTurn
from harnessgrid.policies import PolicyRequest

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")

HARNESSES = ("S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1")
needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                   reason="needs the api extra: pip install 'harnessgrid[api]'")


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def hg_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args],
                          env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                          capture_output=True, text=True, timeout=300, check=False)


def litellm_opts(srv: OpenAICompatServer, key: str, max_retries: int = 4) -> list[str]:
    return ["--policy", "litellm:openai/test-model",
            "--policy-opt", f"api_base={srv.base_url}/v1", "--policy-opt", f"api_key={key}",
            "--policy-opt", f"max_retries={max_retries}", "--policy-opt", "backoff_s=1.0"]


# --- harnessgrid run ----------------------------------------------------------------------------


@needs_litellm
def test_run_with_a_rejected_key_exits_3_with_the_error_as_text() -> None:
    """401: one request (no retries), exit 3, a one-line summary then the error, no table and
    no traceback (was: exit 0, a 120-line table with a traceback in a cell, after 17-23 s)."""
    with OpenAICompatServer([openai_text("unused")] * 5, api_key="sk-right") as srv:
        out = hg_cli("run", "--task", "examples/upper", "--harness", HARNESSES[0],
                     *litellm_opts(srv, "sk-wrong"))
        requests = len(srv.requests)
    assert out.returncode == 3, out.stderr
    assert requests == 1
    assert out.stdout.splitlines() == [out.stdout.strip()]  # one summary line
    assert "infrastructure failure (policy_error) after 0 turn(s)" in out.stdout
    assert "error: PolicyError: litellm:openai/test-model: request rejected: the API key was " \
           "rejected (HTTP 401)" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert "│" not in out.stdout
    assert "overloaded" not in out.stderr
    assert len(out.stdout.splitlines()) + len(out.stderr.splitlines()) <= 6


@needs_litellm
def test_run_json_also_exits_3() -> None:
    script = [http_error(500, message="model server crashed", retry_after_ms=None)]
    with OpenAICompatServer(script) as srv:
        out = hg_cli("run", "--task", "examples/upper", "--harness", HARNESSES[0],
                     *litellm_opts(srv, "sk-x", max_retries=0), "--json")
    assert out.returncode == 3, out.stderr
    result = json.loads(out.stdout)
    assert result["termination"] == "policy_error"
    assert "model server crashed" in result["error"]
    assert "error: PolicyError" in out.stderr
    assert "Traceback" not in out.stderr


@needs_litellm
def test_run_where_the_agent_fails_the_task_exits_0() -> None:
    """A model that answers but does not solve the task is a result, not an error."""
    with OpenAICompatServer([openai_text("I give up.")] * 3) as srv:
        out = hg_cli("run", "--task", "examples/upper", "--harness", HARNESSES[0],
                     *litellm_opts(srv, "sk-x"), "--max-turns", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["termination"] != "policy_error"


# --- harnessgrid eval: summary, exit status, retry on re-run ------------------------------------


@needs_litellm
def test_eval_with_a_wrong_key_then_fixed_reruns_the_failures(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    base = ["eval", "--suites", "examples", "--settings", "in-space", "--harnesses",
            ",".join(HARNESSES), "--runs", "1", "--limit", "1", "--max-turns", "1",
            "--concurrency", "1", "--out", str(out), "--no-plots"]
    with OpenAICompatServer([openai_text("done")] * 20, api_key="sk-right") as srv:
        # 1. the wrong key: every episode an infrastructure failure → exit 3 and why
        first = hg_cli(*base, *litellm_opts(srv, "sk-wrong"))
        assert first.returncode == 3, first.stderr
        assert len(srv.requests) == 2  # one per episode: a 401 is not retried
        assert "infrastructure failures: all 2 of 2 episode(s) (1 distinct reason(s))" \
            in first.stderr
        assert "2 × policy_error: PolicyError: litellm:openai/test-model: request rejected: " \
               "the API key was rejected (HTTP 401)" in first.stderr
        assert len(lines(out / RESULTS)) == 2

        # 2. --keep-failures: nothing runs, still all failed → exit 3
        kept = hg_cli(*base, *litellm_opts(srv, "sk-wrong"), "--keep-failures")
        assert kept.returncode == 3, kept.stderr
        assert "nothing to run: all 2 episode(s) already stored (2 of them infrastructure " \
               "failures, kept by --keep-failures)" in kept.stderr
        assert len(srv.requests) == 2
        assert len(lines(out / RESULTS)) == 2

        # 3. the key fixed, same command: the failed episodes run again
        fixed = hg_cli(*base, *litellm_opts(srv, "sk-right"))
        assert fixed.returncode == 0, fixed.stderr
        assert "2 episode(s) run, 0 already stored, 2 infrastructure failure(s) retried" \
            in fixed.stderr
        assert "infrastructure failures:" not in fixed.stderr
        assert len(srv.requests) == 4

        # 4. and once more: nothing left to run
        again = hg_cli(*base, *litellm_opts(srv, "sk-right"))
        assert again.returncode == 0, again.stderr
        assert "nothing to run: all 2 episode(s) already stored" in again.stderr
        assert len(srv.requests) == 4

    # append-only: the failed records and their trajectories are still in the files
    assert len(lines(out / RESULTS)) == len(lines(out / TRAJECTORIES)) == 4
    effective = read_results(out)
    assert len(effective) == 2
    assert not any(r.infra_failure for r in effective)
    superseded = read_superseded(out)
    assert len(superseded) == 2
    assert all(r.termination == "policy_error" for r in superseded)
    assert {r.key for r in superseded} == {r.key for r in effective}
    report = load_report(out)
    assert (report.episodes, report.infra_failures, report.missing) == (2, 0, 0)


@needs_litellm
def test_eval_with_some_failures_exits_0_and_says_how_many(tmp_path: Path) -> None:
    script = [http_error(500, message="GPU fell off the bus", retry_after_ms=None),
              openai_text("done")]
    with OpenAICompatServer(script) as srv:
        done = hg_cli("eval", "--suites", "examples", "--settings", "in-space",
                      "--harnesses", ",".join(HARNESSES), "--runs", "1", "--limit", "1",
                      "--max-turns", "1", "--concurrency", "1", "--out", str(tmp_path / "e"),
                      "--no-report", "--quiet", *litellm_opts(srv, "sk-x", max_retries=0))
    assert done.returncode == 0, done.stderr
    assert "infrastructure failures: 1 of 2 episode(s) (1 distinct reason(s))" in done.stderr
    assert "GPU fell off the bus" in done.stderr


# --- the store: superseding, history, kill -9 recovery -----------------------------------------


class Switch(EpisodeStub):
    """The oracle, or an API that is down (every call raises) while ``down``."""

    spec = "switch"

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        self.calls += 1
        if self.down:
            raise ConnectionError("model API unreachable")
        return await episode.oracle.act(request)


def config(**update: Any) -> EvalConfig:
    base: dict[str, Any] = {"policy": "switch", "suites": ("examples",),
                            "settings": ("in-space",), "harnesses": HARNESSES, "runs": 1,
                            "concurrency": 2, "limits": EpisodeLimits(max_turns=12)}
    return EvalConfig(**{**base, **update})


def test_rerun_retries_infra_failures_and_keeps_their_records(tmp_path: Path) -> None:
    out, policy = tmp_path / "run", Switch()
    first = evaluate(config(), out, policy=policy)
    assert (first.ran, first.retried, len(first.infra_failures)) == (4, 0, 4)

    kept = evaluate(config(keep_failures=True), out, policy=policy)
    assert (kept.ran, kept.skipped, len(kept.infra_failures)) == (0, 4, 4)

    policy.down, calls = False, policy.calls
    second = evaluate(config(), out, policy=policy)
    assert (second.ran, second.skipped, second.retried) == (4, 0, 4)
    assert policy.calls > calls
    assert second.infra_failures == []
    assert all(r.passed for r in second.results)

    third = evaluate(config(), out, policy=policy)
    assert (third.ran, third.skipped) == (0, 4)

    assert len(lines(out / RESULTS)) == len(lines(out / TRAJECTORIES)) == 8
    history = read_history(out)
    assert len(history) == 4
    for results in history.values():
        assert [r.termination for r in results] == ["policy_error", "finished"]
        assert results[0].traj_offset < results[1].traj_offset
    report = load_report(out)
    assert (report.episodes, report.scored, report.passed, report.infra_failures) == (4, 4, 4, 0)
    assert report.pass_rate == 1.0


def test_a_second_infra_failure_supersedes_the_first(tmp_path: Path) -> None:
    out, policy = tmp_path / "run", Switch()
    evaluate(config(harnesses=HARNESSES[:1]), out, policy=policy)
    again = evaluate(config(harnesses=HARNESSES[:1]), out, policy=policy)
    assert (again.ran, again.retried, len(again.infra_failures)) == (2, 2, 2)
    assert len(read_results(out)) == 2
    assert len(read_superseded(out)) == 2
    assert all(len(h) == 2 for h in read_history(out).values())


def test_killed_retry_is_recovered_from_its_trajectory(tmp_path: Path) -> None:
    """kill -9 between the retry's two appends: its trajectory is there, its result is not.
    Opening the store rebuilds the result, which supersedes the stored failure: nothing is
    run again, nothing counted twice."""
    failed, passed = tmp_path / "failed", tmp_path / "passed"
    evaluate(config(), failed, policy=Switch())
    healthy = Switch()
    healthy.down = False
    evaluate(config(), passed, policy=healthy)
    with (failed / TRAJECTORIES).open("ab") as f:  # the retry's trajectories, no results
        for line in lines(passed / TRAJECTORIES):
            f.write(line + b"\n")
    with EvalStore(failed) as store:
        assert store.recovered == 4
        assert store.failed == set()
        assert len(store.superseded) == 4
    outcome = evaluate(config(), failed, policy=Switch())  # down again: must not be called
    assert (outcome.ran, outcome.skipped, outcome.recovered) == (0, 4, 0)
    assert all(r.passed for r in read_results(failed))
    assert len(lines(failed / RESULTS)) == 8
    assert load_report(failed).episodes == 4


def test_a_result_after_a_real_result_is_still_a_duplicate(tmp_path: Path) -> None:
    healthy = Switch()
    healthy.down = False
    evaluate(config(harnesses=HARNESSES[:1]), tmp_path, policy=healthy)
    first = lines(tmp_path / RESULTS)[0]
    with (tmp_path / RESULTS).open("ab") as f:
        f.write(first + b"\n")
    with pytest.warns(UserWarning, match="ignored 1 duplicate"):
        results, superseded = read_results(tmp_path), read_superseded(tmp_path)
    assert len(results) == 2
    assert superseded == []
    with (pytest.warns(UserWarning, match="ignored 1 duplicate"),
          pytest.raises(RuntimeError, match="already stored"), EvalStore(tmp_path) as store):
        store.extend([EvalResult.model_validate_json(first)])


def test_the_lock_still_holds_during_a_retry(tmp_path: Path) -> None:
    from harnessgrid.errors import ConfigError

    evaluate(config(harnesses=HARNESSES[:1]), tmp_path, policy=Switch())
    with EvalStore(tmp_path), pytest.raises(ConfigError, match="being written"):
        evaluate(config(harnesses=HARNESSES[:1]), tmp_path, policy=Switch())
