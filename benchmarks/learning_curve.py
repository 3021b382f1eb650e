"""Does the trainer make the agent better at tasks? Reward and held-out Pass@1 over GRPO / PPO
steps from a warm start, against the same runs with the advantages negated.

    python benchmarks/learning_curve.py [--steps 12] [--seeds 3] [--algorithms grpo,ppo]
                                        [--eval-tasks 2] [--out runs/learning-curve]

Every run starts from ``tiny:micro-warm`` (the micro model after its SFT warm start on oracle
demonstrations; built once and cached, see ``trainer/warm_start.py``), which solves some micro
tasks on its training harnesses -- partial success, so rollouts of a group differ. Each
(algorithm, seed) is trained twice through the micro space's 18-run orthogonal array with
K = 2 Hamming pairing:

- **signal**: the default reward, the task's score;
- **negated**: the negated score as the reward function. GRPO's advantages (and PPO's returns)
  then point the other way with the same magnitudes, the same rollouts budget and the same
  noise. If the signal arm rises and the negated arm does not, the reward -- not the noise of
  sampling or the optimizer -- is what moves the policy.

Reported per step: the mean task *score* of the step's rollouts (the true grade, in both arms)
and its pass rate; per run: held-out in-space Pass@1 (18 configurations the array never used,
greedy decoding, ``--eval-tasks`` tasks each) of the warm start and of the final model. Writes
``OUT/results.json``, ``OUT/table.md`` and ``OUT/learning_curve.png`` (matplotlib). Every run
is resumable: a re-run reuses finished runs and evaluations.
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


def negated_score(trajectories: Sequence[Any]) -> list[float | None]:
    """The control arm's reward: minus the task score (None for infrastructure failures)."""
    from harnessgrid.trainer.advantages import episode_reward

    out: list[float | None] = []
    for t in trajectories:
        r = episode_reward(t.score, t.passed, t.infra_failure, "score")
        out.append(None if r is None else -r)
    return out


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
        "steps": args.steps, "learning_rate": args.lr, "max_turns": 8, "context_budget": 2048,
        "max_new_tokens": 48, "temperature": 1.0, "concurrency": 64, "output_dir": str(out),
        **({} if grpo else {"ppo": {"critic_learning_rate": args.lr * 10}}),
        "trl": {"save_steps": args.steps, "save_total_limit": 1,
                "lr_scheduler_type": "constant"},
    })


def held_out_pass(policy_dir: Path, out: Path, eval_tasks: int) -> float | None:
    """Pass@1 over the 18 held-out in-space micro configurations, greedy decoding."""
    from harnessgrid.evaluation.aggregate import per_run
    from harnessgrid.evaluation.run import EvalConfig, evaluate
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.runtime import EpisodeLimits

    config = EvalConfig(policy=f"hf:{policy_dir}",
                        policy_options={"temperature": 0, "max_new_tokens": 48},
                        suites=("micro",), settings=("in-space",), runs=1, limit=eval_tasks,
                        concurrency=64,
                        limits=EpisodeLimits(max_turns=8, max_context_tokens=4096))
    outcome = evaluate(config, out, space=MICRO_SPACE)
    value: float | None = per_run(outcome.results).get(0)
    return value


def one_run(algorithm: str, arm: str, seed: int, model: str, out: Path,
            args: argparse.Namespace) -> dict[str, Any]:
    """Train one (algorithm, arm, seed) and evaluate its final model (a worker process)."""
    import torch

    from harnessgrid.trainer.run import train

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet()
    run_dir = out / f"{algorithm}-{arm}-seed{seed}"
    started = time.perf_counter()
    train_dir = run_dir / "train"
    if not (train_dir / "final" / "config.json").is_file():
        train(run_config(algorithm, seed, model, train_dir, args),
              resume=train_dir.exists(),
              reward_funcs=[negated_score] if arm == "negated" else None)
    steps = [json.loads(line) for line in (train_dir / "steps.jsonl").read_text().splitlines()]
    final_pass = held_out_pass(train_dir / "final", run_dir / "eval", args.eval_tasks)
    _say(f"  {algorithm} {arm} seed {seed}: score {_fmt(steps[0]['score'])} -> "
         f"{_fmt(steps[-1]['score'])}, held-out Pass@1 {_fmt(final_pass)} "
         f"({time.perf_counter() - started:.0f}s)")
    return {"algorithm": algorithm, "arm": arm, "seed": seed,
            "score": [s["score"] for s in steps], "pass_rate": [s["pass_rate"] for s in steps],
            "signal_tokens": [s.get("signal_tokens") for s in steps],
            "trained_tokens": [s.get("trained_tokens") for s in steps],
            "held_out_pass": final_pass}


def start_pass(model: str, out: Path, eval_tasks: int) -> float | None:
    import torch

    torch.set_num_threads(1)
    _quiet()
    return held_out_pass(Path(model), out / "warm-start-eval", eval_tasks)


def summarise(runs: Sequence[dict[str, Any]], warm: float | None, window: int
              ) -> list[dict[str, Any]]:
    """Per (algorithm, arm): the mean score of the first and last ``window`` steps and the
    held-out Pass@1, each mean and population spread over seeds."""
    rows = []
    for algorithm in sorted({r["algorithm"] for r in runs}):
        for arm in ARMS:
            mine = [r for r in runs if r["algorithm"] == algorithm and r["arm"] == arm]
            if not mine:
                continue
            first = [statistics.fmean(_known(r["score"][:window])) for r in mine]
            last = [statistics.fmean(_known(r["score"][-window:])) for r in mine]
            held = [r["held_out_pass"] for r in mine if r["held_out_pass"] is not None]
            rows.append({"algorithm": algorithm, "arm": arm, "seeds": len(mine),
                         "score_first": _stat(first), "score_last": _stat(last),
                         "score_change": _stat([b - a for a, b in zip(first, last, strict=True)]),
                         "held_out_start": warm, "held_out_final": _stat(held)})
    return rows


def table(rows: Sequence[dict[str, Any]], window: int) -> str:
    lines = [f"| algorithm | arm | seeds | train score, first {window} steps | last {window} "
             "steps | change | held-out Pass@1, warm start | final |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['algorithm']} | {r['arm']} | {r['seeds']} | {_cell(r['score_first'])}"
                     f" | {_cell(r['score_last'])} | {_cell(r['score_change'], signed=True)} | "
                     f"{_pct(r['held_out_start'])} | {_cell(r['held_out_final'], pct=True)} |")
    return "\n".join(lines)


def plot(runs: Sequence[dict[str, Any]], path: Path) -> bool:
    """Score vs step, mean over seeds with the min-max band, one panel per algorithm."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    algorithms = sorted({r["algorithm"] for r in runs})
    fig, axes = plt.subplots(1, len(algorithms), figsize=(5.5 * len(algorithms), 4),
                             squeeze=False)
    for ax, algorithm in zip(axes[0], algorithms, strict=True):
        for arm, colour in zip(ARMS, ("tab:blue", "tab:red"), strict=True):
            curves = [r["score"] for r in runs if r["algorithm"] == algorithm and r["arm"] == arm]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            steps = list(range(1, n + 1))
            cols = [[c[i] or 0.0 for c in curves] for i in range(n)]
            ax.plot(steps, [statistics.fmean(v) for v in cols], color=colour,
                    label=f"{arm} ({len(curves)} seeds)")
            ax.fill_between(steps, [min(v) for v in cols], [max(v) for v in cols],
                            color=colour, alpha=0.15)
        ax.set_title(f"{algorithm.upper()} from the micro warm start")
        ax.set_xlabel("step")
        ax.set_ylabel("mean task score of the step's rollouts")
        ax.legend()
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--algorithms", default="grpo,ppo")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--tasks", type=int, default=4, help="GRPO tasks per step (PPO: "
                                                             "tasks x rollouts, one rollout each)")
    parser.add_argument("--rollouts", type=int, default=4, help="GRPO rollouts per task")
    parser.add_argument("--lr", type=float, default=1e-4)
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
        warm_future = pool.submit(start_pass, model, out, args.eval_tasks)
        futures = [pool.submit(one_run, a, arm, s, model, out, args) for a, arm, s in jobs]
        runs = [f.result() for f in futures]
        warm = warm_future.result()
    rows = summarise(runs, warm, args.window)
    text = table(rows, args.window)
    summary = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in
                        vars(args).items()}, "warm_start": model, "warm_held_out_pass": warm,
               "runs": runs, "table": rows, "seconds": time.perf_counter() - started,
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


def _quiet() -> None:
    import datasets
    from transformers.utils import logging

    hf_logging: Any = logging
    datasets.disable_progress_bars()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
