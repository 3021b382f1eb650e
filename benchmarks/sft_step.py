"""An SFT step of the demo: harnessgrid's SFT trainer vs TRL's SFTTrainer as shipped, on the
same rows and model.

    python benchmarks/sft_step.py [--steps 12] [--rounds 3] [--rows DIR]

The rows are the demo's: oracle demonstrations through the micro space's orthogonal array,
rendered by the template of the demo's model (``tiny:micro-base``) (``demonstrations/dataset`` of an SFT run; collected
here by a one-step SFT run unless ``--rows`` names an existing one). Every variant trains the
micro model for ``--steps`` steps of 8 rows at the demo's learning rate from the demo's model, one torch thread; the
first two steps are warm-up:

- ``TRL SFTTrainer``: TRL's trainer as shipped, 8 random rows per forward pass;
- ``harnessgrid, 1 pass``: :class:`~harnessgrid.trainer.sft.HarnessSFTTrainer` with the same
  batches (the LM head only where the loss is);
- ``harnessgrid, 4 passes``: the demo's set-up (``sft.micro_batches: 4``: each step's 8 rows
  sorted by length into four forward passes, the same gradient with less padding).

The variants alternate in ``--rounds`` rounds; printed are per-step medians, each round's
speed-up over TRL and the loss of the last step (the first two variants draw the same rows, so
their losses agree; the third draws its own).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def collect_rows(work: Path) -> Path:
    """The demo's demonstration rows (``oa-18``, 400 episodes), from a one-step SFT run."""
    from harnessgrid.plugins.micro import MICRO_LEVELS
    from harnessgrid.plugins.micro.pretraining import micro_base
    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.run import train

    model = micro_base(work / "model")
    config = config_from_mapping({
        "model": str(model), "algorithm": "sft", "device": "cpu", "design": "oa", "k": 2,
        "space": {f: list(v) for f, v in MICRO_LEVELS.items()}, "suite": "micro",
        "split": "train", "steps": 1, "limits": {"max_turns": 8, "max_context_tokens": 2048},
        "max_new_tokens": 48, "output_dir": str(work / "sft"),
        "sft": {"episodes": 400, "batch_size": 8}, "trl": {"save_strategy": "no"}})
    train(config)
    return work / "sft" / "demonstrations"


def step_seconds(variant: str, model_dir: Path, rows: Any, out: Path, steps: int
                 ) -> tuple[list[float], float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTTrainer

    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.sft import HarnessSFTTrainer, sft_args

    times: list[float] = []
    last_loss = [float("nan")]

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            times.append(time.perf_counter() - self.t0)

        def on_log(self, *_: Any, logs: dict[str, float] | None = None, **__: Any) -> None:
            if logs and "loss" in logs:
                last_loss[0] = logs["loss"]

    micro = 4 if variant.endswith("4 passes") else 1
    config = config_from_mapping({
        "model": str(model_dir), "algorithm": "sft", "steps": steps, "learning_rate": 3e-3,
        "output_dir": str(out), "sft": {"batch_size": 8, "micro_batches": micro},
        "trl": {"save_strategy": "no", "logging_steps": 1}})
    args = sft_args(config, "cpu")
    trainer_class, extra = ((SFTTrainer, {}) if variant.startswith("TRL")
                            else (HarnessSFTTrainer, {"fingerprint": "benchmark"}))
    trainer = trainer_class(model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
                            train_dataset=rows,
                            processing_class=AutoTokenizer.from_pretrained(model_dir), **extra)
    trainer.add_callback(Clock())
    trainer.train()
    return times[2:], last_loss[0]


VARIANTS = ("TRL SFTTrainer", "harnessgrid, 1 pass", "harnessgrid, 4 passes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=Path, help="a demonstrations/ folder of an SFT run")
    args = parser.parse_args()
    import datasets
    import torch

    from harnessgrid.plugins.micro.pretraining import micro_base

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = args.rows or collect_rows(work)
        rows = datasets.load_from_disk(str(folder / "dataset")).select_columns(
            ["input_ids", "assistant_masks"])
        model = micro_base(work / "model")
        lengths = [len(r) for r in rows["input_ids"]]
        trained = [sum(m) for m in rows["assistant_masks"]]
        print(f"{len(rows)} rows, {statistics.mean(lengths):.0f} tokens on average, "
              f"{statistics.mean(trained):.0f} of them trained; {args.steps} steps of 8 rows "
              f"per run, medians over steps 3..{args.steps}, one torch thread\n")
        medians: dict[str, list[float]] = {v: [] for v in VARIANTS}
        losses: dict[str, float] = {}
        for r in range(args.rounds):
            for variant in VARIANTS:
                times, loss = step_seconds(variant, model, rows, work / f"{r}-{variant}",
                                           args.steps)
                medians[variant].append(statistics.median(times))
                losses[variant] = loss
            trl = medians[VARIANTS[0]][-1]
            print(f"round {r + 1}: " + ", ".join(
                f"{v} {medians[v][-1]:.3f} s ({trl / medians[v][-1]:.2f}x)" for v in VARIANTS))
    print("\nseconds per SFT step (median over rounds), speed-up over TRL (range over rounds), "
          f"loss after step {args.steps}:")
    for variant in VARIANTS:
        ratios = [a / b for a, b in zip(medians[VARIANTS[0]], medians[variant], strict=True)]
        print(f"  {variant:24}{statistics.median(medians[variant]):7.3f} s"
              f"{statistics.median(ratios):7.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
              f"   loss {losses[variant]:.4f}")


if __name__ == "__main__":
    main()
