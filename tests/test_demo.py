"""``harnessgrid demo`` (trainer/demo.py): the protocol a reviewer checks - one warm start,
holdouts outside every condition's training, unseen levels outside every design, paired
intervals - and the bookkeeping of its stages. The numbers are not asserted (they are the
demo's finding, not a property)."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub

from harnessgrid.trainer.demo import (
    CONDITIONS,
    GAIN_DIFF,
    GAIN_OA,
    GAIN_SINGLE,
    IN_SPACE,
    ORIGINAL,
    PROFILES,
    SETTINGS,
    SINGLE_BEST,
    SINGLE_MEAN,
    SINGLES,
    UNSEEN,
    WARM,
    WARM_STARTS,
    Profile,
    Stages,
    design_codes,
    format_table,
    heldout_codes,
    run_demo,
    unseen_codes,
    validation_codes,
    warm_start_codes,
)
from harnessgrid.trainer.demo_stats import cell_text, interval, resolved, summarise


def test_conditions_train_on_their_designs() -> None:
    from harnessgrid.designs import orthogonal_design
    from harnessgrid.plugins.micro import MICRO_SPACE

    oa = orthogonal_design(MICRO_SPACE)
    held_out = set(heldout_codes())
    # one single baseline per tool-interface level, the other factors at their first level
    assert [design_codes(CONDITIONS[name], 0) for name in SINGLES] == [
        ["S0-T0-O0-C0-W0"], ["S0-T1-O0-C0-W0"], ["S0-T2-O0-C0-W0"]]
    assert design_codes(CONDITIONS["oa-18"], 0) == oa.codes
    assert design_codes(CONDITIONS["oa-18-negated"], 0) == oa.codes
    assert CONDITIONS["oa-18-negated"].negate
    assert not CONDITIONS["oa-18"].negate
    assert len(design_codes(CONDITIONS["random-18"], 0)) == 18
    assert len(design_codes(CONDITIONS["first-order-3"], 0)) == 3
    assert not set(design_codes(CONDITIONS["oa-18"], 0)) & held_out


@pytest.mark.parametrize("seeds", [1, 2, 3, 5])
def test_no_condition_is_scored_on_a_configuration_it_trained_on(seeds: int) -> None:
    """Issue 37, finding 3: random-18 drew its design per seed and trained on 1-2 of the
    array's held-out configurations. The held-out set avoids every condition's design at
    every seed of the run (and at least of the first three), and is the same for all; so do
    the validation set and the warm start, whichever rule picks its configurations."""
    heldout = set(heldout_codes(seeds))
    validation = set(validation_codes(seeds))
    assert len(heldout) == len(validation) == 18
    assert not heldout & validation
    for rule in WARM_STARTS:
        assert not set(warm_start_codes(seeds, rule)) & (heldout | validation), rule
    for condition in CONDITIONS.values():
        for seed in range(max(seeds, 3)):
            codes = set(design_codes(condition, seed))
            assert not codes & (heldout | validation), (condition.name, seed)
            assert codes <= set(warm_start_codes(seeds, "every-design")), (condition.name, seed)
    assert heldout_codes(seeds) == heldout_codes(1) or seeds > 3


def test_warm_start_rules_pick_what_they_say() -> None:
    """The default warm start knows each tool interface through one harness - the singles'
    - and nothing of oa-18's design but the one configuration it shares with them; the
    one-factor rule adds every single-factor variation of those outside the holdouts."""
    assert PROFILES["default"].warm_start == PROFILES["full"].warm_start == "singles"
    singles = set(warm_start_codes(3, "singles"))
    assert singles == set(SINGLES.values())
    oa = set(design_codes(CONDITIONS["oa-18"], 0))
    assert len(oa - singles) == 17
    one_factor = set(warm_start_codes(3, "one-factor"))
    assert singles <= one_factor
    for code in one_factor:
        base = f"S0-{code.split('-')[1]}-O0-C0-W0"
        differing = [a for a, b in zip(code.split("-"), base.split("-"), strict=True) if a != b]
        assert len(differing) <= 1, code
    assert len(one_factor) == 23  # 27 variations, 4 of them in a holdout
    with pytest.raises(ValueError, match="unknown warm-start rule"):
        warm_start_codes(3, "all")


def test_unseen_level_configurations_change_one_factor_to_its_fourth_level() -> None:
    from harnessgrid.plugins.micro import UNSEEN_SPACE

    heldout = heldout_codes()
    unseen = unseen_codes(heldout)
    assert len(unseen) == 12
    trained = {code for rule in WARM_STARTS for code in warm_start_codes(3, rule)}
    for i, code in enumerate(unseen):
        UNSEEN_SPACE.parse(code)  # a micro4 configuration
        changed = [a for a, b in zip(code.split("-"), heldout[i].split("-"), strict=True)
                   if a != b]
        assert changed == [("T3" if i % 2 == 0 else "S3")]
        assert code not in trained
    assert {c.split("-")[1] for c in unseen[::2]} == {"T3"}
    assert {c.split("-")[0] for c in unseen[1::2]} == {"S3"}


# -- the numbers ------------------------------------------------------------------------------

def _cells(values: list[float]) -> dict[str, float]:
    return {f"c{i}": v for i, v in enumerate(values)}


def test_intervals_are_a_deterministic_bootstrap_over_seeds_and_cells() -> None:
    a = [_cells([1, 0, 1, 0] * 25), _cells([1, 1, 0, 0] * 25)]
    low, high = interval(a)  # type: ignore[misc]
    assert low < 0.5 < high
    assert interval(a) == (low, high)  # same on every call
    # more cells, narrower interval
    wide = interval([_cells([1, 0] * 5), _cells([0, 1] * 5)])
    assert wide is not None
    assert wide[1] - wide[0] > high - low
    # a model that passes every cell has no spread to show
    assert interval([_cells([1.0] * 10)]) == (1.0, 1.0)
    # one cell of one seed (a single baseline's one training harness) has no interval at all
    assert interval([_cells([0.9])]) is None
    assert cell_text(summarise([_cells([0.9])])) == "90.0"


def test_differences_are_paired_by_seed_and_cell() -> None:
    """Two models that differ by the same cells on every seed: the paired interval of their
    difference is tight even though each model's own interval is wide; against one shared
    baseline (the warm start), each seed is compared with it."""
    before = _cells([0, 1] * 50)
    after = [_cells([1, 1] * 50), _cells([1, 1] * 50)]
    gain = summarise(after, [before])
    assert gain["mean"] == pytest.approx(0.5)
    assert gain["per_seed"] == [pytest.approx(0.5), pytest.approx(0.5)]
    low, high = gain["ci95"]
    assert 0.3 < low <= 0.5 <= high < 0.7
    assert resolved(gain) is True
    same = summarise(after, after)
    assert same["mean"] == 0
    assert same["ci95"] == [0.0, 0.0]
    assert resolved(same) is False
    assert cell_text(gain, signed=True).startswith("+50.0 [+")
    assert cell_text({"mean": None}) == "-"


# -- the stages, with a fake trainer and evaluator -------------------------------------------

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


class FakeStages(Stages):
    """The demo's stages without training (a fake: even the micro model's smallest budget
    takes minutes, too slow for the fast suite); the bookkeeping around them is the real one.
    The model is one file; SFT and GRPO write ``final/config.json`` with the config's steps
    and turns and, for GRPO, a ``steps.jsonl``; the evaluation stores its parameters and, like
    the evaluation store, refuses to continue a folder evaluated with other ones. Scores:
    Pass@1 0 for the warm start and 1 on a third of the cells after RL; well-formed turns
    50 %. Instances pickle (the runs happen in worker processes)."""

    def build_model(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "weights.txt").write_text("micro")
        return path

    def model_parameters(self, path: Path) -> int:
        return 1

    def prepare_worker(self) -> None:
        pass

    def train(self, config: Any, *, resume: bool, on_log: Any = None) -> None:
        out = Path(config.output_dir)
        final = out / "final"
        final.mkdir(parents=True, exist_ok=True)
        (final / "config.json").write_text(json.dumps(
            {"steps": config.steps, "max_turns": config.limits.max_turns, "resume": resume,
             "algorithm": config.algorithm}))
        if config.algorithm in ("grpo", "ppo"):
            (out / "steps.jsonl").write_text("".join(
                json.dumps({"step": i, "reward": 0.1 * i, "pass_rate": 0.0,
                            "well_formed": 0.5}) + "\n" for i in range(config.steps)))

    def evaluate(self, config: Any, out: Path) -> dict[str, Any]:
        from harnessgrid.errors import ConfigError

        params = config.model_dump_json(exclude={"policy"})
        stored = out / "params.json"
        if stored.is_file() and stored.read_text() != params:
            raise ConfigError(f"{out} holds an evaluation with different parameters")
        out.mkdir(parents=True, exist_ok=True)
        stored.write_text(params)
        warm = "warm-start" in str(out)
        passed = {a: {f"micro/t{t}": 0.0 if warm else float((i + t) % 3 == 0)
                      for t in range(config.limit)} for i, a in enumerate(config.harnesses)}
        (out / "harnesses.json").write_text(json.dumps(list(config.harnesses)))
        return {"passed": passed, "well_formed": {a: [1, 2] for a in config.harnesses}}


TINY = Profile(conditions=("single-T0", "oa-18"), seeds=1, warm_episodes=2, warm_steps=2,
               warm_lr=1e-3, rl_steps=2, tasks_per_step=1, rollouts=2, rl_lr=1e-5,
               eval_tasks=1, max_turns=4, warm_batch=2, warm_micro_batches=1)


def _final(out: Path, profile: str, run: str, stage: str) -> dict[str, Any]:
    return dict(json.loads((out / profile / run / stage / "final" / "config.json").read_text()))


def test_every_condition_starts_rl_from_the_one_warm_start(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    summary = run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    warm = out / "default" / "warm-start"
    assert json.loads((warm / "sft" / "final" / "config.json").read_text())["steps"] == 2
    records = {r["condition"]: json.loads(
        (out / "default" / f"{r['condition']}-seed0" / "grpo.stage.json").read_text())
        for r in summary["runs"]}
    warm_record = json.loads((warm / "sft.stage.json").read_text())
    assert {rec["params"]["from"] for rec in records.values()} == {warm_record["fingerprint"]}
    assert warm_record["params"]["design"] == "list"
    assert warm_record["params"]["harnesses"] == warm_start_codes(1)
    # addresses, which every command takes (bare codes would name the built-in levels)
    assert summary["warm_start"]["train_configs"] == [f"micro:{c}" for c in warm_start_codes(1)]


def test_results_carry_before_and_after_rl_per_condition(tmp_path: Path) -> None:
    """results.json, per condition: train and held-out configurations per seed, and for
    in-space, out-of-space (unseen levels) and original the warm start's Pass@1 (before_rl),
    the run's (after_rl) and the paired gain, each with per-seed values, mean and ci95; the
    emulated shells are marked not measured, with the reason."""
    from harnessgrid.plugins.micro import micro_address

    profile = Profile(**{**TINY.__dict__, "seeds": 2, "eval_tasks": 3})
    run_demo(tmp_path / "demo", "default", workers=1, profile=profile, stages=FakeStages())
    stored = json.loads((tmp_path / "demo" / "default" / "results.json").read_text())
    heldout = heldout_codes(2)
    for name in TINY.conditions:
        entry = stored["conditions"][name]
        assert entry["train_configs"]["1"] == [micro_address(c)
                                                for c in design_codes(CONDITIONS[name], 1)]
        assert entry["heldout_configs"]["0"] == [micro_address(c) for c in heldout]
        assert entry["unseen_configs"] == [f"micro4:{c}" for c in unseen_codes(heldout)]
        for setting in SETTINGS:
            for key in ("before_rl", "after_rl", "gain"):
                stat = entry[setting][key]
                assert len(stat["per_seed"]) == 2
                assert stat["mean"] is not None
                assert len(stat["ci95"]) == 2
            assert entry[setting]["before_rl"]["mean"] == 0.0  # the fake's warm start
            assert entry[setting]["gain"]["mean"] == pytest.approx(
                entry[setting]["after_rl"]["mean"])
        assert entry["out-of-space (emulated shells)"]["measured"] is False
    harnesses = json.loads((tmp_path / "demo" / "default" / "oa-18-seed0" / "eval" /
                            "harnesses.json").read_text())
    assert [micro_address(c) for c in heldout] == harnesses[:18]
    assert sum(h.startswith("micro4:") for h in harnesses) == 12
    rows = stored["rows"]["pass1"]
    assert next(iter(rows)) == WARM
    for name in (SINGLE_MEAN, SINGLE_BEST, GAIN_OA, GAIN_SINGLE, GAIN_DIFF):
        assert name not in rows  # one single baseline: no mean of singles
    table = format_table(stored)
    assert table.splitlines()[2].startswith(f"| {WARM} | 0.0 [0.0, 0.0] |")
    assert "| n/m |" in table
    assert "± 0.0" not in table


def test_single_baselines_are_summarised_by_mean_best_on_own_harness_and_gains(
        tmp_path: Path) -> None:
    profile = Profile(**{**TINY.__dict__, "conditions": (*SINGLES, "oa-18"), "seeds": 2,
                         "eval_tasks": 2})
    summary = run_demo(tmp_path / "demo", "default", workers=1, profile=profile,
                       stages=FakeStages())
    rows = summary["rows"]["pass1"]
    for name in (SINGLE_MEAN, SINGLE_BEST, GAIN_OA, GAIN_SINGLE, GAIN_DIFF):
        assert name in rows
    runs = {(r["condition"], r["seed"]): r for r in summary["runs"]}
    for seed in (0, 1):
        singles = [sum(runs[(n, seed)]["cells"][IN_SPACE].values())
                   / len(runs[(n, seed)]["cells"][IN_SPACE]) for n in SINGLES]
        assert rows[SINGLE_MEAN][IN_SPACE]["per_seed"][seed] == pytest.approx(
            sum(singles) / 3)
        own = {n: sum(runs[(n, seed)]["cells"][ORIGINAL].values()) for n in SINGLES}
        assert rows[SINGLE_BEST]["picked"][seed] == max(SINGLES, key=lambda n: own[n])
    # the warm start scores 0 in the fake: gains equal the after-RL values
    assert rows[GAIN_OA][UNSEEN]["mean"] == pytest.approx(rows["oa-18"][UNSEEN]["mean"])
    assert rows[GAIN_DIFF][IN_SPACE]["mean"] == pytest.approx(
        rows["oa-18"][IN_SPACE]["mean"] - rows[SINGLE_MEAN][IN_SPACE]["mean"])
    report = (tmp_path / "demo" / "default" / "report.md").read_text()
    assert f"{GAIN_DIFF}, in-space:" in report


def test_quick_then_default_into_one_out_do_not_share_stages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 1: each profile has its own folder; the second trains and evaluates its
    own models, without an error, and leaves the first's; a re-run reuses everything."""
    monkeypatch.setitem(PROFILES, "quick", TINY)
    monkeypatch.setitem(PROFILES, "default", Profile(**{**TINY.__dict__, "warm_steps": 3,
                                                        "max_turns": 8}))
    out = tmp_path / "demo"
    quick = run_demo(out, "quick", workers=1, stages=FakeStages())
    default = run_demo(out, "default", workers=1, stages=FakeStages())
    for summary in (quick, default):
        assert [r["stages_run"] for r in summary["runs"]] == [["GRPO", "evaluation"]] * 2
        assert not any(r["redone"] for r in summary["runs"])
    assert json.loads((out / "quick" / "warm-start" / "sft" / "final" / "config.json")
                      .read_text())["steps"] == 2
    assert json.loads((out / "default" / "warm-start" / "sft" / "final" / "config.json")
                      .read_text())["steps"] == 3
    assert _final(out, "default", "oa-18-seed0", "grpo")["max_turns"] == 8
    assert (out / "quick" / "results.json").is_file()
    assert (out / "default" / "report.md").is_file()
    assert "redoing" not in capfd.readouterr().err
    again = run_demo(out, "quick", workers=1, stages=FakeStages())
    assert again["all_reused"]
    assert not any(r["stages_run"] for r in again["runs"])
    # --validation scores elsewhere, on the validation configurations
    checked = run_demo(out, "quick", workers=1, stages=FakeStages(), validation=True)
    assert checked["scored_on"] == "validation"
    assert checked["runs"][0]["heldout_configs"] == [f"micro:{c}" for c in validation_codes(1)]
    assert (out / "quick-validation" / "results.json").is_file()


def test_a_stage_made_with_other_parameters_is_redone_with_a_reason(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A changed budget redoes the stages the change reaches, each with a line saying why,
    and reuses the others."""
    out = tmp_path / "demo"
    run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    capfd.readouterr()
    more_tasks = Profile(**{**TINY.__dict__, "eval_tasks": 2})
    summary = run_demo(out, "default", workers=1, profile=more_tasks, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["evaluation"]] * 2
    err = capfd.readouterr().err
    assert "single-T0 seed 0: redoing evaluation: its parameters changed: limit 1 → 2" in err
    assert err.count("redoing") == 3  # the warm start's evaluation too
    longer = Profile(**{**more_tasks.__dict__, "warm_steps": 5})
    summary = run_demo(out, "default", workers=1, profile=longer, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["GRPO", "evaluation"]] * 2
    err = capfd.readouterr().err
    assert "warm start: redoing warm start: its parameters changed: steps 2 → 5" in err
    assert "oa-18 seed 0: redoing GRPO: its parameters changed: the warm start it starts " \
           "from changed" in err
    assert "redoing evaluation: its parameters changed: the model it evaluates changed" in err
    # A stage with no record (made by an earlier demo version) is not trusted.
    (out / "default" / "single-T0-seed0" / "grpo.stage.json").unlink()
    summary = run_demo(out, "default", workers=1, profile=longer, stages=FakeStages())
    assert [r["stages_run"] for r in summary["runs"]] == [["GRPO", "evaluation"], []]
    assert "single-T0 seed 0: redoing GRPO: no record of the parameters it was made with" in \
        capfd.readouterr().err


def test_a_rerun_keeps_the_measured_time_of_the_run_that_computed_the_numbers(
        tmp_path: Path) -> None:
    """Issue 28 item 7: a re-run that only reads finished stages keeps the computing run's
    time; each stage's own time is recorded when it ran and survives re-runs."""
    out = tmp_path / "demo"
    first = run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    assert not first["all_reused"]
    assert first["stages_run"] == first["stages"] == 7  # model, warm start and its eval, 2 x 2
    record = json.loads((out / "default" / "oa-18-seed0" / "grpo.stage.json").read_text())
    assert record["finished"]
    assert isinstance(record["seconds"], float)  # recorded, not judged
    report = (out / "default" / "report.md").read_text()
    again = run_demo(out, "default", workers=1, profile=TINY, stages=FakeStages())
    assert again["all_reused"]
    for key in ("seconds", "measured_at", "stages_run", "stages"):
        assert again[key] == first[key], key
    assert json.loads((out / "default" / "oa-18-seed0" / "grpo.stage.json").read_text()) \
        == record
    assert (out / "default" / "report.md").read_text() == report
    assert f"{first['seconds'] / 60:.1f} min on" in report


def test_the_rl_curve_is_scored_at_its_checkpoints(tmp_path: Path) -> None:
    profile = Profile(**{**TINY.__dict__, "rl_steps": 6, "curve_every": 2})
    summary = run_demo(tmp_path / "demo", "default", workers=1, profile=profile,
                       stages=FakeStages())
    for run in summary["runs"]:
        assert [p["step"] for p in run["curve"]] == [2, 4]
        assert len(run["steps"]) == 6
        assert all(len(p["cells"]) == 18 for p in run["curve"])  # in-space, held out
    root = tmp_path / "demo" / "default"
    assert (root / "single-T0-seed0" / "eval-step4" / "params.json").is_file()
    assert (root / "rl-curve.png").read_bytes().startswith(b"\x89PNG")
    assert (root / "pass1.png").read_bytes().startswith(b"\x89PNG")
    html = (root / "report.html").read_text()
    assert "`" not in html
    assert html.count("data:image/png;base64,") == 3


def test_the_negated_arm_flips_every_advantage() -> None:
    """The control of ``--full``: the same trainer with each GRPO advantage's sign flipped
    (and PPO's per-token ones), so a learning signal would move Pass@1 the other way."""
    from harnessgrid.trainer.demo import _train_config

    plain = _train_config("grpo", Path("m"), Path("o"), TINY, CONDITIONS["oa-18"])
    negated = _train_config("grpo", Path("m"), Path("o"), TINY, CONDITIONS["oa-18-negated"])
    assert not plain.negate_advantages
    assert negated.negate_advantages
    assert plain.model_dump(exclude={"negate_advantages"}) == negated.model_dump(
        exclude={"negate_advantages"})
    assert "oa-18-negated" in PROFILES["full"].conditions


def test_the_ppo_arm_is_oa_18_through_ppo_from_the_same_warm_start(tmp_path: Path) -> None:
    """``--full``'s PPO arm (issue 37: "GRPO, and PPO in --full"): oa-18's design, pairing and
    budget, trained by PPO with a critic from the same warm start, its RL stage in a ``ppo``
    folder, and reported like every condition."""
    from harnessgrid.trainer.demo import _train_config

    grpo = _train_config("grpo", Path("m"), Path("o"), TINY, CONDITIONS["oa-18"])
    ppo = _train_config("ppo", Path("m"), Path("o"), TINY, CONDITIONS["oa-18-ppo"])
    assert ppo.algorithm == "ppo"
    assert ppo.model_dump(exclude={"algorithm"}) == grpo.model_dump(exclude={"algorithm"})
    assert "oa-18-ppo" in PROFILES["full"].conditions
    profile = Profile(**{**TINY.__dict__, "conditions": ("single-T0", "oa-18", "oa-18-ppo")})
    summary = run_demo(tmp_path / "demo", "default", workers=1, profile=profile,
                       stages=FakeStages())
    assert _final(tmp_path / "demo", "default", "oa-18-ppo-seed0", "ppo")["algorithm"] == "ppo"
    assert _final(tmp_path / "demo", "default", "oa-18-seed0", "grpo")["algorithm"] == "grpo"
    gain = summary["conditions"]["oa-18-ppo"][IN_SPACE]["gain"]
    assert gain["mean"] is not None
    assert "| oa-18-ppo |" in (tmp_path / "demo" / "default" / "report.md").read_text()


def test_well_formed_turns_count_the_turns_harnesses_rejected(tmp_path: Path) -> None:
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.demo_stages import well_formed_turns

    tags = "S0-T1-O0-C0-W0"  # micro_tags tool interface, micro_react workflow
    config = EvalConfig(policy="scripted", suites=("micro",), settings=("in-space",),
                        harnesses=(tags,), limit=2, runs=1)
    every_workflow = config.model_copy(update={"harnesses": (tags, "S0-T1-O0-C0-W1",
                                                             "S0-T1-O0-C0-W2")})

    def share(out: Path, results: Any) -> float:
        counts = [well_formed_turns(out, r) for r in results]
        return sum(ok for ok, _ in counts) / sum(n for _, n in counts)

    clean = evaluate(every_workflow, tmp_path / "clean", space=MICRO_SPACE)
    assert share(tmp_path / "clean", clean.results) == 1.0  # plans count
    chatty = evaluate(config, tmp_path / "chatty", space=MICRO_SPACE, policy=TextOnly())
    assert share(tmp_path / "chatty", chatty.results) == 0.0
    garbled = evaluate(config, tmp_path / "garbled", space=MICRO_SPACE,
                       policy=GarbledFirstTurn())
    turns = sum(r.turns for r in garbled.results)
    assert turns > len(garbled.results)
    assert share(tmp_path / "garbled", garbled.results) == pytest.approx(
        1 - len(garbled.results) / turns)


@pytest.mark.slow
def test_quick_demo_completes_with_a_well_formed_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                           str(out)], capture_output=True, text=True, timeout=1500,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"| {WARM} |" in done.stdout
    assert "| single-T0 |" in done.stdout
    assert "| oa-18 |" in done.stdout
    results = json.loads((out / "quick" / "results.json").read_text())
    assert {r["condition"] for r in results["runs"]} == {"single-T0", "oa-18"}
    for run in results["runs"]:
        assert set(run["cells"]) == set(SETTINGS)
        assert len(run["cells"][IN_SPACE]) == 18 * PROFILES["quick"].eval_tasks
        assert len(run["cells"][UNSEEN]) == 12 * PROFILES["quick"].eval_tasks
        assert all(v in (0.0, 1.0) for v in run["cells"][IN_SPACE].values())
    for name in ("single-T0", "oa-18"):
        assert results["conditions"][name][IN_SPACE]["after_rl"]["mean"] is not None
    report = (out / "quick" / "report.md").read_text()
    assert report.count("| oa-18 |") == 2
    assert "Well-formed turns" in done.stdout
    again = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                            str(out)], capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0  # resumes: every stage is found done
    rerun = json.loads((out / "quick" / "results.json").read_text())
    assert rerun["all_reused"]
    assert rerun["seconds"] == results["seconds"]
    assert rerun["conditions"] == results["conditions"]
    # the same command into a fresh folder repeats it: every number but the timings, and
    # every model byte for byte (README, "What repeats")
    fresh = tmp_path / "fresh"
    repeat = subprocess.run([sys.executable, "-m", "harnessgrid", "demo", "--quick", "--out",
                             str(fresh)], capture_output=True, text=True, timeout=1500,
                            check=False)
    assert repeat.returncode == 0, repeat.stderr[-3000:]
    assert without_timings(json.loads((fresh / "quick" / "results.json").read_text())) == \
        without_timings(results)
    models = sorted(p.relative_to(out) for p in out.glob("quick/**/final/model.safetensors"))
    assert len(models) == 3  # the warm start and the two conditions' RL
    for model in models:
        assert (fresh / model).read_bytes() == (out / model).read_bytes(), model


def without_timings(results: dict[str, Any]) -> dict[str, Any]:
    """A demo's results.json without what the clock says."""
    kept = {k: v for k, v in results.items()
            if k not in ("measured_at", "seconds", "stage_seconds", "all_reused")}
    kept["runs"] = [{k: v for k, v in run.items() if k != "timings"} for run in results["runs"]]
    return kept


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


def _ship(folder: Path, fingerprint: str, files: dict[str, bytes]) -> None:
    import hashlib

    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "recipe.json").write_text(json.dumps({
        "fingerprint": fingerprint,
        "sha256": {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}}))


def test_a_shipped_warm_start_with_the_stages_parameters_is_installed_not_trained(
        tmp_path: Path) -> None:
    """The default's longest serial stage ships in the package: installed (and recorded as
    installed) when its recipe's fingerprint is the stage's; trained when the parameters
    differ or ``--train-warm-start`` asks; a damaged shipped file stops the demo."""
    from harnessgrid.errors import ConfigError

    first = run_demo(tmp_path / "a", "default", workers=1, profile=TINY, stages=FakeStages())
    trained = json.loads((tmp_path / "a" / "default" / "warm-start" / "sft.stage.json")
                         .read_text())
    assert first["warm_start"]["installed"] is None
    shipped = tmp_path / "shipped"
    _ship(shipped, trained["fingerprint"], {"config.json": b'{"shipped": true}'})
    stages = FakeStages()
    stages.warm_start_dir = shipped

    summary = run_demo(tmp_path / "b", "default", workers=1, profile=TINY, stages=stages)
    warm = tmp_path / "b" / "default" / "warm-start"
    assert json.loads((warm / "sft" / "final" / "config.json").read_text()) == {"shipped": True}
    # what the shipped folder does not repeat comes from the model it was trained from
    assert (warm / "sft" / "final" / "weights.txt").read_text() == "micro"
    assert summary["warm_start"]["installed"] == "shipped"
    record = json.loads((warm / "sft.stage.json").read_text())
    assert record["fingerprint"] == trained["fingerprint"]  # the same stage, not trained here
    # every run's GRPO starts from it
    assert {json.loads((tmp_path / "b" / "default" / f"{r['condition']}-seed0" /
                        "grpo.stage.json").read_text())["params"]["from"]
            for r in summary["runs"]} == {trained["fingerprint"]}

    again = run_demo(tmp_path / "c", "default", workers=1, profile=TINY, stages=stages,
                     train_warm_start=True)
    assert again["warm_start"]["installed"] is None
    assert "steps" in json.loads((tmp_path / "c" / "default" / "warm-start" / "sft" / "final" /
                                  "config.json").read_text())
    other = replace(TINY, warm_steps=3)  # other parameters: the shipped one does not apply
    assert run_demo(tmp_path / "d", "default", workers=1, profile=other,
                    stages=stages)["warm_start"]["installed"] is None

    (shipped / "config.json").write_bytes(b"edited")
    with pytest.raises(ConfigError, match=r"config\.json missing or not as its recipe"):
        run_demo(tmp_path / "e", "default", workers=1, profile=TINY, stages=stages)


def test_the_shipped_warm_start_is_the_default_profiles(tmp_path: Path) -> None:
    """The shipped files match their checksums, and the recipe's fingerprint is the one the
    default and ``--full`` profiles compute for their warm start from the shipped base - so
    a change to either profile's warm-start parameters (or to the base) fails here until the
    warm start is made again and shipped."""
    from harnessgrid.trainer.demo import _train_config
    from harnessgrid.trainer.demo_stages import (
        SHIPPED_WARM_START,
        _training_params,
        model_stage,
        stage_fingerprint,
    )

    recipe = json.loads((SHIPPED_WARM_START / "recipe.json").read_text())
    model = model_stage(tmp_path / "model", Stages())
    for name in ("default", "full"):
        profile = PROFILES[name]
        config = _train_config("sft", model.directory, tmp_path / "sft", profile,
                               harnesses=warm_start_codes(1, profile.warm_start))
        fingerprint = stage_fingerprint(_training_params(config, model.fingerprint))
        assert fingerprint == recipe["fingerprint"], name
    assert Stages().shipped_warm_start(recipe["fingerprint"]) == SHIPPED_WARM_START
    # installed over the base: a whole model folder, the shipped files byte for byte
    from harnessgrid.plugins.micro.pretraining import MODEL_FILES

    final = tmp_path / "final"
    Stages().install(SHIPPED_WARM_START, final, model.directory)
    assert sorted(p.name for p in final.iterdir()) == sorted(MODEL_FILES)
    for name, digest in recipe["sha256"].items():
        assert hashlib.sha256((final / name).read_bytes()).hexdigest() == digest
    assert sorted(recipe["sha256"]) == sorted(p.name for p in SHIPPED_WARM_START.iterdir()
                                              if p.name != "recipe.json")


def test_bar_plots_draw_unmeasured_values_as_no_bar() -> None:
    """Issue 43, item 6: a value that was not measured (``mean`` None: the singles' mean has
    no well-formed share on its own harnesses) was drawn as a 0 bar with a whisker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harnessgrid.trainer.demo_report import _bars

    measured = {"mean": 0.5, "ci95": [0.4, 0.6]}
    rows = {"a": dict.fromkeys(SETTINGS, measured),
            "b": {**dict.fromkeys(SETTINGS, measured), SETTINGS[-1]: {"mean": None},
                  SETTINGS[0]: {"mean": 0.0, "ci95": [0.0, 0.0]}}}
    drawn: list[Any] = []
    real_bar = plt.Axes.bar

    def bar(ax: Any, xs: Any, heights: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append((list(heights), ax))
        return real_bar(ax, xs, heights, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt.Axes, "bar", bar)
        plot = _bars(plt, rows, "x.png", "title", "Pass@1 (%)")
    assert plot.png is not None
    assert plot.png.startswith(b"\x89PNG")
    unmeasured = drawn[-1][0][1]  # the last setting, row "b"
    assert math.isnan(unmeasured)  # no bar
    texts = [t.get_text() for t in drawn[0][1].texts]
    assert sorted(texts) == ["0", "–"]  # the measured 0 and the unmeasured value are labelled
