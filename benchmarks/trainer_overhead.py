"""Step time of the harness-scaled trainer vs TRL's plain single-turn GRPOTrainer, on the same
model, per trained token, with the phase split.

    python benchmarks/trainer_overhead.py [--steps 4] [--tasks 4] [--rollouts 4] [--shared-prefill]
        [--prefix-cache-mb 256] [--config examples/tiny-grpo.yaml]

Both sides run GRPO steps with the same group size (tasks x rollouts completions per step),
completion length, learning rate and loss type on the same model (CPU, fp32): by default the
offline random tiny model on ``grid`` tasks; with ``--config`` the config's model, suite, space,
limits and reward (``examples/tiny-grpo.yaml``: the micro warm start, whose groups have reward
spread, so the harnessgrid steps are learning steps).

- **TRL (a)**: ``trl.GRPOTrainer`` on single-turn prompts, the task instructions as user
  messages; **TRL (b)**: the same on the first-turn prompts harnessgrid's episodes had (system
  prompt, tool schemas, instruction: the text their token ids decode to, read from the run's
  trajectories). A constant reward. Its phases are timed by wrapping
  ``_generate_and_score_completions`` (generation + TRL's old/ref logprob forwards when it
  needs them) and ``compute_loss`` (forward + loss); backward = step - both.
- **harnessgrid**: :class:`~harnessgrid.trainer.grpo.HarnessTrainer` through the 18-run design,
  episodes of up to ``--turns`` turns of ``--tokens`` tokens (or the config's limits) in the
  bubblewrap sandbox. Its phases are the step report's: rollout (episodes: generation,
  harness, sandbox, grading), logprobs (none: the recorded sampling logprobs are the old
  logprobs), forward + loss, backward.

"Equal trained tokens" is handled by normalising: the figure compared is seconds per 1,000
model tokens that carry loss, medians over the steps after the first (warm-up). The ratio is
harnessgrid / TRL (1.0 = no overhead per trained token).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def instruction_prompts(args: argparse.Namespace, cfg: Any) -> list[Any]:
    """TRL's prompts as the issue defines the comparison: each task's instruction alone."""
    from harnessgrid.plugin_system.registry import load_suite

    tasks = load_suite(cfg.suite).tasks(cfg.split)[: args.tasks * args.steps]
    return [[{"role": "user", "content": t.instruction}] for t in tasks]


def first_turn_prompts(run_dir: Path, model_dir: Path) -> list[Any]:
    """TRL's prompts like for like: the first-turn prompt of each (task, harness) group the
    harnessgrid run trained on -- system prompt, tool schemas and instruction, the text its
    token ids decode to -- one per group, in step order."""
    import json

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts: dict[tuple[int, ...], None] = {}
    for path in sorted((run_dir / "trajectories").glob("step-*.jsonl")):
        for line in path.read_text().splitlines():
            turns = json.loads(line)["turns"]
            if turns and turns[0].get("tokens"):
                prompts.setdefault(tuple(turns[0]["tokens"]["prompt_ids"]), None)
    if not prompts:
        raise SystemExit(f"no first-turn token records under {run_dir / 'trajectories'}")
    return [tokenizer.decode(list(ids)) for ids in prompts]


def trl_plain(model_dir: Path, out: Path, args: argparse.Namespace, cfg: Any,
              prompts: list[Any]) -> list[dict[str, float]]:
    """TRL's plain GRPOTrainer on ``prompts``, with the harnessgrid run's model, batch,
    completion length and learning rate."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    data = datasets.Dataset.from_dict({"prompt": prompts})
    phases: list[dict[str, float]] = []
    current: dict[str, float] = {}

    class Timed(GRPOTrainer):  # type: ignore[misc]
        def _generate_and_score_completions(self, inputs: Any) -> Any:
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            current["rollout_s"] = time.perf_counter() - t0
            current["tokens"] = float((out["completion_mask"]).sum())
            current["prompt_tokens"] = float(out["prompt_mask"].sum()) / len(out["prompt_mask"])
            return out

        def compute_loss(self, *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            loss = super().compute_loss(*a, **k)
            current["loss_s"] = current.get("loss_s", 0.0) + time.perf_counter() - t0
            return loss

        def training_step(self, *a: Any, **k: Any) -> Any:
            current.clear()
            t0 = time.perf_counter()
            loss = super().training_step(*a, **k)
            current["step_s"] = time.perf_counter() - t0
            phases.append(dict(current))
            return loss

    def constant(completions: list[Any], **_: Any) -> list[float]:
        return [0.0] * len(completions)

    n = args.tasks * args.rollouts
    config = GRPOConfig(output_dir=str(out), max_steps=args.steps,
                        learning_rate=cfg.learning_rate,
                        num_generations=args.rollouts, per_device_train_batch_size=n,
                        gradient_accumulation_steps=1, max_completion_length=cfg.max_new_tokens,
                        loss_type="dapo", use_cpu=True, bf16=False, report_to=[],
                        save_strategy="no", logging_steps=1000, disable_tqdm=True,
                        gradient_checkpointing=False, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    Timed(model=model, reward_funcs=constant, args=config, train_dataset=data,
          processing_class=tokenizer).train()
    for p in phases:
        p["backward_s"] = p["step_s"] - p["rollout_s"] - p.get("loss_s", 0.0)
        p["logprobs_s"] = 0.0  # inside rollout_s when TRL needs an extra forward
    return phases


def experiment(model_dir: Path | None, out: Path, args: argparse.Namespace) -> Any:
    """The harnessgrid side's run: ``--config``'s (its model, suite, space, limits, reward and
    format bonus) or the grid suite's on the random tiny model, with this script's batch."""
    from harnessgrid.trainer.config import config_from_mapping, load_config

    # save_trajectories: TRL (b) reads the first-turn prompts from them
    batch = {"tasks_per_step": args.tasks, "rollouts_per_task": args.rollouts,
             "steps": args.steps, "output_dir": str(out), "save_trajectories": True}
    if args.config:
        sets = [f"{key}={value}" for key, value in batch.items()]
        return load_config(args.config, [*sets, "trl.save_strategy='no'"])
    return config_from_mapping({
        "model": str(model_dir), "design": "oa", "suite": "grid", "max_tasks": 200,
        "learning_rate": 1e-5, "limits": {"max_turns": args.turns, "max_context_tokens": 4096},
        "max_new_tokens": args.tokens, "trl": {"save_strategy": "no"}, **batch})


def harnessgrid_steps(cfg: Any, args: argparse.Namespace) -> list[dict[str, float]]:
    from harnessgrid.trainer.run import train

    options: dict[str, Any] = {}
    if args.shared_prefill:
        options["shared_prefill"] = True
    if args.prefix_cache_mb:
        options["prefix_cache_mb"] = args.prefix_cache_mb
    result = train(cfg, policy_options=options or None)
    steps = []
    for r in result.reports:
        step_s = r["rollout_s"] + r["prepare_s"] + r["train_s"]
        steps.append({"step_s": step_s, "rollout_s": r["rollout_s"], "logprobs_s": 0.0,
                      "loss_s": r["loss_s"], "backward_s": r["backward_s"],
                      "tokens": float(r["model_tokens"]),
                      "signal": float(r.get("signal_tokens") or 0),
                      "segments": float(r["segments_per_episode"] or 0)})
    return steps


def per_1k(steps: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] / s["tokens"] * 1000 for s in steps[1:] or steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--shared-prefill", action="store_true",
                        help="the hf policy's shared_prefill option: a prompt a step's rollouts "
                        "share is prefilled once")
    parser.add_argument("--prefix-cache-mb", type=float, default=0,
                        help="the hf policy's prefix_cache_mb option: an episode's next turn "
                        "prefills only its new tokens over the kept keys and values")
    parser.add_argument("--config", type=Path,
                        help="a training config (e.g. examples/tiny-grpo.yaml: the micro warm "
                        "start, whose groups have reward spread) whose model, suite, space, "
                        "limits and reward the harnessgrid side takes; --turns and --tokens "
                        "then come from it")
    args = parser.parse_args()
    from harnessgrid.policies.tiny_model import build_tiny_model
    from harnessgrid.trainer.run import resolve_model_path

    with tempfile.TemporaryDirectory() as tmp:
        built = None if args.config else build_tiny_model(Path(tmp) / "model")
        cfg = experiment(built, Path(tmp) / "hg", args)
        model_dir = built or Path(resolve_model_path(cfg.model))
        ours = harnessgrid_steps(cfg, args)
        plain = trl_plain(model_dir, Path(tmp) / "trl", args, cfg,
                          instruction_prompts(args, cfg))
        alike = trl_plain(model_dir, Path(tmp) / "trl-alike", args, cfg,
                          first_turn_prompts(Path(tmp) / "hg", model_dir))
    print(f"GRPO steps of {args.tasks} tasks x {args.rollouts} rollouts on {cfg.model} "
          f"({cfg.suite}); harnessgrid episodes of up to {cfg.limits.max_turns} turns x "
          f"{cfg.max_new_tokens} tokens, TRL completions of {cfg.max_new_tokens} tokens "
          "(CPU; medians over steps 2..N). TRL (a): prompts are the task "
          "instructions; TRL (b): the first-turn prompts harnessgrid's episodes had (system "
          "prompt, tool schemas, instruction)\n")
    header = (f"{'seconds per 1K trained tokens':30}{'harnessgrid':>12}{'TRL (a)':>9}{'ratio':>7}"
              f"{'TRL (b)':>9}{'ratio':>7}")
    print(header)
    print("-" * len(header))
    for key, label in (("step_s", "whole step"), ("rollout_s", "rollout / generation"),
                       ("logprobs_s", "old-logprob forward"), ("loss_s", "forward + loss"),
                       ("backward_s", "backward")):
        ours_1k = per_1k(ours, key)
        cells = [f"{label:30}{ours_1k:12.3f}"]
        for theirs in (plain, alike):
            b = per_1k(theirs, key)
            cells.append(f"{b:9.3f}" + (f"{ours_1k / b:7.2f}" if b > 0 else "      -"))
        print("".join(cells))
    tokens = [statistics.median(s["tokens"] for s in side) for side in (ours, plain, alike)]
    prompt = [statistics.median(s["prompt_tokens"] for s in side) for side in (plain, alike)]
    print(f"\ntrained tokens per step: harnessgrid {tokens[0]:.0f}, TRL (a) {tokens[1]:.0f}, "
          f"TRL (b) {tokens[2]:.0f}; TRL prompt tokens (mean per row): (a) {prompt[0]:.0f}, "
          f"(b) {prompt[1]:.0f}; harnessgrid segments per episode: "
          f"{statistics.median(s['segments'] for s in ours)}")
    learning = sum(1 for s in ours if s["signal"] > 0)
    print(f"harnessgrid steps with a learning signal (groups with reward spread): {learning} "
          f"of {len(ours)}; TRL's reward is a constant")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
