"""``harnessgrid demo``: the paper's comparison at CPU scale (issue 17).

The question the paper asks: does training through many harness configurations (the 18-run
orthogonal array, K = 2 Hamming pairing) make a policy hold up on harnesses it never saw, where
training through one harness does not? The demo answers it end to end on a laptop, with the
code path a GPU user runs on the real 15 levels and Qwen3-4B -- only the scale differs:

- **model**: the offline ``micro`` model (about 0.6M parameters) with a byte-level BPE trained
  on the micro harnesses' and tasks' texts (so prompts are a few hundred tokens);
- **space and tasks**: the ``micro`` plugin (five factors x three compact levels, shipped as a
  third party's plugin) and its ``micro`` suite of one- to four-step file tasks;
- **per condition** (``single``, ``oa-18``; with ``--full`` also ``random-18``,
  ``first-order-3`` and ``oa-18-k1``) and seed: a supervised warm start on scripted-oracle
  demonstrations rendered through the condition's harnesses (TRL SFTTrainer), then GRPO
  through the harness-scaling schedule (the project's trainer), the same number of steps and
  episodes for every condition;
- **evaluation** by the project's evaluator, greedy decoding: *in-space* over the 18 held-out
  configurations, *out-of-space* through the emulated Claude Code and OpenClaw shells, and
  *original* on the condition's own training harnesses.

Two tables, mean ± spread over seeds: Pass@1, and the share of *well-formed turns* (a call
the harness accepted). The second shows whether the policy speaks a harness's protocol at all:
that is the first thing a harness change breaks, and what a sub-million-parameter model learns
in minutes, long before it reliably copies file names into its calls. Both go to the terminal,
``OUT/report.md``, ``OUT/results.json`` and ``OUT/report.html`` (with plots). Every stage is
resumable: re-running the same command skips what is done.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["CONDITIONS", "PROFILES", "Condition", "Profile", "run_demo"]


@dataclass(frozen=True)
class Condition:
    """One way of choosing training harnesses."""

    name: str
    design: str  # single | oa | random | first-order
    k: int = 2
    pairing: str = "hamming"
    design_size: int = 18


CONDITIONS: dict[str, Condition] = {
    "single": Condition("single", "single", k=1, pairing="repeat"),
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


#: Budgets measured on a 2-core VM (one run per core, one torch thread each): an SFT step of 8
#: rows costs 1.0-1.7 s (the single harness's rows are the longest), an oracle demonstration
#: about 0.1 s, and an evaluation episode 0.4-1.4 s. ``default`` took 11.3 minutes with one seed
#: and ``quick`` 2.4; ``full`` is about 30 minutes per run (15 runs: about 4 hours on 2 cores,
#: an estimate, not a measurement).
PROFILES: dict[str, Profile] = {
    "quick": Profile(conditions=("single", "oa-18"), seeds=1, sft_episodes=48, sft_steps=20,
                     sft_batch=8, sft_lr=3e-3, grpo_steps=1, tasks_per_step=2, rollouts=2,
                     grpo_lr=2e-5, eval_tasks=1, max_turns=4),
    "default": Profile(conditions=("single", "oa-18"), seeds=1, sft_episodes=400,
                       sft_steps=300, sft_batch=8, sft_lr=3e-3, grpo_steps=2,
                       tasks_per_step=4, rollouts=4, grpo_lr=2e-5, eval_tasks=4),
    "full": Profile(conditions=("single", "oa-18", "random-18", "first-order-3", "oa-18-k1"),
                    seeds=3, sft_episodes=1000, sft_steps=800, sft_batch=8, sft_lr=3e-3,
                    grpo_steps=4, tasks_per_step=4, rollouts=4, grpo_lr=2e-5, eval_tasks=8),
}

SETTINGS = ("in-space", "out-of-space", "original")


def build_model(out: Path) -> Path:
    """The demo's model, in ``OUT/model``."""
    from harnessgrid.plugins.micro import build_micro_model

    return build_micro_model(out / "model")


def design_codes(condition: Condition, seed: int) -> list[str]:
    """The condition's training configurations (codes in the micro space)."""
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.plan import build_design

    return list(build_design(_config(condition, seed, Path("."), Path("."), "sft",
                                     PROFILES["quick"]), MICRO_SPACE).codes)


def single_harness() -> str:
    """The one harness of ``single``: the orthogonal array's first run, so it is never among
    the held-out in-space configurations (which the array's holdout excludes)."""
    from harnessgrid.designs import orthogonal_design
    from harnessgrid.plugins.micro import MICRO_SPACE

    return orthogonal_design(MICRO_SPACE).codes[0]


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
        "harness": single_harness() if condition.design == "single" else None,
        "space": {f: list(v) for f, v in MICRO_LEVELS.items()},
        "suite": "micro", "split": "train",
        "tasks_per_step": profile.tasks_per_step,
        "rollouts_per_task": None if sft else profile.rollouts,
        "steps": profile.sft_steps if sft else profile.grpo_steps,
        "learning_rate": profile.sft_lr if sft else profile.grpo_lr,
        "max_turns": profile.max_turns, "context_budget": 2048,
        "max_new_tokens": profile.max_new_tokens, "temperature": 1.0, "seed": seed,
        "concurrency": 64, "output_dir": str(out),
        "sft": {"episodes": profile.sft_episodes, "batch_size": profile.sft_batch},
        "trl": {"save_steps": 10_000, "save_total_limit": 1, "logging_steps": 10,
                **({"warmup_steps": min(20, profile.sft_steps // 10),
                    "lr_scheduler_type": "cosine"} if sft else
                   {"lr_scheduler_type": "constant"})},
    })


def run_condition(condition: Condition, seed: int, model: Path, out: Path,
                  profile: Profile) -> dict[str, Any]:
    """Warm start, GRPO and evaluation of one (condition, seed); resumable by stage. Runs in a
    worker process of its own (one CPU thread)."""
    import torch

    from harnessgrid.evaluation.aggregate import per_run
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.runtime import EpisodeLimits
    from harnessgrid.trainer.run import train

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet_libraries()
    name = f"{condition.name} seed {seed}"
    timings: dict[str, float] = {}
    sft_dir, grpo_dir = out / "sft", out / "grpo"
    t0 = time.perf_counter()
    if not (sft_dir / "final" / "config.json").is_file():
        _say(f"  {name}: warm start, {profile.sft_episodes} oracle demonstrations, "
             f"{profile.sft_steps} SFT steps")
        next_line = [profile.sft_steps // 5]  # a line at about every fifth of the steps

        def sft_progress(step: int, logs: dict[str, float]) -> None:
            if "loss" in logs and step >= next_line[0]:
                next_line[0] = step + profile.sft_steps // 5
                _say(f"  {name}: SFT step {step}/{profile.sft_steps}, loss {logs['loss']:.3f} "
                     f"({time.perf_counter() - t0:.0f}s so far)")

        train(_config(condition, seed, model, sft_dir, "sft", profile),
              resume=sft_dir.exists(), on_log=sft_progress)
    t1 = time.perf_counter()
    if not (grpo_dir / "final" / "config.json").is_file():
        _say(f"  {name}: {profile.grpo_steps} GRPO steps ({t1 - t0:.0f}s so far)")
        train(_config(condition, seed, model, grpo_dir, "grpo", profile,
                      init_from=sft_dir / "final"), resume=grpo_dir.exists())
    t2 = time.perf_counter()
    _say(f"  {name}: evaluating ({t2 - t0:.0f}s so far)")
    codes = design_codes(condition, seed)
    eval_config = EvalConfig(
        policy=f"hf:{grpo_dir / 'final'}",
        policy_options={"temperature": 0, "max_new_tokens": profile.max_new_tokens},
        suites=("micro",), settings=("in-space", "out-of-space", "train"), runs=1,
        train_harnesses=tuple(codes), limit=profile.eval_tasks, concurrency=64,
        limits=EpisodeLimits(max_turns=profile.max_turns, max_context_tokens=4096))
    outcome = evaluate(eval_config, out / "eval", space=MICRO_SPACE)
    t3 = time.perf_counter()
    timings.update(sft_s=t1 - t0, grpo_s=t2 - t1, eval_s=t3 - t2)
    by_setting = {"in-space": "in-space", "out-of-space": "out-of-space", "original": "train"}
    scores, well_formed = {}, {}
    for column, setting in by_setting.items():
        mine = [r for r in outcome.results if r.setting == setting]
        scores[column] = per_run(mine).get(0)
        well_formed[column] = well_formed_share(out / "eval", mine)
    per_config: dict[str, list[float]] = {}
    for r in outcome.results:
        if r.setting == "in-space" and r.scored:
            per_config.setdefault(r.harness, []).append(1.0 if r.passed else 0.0)
    return {"condition": condition.name, "seed": seed, "scores": scores,
            "well_formed": well_formed,
            "in_space_per_config": {k: statistics.fmean(v) for k, v in per_config.items()},
            "training_harnesses": codes, "timings": timings}


def well_formed_share(eval_dir: Path, results: Sequence[Any]) -> float | None:
    """The share of the model's turns that spoke the harness's protocol over ``results``'
    episodes: a call the harness accepted (the syntax parsed and the arguments fit the tool),
    or the plan a plan-first workflow asks for. A reply with no call, or with a rejected one,
    does not count. Whether a policy speaks each harness's tool protocol is what a small model
    learns long before it solves the tasks."""
    from harnessgrid.api import resolve_harness
    from harnessgrid.evaluation.store import load_trajectory
    from harnessgrid.plugins.micro import MICRO_SPACE

    turns = ok = 0
    plan_first: dict[str, bool] = {}
    for result in results:
        if not result.scored:
            continue
        if result.harness not in plan_first:
            plan_first[result.harness] = resolve_harness(result.harness,
                                                         MICRO_SPACE).protocol.plan_turn
        for turn in load_trajectory(eval_dir, result).turns:
            turns += 1
            expected_plan = plan_first[result.harness] and turn.index == 0
            ok += turn.format_error is None and (bool(turn.calls) or expected_plan)
    return ok / turns if turns else None


def _say(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


def _quiet_libraries() -> None:
    """The demo prints its own progress; library progress bars and notices would bury it."""
    import datasets
    from transformers.utils import logging

    hf_logging: Any = logging  # partially typed upstream
    datasets.disable_progress_bars()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def run_demo(out: Path, profile_name: str = "default", seeds: int | None = None,
             workers: int | None = None,
             on_result: Callable[[dict[str, Any]], None] | None = None,
             profile: Profile | None = None) -> dict[str, Any]:
    """Every (condition, seed) of the profile (a named one, or ``profile`` itself), ``workers``
    at a time, then the table."""
    import multiprocessing

    from harnessgrid.paths import require_output_dir

    profile = profile or PROFILES[profile_name]
    n_seeds = seeds or profile.seeds
    require_output_dir(out, "--out").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model = build_model(out)
    runs = [(CONDITIONS[c], s) for s in range(n_seeds) for c in profile.conditions]
    workers = workers or min(len(runs), os.cpu_count() or 1)
    results: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")  # torch and sandboxes: no fork
    with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                             initializer=_die_with_parent) as pool:
        futures = [pool.submit(run_condition, c, s, model, out / f"{c.name}-seed{s}", profile)
                   for c, s in runs]
        for future in futures:
            result = future.result()
            results.append(result)
            if on_result is not None:
                on_result(result)
    summary = {"profile": profile_name, "profile_budget": asdict(profile), "seeds": n_seeds,
               "model_parameters": _parameters(model), "runs": results,
               "table": table(results, profile.conditions),
               "table_well_formed": table(results, profile.conditions, key="well_formed"),
               "seconds": time.perf_counter() - started, "cpus": os.cpu_count()}
    write_outputs(out, summary)
    return summary


def _die_with_parent() -> None:
    """A worker ends when the demo's process does (killed, not only interrupted): otherwise an
    orphaned worker would go on training and holding a core. Linux only; elsewhere a no-op."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _parameters(model: Path) -> int:
    from safetensors import safe_open

    total = 0
    with safe_open(str(model / "model.safetensors"), framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
            n = 1
            for d in f.get_slice(name).get_shape():
                n *= d
            total += n
    return total


def table(results: Sequence[dict[str, Any]], conditions: Sequence[str], key: str = "scores"
          ) -> dict[str, dict[str, dict[str, float | None]]]:
    """condition → setting → mean and spread (population std) over seeds of each run's
    ``key`` (``scores``: Pass@1; ``well_formed``: the share of well-formed turns)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for name in conditions:
        mine = [r for r in results if r["condition"] == name]
        out[name] = {}
        for setting in SETTINGS:
            values = [r[key][setting] for r in mine if r.get(key, {}).get(setting) is not None]
            out[name][setting] = {
                "mean": statistics.fmean(values) if values else None,
                "spread": statistics.pstdev(values) if len(values) > 1 else 0.0,
                "seeds": len(values)}
    return out


def format_table(summary: dict[str, Any], key: str = "table") -> str:
    """The paper-shaped table as markdown (``key="table_well_formed"``: well-formed turns)."""
    def cell(stat: dict[str, float | None]) -> str:
        if stat["mean"] is None:
            return "-"
        return f"{100 * stat['mean']:.1f} ± {100 * (stat['spread'] or 0):.1f}"

    lines = ["| condition | in-space (18 held out) | out-of-space (Claude Code, OpenClaw) "
             "| original (training harnesses) |", "|---|---:|---:|---:|"]
    for name, row in summary[key].items():
        lines.append(f"| {name} | " + " | ".join(cell(row[s]) for s in SETTINGS) + " |")
    return "\n".join(lines)


def write_outputs(out: Path, summary: dict[str, Any]) -> None:
    """``results.json``, ``report.md`` and ``report.html`` (with plots when matplotlib is
    installed), each replaced atomically."""
    from harnessgrid.trainer.demo_report import render_html, render_markdown

    _write(out / "results.json", json.dumps(summary, indent=2) + "\n")
    tables = (format_table(summary), format_table(summary, "table_well_formed"))
    _write(out / "report.md", render_markdown(summary, *tables))
    _write(out / "report.html", render_html(summary, *tables))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
