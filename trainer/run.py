"""``harnessgrid train CONFIG``: build the run from its config, train, resume.

Output directory layout::

    OUT/config.yaml            the resolved config (what was run)
    OUT/steps.jsonl            one line per step: pairs rolled out, reward per configuration,
                               pass rate, segments per episode, tokens/s, logprob gap, timings
    OUT/checkpoint-N/          TRL/transformers checkpoints (model, optimizer, scheduler, RNG,
                               trainer state) + critic/ for PPO + harnessgrid_state.json
    OUT/trajectories/          every episode, per step (``save_trajectories: true``)
    OUT/final/                 the trained model and tokenizer (``hf:OUT/final``)

Resume (``--resume``) continues from the newest *complete* checkpoint (one whose
``harnessgrid_state.json`` was written), after checking that the config and schedule are the
ones it was made with; steps after that checkpoint are redone and their lines in
``steps.jsonl`` replaced, so nothing is counted twice.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import ConfigError
from harnessgrid.paths import require_output_dir
from harnessgrid.trainer.checkpoints import STATE_FILE, latest_checkpoint

if TYPE_CHECKING:
    from harnessgrid.trainer.config import ExperimentConfig
    from harnessgrid.trainer.grpo import RewardFunc, StepReport
    from harnessgrid.trainer.plan import TrainingPlan

__all__ = ["TrainResult", "latest_checkpoint", "load_model", "train"]

STEPS_FILE = "steps.jsonl"


@dataclass
class TrainResult:
    output_dir: Path
    final_model: Path
    steps: int
    resumed_from: Path | None
    reports: list[dict[str, Any]]
    #: Set when no step of the run had learning signal (see :mod:`.signal`): what happened
    #: and what to change. The run still finished; its weights are the starting ones.
    no_signal: str | None = None


def interrupted_message(output_dir: str | Path) -> str:
    """What to say when a run is interrupted (Ctrl-C): where it stands and how to go on."""
    out = Path(output_dir)
    checkpoint = latest_checkpoint(out) if out.is_dir() else None
    if checkpoint is None:
        return (f"interrupted before the first complete checkpoint in {out}; re-run the same "
                "command with --resume to start the run again there")
    return (f"interrupted: {checkpoint} is the newest complete checkpoint; re-run the same "
            "command with --resume to continue from it")


def require_training_extras() -> None:
    """A clear error, before any work, when the training stack is not installed."""
    missing = []
    for module in ("torch", "transformers", "trl", "datasets", "accelerate"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigError(f"training needs {', '.join(missing)}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not installed",
                          hint="pip install 'harnessgrid[train]'")


#: ``tiny:NAME`` models that are trained, not only built: NAME → what they are.
WARM_STARTS = {"micro-warm": "the micro model after an SFT warm start on oracle "
                             "demonstrations through the micro OA (built once, minutes)",
               "micro-base": "the micro model pretrained on file tasks in a neutral "
                             "notation (shipped with the package; an experiment's start, "
                             "not yet the demo's)"}


def resolve_model_path(spec: str) -> str:
    """``tiny:SIZE`` → the offline tiny model, built once into the cache directory
    (``$HARNESSGRID_CACHE``, default ``~/.cache/harnessgrid``); ``tiny:micro-base`` → the
    shipped pretrained micro model (:mod:`harnessgrid.plugins.micro.pretraining`);
    ``tiny:micro-warm`` → the micro model after its warm start (:mod:`.warm_start`); anything
    else as given."""
    if not spec.startswith("tiny:"):
        return spec
    from harnessgrid.policies.tiny_model import SIZES, build_tiny_model

    size = spec.removeprefix("tiny:")
    cache = Path(os.environ.get("HARNESSGRID_CACHE", Path.home() / ".cache" / "harnessgrid"))
    if size == "micro-base":
        from harnessgrid.trainer.micro_plugin import micro_plugin

        return str(micro_plugin().micro_base())
    if size in WARM_STARTS:
        from harnessgrid.trainer.warm_start import build_micro_warm_start

        return str(build_micro_warm_start(cache))
    if size not in SIZES:
        names = [*SIZES, *WARM_STARTS]
        raise ConfigError(f"model {spec!r}: unknown tiny model {size!r}",
                          hint=f"choose one of {', '.join(f'tiny:{s}' for s in names)}")
    if size == "micro":  # a tokenizer trained on the micro plugin's texts, names one token
        from harnessgrid.trainer.micro_plugin import micro_plugin

        return str(micro_plugin().build_micro_model(cache / "tiny-model-micro"))
    return str(build_tiny_model(cache / f"tiny-model-{size}", size=size))


def load_model(path: str, dtype: str, device: str) -> tuple[Any, Any]:
    """The causal LM and tokenizer at ``path`` (a checkpoint directory, a hub name or
    ``tiny:SIZE``), with the same errors as the ``hf:`` policy."""
    import torch
    import transformers

    from harnessgrid.policies.hf import _HINT as HINT

    hf: Any = transformers  # partially typed upstream

    path = resolve_model_path(path)

    if path.startswith(("/", "./", "../", "~")) and not Path(path).expanduser().is_dir():
        raise ConfigError(f"model: no such directory {path!r}", hint=HINT)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ConfigError(f"unknown dtype {dtype!r}", hint="float32, bfloat16 or float16")
    try:
        tokenizer = hf.AutoTokenizer.from_pretrained(path)
        model = hf.AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"model {path!r} cannot be loaded: {reason}", hint=HINT) from None
    if device not in ("auto", "cpu"):
        model.to(device)
    return model, tokenizer


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def grpo_args(config: ExperimentConfig, device: str) -> Any:
    """TRL's GRPOConfig for this run. One optimizer step per schedule step (micro-batching
    happens inside the step); ``num_generations`` and the batch sizes only satisfy GRPOConfig's
    checks -- the trainer forms its own batches."""
    from trl import GRPOConfig  # type: ignore[attr-defined]

    defaults: dict[str, Any] = {"report_to": [], "logging_steps": 1, "save_strategy": "steps",
                                "save_steps": max(1, min(50, config.steps)),
                                "save_total_limit": 2, "disable_tqdm": True,
                                "gradient_checkpointing": False,
                                "ddp_find_unused_parameters": False}
    trl_options = {**defaults, **config.trl}
    check_trl_keys(GRPOConfig, trl_options)
    if config.generation == "vllm":
        if trl_options.get("vllm_enable_sleep_mode"):
            raise ConfigError("trl.vllm_enable_sleep_mode is not supported with generation: "
                              "vllm (episodes call the engine directly, turn by turn)",
                              hint="remove it; lower trl.vllm_gpu_memory_utilization instead")
        # The recorded sampling logprobs are the old logprobs; TRL's extra correction pass
        # would need its own generation path.
        trl_options = {"vllm_mode": "colocate", **trl_options, "use_vllm": True,
                       "vllm_importance_sampling_correction": False}
    on_cpu = device == "cpu"
    if on_cpu:
        trl_options.update(use_cpu=True, bf16=False, fp16=False)
    try:
        return GRPOConfig(
            output_dir=config.output_dir, max_steps=config.steps,
            learning_rate=config.learning_rate, beta=config.beta, epsilon=config.epsilon,
            epsilon_high=config.epsilon_high, loss_type=config.loss_type,
            scale_rewards=config.scale_rewards, temperature=config.temperature,
            seed=config.seed, num_generations=2, per_device_train_batch_size=2,
            gradient_accumulation_steps=1, steps_per_generation=1,
            max_completion_length=config.max_new_tokens, **trl_options)
    except (ValueError, TypeError) as exc:
        raise trl_rejected("GRPOConfig", exc, config.trl) from None


def trl_rejected(config_class: str, exc: Exception, given: Mapping[str, Any]) -> ConfigError:
    """The error for ``trl:`` options TRL's config class refused. YAML reads an unquoted
    ``no``, ``yes``, ``on`` or ``off`` as a boolean, so ``save_strategy: no`` reaches TRL as
    False ("False is not a valid SaveStrategy"): a boolean the message points at is named,
    with the quoting that keeps the word."""
    text = str(exc)
    squeezed = text.lower().replace(" ", "").replace("_", "")
    suspects = [key for key, value in given.items()
                if isinstance(value, bool) and str(value) in text
                and key.lower().replace("_", "") in squeezed]
    hint = "fix or remove the key under trl:"
    if suspects:
        key = suspects[0]
        word = "no" if given[key] is False else "yes"
        hint = (f"YAML reads an unquoted no/yes/on/off as a boolean: quote the word, "
                f"trl: {{{key}: '{word}'}} in the file or --set trl.{key}=\"'{word}'\"")
    return ConfigError(f"trl options rejected by {config_class}: {text}", hint=hint)


def check_trl_keys(config_class: Any, options: dict[str, Any]) -> None:
    import dataclasses

    known = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown trl option(s) {', '.join(unknown)} for "
                          f"{config_class.__name__}",
                          hint="keys under trl: are TRL/transformers training arguments, e.g. "
                               "report_to, logging_steps, save_steps, max_grad_norm, bf16")


class StepLog:
    """``steps.jsonl``: appended (fsync'd) after each step; on resume, cut back to the steps
    before the checkpoint (rewritten atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a crash is the last one
        return out

    def truncate(self, before_step: int) -> None:
        keep = [r for r in self.read() if r.get("step", -1) < before_step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in keep))
        os.replace(tmp, self.path)

    def append(self, report: dict[str, Any]) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(report) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)


def is_main_launch_process() -> bool:
    """Rank 0 of a ``torchrun`` / ``accelerate launch`` group (or a plain process)."""
    return int(os.environ.get("RANK", "0")) == 0


def prepare_output(config: ExperimentConfig, out: Path, resume: bool) -> Path | None:
    """Refuse to mix runs; on resume, find and check the checkpoint and cut the step log.
    Only the main process of a multi-process launch checks and writes; the others only look
    up the checkpoint (rank 0 creates nothing in ``out`` that could change it)."""
    require_output_dir(out, "output_dir")
    if not is_main_launch_process():
        return latest_checkpoint(out) if resume else None
    has_run = (out / STEPS_FILE).exists() or any(out.glob("checkpoint-*"))
    if has_run and not resume:
        raise ConfigError(f"{out} already holds a training run",
                          hint="add --resume to continue it, or choose another output "
                               "directory (--set output_dir=...)")
    checkpoint = latest_checkpoint(out) if resume else None
    if checkpoint is not None:
        state = json.loads((checkpoint / STATE_FILE).read_text())
        if state.get("config") != config.fingerprint():
            raise ConfigError(f"{checkpoint} was made with a different config",
                              hint="resume with the config (and --set values) the run started "
                                   f"with; it is saved in {out / 'config.yaml'}")
    if has_run:
        # Steps after the checkpoint (or all, when killed before the first) are redone.
        StepLog(out / STEPS_FILE).truncate(int(state["step"]) if checkpoint else 0)
    out.mkdir(parents=True, exist_ok=True)
    write_config(config, out)
    return checkpoint


def train(config: ExperimentConfig, *, resume: bool = False,
          on_step: Callable[[StepReport], None] | None = None,
          policy_options: dict[str, Any] | None = None,
          reward_funcs: Sequence[RewardFunc] | None = None,
          plan: TrainingPlan | None = None,
          on_log: Callable[[int, dict[str, float]], None] | None = None) -> TrainResult:
    """Run (or resume) the experiment ``config``; see the module docstring for the outputs.

    ``reward_funcs`` replace the default reward (the task's grade; see
    :func:`~harnessgrid.trainer.grpo.trajectory_reward`); ``plan`` replaces the rollouts the
    config describes (e.g. hand-picked harnesses); ``on_log`` gets SFT's logged metrics with
    the global step (GRPO/PPO report through ``on_step``)."""
    require_training_extras()
    if config.algorithm == "sft":
        from harnessgrid.trainer.sft import train_sft

        if policy_options:
            raise ConfigError("algorithm: sft rolls out no policy of its own: --policy-opt "
                              f"{', '.join(sorted(policy_options))} would be ignored",
                              hint="drop --policy-opt (the teacher is sft.teacher)")

        return train_sft(config, resume=resume, on_log=on_log)
    from harnessgrid.trainer.generation import check_policy_options

    check_policy_options(policy_options or {}, config.generation)  # before TRL is imported
    from harnessgrid.engine.limits import require_sandbox
    from harnessgrid.trainer.grpo import HarnessTrainer
    from harnessgrid.trainer.plan import TrainingPlan

    out = Path(config.output_dir)
    plan = plan or TrainingPlan(config)
    require_sandbox(plan.limits)
    checkpoint = prepare_output(config, out, resume)
    if checkpoint is not None:
        state = json.loads((checkpoint / STATE_FILE).read_text())
        if state.get("schedule") != plan.fingerprint():
            raise ConfigError(f"{checkpoint} was made with a different schedule (tasks, design "
                              "or plugins changed)",
                              hint="resume where the same suite, plugins and design are "
                                   "available")
    device = resolve_device(config.device)
    model, tokenizer = load_model(config.init_from or config.model, config.dtype, device)
    from harnessgrid.trainer.row_checks import check_model_for_run  # rows it can train (#26)

    check_model_for_run(plan, config.init_from or config.model, tokenizer, model)
    args = grpo_args(config, device)
    steplog = StepLog(out / STEPS_FILE)
    reports: list[dict[str, Any]] = []

    def record(report: StepReport) -> None:
        steplog.append(report)
        reports.append(report)
        if on_step is not None:
            on_step(report)

    if reward_funcs is None and config.reward_funcs:
        reward_funcs = [import_reward(spec) for spec in config.reward_funcs]
    trainer = HarnessTrainer(experiment=config, plan=plan, model=model, tokenizer=tokenizer,
                             args=args, on_step=record, policy_options=policy_options,
                             reward_funcs=reward_funcs)
    quiet_transformers_printing(trainer)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    final = save_final(trainer, tokenizer, out)
    write_summary(trainer, out)
    from harnessgrid.trainer.signal import no_signal_message

    # Judged on the whole step log, so a resumed run counts the steps before the resume too.
    no_signal = no_signal_message(steplog.read(), config)
    return TrainResult(output_dir=out, final_model=final, steps=int(trainer.state.global_step),
                       resumed_from=checkpoint, reports=reports, no_signal=no_signal)


def write_summary(trainer: Any, out: Path) -> None:
    """``OUT/summary.json``: steps, world size and a checksum of each process's weights (all
    equal when data-parallel replicas stayed in sync)."""
    import hashlib

    from accelerate.utils import gather_object

    digest = hashlib.sha256()
    for name, param in sorted(trainer.accelerator.unwrap_model(trainer.model)
                              .state_dict().items()):
        digest.update(name.encode())
        digest.update(param.detach().float().cpu().numpy().tobytes())
    checksums = gather_object([digest.hexdigest()[:16]])
    if trainer.accelerator.is_main_process:
        summary = {"steps": int(trainer.state.global_step),
                   "world_size": int(trainer.accelerator.num_processes),
                   "weight_checksums": list(checksums)}
        tmp = out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        os.replace(tmp, out / "summary.json")


def import_reward(spec: str) -> RewardFunc:
    """``package.module:function`` → the function (a reward function of trajectories)."""
    import importlib

    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"reward function {spec!r} is not module:function",
                          hint="e.g. reward_funcs: [my_rewards:shaped]")
    try:
        func = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import reward function {spec!r}: {exc}",
                          hint="the module must be importable (installed or on PYTHONPATH)"
                          ) from None
    if not callable(func):
        raise ConfigError(f"reward function {spec!r} is not callable",
                          hint="it takes a list of trajectories and returns a list of floats")
    reward: RewardFunc = func
    return reward


def save_final(trainer: Any, tokenizer: Any, out: Path) -> Path:
    """The trained model and tokenizer in ``out/final``, replaced atomically."""
    final = out / "final"
    if trainer.accelerator.is_main_process:
        tmp = out / "final.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        trainer.accelerator.unwrap_model(trainer.model).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    trainer.accelerator.wait_for_everyone()
    return final


def write_config(config: ExperimentConfig, out: Path) -> None:
    import yaml

    tmp = out / "config.yaml.tmp"
    tmp.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    os.replace(tmp, out / "config.yaml")


def quiet_transformers_printing(trainer: Any) -> None:
    """The step display is ours (``on_step``); transformers' own printer would repeat it."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
