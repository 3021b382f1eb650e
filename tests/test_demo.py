"""``harnessgrid demo`` (trainer/demo.py): the pipeline completes and its report is
well-formed. The numbers are not asserted (they are the demo's finding, not a property)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub

from harnessgrid.trainer.demo import (
    CONDITIONS,
    GAIN,
    PROFILES,
    SINGLE_BEST,
    SINGLE_MEAN,
    SINGLES,
    Profile,
    Stages,
    ci95,
    derived_runs,
    design_codes,
    format_table,
    heldout_codes,
    run_demo,
    table,
)


def test_conditions_train_on_their_designs() -> None:
    from harnessgrid.designs import orthogonal_design
    from harnessgrid.plugins.micro import MICRO_SPACE

    oa = orthogonal_design(MICRO_SPACE)
    held_out = set(heldout_codes())
    # one single baseline per tool-interface level, the other factors at their first level
    assert [design_codes(CONDITIONS[name], 0) for name in SINGLES] == [
        ["S0-T0-O0-C0-W0"], ["S0-T1-O0-C0-W0"], ["S0-T2-O0-C0-W0"]]
    assert design_codes(CONDITIONS["oa-18"], 0) == oa.codes
    assert len(design_codes(CONDITIONS["random-18"], 0)) == 18
    assert len(design_codes(CONDITIONS["first-order-3"], 0)) == 3
    assert not set(design_codes(CONDITIONS["oa-18"], 0)) & held_out


def test_single_baselines_are_summarised_by_mean_best_on_own_harness_and_paired_gain() -> None:
    def run(name: str, seed: int, inside: float, own: float) -> dict[str, Any]:
        scores = {"in-space": inside, "out-of-space": 0.0, "original": own}
        return {"condition": name, "seed": seed, "scores": scores, "well_formed": scores}

    results = [run("single-T0", 0, 0.0, 0.0), run("single-T1", 0, 0.3, 0.5),
               run("single-T2", 0, 0.6, 0.4), run("oa-18", 0, 0.5, 0.5),
               run("single-T0", 1, 0.1, 0.2), run("single-T1", 1, 0.2, 0.2),
               run("single-T2", 1, 0.3, 0.1), run("oa-18", 1, 0.4, 0.4)]
    derived = {(r["condition"], r["seed"]): r
               for r in derived_runs(results, ["single-T0", "single-T1", "single-T2", "oa-18"])}
    assert derived[(SINGLE_MEAN, 0)]["scores"]["in-space"] == pytest.approx(0.3)
    # picked on its own harness (0.5 > 0.4), not on held-out Pass@1 (where T2 is higher)
    assert derived[(SINGLE_BEST, 0)]["picked"] == "single-T1"
    assert derived[(SINGLE_BEST, 1)]["picked"] == "single-T0"  # a tie goes to the first
    assert derived[(GAIN, 0)]["scores"]["in-space"] == pytest.approx(0.2)
    assert derived[(GAIN, 1)]["scores"]["in-space"] == pytest.approx(0.2)
    gain = table(list(derived.values()), [GAIN])[GAIN]["in-space"]
    assert gain["mean"] == pytest.approx(0.2)
    assert gain["ci95"] == pytest.approx(0.0, abs=1e-12)  # paired by seed: the same gain
    assert derived_runs(results[:1], ["single-T0"]) == []


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
            assert parent.poll() is None, "worker never started"
            assert time.monotonic() < deadline, "worker never started"
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


class GarbledFirstTurn(EpisodeStub):
    """The oracle, except that each episode's first reply is a ``micro_tags`` write call
    without its path (the harness rejects it as a format error)."""

    spec = "garbled-first-turn"

    async def play(self, request: Any, episode: Bound) -> Any:
        from harnessgrid.models import ModelTurn

        if request.state.turn == 0:
            return ModelTurn(content="<w>no path</w>")
        return await episode.oracle.act(request)


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


def test_table_is_mean_and_95_percent_t_interval_over_seeds() -> None:
    """Issue 37: a mean comes with its 95 % t-interval over seeds (not the population std,
    which hid how little two seeds resolve); out-of-space, 0 by construction at micro scale,
    is printed as not measurable, never as a measured 0.0."""
    runs = [{"condition": "oa-18", "seed": s, "scores": {"in-space": v, "out-of-space": 0.0,
                                                         "original": None}}
            for s, v in enumerate((0.2, 0.4))]
    t = table(runs, ["oa-18"])
    assert t["oa-18"]["in-space"]["mean"] == pytest.approx(0.3)
    # t(1) = 12.706, s = 0.1414, n = 2: 12.706 * 0.1414 / 1.414 = 1.2706
    assert t["oa-18"]["in-space"]["ci95"] == pytest.approx(1.2706, abs=1e-4)
    assert t["oa-18"]["in-space"]["per_seed"] == [0.2, 0.4]
    assert t["oa-18"]["out-of-space"]["by_construction"] is True
    assert t["oa-18"]["original"]["mean"] is None
    md = format_table({"table": t})
    assert "| oa-18 | 30.0 ± 127.1 | n/m | - |" in md
    assert "| 0.0" not in md
    for run, share in zip(runs, (0.5, 1.0), strict=True):
        run["well_formed"] = {"in-space": share, "out-of-space": None, "original": None}
    formed = table(runs, ["oa-18"], key="well_formed")
    assert formed["oa-18"]["in-space"]["mean"] == 0.75
    assert formed["oa-18"]["out-of-space"]["mean"] is None


@pytest.mark.parametrize(("values", "half_width"), [
    ((0.1, 0.2, 0.3), 4.303 * 0.1 / 3 ** 0.5),
    ((0.5,) * 5, 0.0),
    (tuple(i / 40 for i in range(40)), 1.960 * statistics.stdev([i / 40 for i in range(40)])
     / 40 ** 0.5),
])
def test_ci95_is_students_t_interval(values: tuple[float, ...], half_width: float) -> None:
    assert ci95(values) == pytest.approx(half_width, rel=1e-3)


def test_one_seed_is_reported_without_an_interval() -> None:
    """One seed has no interval: its cells show the value alone, not ``± 0.0`` (issue 28)."""
    runs = [{"condition": "oa-18", "seed": 0,
             "scores": {"in-space": 0.25, "out-of-space": 0.0, "original": None}}]
    t = table(runs, ["oa-18"])
    assert t["oa-18"]["in-space"]["ci95"] is None
    md = format_table({"table": t})
    assert "| oa-18 | 25.0 | n/m | - |" in md
    assert "±" not in md
    runs.append({"condition": "oa-18", "seed": 1,
                 "scores": {"in-space": 0.75, "out-of-space": None, "original": None}})
    runs.append({"condition": "single", "seed": 0,
                 "scores": {"in-space": 0.0, "out-of-space": None, "original": 0.5}})
    mixed = format_table({"table": table(runs, ["oa-18", "single"])})
    assert "| oa-18 | 50.0 ± 317.6 | n/m | - |" in mixed
    assert "| single | 0.0 (1 seed) | n/m | 50.0 (1 seed) |" in mixed


@pytest.mark.parametrize("seeds", [1, 2, 3, 5])
def test_no_condition_is_scored_on_a_configuration_it_trained_on(seeds: int) -> None:
    """Issue 37, finding 3: random-18 drew its design per seed and trained on 1-2 of the
    array's held-out configurations. The held-out set now avoids every condition's design at
    every seed of the run (and at least of the first three), and is the same for all."""
    heldout = set(heldout_codes(seeds))
    assert len(heldout) == 18
    for condition in CONDITIONS.values():
        for seed in range(max(seeds, 3)):
            assert not set(design_codes(condition, seed)) & heldout, (condition.name, seed)
    assert heldout_codes(seeds) == heldout_codes(1) or seeds > 3


class FakeStages(Stages):
    """The demo's stages without training (a fake: even the micro model's smallest budget
    takes minutes, too slow for the fast suite); the bookkeeping around them is the real one.
    The model is one file; SFT and GRPO write ``final/config.json`` with the config's steps and
    turns; the evaluation stores its parameters and, like the evaluation store, refuses to
    continue a folder evaluated with other ones. Fixed scores: Pass@1 0 everywhere,
    well-formed turns 50 %. Instances pickle (the runs happen in worker processes)."""

    def build_model(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "weights.txt").write_text("micro")
        return path

    def model_parameters(self, path: Path) -> int:
        return 1

    def prepare_worker(self) -> None:
        pass

    def train(self, config: Any, *, resume: bool, on_log: Any = None) -> None:
        final = Path(config.output_dir) / "final"
        final.mkdir(parents=True, exist_ok=True)
        (final / "config.json").write_text(json.dumps(
            {"steps": config.steps, "max_turns": config.max_turns, "resume": resume}))

    def evaluate(self, config: Any, out: Path) -> dict[str, Any]:
        from harnessgrid.errors import ConfigError

        params = config.model_dump_json(exclude={"policy"})
        stored = out / "params.json"
        if stored.is_file() and stored.read_text() != params:
            raise ConfigError(f"{out} holds an evaluation with different parameters")
        out.mkdir(parents=True, exist_ok=True)
        stored.write_text(params)
        settings = ("in-space", "out-of-space", "original")
        return {"scores": dict.fromkeys(settings, 0.0),
                "well_formed": dict.fromkeys(settings, 0.5),
                "in_space_per_config": {"S0-T0-O0-C0-W0": 0.0, "S1-T1-O1-C1-W1": 0.0},
                "evaluated_in_space": list(config.harnesses or ())}


TINY = Profile(conditions=("single-T0", "oa-18"), seeds=1, sft_episodes=2, sft_steps=2,
               sft_batch=2, sft_lr=1e-3, grpo_steps=1, tasks_per_step=1, rollouts=2,
               grpo_lr=1e-5, eval_tasks=1, max_turns=4, sft_micro_batches=1)


def _final(out: Path, profile: str, run: str, stage: str) -> dict[str, Any]:
    return dict(json.loads((out / profile / run / stage / "final" / "config.json").read_text()))


def test_quick_then_default_into_one_out_do_not_share_stages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 1: ``demo --quick --out D`` then ``demo --out D`` reused the quick models
    and stopped on the evaluation store's diff. Each profile now has its own folder: the
    second trains and evaluates its own models, without an error, and leaves the first's."""
    monkeypatch.setitem(PROFILES, "quick", TINY)
    monkeypatch.setitem(PROFILES, "default", Profile(**{**TINY.__dict__, "sft_steps": 3,
                                                        "max_turns": 8}))
    out = tmp_path / "demo"
    quick = run_demo(out, "quick", workers=1, stages=FakeStages())
    default = run_demo(out, "default", workers=1, stages=FakeStages())
    for summary in (quick, default):
        assert [r["stages_run"] for r in summary["runs"]] == [["SFT", "GRPO", "evaluation"]] * 2
        assert not any(r["redone"] for r in summary["runs"])
    for run in ("single-T0-seed0", "oa-18-seed0"):
        assert _final(out, "quick", run, "sft")["steps"] == 2
        assert _final(out, "default", run, "sft")["steps"] == 3
        assert _final(out, "default", run, "grpo")["max_turns"] == 8
    assert (out / "quick" / "results.json").is_file()
    assert (out / "default" / "report.md").is_file()
    assert "redoing" not in capfd.readouterr().err
    again = run_demo(out, "quick", workers=1, stages=FakeStages())
    assert again["all_reused"]
    assert not any(r["stages_run"] for r in again["runs"])


def test_a_stage_made_with_other_parameters_is_redone_with_a_reason(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A profile whose budget changed (issue 26 changes them) redoes the stages the change
    reaches, each with a line saying why, and reuses the others; never the store's diff."""
    out = tmp_path / "demo"
    run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    capfd.readouterr()
    more_tasks = Profile(**{**TINY.__dict__, "eval_tasks": 2})
    summary = run_demo(out, "default", workers=1, profile=more_tasks, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["evaluation"]] * 2
    err = capfd.readouterr().err
    assert "single-T0 seed 0: redoing evaluation: its parameters changed: limit 1 → 2" in err
    assert err.count("redoing") == 2
    longer = Profile(**{**more_tasks.__dict__, "sft_steps": 5})
    summary = run_demo(out, "default", workers=1, profile=longer, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["SFT", "GRPO", "evaluation"]] * 2
    err = capfd.readouterr().err
    assert "oa-18 seed 0: redoing SFT: its parameters changed: steps 2 → 5" in err
    assert "redoing GRPO: its parameters changed: the SFT model it starts from changed" in err
    assert "redoing evaluation: its parameters changed: the GRPO model it evaluates changed" \
        in err
    assert _final(out, "default", "oa-18-seed0", "sft") == {"steps": 5, "max_turns": 4,
                                                             "resume": False}
    # A stage with no record (made by an earlier demo version) is not trusted.
    (out / "default" / "single-T0-seed0" / "grpo.stage.json").unlink()
    summary = run_demo(out, "default", workers=1, profile=longer, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["GRPO", "evaluation"], []]
    assert "single-T0 seed 0: redoing GRPO: no record of the parameters it was made with" in \
        capfd.readouterr().err


def test_a_rerun_keeps_the_measured_time_of_the_run_that_computed_the_numbers(
        tmp_path: Path) -> None:
    """Issue 28 item 7: a re-run that only reads finished stages replaced the report's time
    (36.5 min became 0.3 min). It keeps the computing run's time; each stage's own time is
    recorded when it ran and survives re-runs."""
    out = tmp_path / "demo"
    first = run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    assert not first["all_reused"]
    assert first["stages_run"] == first["stages"] == 7
    record = json.loads((out / "default" / "oa-18-seed0" / "sft.stage.json").read_text())
    assert record["finished"]
    assert isinstance(record["seconds"], float)  # recorded, not judged
    report = (out / "default" / "report.md").read_text()
    again = run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    assert again["all_reused"]
    for key in ("seconds", "measured_at", "stages_run", "stages", "stage_seconds"):
        assert again[key] == first[key], key
    assert json.loads((out / "default" / "oa-18-seed0" / "sft.stage.json").read_text()) \
        == record
    assert (out / "default" / "report.md").read_text() == report
    assert f"{first['seconds'] / 60:.1f} min on" in report
    # Redoing part of the stages says the time is that part's.
    partial = run_demo(out, "default", workers=1, stages=FakeStages(),
                       profile=Profile(**{**TINY.__dict__, "eval_tasks": 2}))
    assert partial["stages_run"] == 2
    assert partial["seconds"] != first["seconds"]
    assert "computing 2 of the 7 stages" in (out / "default" / "report.md").read_text()


def test_report_writes_pngs_and_skips_all_zero_plots(tmp_path: Path) -> None:
    """Issue 28 item 7: two of three plots were flat zero lines, no PNG reached the disk and
    the HTML showed literal backticks. Here Pass@1 is 0 everywhere (the fake's scores)."""
    out = tmp_path / "demo"
    run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    root = out / "default"
    png = (root / "well-formed.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert not (root / "pass1.png").exists()
    assert not (root / "configurations.png").exists()
    html = (root / "report.html").read_text()
    assert "`" not in html
    assert "<code>default</code>" in html
    assert html.count("data:image/png;base64,") == 1
    assert "not drawn: Pass@1 is 0" in html
    report = (root / "report.md").read_text()
    assert "![Well-formed turns by condition and setting](well-formed.png)" in report
    assert "Pass@1 (%), 1 seed (no interval):" in report
    assert "± 0.0" not in report


def test_results_record_each_runs_training_and_held_out_configurations(tmp_path: Path) -> None:
    """results.json says, per condition and seed, what was trained on and what was scored as
    held out, and the evaluation was run on exactly that held-out set."""
    from harnessgrid.plugins.micro import micro_address

    summary = run_demo(tmp_path / "demo", "default", workers=1, profile=TINY,
                       stages=FakeStages())
    stored = json.loads((tmp_path / "demo" / "default" / "results.json").read_text())
    heldout = heldout_codes(1)
    for name in TINY.conditions:
        configs = stored["conditions"][name]
        assert configs["train_configs"]["0"] == design_codes(CONDITIONS[name], 0)
        assert configs["heldout_configs"]["0"] == heldout
    for run in summary["runs"]:
        assert run["evaluated_in_space"] == [micro_address(c) for c in heldout]


@pytest.mark.slow
def test_quick_demo_completes_with_a_well_formed_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                           str(out)], capture_output=True, text=True, timeout=1500,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| single-T0 |" in done.stdout
    assert "| oa-18 |" in done.stdout
    results = json.loads((out / "quick" / "results.json").read_text())
    assert {r["condition"] for r in results["runs"]} == {"single-T0", "oa-18"}
    for run in results["runs"]:
        assert set(run["scores"]) == {"in-space", "out-of-space", "original"}
        assert all(v is not None and 0.0 <= v <= 1.0 for v in run["scores"].values())
        assert set(run["well_formed"]) == set(run["scores"])
        assert all(v is not None and 0.0 <= v <= 1.0 for v in run["well_formed"].values())
        assert len(run["in_space_per_config"]) == 18  # every held-out configuration evaluated
    html = (out / "quick" / "report.html").read_text()
    assert "<table" in html
    assert "`" not in html
    for png, plotted in (("well-formed.png", "well-formed turns"), ("pass1.png", "Pass@1")):
        assert (out / "quick" / png).is_file() or f"not drawn: {plotted} is 0" in html
    report = (out / "quick" / "report.md").read_text()
    assert report.count("| oa-18 |") == 2
    assert "Well-formed turns" in report
    assert "Well-formed turns" in done.stdout
    again = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                            str(out)], capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0  # resumes: every stage is found done
    rerun = json.loads((out / "quick" / "results.json").read_text())
    assert rerun["all_reused"]
    assert rerun["seconds"] == results["seconds"]
    assert [r["scores"] for r in rerun["runs"]] == [r["scores"] for r in results["runs"]]


def test_the_demo_trains_from_the_shipped_pretrained_base(tmp_path: Path) -> None:
    """Issue 26: from the random micro model neither condition solved a held-out task; the
    demo starts from ``tiny:micro-base``. A copy that no longer matches the shipped checksums
    (an edited or truncated file) is replaced, not trained from."""
    import hashlib

    from harnessgrid.plugins.micro.pretraining import BASE_SHA256
    from harnessgrid.trainer.demo import Stages

    def digests(folder: Path) -> dict[str, str]:
        return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
                for name in BASE_SHA256}

    model = Stages().build_model(tmp_path / "model")
    assert model == tmp_path / "model"
    assert digests(model) == BASE_SHA256
    (model / "model.safetensors").write_bytes(b"not the base")
    assert digests(Stages().build_model(model)) == BASE_SHA256
