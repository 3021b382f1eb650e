"""``harnessgrid demo``: the paper's comparison at CPU scale (issue 17).

The question the paper asks: does training through many harness configurations (the 18-run
orthogonal array, K = 2 Hamming pairing) make a policy hold up on harnesses it never saw, where
training through one harness does not? The demo answers it end to end on a laptop, with the
code path a GPU user runs on the real 15 levels and Qwen3-4B -- only the scale differs:

- **model**: ``tiny:micro-base``, the ``micro`` model (about 0.6M parameters, a byte-level BPE
  trained on the micro harnesses' and tasks' texts, so prompts are a few hundred tokens)
  pretrained to do file tasks in a neutral notation that is none of the harnesses'
  (:mod:`harnessgrid.plugins.micro.pretraining`), as a GPU user starts from a pretrained Qwen3;
- **space and tasks**: the ``micro`` plugin (five factors x three compact levels, shipped as a
  third party's plugin) and its ``micro`` suite of one- to four-step file tasks;
- **per condition** (three single-harness baselines, one per tool-interface level -
  :data:`SINGLES`, a rule fixed before any result -, ``oa-18``; with ``--full`` also
  ``random-18``, ``first-order-3`` and ``oa-18-k1``) and seed: a supervised warm start on scripted-oracle
  demonstrations rendered through the condition's harnesses (TRL SFTTrainer), then GRPO
  through the harness-scaling schedule (the project's trainer), the same number of steps and
  episodes for every condition;
- **evaluation** by the project's evaluator, greedy decoding: *in-space* over the 18 held-out
  configurations, *out-of-space* through the emulated Claude Code and OpenClaw shells, and
  *original* on the condition's own training harnesses.

Every condition is scored in-space on one set of 18 configurations outside every condition's
training design (:func:`heldout_codes`). Two tables, mean ± the half-width of its 95 %
t-interval over seeds (one seed: the value alone), with the singles' mean, the single picked
on its own harness and oa-18's paired gain over the mean as extra rows: Pass@1, and the share of
*well-formed turns* (a call the harness accepted). The second shows whether the policy speaks a
harness's protocol at all: that is the first thing a harness change breaks, and it explains the
first (a model that cannot speak a harness solves nothing through it). Both go to the terminal, ``OUT/PROFILE/report.md``, ``OUT/PROFILE/results.json`` and
``OUT/PROFILE/report.html``, the plots also to ``OUT/PROFILE/*.png``.

Each profile writes its own folder, each (condition, seed) its own below it
(``OUT/PROFILE/CONDITION-seedN/{sft,grpo,eval}``), and each stage (model build, SFT, GRPO,
evaluation) records the parameters that made it and how long it took when it ran
(``STAGE.stage.json`` beside its folder). A re-run reuses a finished stage with the same
parameters, resumes an unfinished one, and redoes -- saying which and why -- one made with other
parameters, together with every stage built on it. So ``--quick`` and then the default profile
into the same ``--out`` never mix, and a changed budget never reports the old models.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["CONDITIONS", "PROFILES", "Condition", "Profile", "Stages", "run_demo"]


@dataclass(frozen=True)
class Condition:
    """One way of choosing training harnesses."""

    name: str
    design: str  # single | oa | random | first-order
    k: int = 2
    pairing: str = "hamming"
    design_size: int = 18
    harness: str | None = None  # design "single": its one configuration


#: The single-harness baselines, by a rule fixed before any result (issue 37): one per
#: tool-interface level - the factor a harness change breaks first - with every other factor
#: at its first level. The paper trains one fixed harness; which one is a choice that moves
#: the baseline by the interface's own difficulty, so the demo reports all three, their mean
#: per seed, and the one a user would pick without the test set: the best on its own harness.
SINGLES: dict[str, str] = {f"single-T{level}": f"S0-T{level}-O0-C0-W0" for level in range(3)}

CONDITIONS: dict[str, Condition] = {
    **{name: Condition(name, "single", k=1, pairing="repeat", harness=code)
       for name, code in SINGLES.items()},
    "oa-18": Condition("oa-18", "oa", k=2),
    "random-18": Condition("random-18", "random", k=2),
    "first-order-3": Condition("first-order-3", "first-order", k=2),
    "oa-18-k1": Condition("oa-18-k1", "oa", k=1),
}


@dataclass(frozen=True)
class Profile:
    """The budget of one demo size; the same for every condition."""

    conditions: tuple[str, ...]
    seeds: int
    sft_episodes: int
    sft_steps: int
    sft_batch: int
    sft_lr: float
    grpo_steps: int
    tasks_per_step: int
    rollouts: int
    grpo_lr: float
    eval_tasks: int
    max_turns: int = 8
    max_new_tokens: int = 48
    #: each SFT step's rows sorted into this many forward passes: the same gradient with less
    #: padding (1.6x faster per step on the demo's rows)
    sft_micro_batches: int = 4


#: Budgets measured on a 2-core VM (one run per core, one torch thread each): an oracle
#: demonstration costs about 0.1 s, an evaluation episode 0.4-1.4 s and an SFT step of 8 rows
#: about 0.9 s (rows drawn at random; grouping them by length learned much less per step, see
#: ``sft_args``). From the pretrained base, 200 SFT steps gave no held-out Pass@1 and 400 gave
#: 19-33 % through the array (benchmarks/README.md, "A base that copies"), so ``default`` runs
#: 400 steps, two seeds of each condition (three single baselines and oa-18: 17.5 minutes on
#: 2026-12-05); ``full`` the same budget per run for seven conditions and three seeds (21 runs,
#: about 50 minutes estimated from the default's per-run time).
PROFILES: dict[str, Profile] = {
    "quick": Profile(conditions=("single-T0", "oa-18"), seeds=1, sft_episodes=48, sft_steps=20,
                     sft_batch=8, sft_lr=3e-3, grpo_steps=1, tasks_per_step=2, rollouts=2,
                     grpo_lr=2e-5, eval_tasks=1, max_turns=4),
    "default": Profile(conditions=(*SINGLES, "oa-18"), seeds=2, sft_episodes=400,
                       sft_steps=400, sft_batch=8, sft_lr=3e-3, grpo_steps=2,
                       tasks_per_step=4, rollouts=4, grpo_lr=2e-5, eval_tasks=4),
    "full": Profile(conditions=(*SINGLES, "oa-18", "random-18", "first-order-3", "oa-18-k1"),
                    seeds=3, sft_episodes=400, sft_steps=400, sft_batch=8, sft_lr=3e-3,
                    grpo_steps=2, tasks_per_step=4, rollouts=4, grpo_lr=2e-5, eval_tasks=4),
}

SETTINGS = ("in-space", "out-of-space", "original")


def design_codes(condition: Condition, seed: int) -> list[str]:
    """The condition's training configurations (codes in the micro space)."""
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.plan import build_design

    return list(build_design(_config(condition, seed, Path("."), Path("."), "sft",
                                     PROFILES["quick"]), MICRO_SPACE).codes)


#: Seeds whose training designs every held-out set avoids, whatever a run's ``--seeds``: the
#: default and ``--full`` profiles then score every condition on the same configurations.
HOLDOUT_SEEDS = 3


def warm_start_codes(seeds: int = HOLDOUT_SEEDS) -> list[str]:
    """The configurations of the shared warm start: the union of every condition's training
    design at every seed below ``max(seeds, HOLDOUT_SEEDS)``. Every condition then starts from
    a model that has seen its own training harnesses no more and no less than the others', and
    the held-out and validation sets lie outside it."""
    return sorted({code for condition in CONDITIONS.values()
                   for seed in range(max(seeds, HOLDOUT_SEEDS))
                   for code in design_codes(condition, seed)})


def validation_codes(seeds: int = HOLDOUT_SEEDS) -> list[str]:
    """18 configurations for choices made while building the demo (warm-start recipe, RL
    steps and learning rate): outside every training design and the test holdout
    (:func:`heldout_codes`), balanced over the levels like it."""
    from harnessgrid.designs import Design, holdout
    from harnessgrid.plugins.micro import MICRO_SPACE

    taken = sorted({*warm_start_codes(seeds), *heldout_codes(seeds)})
    union = Design(space=MICRO_SPACE, configs=tuple(MICRO_SPACE.parse(c) for c in taken),
                   kind="custom", params={"training_and_test_to_seed": max(seeds,
                                                                           HOLDOUT_SEEDS)})
    return list(holdout(union, 18, 0).codes)


def heldout_codes(seeds: int = HOLDOUT_SEEDS) -> list[str]:
    """The 18 in-space configurations every condition is scored on: balanced over the levels
    (:func:`~harnessgrid.designs.holdout`) and outside the training design of *every*
    condition at every seed below ``max(seeds, HOLDOUT_SEEDS)`` - so no condition is ever
    scored as "held out" on a configuration it trained on (random-18 draws a design per seed),
    and the conditions are compared on one set of harnesses, pairwise."""
    from harnessgrid.designs import Design, holdout
    from harnessgrid.plugins.micro import MICRO_SPACE

    trained = sorted({code for condition in CONDITIONS.values()
                      for seed in range(max(seeds, HOLDOUT_SEEDS))
                      for code in design_codes(condition, seed)})
    union = Design(space=MICRO_SPACE, configs=tuple(MICRO_SPACE.parse(c) for c in trained),
                   kind="custom", params={"union_of_conditions_to_seed": max(seeds,
                                                                             HOLDOUT_SEEDS)})
    return list(holdout(union, 18, 0).codes)


def _config(condition: Condition, seed: int, model: Path, out: Path, algorithm: str,
            profile: Profile, init_from: Path | None = None) -> Any:
    from harnessgrid.plugins.micro import MICRO_LEVELS
    from harnessgrid.trainer.config import config_from_mapping

    sft = algorithm == "sft"
    return config_from_mapping({
        "model": str(model), "init_from": str(init_from) if init_from else None,
        "algorithm": algorithm, "device": "cpu",
        "design": condition.design, "k": condition.k, "pairing": condition.pairing,
        "design_size": condition.design_size,
        "harness": condition.harness,
        "space": {f: list(v) for f, v in MICRO_LEVELS.items()},
        "suite": "micro", "split": "train",
        "tasks_per_step": profile.tasks_per_step,
        "rollouts_per_task": None if sft else profile.rollouts,
        "steps": profile.sft_steps if sft else profile.grpo_steps,
        "learning_rate": profile.sft_lr if sft else profile.grpo_lr,
        "max_turns": profile.max_turns, "context_budget": 2048,
        "max_new_tokens": profile.max_new_tokens, "temperature": 1.0, "seed": seed,
        "concurrency": 64, "output_dir": str(out),
        # The micro model solves no task, so a task-only reward gives GRPO no signal (every
        # rollout of a group scores alike); the bonus rewards the turns that speak the harness.
        "format_bonus": 0.0 if sft else 0.5,
        "sft": {"episodes": profile.sft_episodes, "batch_size": profile.sft_batch,
                "micro_batches": profile.sft_micro_batches},
        "trl": {"save_steps": 10_000, "save_total_limit": 1, "logging_steps": 10,
                **({"warmup_steps": min(20, profile.sft_steps // 10),
                    "lr_scheduler_type": "cosine"} if sft else
                   {"lr_scheduler_type": "constant"})},
    })


STAGE_RECORD = ".stage.json"  # suffix of a stage's record, beside its folder


class Stages:
    """What the stages run: the micro model's build, the project's trainer and its evaluator.

    The (condition, seed) runs happen in worker processes, so an instance must pickle. A test
    passes a fake one to check the bookkeeping around the stages (records, reuse, redo, times)
    without training a model."""

    def build_model(self, path: Path) -> Path:
        """The demo's model in ``path``: the shipped micro base (``tiny:micro-base``), copied
        and checked against its checksums (an existing verified copy is reused)."""
        from harnessgrid.plugins.micro.pretraining import micro_base

        return micro_base(path)

    def model_parameters(self, path: Path) -> int:
        from safetensors import safe_open

        total = 0
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                n = 1
                for d in f.get_slice(name).get_shape():
                    n *= d
                total += n
        return total

    def prepare_worker(self) -> None:
        """One CPU thread per run, and no library progress bars burying the demo's lines."""
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        quiet_libraries()

    def train(self, config: Any, *, resume: bool,
              on_log: Callable[[int, dict[str, float]], None] | None = None) -> None:
        from harnessgrid.trainer.run import train

        train(config, resume=resume, on_log=on_log)

    def evaluate(self, config: Any, out: Path) -> dict[str, Any]:
        """Evaluate (or read a finished evaluation) into ``out``: per setting Pass@1 and the
        share of well-formed turns, and in-space Pass@1 per configuration."""
        from harnessgrid.evaluation.aggregate import per_run
        from harnessgrid.evaluation.run import evaluate
        from harnessgrid.plugins.micro import MICRO_SPACE

        outcome = evaluate(config, out, space=MICRO_SPACE)
        by_setting = {"in-space": "in-space", "out-of-space": "out-of-space",
                      "original": "train"}
        scores, well_formed = {}, {}
        for column, setting in by_setting.items():
            mine = [r for r in outcome.results if r.setting == setting]
            scores[column] = per_run(mine).get(0)
            well_formed[column] = well_formed_share(out, mine)
        per_config: dict[str, list[float]] = {}
        for r in outcome.results:
            if r.setting == "in-space" and r.scored:
                per_config.setdefault(r.harness, []).append(1.0 if r.passed else 0.0)
        return {"scores": scores, "well_formed": well_formed,
                "in_space_per_config": {k: statistics.fmean(v) for k, v in per_config.items()}}


def stage_fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def stage_record(directory: Path) -> dict[str, Any] | None:
    """What ``directory``'s stage recorded (``None``: nothing readable)."""
    try:
        data = json.loads(directory.with_name(directory.name + STAGE_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_record(directory: Path, record: dict[str, Any]) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    _write(directory.with_name(directory.name + STAGE_RECORD),
           json.dumps(record, indent=2) + "\n")


def _wipe(directory: Path) -> None:
    if directory.is_dir() and not directory.is_symlink():
        shutil.rmtree(directory)
    else:
        directory.unlink(missing_ok=True)
    directory.with_name(directory.name + STAGE_RECORD).unlink(missing_ok=True)


@dataclass
class StageRun:
    """One stage of one run and what this invocation does with it: ``reuse`` (finished with
    the same parameters), ``resume`` (unfinished, same parameters) or ``run`` (from scratch;
    ``reason`` says why an existing one was thrown away)."""

    directory: Path
    label: str
    params: dict[str, Any]
    fingerprint: str
    action: str
    reason: str | None = None
    seconds: float | None = None


#: How a stage's parameters name the stage it is built on (``from``: its fingerprint).
UPSTREAM = {"SFT": "the model", "GRPO": "the SFT model it starts from",
            "evaluation": "the GRPO model it evaluates"}


def open_stage(directory: Path, label: str, params: dict[str, Any], done: Path,
               upstream_redone: bool, who: str) -> StageRun:
    """Decide what to do with the stage in ``directory``; a stage that cannot be reused or
    resumed is deleted (with a line saying why) before it is redone. ``done``: the file a
    finished stage has; ``upstream_redone``: the stage it is built on ran in this invocation,
    so whatever this one built on before is gone."""
    fingerprint = stage_fingerprint(params)
    record = stage_record(directory)
    reason = None
    if record is None:
        if directory.exists():
            reason = "no record of the parameters it was made with"
    elif record.get("fingerprint") != fingerprint:
        reason = "its parameters changed: " + describe_changes(record.get("params"), params,
                                                               UPSTREAM.get(label, "its input"))
    elif upstream_redone:
        reason = f"{UPSTREAM.get(label, 'its input')} was redone"
    elif record.get("finished") and not done.exists():
        reason = f"its output ({done.name}) is missing"
    if reason is not None:
        _say(f"  {who}: redoing {label}: {reason}")
        _wipe(directory)
        record = None
    if record is not None and record.get("finished"):
        seconds = record.get("seconds")
        return StageRun(directory, label, params, fingerprint, "reuse",
                        seconds=float(seconds) if isinstance(seconds, int | float) else None)
    action = "resume" if record is not None and directory.exists() else "run"
    return StageRun(directory, label, params, fingerprint, action, reason)


def describe_changes(old: Any, new: dict[str, Any], upstream: str) -> str:
    """The parameters that differ, e.g. ``steps 20 → 300, max_turns 4 → 8``."""
    if not isinstance(old, dict):
        return "its record is unreadable"
    before, after = _flat(old), _flat(new)
    changed = [k for k in sorted(before.keys() | after.keys())
               if before.get(k, _MISSING) != after.get(k, _MISSING)]
    parts = [f"{upstream} changed" if key == "from" else
             f"{key} {_short(before.get(key, '(none)'))} → {_short(after.get(key, '(none)'))}"
             for key in changed[:4]]
    if len(changed) > 4:
        parts.append(f"and {len(changed) - 4} more")
    return ", ".join(parts) or "its record differs"


_MISSING = object()


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run_stage(stage: StageRun, work: Callable[[bool], Any], who: str) -> Any:
    """``work(resume)`` for the stage: its parameters are recorded before it starts and its
    time when it ends. A finished stage's ``work`` only reads what is there, and its recorded
    time is kept. A mismatch the stage's own store finds (which the record did not catch)
    redoes the stage once from scratch instead of stopping the demo."""
    from harnessgrid.errors import ConfigError

    if stage.action != "reuse":
        _start(stage)
    started = time.perf_counter()
    try:
        value = work(stage.action != "run")
    except ConfigError as exc:
        if stage.action == "run":
            raise
        stage.reason = str(exc).splitlines()[0]
        _say(f"  {who}: redoing {stage.label}: {stage.reason}")
        _wipe(stage.directory)
        stage.action = "run"
        _start(stage)
        started = time.perf_counter()
        value = work(False)
    if stage.action != "reuse":
        stage.seconds = time.perf_counter() - started
        _write_record(stage.directory, {
            "stage": stage.label, "fingerprint": stage.fingerprint, "params": stage.params,
            "finished": True, "seconds": stage.seconds, "resumed": stage.action == "resume",
            "finished_at": _now()})
    return value


def _start(stage: StageRun) -> None:
    _write_record(stage.directory, {"stage": stage.label, "fingerprint": stage.fingerprint,
                                    "params": stage.params, "finished": False,
                                    "started_at": _now()})


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _training_params(config: Any, upstream: str) -> dict[str, Any]:
    """What decides a training stage's result: its config without paths or parallelism (the
    same run in a moved ``--out`` is the same run), and the stage it starts from."""
    data: dict[str, Any] = config.model_dump(mode="json", exclude={
        "model", "init_from", "output_dir", "concurrency", "save_trajectories",
        "rollout_backend", "ray_address"})
    return {"from": upstream, **data}


def run_condition(condition: Condition, seed: int, model: Path, model_fingerprint: str,
                  out: Path, profile: Profile, stages: Stages | None = None,
                  heldout: Sequence[str] | None = None) -> dict[str, Any]:
    """Warm start, GRPO and evaluation of one (condition, seed) in ``out``, each stage reused,
    resumed or redone (see the module docstring); in-space is scored on ``heldout`` (default
    :func:`heldout_codes`), which must not meet the condition's training design. Runs in a
    worker process of its own (one CPU thread)."""
    from harnessgrid.engine.runtime import EpisodeLimits
    from harnessgrid.evaluation.run import EvalConfig

    stages = stages or Stages()
    stages.prepare_worker()
    who = f"{condition.name} seed {seed}"
    t0 = time.perf_counter()
    sft_dir, grpo_dir, eval_dir = out / "sft", out / "grpo", out / "eval"

    sft_config = _config(condition, seed, model, sft_dir, "sft", profile)
    sft = open_stage(sft_dir, "SFT", _training_params(sft_config, model_fingerprint),
                     sft_dir / "final" / "config.json", False, who)
    if sft.action != "reuse":
        _say(f"  {who}: warm start, {profile.sft_episodes} oracle demonstrations, "
             f"{profile.sft_steps} SFT steps")
        next_line = [profile.sft_steps // 5]  # a line at about every fifth of the steps

        def sft_progress(step: int, logs: dict[str, float]) -> None:
            if "loss" in logs and step >= next_line[0]:
                next_line[0] = step + profile.sft_steps // 5
                _say(f"  {who}: SFT step {step}/{profile.sft_steps}, loss {logs['loss']:.3f} "
                     f"({time.perf_counter() - t0:.0f}s so far)")

        run_stage(sft, lambda resume: stages.train(sft_config, resume=resume,
                                                    on_log=sft_progress), who)

    grpo_config = _config(condition, seed, model, grpo_dir, "grpo", profile,
                          init_from=sft_dir / "final")
    grpo = open_stage(grpo_dir, "GRPO", _training_params(grpo_config, sft.fingerprint),
                      grpo_dir / "final" / "config.json", sft.action != "reuse", who)
    if grpo.action != "reuse":
        _say(f"  {who}: {profile.grpo_steps} GRPO steps ({time.perf_counter() - t0:.0f}s "
             "so far)")
        run_stage(grpo, lambda resume: stages.train(grpo_config, resume=resume), who)

    from harnessgrid.plugins.micro import micro_address

    codes = design_codes(condition, seed)
    heldout = list(heldout if heldout is not None else heldout_codes())
    if set(codes) & set(heldout):
        raise ValueError(f"{who} trains on held-out configurations "
                         f"{sorted(set(codes) & set(heldout))}")
    eval_config = EvalConfig(
        policy=f"hf:{grpo_dir / 'final'}",
        policy_options={"temperature": 0, "max_new_tokens": profile.max_new_tokens},
        suites=("micro",), settings=("in-space", "out-of-space", "train"), runs=1,
        harnesses=tuple(micro_address(c) for c in heldout),
        # micro:CODE: the evaluator reads a plain code in the paper's space
        train_harnesses=tuple(micro_address(c) for c in codes), limit=profile.eval_tasks,
        concurrency=64,
        limits=EpisodeLimits(max_turns=profile.max_turns, max_context_tokens=4096))
    eval_params = {"from": grpo.fingerprint, **eval_config.model_dump(
        mode="json", exclude={"policy", "concurrency", "workers", "ray", "keep_failures"})}
    evaluation = open_stage(eval_dir, "evaluation", eval_params, eval_dir,
                            grpo.action != "reuse", who)
    if evaluation.action != "reuse":
        _say(f"  {who}: evaluating ({time.perf_counter() - t0:.0f}s so far)")
    found = run_stage(evaluation, lambda _resume: stages.evaluate(eval_config, eval_dir), who)
    done = (sft, grpo, evaluation)
    return {"condition": condition.name, "seed": seed, **found,
            "train_configs": codes, "heldout_configs": heldout,
            "timings": {"sft_s": sft.seconds, "grpo_s": grpo.seconds,
                        "eval_s": evaluation.seconds},
            "stages_run": [s.label for s in done if s.action != "reuse"],
            "redone": {s.label: s.reason for s in done if s.reason},
            "fingerprints": {s.label: s.fingerprint for s in done}}


def well_formed_share(eval_dir: Path, results: Sequence[Any]) -> float | None:
    """The share of the model's turns that spoke the harness's protocol over ``results``'
    episodes (:meth:`~harnessgrid.engine.trajectory.Trajectory.well_formed_turns`)."""
    from harnessgrid.evaluation.store import load_trajectory

    turns = ok = 0
    for result in results:
        if not result.scored:
            continue
        trajectory = load_trajectory(eval_dir, result)
        turns += len(trajectory.turns)
        ok += trajectory.well_formed_turns()
    return ok / turns if turns else None


def _say(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


def quiet_libraries() -> None:
    """The demo prints its own progress; library progress bars and notices would bury it."""
    import datasets
    from transformers.utils import logging

    hf_logging: Any = logging  # partially typed upstream
    datasets.disable_progress_bars()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def model_stage(directory: Path, stages: Stages) -> StageRun:
    """Build (or find built) the profile's model; its fingerprint is a hash of the files the
    build wrote, so whatever changes the model (the builder, the micro plugin's texts) redoes
    every stage trained from it."""
    record = stage_record(directory)
    started = time.perf_counter()
    stages.build_model(directory)
    fingerprint = _tree_hash(directory)
    params = {"files_sha256": fingerprint}
    if record is not None and record.get("finished") and record.get("fingerprint") == fingerprint:
        seconds = record.get("seconds")
        return StageRun(directory, "model", params, fingerprint, "reuse",
                        seconds=float(seconds) if isinstance(seconds, int | float) else None)
    reason = None
    if record is not None:
        reason = "its build changed (the micro plugin's texts or the model builder)"
        _say(f"  model: rebuilt: {reason}")
    stage = StageRun(directory, "model", params, fingerprint, "run", reason,
                     seconds=time.perf_counter() - started)
    _write_record(directory, {"stage": "model", "fingerprint": fingerprint, "params": params,
                              "finished": True, "seconds": stage.seconds,
                              "finished_at": _now()})
    return stage


def _tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def run_demo(out: Path, profile_name: str = "default", seeds: int | None = None,
             workers: int | None = None,
             on_result: Callable[[dict[str, Any]], None] | None = None,
             profile: Profile | None = None, stages: Stages | None = None) -> dict[str, Any]:
    """Every (condition, seed) of the profile (a named one, or ``profile`` itself, under that
    name), ``workers`` at a time, into ``out/profile_name``; then the tables and the report."""
    import multiprocessing

    from harnessgrid.paths import require_output_dir

    profile = profile or PROFILES[profile_name]
    stages = stages or Stages()
    n_seeds = seeds or profile.seeds
    require_output_dir(out, "--out").mkdir(parents=True, exist_ok=True)
    if (out / "results.json").is_file():
        _say(f"  note: {out}/results.json and the run folders beside it are from an earlier "
             "demo version (one folder for every profile); they are not used: this run "
             f"writes {out / profile_name}")
    root = out / profile_name
    root.mkdir(exist_ok=True)
    started = time.perf_counter()
    model = model_stage(root / "model", stages)
    runs = [(CONDITIONS[c], s) for s in range(n_seeds) for c in profile.conditions]
    heldout = heldout_codes(n_seeds)
    workers = workers or min(len(runs), os.cpu_count() or 1)
    results: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")  # torch and sandboxes: no fork
    with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                             initializer=_die_with_parent) as pool:
        futures = [pool.submit(run_condition, c, s, model.directory, model.fingerprint,
                               root / f"{c.name}-seed{s}", profile, stages, heldout)
                   for c, s in runs]
        for future in futures:
            result = future.result()
            results.append(result)
            if on_result is not None:
                on_result(result)
    fingerprints = {"model": model.fingerprint}
    for r in results:
        fingerprints.update({f"{r['condition']}-seed{r['seed']}/{label}": fp
                             for label, fp in r["fingerprints"].items()})
    timing = {"seconds": time.perf_counter() - started, "measured_at": _now(),
              "stages_run": (model.action != "reuse") + sum(len(r["stages_run"])
                                                            for r in results),
              "stages": len(fingerprints), "workers": workers, "cpus": os.cpu_count()}
    all_reused = timing["stages_run"] == 0
    derived = derived_runs(results, profile.conditions)
    rows = [*profile.conditions, *dict.fromkeys(r["condition"] for r in derived)]
    if all_reused:
        timing = _earlier_timing(root / "results.json", fingerprints)
    summary = {"profile": profile_name, "profile_budget": asdict(profile), "seeds": n_seeds,
               "model_parameters": stages.model_parameters(model.directory), "runs": results,
               "conditions": condition_configs(results, profile.conditions),
               "derived": derived, "single_best_picked": {
                   str(r["seed"]): r["picked"] for r in derived if "picked" in r},
               "table": table([*results, *derived], rows),
               "table_well_formed": table([*results, *derived], rows, key="well_formed"),
               **timing, "all_reused": all_reused,
               "stage_seconds": _stage_seconds(model, results),
               "stage_fingerprints": fingerprints}
    write_outputs(root, summary)
    return summary


TIMING_KEYS = ("seconds", "measured_at", "stages_run", "stages", "workers", "cpus")


def _earlier_timing(results_json: Path, fingerprints: dict[str, str]) -> dict[str, Any]:
    """A re-run that only read finished stages keeps the wall time of the run that computed
    them (in ``results.json`` when it describes the same stages); otherwise that time is
    unknown (``seconds`` None) and only the per-stage times stand."""
    try:
        earlier = json.loads(results_json.read_text())
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict) and earlier.get("stage_fingerprints") == fingerprints:
        return {key: earlier.get(key) for key in TIMING_KEYS}
    return {"seconds": None, "measured_at": None, "stages_run": 0,
            "stages": len(fingerprints), "workers": None, "cpus": os.cpu_count()}


def _stage_seconds(model: StageRun, results: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds per kind of stage, summed over runs, each as recorded when the stage ran
    (``None`` where a time was not recorded)."""
    out: dict[str, float | None] = {"model": model.seconds}
    for kind in ("sft", "grpo", "eval"):
        times = [r["timings"].get(f"{kind}_s") for r in results]
        out[kind] = None if any(t is None for t in times) else sum(times)
    return out


def _die_with_parent() -> None:
    """A worker ends when the demo's process does (killed, not only interrupted): otherwise an
    orphaned worker would go on training and holding a core. Linux only; elsewhere a no-op."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


SINGLE_MEAN = "single: mean of 3"
SINGLE_BEST = "single: best on own harness"
GAIN = "oa-18 − single: mean of 3"
"""The rows the tables add to the runs': the single baselines' mean and the single a user
would pick (highest Pass@1 on its own training harness - never on held-out ones), and
oa-18's gain over the mean, each per seed and then over seeds, so the gain's interval is a
paired one."""


def derived_runs(results: Sequence[dict[str, Any]], conditions: Sequence[str]
                 ) -> list[dict[str, Any]]:
    """Per seed with every single baseline done: :data:`SINGLE_MEAN`, :data:`SINGLE_BEST`
    (``picked`` names it) and, with oa-18, :data:`GAIN` - in the shape of a run's result."""
    singles = [c for c in conditions if c in SINGLES]
    if len(singles) < 2:
        return []
    out: list[dict[str, Any]] = []
    for seed in sorted({r["seed"] for r in results}):
        mine = sorted((r for r in results if r["seed"] == seed and r["condition"] in singles),
                      key=lambda r: singles.index(r["condition"]))
        if len(mine) != len(singles):
            continue
        mean = {key: {setting: _mean_or_none([r[key][setting] for r in mine])
                      for setting in SETTINGS} for key in ("scores", "well_formed")}
        out.append({"condition": SINGLE_MEAN, "seed": seed, **mean})
        best = max(mine, key=lambda r: r["scores"]["original"] or 0.0)  # first on ties
        out.append({"condition": SINGLE_BEST, "seed": seed, "picked": best["condition"],
                    "scores": best["scores"], "well_formed": best["well_formed"]})
        oa = [r for r in results if r["seed"] == seed and r["condition"] == "oa-18"]
        if oa:
            out.append({"condition": GAIN, "seed": seed, **{
                key: {setting: _difference(oa[0][key][setting], mean[key][setting])
                      for setting in SETTINGS} for key in ("scores", "well_formed")}})
    return out


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if len(known) == len(values) and known else None


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def condition_configs(results: Sequence[dict[str, Any]], conditions: Sequence[str]
                      ) -> dict[str, dict[str, dict[str, list[str]]]]:
    """condition → ``train_configs`` and ``heldout_configs``, each by seed: what every run
    trained on and was scored on as held out."""
    return {name: {key: {str(r["seed"]): r[key] for r in results if r["condition"] == name}
                   for key in ("train_configs", "heldout_configs")} for name in conditions}


#: Two-sided 95 % quantiles of Student's t by degrees of freedom (1-30); beyond, the normal's.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def ci95(values: Sequence[float]) -> float | None:
    """Half-width of the 95 % t-interval of the mean of ``values`` (seeds): ``t(n-1) · s /
    √n`` with the sample standard deviation; None for fewer than two values, which have no
    interval. With two seeds t is 12.7: two seeds resolve only large differences."""
    n = len(values)
    if n < 2:
        return None
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.960
    return t * statistics.stdev(values) / math.sqrt(n)


#: Why the emulated shells' Pass@1 is not a measurement at micro scale: written in every table
#: in place of a 0 that no model of the demo could have avoided.
NOT_MEASURABLE = "n/m"
OUT_OF_SPACE_NOTE = (
    "n/m: not measurable at micro scale. The emulated Claude Code and OpenClaw shells take "
    "calls in their own tool syntax (`Read`, `Write`, `Bash`, ... with JSON arguments), which "
    "occurs in no warm-start or training row of the micro harnesses, and their first prompts "
    "are several times longer than any micro episode: Pass@1 there is 0 by construction, not "
    "by measurement (results.json keeps the counted value, marked by_construction).")


def table(results: Sequence[dict[str, Any]], conditions: Sequence[str], key: str = "scores"
          ) -> dict[str, dict[str, dict[str, Any]]]:
    """condition → setting → over seeds of each run's ``key`` (``scores``: Pass@1;
    ``well_formed``: the share of well-formed turns): the mean, the half-width of its 95 %
    t-interval (``ci95``; None for one seed, which has no interval), the per-seed values, and
    for out-of-space ``by_construction`` (see :data:`OUT_OF_SPACE_NOTE`)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in conditions:
        mine = sorted((r for r in results if r["condition"] == name), key=lambda r: r["seed"])
        out[name] = {}
        for setting in SETTINGS:
            values = [r[key][setting] for r in mine if r.get(key, {}).get(setting) is not None]
            out[name][setting] = {
                "mean": statistics.fmean(values) if values else None,
                "ci95": ci95(values), "seeds": len(values), "per_seed": values,
                **({"by_construction": True} if setting == "out-of-space" else {})}
    return out


def spread_words(summary: dict[str, Any]) -> str:
    """What the tables' cells are: ``mean ± 95 % t-interval over 3 seeds``, or ``1 seed (no
    interval)``."""
    n = summary["seeds"]
    return ("1 seed (no interval)" if n == 1
            else f"mean ± half-width of its 95 % t-interval over {n} seeds")


def format_table(summary: dict[str, Any], key: str = "table") -> str:
    """The paper-shaped table as markdown (``key="table_well_formed"``: well-formed turns).
    A cell is ``mean ± ci95``; with one seed the value alone (an interval of 0.0 would claim a
    precision there is none of), marked ``(1 seed)`` when other cells have more. Out-of-space
    cells are ``n/m`` (:data:`OUT_OF_SPACE_NOTE`), never a 0 printed as measured."""
    rows = summary[key]
    several = any((stat.get("seeds") or 0) > 1 for row in rows.values() for stat in row.values())

    def cell(stat: dict[str, Any]) -> str:
        if stat.get("by_construction"):
            return NOT_MEASURABLE
        if stat["mean"] is None:
            return "-"
        if stat.get("ci95") is not None:
            return f"{100 * stat['mean']:.1f} ± {100 * stat['ci95']:.1f}"
        return f"{100 * stat['mean']:.1f}" + (" (1 seed)" if several else "")

    lines = ["| condition | in-space (18 held out) | out-of-space (Claude Code, OpenClaw) "
             "| original (training harnesses) |", "|---|---:|---:|---:|"]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(cell(row[s]) for s in SETTINGS) + " |")
    return "\n".join(lines)


def write_outputs(out: Path, summary: dict[str, Any]) -> None:
    """``results.json``, ``report.md``, ``report.html`` and the plots as PNG files beside them
    (when matplotlib is installed; a plot not drawn removes its stale file), each replaced
    atomically."""
    from harnessgrid.trainer.demo_report import draw_plots, render_html, render_markdown

    _write(out / "results.json", json.dumps(summary, indent=2) + "\n")
    tables = (format_table(summary), format_table(summary, "table_well_formed"))
    plots = draw_plots(summary)
    for plot in plots:
        if plot.png is None:
            (out / plot.file).unlink(missing_ok=True)
        else:
            _write(out / plot.file, plot.png)
    _write(out / "report.md", render_markdown(summary, *tables, plots))
    _write(out / "report.html", render_html(summary, *tables, plots))


def _write(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    os.replace(tmp, path)
