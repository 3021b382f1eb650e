"""``tiny:micro-warm``: the micro model after a supervised warm start, built once and cached.

Policy-gradient RL learns from the differences between rollouts; a randomly initialised model
fails every task the same way, so its GRPO steps have no signal at all (see :mod:`.signal`).
A GPU user starts from a pretrained checkpoint that sometimes succeeds; at CPU scale the
equivalent is this warm start: the ``micro`` model, SFT'd (TRL's SFTTrainer, through the
project's ``algorithm: sft``) on scripted-oracle demonstrations rendered through the micro
space's 18-run orthogonal array. The CPU examples (``examples/tiny-grpo.yaml``,
``tiny-ppo.yaml``) and ``benchmarks/learning_curve.py`` start from it.

The build is keyed by everything that shapes it (the SFT recipe, the micro model's build, the
micro suite's version): a change rebuilds it, an unchanged one is reused. A half-finished
build is never reused (the info file is written last, the model is moved in atomically).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["WARM_RECIPE", "build_micro_warm_start"]

#: The warm start's SFT: demonstrations and steps sized so that the model speaks most micro
#: harnesses' protocols (it solves no task: at 0.6M parameters it does not learn to copy file
#: names from the instruction; see benchmarks/README.md), so that rollouts of a group differ in
#: how well-formed they are -- which ``format_bonus`` rewards.
WARM_RECIPE: dict[str, Any] = {
    "episodes": 400, "steps": 200, "batch_size": 8, "learning_rate": 3e-3,
    "max_turns": 8, "max_new_tokens": 48, "seed": 0,
    "sft_sampling": "random",  # trainer/sft.py's batch order; part of the cache key
}

_INFO = "harnessgrid_warm_start.json"


def build_micro_warm_start(cache: Path, *, say: Any = None) -> Path:
    """The warm-started micro model under ``cache`` (built on first use; minutes on a CPU)."""
    from harnessgrid.trainer.micro_plugin import micro_plugin

    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    micro = micro_plugin()
    base = Path(micro.build_micro_model(cache / "tiny-model-micro"))
    base_info = (base / "harnessgrid_tiny_model.json")
    info = {"recipe": WARM_RECIPE, "suite_version": micro.SUITE_VERSION,
            "base": base_info.read_text() if base_info.is_file() else None}
    key = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    folder = cache / f"tiny-model-micro-warm-{key}"
    if (folder / _INFO).is_file() and (folder / "config.json").is_file():
        return folder
    import fcntl

    # Two processes asking at once (two runs, or a benchmark's workers): one builds, the other
    # waits for it and then reuses the result.
    with open(cache / f"tiny-model-micro-warm-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / _INFO).is_file() and (folder / "config.json").is_file():
            return folder
        return _build(base, folder, key, info, say)


def _build(base: Path, folder: Path, key: str, info: dict[str, Any], say: Any) -> Path:
    cache = folder.parent
    say(f"building the micro warm start once ({WARM_RECIPE['episodes']} oracle "
        f"demonstrations, {WARM_RECIPE['steps']} SFT steps; a few minutes on a CPU) "
        f"into {folder}")
    work = cache / f"tiny-model-micro-warm-{key}.work"
    from harnessgrid.trainer.run import train

    steps = int(WARM_RECIPE["steps"])
    next_line = [steps // 4]

    def progress(step: int, logs: dict[str, float]) -> None:
        if "loss" in logs and step >= next_line[0]:
            next_line[0] = step + steps // 4
            say(f"  warm start: SFT step {step}/{steps}, loss {logs['loss']:.3f}")

    result = train(warm_start_config(base, work), resume=work.exists(), on_log=progress)
    tmp = cache / f"tiny-model-micro-warm-{key}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(result.final_model, tmp)
    (tmp / _INFO).write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    shutil.rmtree(work, ignore_errors=True)
    return folder


def warm_start_config(base: Path, out: Path) -> Any:
    """The SFT run of the warm start (the micro space, its OA, the micro suite's train split)."""
    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.micro_plugin import micro_levels

    r = WARM_RECIPE
    return config_from_mapping({
        "model": str(base), "algorithm": "sft", "device": "cpu", "design": "oa", "k": 2,
        "space": micro_levels(),
        "suite": "micro", "split": "train", "tasks_per_step": 4,
        "steps": r["steps"], "learning_rate": r["learning_rate"],
        "limits": {"max_turns": r["max_turns"], "max_context_tokens": 2048},
        "max_new_tokens": r["max_new_tokens"], "seed": r["seed"],
        "concurrency": 64, "output_dir": str(out),
        "sft": {"episodes": r["episodes"], "batch_size": r["batch_size"]},
        "trl": {"save_steps": 100, "save_total_limit": 1, "logging_steps": 10,
                "warmup_steps": min(20, r["steps"] // 10), "lr_scheduler_type": "cosine"},
    })
