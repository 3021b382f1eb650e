"""Supervised fine-tuning on demonstrations (``algorithm: sft``).

1. **Collect**: a teacher policy (``sft.teacher``: any policy spec; the scripted oracle by
   default) plays the schedule's (task, harness) pairs, one rollout each, until
   ``sft.episodes`` episodes ran. ``design: adapter:openclaw`` makes this the paper's
   black-box SFT baseline (every demonstration through the emulated shell; a model with a
   short context takes ``adapter:openclaw@2026.2.26``, whose five tools fit it).
2. **Keep** the episodes whose score reaches ``sft.min_score`` (infrastructure failures never).
3. **Rows**: each kept episode's append-only segments, from exact token ids -- the teacher's
   own when it is a token policy with the student's tokenizer, otherwise the teacher's turns
   written by the student's chat template as the episode ran
   (:class:`~harnessgrid.policies.forced.TeacherForcedPolicy`). The loss mask is 1 exactly on
   assistant tokens.
4. **Train** with TRL's ``SFTTrainer`` on the pre-tokenized rows (``input_ids`` +
   ``assistant_masks``), ``steps`` optimizer steps of ``sft.batch_size`` rows.

Demonstrations are exported before training, so they can be used elsewhere::

    OUT/demonstrations/trajectories.jsonl   every collected episode (kept or not)
    OUT/demonstrations/rows.jsonl           one line per row: task, harness, score, the
                                            conversation (messages + tools) and the token ids
    OUT/demonstrations/dataset/             the same rows as a Hugging Face datasets Dataset
                                            (``datasets.load_from_disk``)

Training then writes what GRPO's runs do (:mod:`harnessgrid.trainer.run`): ``steps.jsonl`` (one
line per logged step: loss, learning rate, tokens; see :func:`sft_step_line`), checkpoints,
``final/`` and ``summary.json``. The teacher's episodes keep their views within the student's
maximum length (less ``max_new_tokens``), as the student's own episodes would.

A resumed run reuses the exported demonstrations (``COMPLETE``, written last, holds the
config's fingerprint).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback
from trl import SFTTrainer  # type: ignore[attr-defined]

from harnessgrid.policies.forced import TeacherForcedPolicy
from harnessgrid.trainer.checkpoints import CompleteCheckpoints
from harnessgrid.trainer.labelled_head import labelled_positions_only

if TYPE_CHECKING:
    from harnessgrid.policies import Policy
    from harnessgrid.token_rows import TokenRow
    from harnessgrid.trainer.config import ExperimentConfig
    from harnessgrid.trainer.plan import TrainingPlan
    from harnessgrid.trainer.run import TrainResult
    from harnessgrid.trajectory import Trajectory

__all__ = ["HarnessSFTTrainer", "collect_demonstrations", "demonstration_rows", "train_sft"]

DEMOS = "demonstrations"


class HarnessSFTTrainer(CompleteCheckpoints, SFTTrainer):
    """TRL's SFTTrainer with complete-or-ignored checkpoints (see :mod:`.checkpoints`)."""

    def __init__(self, *args: Any, fingerprint: str, **kwargs: Any) -> None:
        self._fingerprint = fingerprint
        super().__init__(*args, **kwargs)

    def checkpoint_state(self) -> dict[str, Any]:
        return {"config": self._fingerprint}

    def compute_loss(self, *args: Any, **kwargs: Any) -> Any:
        parent: Any = super()
        with labelled_positions_only():  # the LM head only where the loss is, on CPU too
            return parent.compute_loss(*args, **kwargs)


class StudentBoundTeacher(TeacherForcedPolicy):
    """A teacher-forced policy whose episodes keep their views within ``context_limit`` (the
    runtime's context budget reads it, as it reads an ``hf:`` policy's)."""

    def __init__(self, teacher: Policy, tokenizer: Any, context_limit: int | None) -> None:
        super().__init__(teacher, tokenizer)
        self.context_limit = context_limit
        # The budget counts a view that outgrew the student's length before it cuts it: that
        # is counting, not running the sequence through the model, so the tokenizer's warning
        # about running it ("Token indices sequence length is longer than...") does not apply
        # (transformers marks it given this way). Rows the student would train on are checked
        # by long_rows_warning.
        flags = getattr(tokenizer, "deprecation_warnings", None)
        if isinstance(flags, dict):
            flags["sequence-length-is-longer-than-the-specified-maximum"] = True


def teacher_policy(config: ExperimentConfig, tokenizer: Any,
                   max_length: int | None = None) -> Policy:
    """The teacher, recording token ids in the student's vocabulary and template.

    ``max_length`` is the student's (its ``max_position_embeddings``): the teacher's views are
    then kept within it less ``max_new_tokens``, as the ``hf:`` policy keeps its own, so a
    demonstration is never longer than what the student can read."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.policies import make_policy
    from harnessgrid.policies.token import TokenPolicy

    teacher = make_policy(config.sft.teacher, config.sft.teacher_options)
    if isinstance(teacher, TokenPolicy) and _same_tokenizer(teacher.book.tokenizer, tokenizer):
        return teacher  # its records are already the student's ids
    if max_length is not None and max_length <= config.max_new_tokens:
        raise ConfigError(f"max_new_tokens={config.max_new_tokens} leaves no room for a prompt "
                          f"in the student's maximum length {max_length}",
                          hint="lower max_new_tokens")
    return StudentBoundTeacher(teacher, tokenizer, None if max_length is None
                               else max_length - config.max_new_tokens)


def _same_tokenizer(a: Any, b: Any) -> bool:
    return bool(a.get_vocab() == b.get_vocab()
                and getattr(a, "chat_template", None) == getattr(b, "chat_template", None))


def collect_demonstrations(config: ExperimentConfig, plan: TrainingPlan,
                           policy: Policy) -> list[Trajectory]:
    """``sft.episodes`` teacher episodes over the schedule's pairs, in schedule order."""
    from dataclasses import replace

    from harnessgrid.trainer.rollout import RolloutJob, run_rollouts

    jobs: list[RolloutJob] = []
    step = 0
    while len(jobs) < config.sft.episodes:
        jobs.extend(replace(j, rollout=0) for j in plan.jobs(step) if j.rollout == 0)
        step += 1
    return asyncio.run(run_rollouts(jobs[:config.sft.episodes], plan.tasks, policy,
                                    plan.limits, make_harness=plan.make_harness,
                                    concurrency=config.concurrency))


def long_rows_warning(rows: list[tuple[Trajectory, TokenRow]], max_length: int | None,
                      truncate_at: int | None) -> str | None:
    """What to warn about when rows are longer than the student's maximum length (a teacher
    turn longer than ``max_new_tokens``) and ``sft.max_length`` does not cut them; None when
    every row fits."""
    if max_length is None or (truncate_at is not None and truncate_at <= max_length):
        return None
    lengths = [len(row.prompt_ids) + len(row.completion_ids) for _, row in rows]
    long = [n for n in lengths if n > max_length]
    if not long:
        return None
    return (f"{len(long)} of {len(rows)} demonstration rows are longer than the student's "
            f"maximum length {max_length} (up to {max(long)} tokens): set sft.max_length "
            f"(at most {max_length}) to truncate them")


def demonstration_rows(trajectories: list[Trajectory], min_score: float
                       ) -> list[tuple[Trajectory, TokenRow]]:
    """The segment rows of every episode that scored at least ``min_score``."""
    return [(t, row) for t in trajectories
            if not t.infra_failure and t.score is not None and t.score >= min_score
            for row in t.token_rows()]


def _row_record(traj: Trajectory, row: TokenRow) -> dict[str, Any]:
    """One exported row: provenance, the conversation as messages (what another tokenizer
    would need) and the exact ids with the assistant mask (what this student trains on)."""
    turns = {t.index: t for t in traj.turns}
    last = turns[row.turns[-1]]
    messages = [m.openai() for m in [*last.view, last.assistant]]
    return {"episode_id": traj.episode_id, "task": traj.task_id, "harness": traj.harness,
            "score": traj.score, "segment": row.segment, "messages": json.dumps(messages),
            "input_ids": list(row.prompt_ids) + list(row.completion_ids),
            "assistant_masks": [0] * len(row.prompt_ids) + list(row.mask)}


def export_demonstrations(folder: Path, trajectories: list[Trajectory],
                          rows: list[tuple[Trajectory, TokenRow]], fingerprint: str) -> Any:
    """Write the demonstrations (module docstring) and return the rows as a Dataset."""
    import datasets

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "trajectories.jsonl").write_text(
        "".join(t.model_dump_json() + "\n" for t in trajectories))
    records = [_row_record(t, r) for t, r in rows]
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    dataset = datasets.Dataset.from_list(records)
    dataset.save_to_disk(str(tmp / "dataset"))
    (tmp / "COMPLETE").write_text(fingerprint)  # written last: the export is whole
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return dataset


def sft_args(config: ExperimentConfig, device: str) -> Any:
    from trl import SFTConfig  # type: ignore[attr-defined]

    from harnessgrid.errors import ConfigError
    from harnessgrid.trainer.run import check_trl_keys, trl_rejected

    defaults: dict[str, Any] = {"report_to": [], "logging_steps": 1, "save_strategy": "steps",
                                "save_steps": max(1, min(50, config.steps)),
                                "save_total_limit": 2, "disable_tqdm": True,
                                "ddp_find_unused_parameters": False,
                                # not group_by_length: transformers' length-grouped sampler
                                # cuts an epoch into about four mega-batches, each sorted
                                # longest first, so training sweeps from the longest rows (late
                                # turns) to the shortest with consecutive batches alike; that
                                # cost the micro model 0.70 -> 0.41 held-out token accuracy at
                                # 60 steps (issue 26), more than random batches' padding costs
                                "train_sampling_strategy": "random"}
    micro = config.sft.micro_batches
    if micro > 1:
        defaults["train_sampling_strategy"] = "batch_rebalance"
    options = {**defaults, **config.trl}
    check_trl_keys(SFTConfig, options)
    if micro > 1 and options["train_sampling_strategy"] != "batch_rebalance":
        raise ConfigError(f"sft.micro_batches={micro} sorts each step's rows into micro-batches "
                          "(train_sampling_strategy batch_rebalance), but trl."
                          f"train_sampling_strategy is {options['train_sampling_strategy']!r}",
                          hint="remove trl.train_sampling_strategy, or set sft.micro_batches: 1")
    if device == "cpu":
        options.update(use_cpu=True, bf16=False, fp16=False)
    try:
        return SFTConfig(output_dir=config.output_dir, max_steps=config.steps,
                         learning_rate=config.learning_rate, seed=config.seed,
                         per_device_train_batch_size=config.sft.batch_size // micro,
                         gradient_accumulation_steps=micro, max_length=config.sft.max_length,
                         **options)
    except (ValueError, TypeError) as exc:
        raise trl_rejected("SFTConfig", exc, config.trl) from None


def train_sft(config: ExperimentConfig, *, resume: bool = False,
              plan: TrainingPlan | None = None,
              on_log: Callable[[int, dict[str, float]], None] | None = None) -> TrainResult:
    """Collect, export and train (module docstring)."""
    import datasets

    from harnessgrid.engine.limits import require_sandbox
    from harnessgrid.errors import ConfigError
    from harnessgrid.trainer.plan import TrainingPlan
    from harnessgrid.trainer.row_checks import check_demonstration_rows, check_model_for_run
    from harnessgrid.trainer.run import (
        STEPS_FILE,
        StepLog,
        TrainResult,
        load_model,
        prepare_output,
        quiet_transformers_printing,
        resolve_device,
        save_final,
        write_summary,
    )

    out = Path(config.output_dir)
    plan = plan or TrainingPlan(config)
    require_sandbox(plan.limits)
    checkpoint = prepare_output(config, out, resume)
    device = resolve_device(config.device)
    model_name = config.init_from or config.model
    model, tokenizer = load_model(model_name, config.dtype, device)
    check_model_for_run(plan, model_name, tokenizer, model)
    folder = out / DEMOS
    args = sft_args(config, device)
    # The main process collects; the others then find the finished export and load it.
    with args.main_process_first(local=False, desc="demonstrations"):
        complete = folder / "COMPLETE"
        if complete.is_file() and complete.read_text() == config.fingerprint():
            dataset = datasets.load_from_disk(str(folder / "dataset"))
        else:
            max_length = getattr(model.config, "max_position_embeddings", None)
            teacher = teacher_policy(config, tokenizer, max_length)
            trajectories = collect_demonstrations(config, plan, teacher)
            rows = demonstration_rows(trajectories, config.sft.min_score)
            if not rows:
                failures = sorted({t.termination for t in trajectories})
                raise ConfigError(f"none of the {len(trajectories)} teacher episodes reached "
                                  f"sft.min_score={config.sft.min_score} (terminations: "
                                  f"{', '.join(failures)})",
                                  hint="check the teacher (sft.teacher) and the episode "
                                       f"limits, or lower sft.min_score; see {folder}")
            too_long = long_rows_warning(rows, max_length, config.sft.max_length)
            if too_long is not None:
                warnings.warn(too_long, stacklevel=1)
            dataset = export_demonstrations(folder, trajectories, rows, config.fingerprint())
    check_demonstration_rows(dataset, tokenizer, model_name=model_name, folder=folder)
    train_rows = dataset.select_columns(["input_ids", "assistant_masks"])
    trainer = HarnessSFTTrainer(model=model, args=args,
                                train_dataset=train_rows, processing_class=tokenizer,
                                fingerprint=config.fingerprint())
    quiet_transformers_printing(trainer)
    logged: list[dict[str, Any]] = []
    steplog = StepLog(out / STEPS_FILE)
    tokens_before = 0.0

    def record(step: int, logs: dict[str, float]) -> None:
        nonlocal tokens_before
        logged.append({"step": step, **logs})
        if "loss" in logs:  # a step's log, not the closing one (train_runtime, ...)
            steplog.append(sft_step_line(step, logs, tokens_before))
            tokens_before = logs.get("num_tokens", tokens_before)
        if on_log is not None:
            on_log(step, logs)

    trainer.add_callback(_LogForwarder(record))
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    final = save_final(trainer, tokenizer, out)
    write_summary(trainer, out)
    return TrainResult(output_dir=out, final_model=final, steps=int(trainer.state.global_step),
                       resumed_from=checkpoint,
                       reports=[{"demonstration_rows": len(dataset)}, *logged])


def sft_step_line(step: int, logs: dict[str, float], tokens_before: float) -> dict[str, Any]:
    """One line of ``steps.jsonl`` for the logged step ``step`` (the trainer's global step):
    ``step`` counted from 0 as in GRPO's lines, TRL's metrics as logged (``loss``,
    ``learning_rate``, ``grad_norm``, ``entropy``, ``mean_token_accuracy``, ``epoch``) and
    ``tokens``, the tokens trained on since the previous line (from TRL's running
    ``num_tokens``, which counts from 0 in each process, as ``tokens_before`` does)."""
    line: dict[str, Any] = {"step": step - 1,
                            **{k: v for k, v in logs.items() if k != "num_tokens"}}
    if "num_tokens" in logs:
        line["tokens"] = int(logs["num_tokens"] - tokens_before)
    return line



class _LogForwarder(TrainerCallback):
    """Hands the trainer's logged metrics (loss, learning rate, ...) to a plain function."""

    def __init__(self, forward: Callable[[int, dict[str, float]], None]) -> None:
        self.forward = forward

    def on_log(self, args: Any, state: Any, control: Any,
               logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        if logs and state.is_world_process_zero:
            self.forward(int(state.global_step), logs)
