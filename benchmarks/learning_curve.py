"""Does the trainer make the agent better? Training reward, well-formed turns and held-out
results over GRPO / PPO steps from a warm start, against the same runs with the reward negated.

    python benchmarks/learning_curve.py [--steps 10] [--seeds 3] [--algorithms grpo,ppo]
                                        [--eval-tasks 2] [--out runs/learning-curve]

Every run starts from ``tiny:micro-warm`` (the micro model after its SFT warm start on oracle
demonstrations; built once and cached, see ``trainer/warm_start.py``). That model speaks most
micro harnesses' protocols but solves no task (it does not copy file names from the
instruction), so the reward is the task's score plus ``--format-bonus`` times the episode's
share of well-formed turns (``format_bonus`` of the experiment config): rollouts of a group
then differ, and GRPO has something to follow. Each (algorithm, seed) is trained twice through
the micro space's 18-run orthogonal array with K = 2 Hamming pairing:

- **signal**: that reward;
- **negated**: minus that reward. GRPO's advantages (and PPO's returns) point the other way
  with the same magnitudes, the same rollouts budget and the same sampling noise. If the signal
  arm rises and the negated arm does not, the reward -- not the noise of sampling or of the
  optimizer -- is what moves the policy.

Reported per step: the mean reward, the task score and the share of well-formed turns of the
step's rollouts; per run: held-out in-space results (the 18 configurations the array never
used, greedy decoding, ``--eval-tasks`` tasks each), Pass@1 and well-formed turns, of the
warm start and of the final model. A step's reward also moves with the tasks it happens to
draw (a "delete" task left alone scores 0.5, a "create" task 0); the two arms of one seed draw
the same tasks at every step, so the second table gives signal − negated, seed by seed. Writes ``OUT/results.json``, ``OUT/table.md`` and
``OUT/learning_curve.png`` (matplotlib). A re-run reuses finished runs and evaluations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ARMS = ("signal", "negated")


def run_reward(bonus: float, sign: float) -> Any:
    """The experiment's default reward (score + bonus x well-formed share), times ``sign``."""
    from harnessgrid.trainer.grpo import trajectory_reward

    reward = trajectory_reward("score", bonus)

    def signed(trajectories: Sequence[Any]) -> list[float | None]:
        return [None if r is None else sign * r for r in reward(trajectories)]

    signed.__name__ = "negated_reward" if sign < 0 else "reward"
    return signed


def run_config(algorithm: str, seed: int, model: str, out: Path, args: argparse.Namespace
               ) -> Any:
    from harnessgrid.plugins.micro import MICRO_LEVELS
    from harnessgrid.trainer.config import config_from_mapping

    grpo = algorithm == "grpo"
    return config_from_mapping({
        "model": model, "algorithm": algorithm, "device": "cpu", "design": "oa", "k": 2,
        "space": {f: list(v) for f, v in MICRO_LEVELS.items()},
        "suite": "micro", "split": "train", "seed": seed,
        "tasks_per_step": args.tasks if grpo else args.tasks * args.rollouts,
        "rollouts_per_task": args.rollouts if grpo else 1,
        "steps": args.steps, "learning_rate": args.lr, "limits": {"max_turns": 8, "max_context_tokens": 2048},
        "max_new_tokens": 48, "temperature": 1.0, "concurrency": 64, "output_dir": str(out),
        "format_bonus": args.format_bonus,
        **({} if grpo else {"ppo": {"critic_learning_rate": args.lr * 10}}),
        "trl": {"save_steps": args.steps, "save_total_limit": 1,
                "lr_scheduler_type": "constant"},
    })


def held_out(policy_dir: Path, out: Path, eval_tasks: int) -> dict[str, float | None]:
    """Pass@1 and the share of well-formed turns over the 18 held-out in-space micro
    configurations, greedy decoding."""
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.evaluation.aggregate import per_run
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.demo import well_formed_share

    config = EvalConfig(policy=f"hf:{policy_dir}",
                        policy_options={"temperature": 0, "max_new_tokens": 48},
                        suites=("micro",), settings=("in-space",), runs=1, limit=eval_tasks,
                        concurrency=64,
                        limits=EpisodeLimits(max_turns=8, max_context_tokens=4096))
    outcome = evaluate(config, out, space=MICRO_SPACE)
    return {"pass": per_run(outcome.results).get(0),
            "well_formed": well_formed_share(out, outcome.results)}


def one_run(algorithm: str, arm: str, seed: int, model: str, out: Path,
            args: argparse.Namespace) -> dict[str, Any]:
    """Train one (algorithm, arm, seed) and evaluate its final model (a worker process)."""
    import torch

    from harnessgrid.trainer.run import train

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from harnessgrid.trainer.demo import quiet_libraries

    quiet_libraries()
    run_dir = out / f"{algorithm}-{arm}-seed{seed}"
    started = time.perf_counter()
    train_dir = run_dir / "train"
    if not (train_dir / "final" / "config.json").is_file():
        train(run_config(algorithm, seed, model, train_dir, args),
              resume=train_dir.exists(),
              reward_funcs=[run_reward(args.format_bonus, -1.0 if arm == "negated" else 1.0)])
    steps = [json.loads(line) for line in (train_dir / "steps.jsonl").read_text().splitlines()]
    final = held_out(train_dir / "final", run_dir / "eval", args.eval_tasks)
    _say(f"  {algorithm} {arm} seed {seed}: reward {_fmt(steps[0]['reward'])} -> "
         f"{_fmt(steps[-1]['reward'])}, well-formed {_fmt(steps[0]['well_formed'])} -> "
         f"{_fmt(steps[-1]['well_formed'])}; held out: well-formed "
         f"{_fmt(final['well_formed'])}, Pass@1 {_fmt(final['pass'])} "
         f"({time.perf_counter() - started:.0f}s)")
    # The negated arm optimised minus the reward; its curve is the reward it got, unsigned.
    sign = -1.0 if arm == "negated" else 1.0
    return {"algorithm": algorithm, "arm": arm, "seed": seed,
            "reward": [None if s["reward"] is None else sign * s["reward"] for s in steps],
            "score": [s["score"] for s in steps], "pass_rate": [s["pass_rate"] for s in steps],
            "well_formed": [s.get("well_formed") for s in steps],
            "signal_tokens": [s.get("signal_tokens") for s in steps],
            "trained_tokens": [s.get("trained_tokens") for s in steps],
            "held_out": final}


def start_results(model: str, out: Path, eval_tasks: int) -> dict[str, float | None]:
    import torch

    from harnessgrid.trainer.demo import quiet_libraries

    torch.set_num_threads(1)
    quiet_libraries()
    return held_out(Path(model), out / "warm-start-eval", eval_tasks)


def summarise(runs: Sequence[dict[str, Any]], warm: dict[str, float | None], window: int
              ) -> list[dict[str, Any]]:
    """Per (algorithm, arm): the mean reward and well-formed share of the first and last
    ``window`` steps and the held-out results, each mean and population spread over seeds."""
    rows = []
    for algorithm in sorted({r["algorithm"] for r in runs}):
        for arm in ARMS:
            mine = [r for r in runs if r["algorithm"] == algorithm and r["arm"] == arm]
            if not mine:
                continue
            row: dict[str, Any] = {"algorithm": algorithm, "arm": arm, "seeds": len(mine),
                                   "warm": warm}
            for key in ("reward", "well_formed"):
                first = [statistics.fmean(_known(r[key][:window])) for r in mine]
                last = [statistics.fmean(_known(r[key][-window:])) for r in mine]
                row[f"{key}_first"], row[f"{key}_last"] = _stat(first), _stat(last)
                row[f"{key}_change"] = _stat([b - a for a, b in zip(first, last, strict=True)])
            for key in ("well_formed", "pass"):
                row[f"held_out_{key}"] = _stat([r["held_out"][key] for r in mine
                                                if r["held_out"][key] is not None])
            rows.append(row)
    return rows


def paired(runs: Sequence[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """Per algorithm: signal minus negated, seed by seed. The arms of one seed roll out the
    same tasks through the same harnesses at every step (the schedule depends on the seed
    only), so the difference cancels the task mix that moves both curves step to step."""
    out = []
    for algorithm in sorted({r["algorithm"] for r in runs}):
        by_seed = {(r["arm"], r["seed"]): r for r in runs if r["algorithm"] == algorithm}
        seeds = sorted(s for arm, s in by_seed if arm == "signal" and ("negated", s) in by_seed)
        if not seeds:
            continue
        row: dict[str, Any] = {"algorithm": algorithm, "seeds": len(seeds)}
        for key in ("reward", "well_formed"):
            row[key] = _stat([
                statistics.fmean(_known(by_seed["signal", s][key][-window:]))
                - statistics.fmean(_known(by_seed["negated", s][key][-window:]))
                for s in seeds])
        row["held_out_well_formed"] = _stat([
            (by_seed["signal", s]["held_out"]["well_formed"] or 0.0)
            - (by_seed["negated", s]["held_out"]["well_formed"] or 0.0) for s in seeds])
        out.append(row)
    return out


def paired_table(rows: Sequence[dict[str, Any]], window: int) -> str:
    lines = [f"| algorithm | seeds | signal − negated: reward, last {window} steps | "
             "well-formed turns (training) | held-out well-formed turns |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['algorithm']} | {r['seeds']} | {_cell(r['reward'], signed=True)} | "
                     f"{_cell(r['well_formed'], pct=True, signed=True)} | "
                     f"{_cell(r['held_out_well_formed'], pct=True, signed=True)} |")
    return "\n".join(lines)


def table(rows: Sequence[dict[str, Any]], window: int) -> str:
    lines = [f"| algorithm | arm | seeds | reward, first {window} steps → last {window} | "
             "change | well-formed turns (training), change | held-out well-formed: warm "
             "start → final | held-out Pass@1: warm start → final |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['algorithm']} | {r['arm']} | {r['seeds']} | {_cell(r['reward_first'])} → "
            f"{_cell(r['reward_last'])} | {_cell(r['reward_change'], signed=True)} | "
            f"{_cell(r['well_formed_change'], pct=True, signed=True)} | "
            f"{_pct(r['warm']['well_formed'])} → {_cell(r['held_out_well_formed'], pct=True)} | "
            f"{_pct(r['warm']['pass'])} → {_cell(r['held_out_pass'], pct=True)} |")
    return "\n".join(lines)


def plot(runs: Sequence[dict[str, Any]], path: Path) -> bool:
    """Top: reward vs step, mean over seeds with the min-max band, per arm. Bottom: signal −
    negated, seed by seed (the same tasks at each step), mean and band. One column per
    algorithm."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    algorithms = sorted({r["algorithm"] for r in runs})
    fig, axes = plt.subplots(2, len(algorithms), figsize=(5.5 * len(algorithms), 7),
                             squeeze=False, sharex=True)
    for col, algorithm in enumerate(algorithms):
        top, bottom = axes[0][col], axes[1][col]
        curves: dict[str, dict[int, list[float]]] = {}
        for arm, colour in zip(ARMS, ("tab:blue", "tab:red"), strict=True):
            mine = {r["seed"]: [v or 0.0 for v in r["reward"]] for r in runs
                    if r["algorithm"] == algorithm and r["arm"] == arm}
            curves[arm] = mine  # seed -> curve
            if mine:
                _band(top, list(mine.values()), colour, f"{arm} ({len(mine)} seeds)")
        seeds = sorted(set(curves.get("signal", {})) & set(curves.get("negated", {})))
        if seeds:
            diffs = [[a - b for a, b in zip(curves["signal"][s], curves["negated"][s],
                                             strict=False)] for s in seeds]
            _band(bottom, diffs, "tab:green", f"signal − negated ({len(seeds)} seeds)")
            bottom.axhline(0.0, color="grey", linewidth=0.8)
        top.set_title(f"{algorithm.upper()} from the micro warm start")
        top.set_ylabel("mean reward of the step's rollouts")
        bottom.set_ylabel("reward difference, same tasks")
        bottom.set_xlabel("step")
        top.legend()
        bottom.legend()
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def _band(ax: Any, curves: Sequence[Sequence[float]], colour: str, label: str) -> None:
    n = min(len(c) for c in curves)
    steps = list(range(1, n + 1))
    cols = [[c[i] for c in curves] for i in range(n)]
    ax.plot(steps, [statistics.fmean(v) for v in cols], color=colour, label=label)
    ax.fill_between(steps, [min(v) for v in cols], [max(v) for v in cols], color=colour,
                    alpha=0.15)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--algorithms", default="grpo,ppo")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--tasks", type=int, default=4, help="GRPO tasks per step (PPO: "
                                                             "tasks x rollouts, one rollout each)")
    parser.add_argument("--rollouts", type=int, default=4, help="GRPO rollouts per task")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--format-bonus", type=float, default=0.5,
                        help="reward = score + this x share of well-formed turns")
    parser.add_argument("--eval-tasks", type=int, default=2,
                        help="tasks per held-out configuration (18 configurations)")
    parser.add_argument("--window", type=int, default=3, help="steps averaged at each end")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("runs/learning-curve"))
    args = parser.parse_args(argv)
    algorithms = [a for a in args.algorithms.split(",") if a]
    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in algorithms if a not in ("grpo", "ppo")] + [a for a in arms
                                                                 if a not in ARMS]
    if bad:
        parser.error(f"unknown algorithm or arm: {', '.join(bad)} (algorithms: grpo, ppo; "
                     f"arms: {', '.join(ARMS)})")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from harnessgrid.paths import require_output_dir
    from harnessgrid.trainer.run import resolve_model_path

    out = require_output_dir(args.out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model = resolve_model_path("tiny:micro-warm")
    _say(f"warm start: {model}")
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # torch and sandboxes: no fork
    jobs = [(a, arm, s) for s in range(args.seeds) for a in algorithms for arm in arms]
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
        warm_future = pool.submit(start_results, model, out, args.eval_tasks)
        futures = [pool.submit(one_run, a, arm, s, model, out, args) for a, arm, s in jobs]
        runs = [f.result() for f in futures]
        warm = warm_future.result()
    rows = summarise(runs, warm, args.window)
    pairs = paired(runs, args.window)
    text = table(rows, args.window) + "\n\n" + paired_table(pairs, args.window)
    summary = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in
                        vars(args).items()}, "warm_start": model, "warm_held_out": warm,
               "runs": runs, "table": rows, "paired": pairs, "seconds": time.perf_counter() - started,
               "cpus": os.cpu_count()}
    _write(out / "results.json", json.dumps(summary, indent=2) + "\n")
    _write(out / "table.md", text + "\n")
    drawn = plot(runs, out / "learning_curve.png")
    print(text)
    print(f"\n{len(runs)} runs in {(time.perf_counter() - started) / 60:.1f} min; "
          f"{out / 'results.json'}, {out / 'table.md'}"
          + (f", {out / 'learning_curve.png'}" if drawn else " (no plot: matplotlib missing)"))
    return 0


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _known(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None] or [0.0]


def _stat(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "spread": None}
    return {"mean": statistics.fmean(values),
            "spread": statistics.pstdev(values) if len(values) > 1 else None}


def _cell(stat: dict[str, float | None], *, pct: bool = False, signed: bool = False) -> str:
    if stat["mean"] is None:
        return "-"
    scale, unit = (100, " %") if pct else (1, "")
    mean = f"{scale * stat['mean']:{'+' if signed else ''}.{1 if pct else 3}f}"
    spread = "" if stat["spread"] is None else f" ± {scale * stat['spread']:.{1 if pct else 3}f}"
    return mean + spread + unit


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
