"""``harnessgrid demo`` (trainer/demo.py): the pipeline completes and its report is
well-formed. The numbers are not asserted (they are the demo's finding, not a property)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harnessgrid.trainer.demo import CONDITIONS, design_codes, format_table, single_harness, table


def test_conditions_train_on_their_designs_and_single_is_never_held_out() -> None:
    from harnessgrid.designs import holdout, orthogonal_design
    from harnessgrid.plugins.micro import MICRO_SPACE

    oa = orthogonal_design(MICRO_SPACE)
    held_out = set(holdout(oa, 18, 0).codes)
    assert design_codes(CONDITIONS["single"], 0) == [single_harness()]
    assert single_harness() not in held_out
    assert design_codes(CONDITIONS["oa-18"], 0) == oa.codes
    assert len(design_codes(CONDITIONS["random-18"], 0)) == 18
    assert len(design_codes(CONDITIONS["first-order-3"], 0)) == 3
    assert not set(design_codes(CONDITIONS["oa-18"], 0)) & held_out


ORPHAN_SCRIPT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from harnessgrid.trainer.demo import _die_with_parent

def work(path):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(120)

if __name__ == "__main__":
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_die_with_parent) as pool:
        pool.submit(work, sys.argv[1]).result()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_demo_leaves_no_worker_training(tmp_path: Path) -> None:
    """kill -9 of the demo's process ends its worker processes too (found: orphaned workers
    went on training for half an hour, holding the cores)."""
    import os
    import signal
    import time

    script, pid_file = tmp_path / "demo_like.py", tmp_path / "worker.pid"
    script.write_text(ORPHAN_SCRIPT)
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file)])
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists():
            assert parent.poll() is None and time.monotonic() < deadline, "worker never started"
            time.sleep(0.1)
        worker = int(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker)
    finally:
        parent.kill()
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class GarbledFirstTurn:
    """The oracle, except that each episode's first reply is a ``micro_tags`` write call
    without its path (the harness rejects it as a format error)."""

    spec = "garbled-first-turn"

    def __init__(self) -> None:
        from harnessgrid.policies.scripted import ScriptedPolicy

        self.oracle = ScriptedPolicy()

    async def act(self, request: Any) -> Any:
        from harnessgrid.models import ModelTurn

        if request.state.turn == 0:
            return ModelTurn(content="<w>no path</w>")
        return await self.oracle.act(request)


class TextOnly:
    """Replies in prose, never calling a tool (what an untrained model mostly does)."""

    spec = "text-only"

    async def act(self, request: Any) -> Any:
        from harnessgrid.models import ModelTurn

        return ModelTurn(content="Sure, the file is done.")


def test_well_formed_share_counts_the_turns_harnesses_rejected(tmp_path: Path) -> None:
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.demo import well_formed_share

    tags = "S0-T1-O0-C0-W0"  # micro_tags tool interface, micro_react workflow
    config = EvalConfig(policy="scripted", suites=("micro",), settings=("in-space",),
                        harnesses=(tags,), limit=2, runs=1)
    every_workflow = config.model_copy(update={"harnesses": (tags, "S0-T1-O0-C0-W1",
                                                             "S0-T1-O0-C0-W2")})
    clean = evaluate(every_workflow, tmp_path / "clean", space=MICRO_SPACE)
    assert well_formed_share(tmp_path / "clean", clean.results) == 1.0  # plans count
    chatty = evaluate(config, tmp_path / "chatty", space=MICRO_SPACE, policy=TextOnly())
    assert well_formed_share(tmp_path / "chatty", chatty.results) == 0.0
    garbled = evaluate(config, tmp_path / "garbled", space=MICRO_SPACE,
                       policy=GarbledFirstTurn())
    turns = sum(r.turns for r in garbled.results)
    assert turns > len(garbled.results)
    share = well_formed_share(tmp_path / "garbled", garbled.results)
    assert share == pytest.approx(1 - len(garbled.results) / turns)
    assert well_formed_share(tmp_path / "garbled", []) is None


def test_table_is_mean_and_spread_over_seeds() -> None:
    runs = [{"condition": "oa-18", "seed": s, "scores": {"in-space": v, "out-of-space": 0.0,
                                                         "original": None}}
            for s, v in enumerate((0.2, 0.4))]
    t = table(runs, ["oa-18"])
    assert t["oa-18"]["in-space"]["mean"] == pytest.approx(0.3)
    assert t["oa-18"]["in-space"]["spread"] == pytest.approx(0.1)
    assert t["oa-18"]["original"]["mean"] is None
    md = format_table({"table": t})
    assert "| oa-18 | 30.0 ± 10.0 | 0.0 ± 0.0 | - |" in md
    for run, share in zip(runs, (0.5, 1.0), strict=True):
        run["well_formed"] = {"in-space": share, "out-of-space": None, "original": None}
    formed = table(runs, ["oa-18"], key="well_formed")
    assert formed["oa-18"]["in-space"] == {"mean": 0.75, "spread": 0.25, "seeds": 2}
    assert formed["oa-18"]["out-of-space"]["mean"] is None


@pytest.mark.slow
def test_quick_demo_completes_with_a_well_formed_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                           str(out)], capture_output=True, text=True, timeout=1500,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| single |" in done.stdout and "| oa-18 |" in done.stdout
    results = json.loads((out / "results.json").read_text())
    assert {r["condition"] for r in results["runs"]} == {"single", "oa-18"}
    for run in results["runs"]:
        assert set(run["scores"]) == {"in-space", "out-of-space", "original"}
        assert all(v is not None and 0.0 <= v <= 1.0 for v in run["scores"].values())
        assert set(run["well_formed"]) == set(run["scores"])
        assert all(v is not None and 0.0 <= v <= 1.0 for v in run["well_formed"].values())
        assert len(run["in_space_per_config"]) == 18  # every held-out configuration evaluated
    html = (out / "report.html").read_text()
    assert "<table" in html and "data:image/png;base64," in html
    report = (out / "report.md").read_text()
    assert report.count("| oa-18 |") == 2 and "Well-formed turns" in report
    assert "Well-formed turns" in done.stdout
    again = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                            str(out)], capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0  # resumes: every stage is found done
    rerun = json.loads((out / "results.json").read_text())["runs"]
    assert [r["scores"] for r in rerun] == [r["scores"] for r in results["runs"]]
