"""The harness-scaled trainer: TRL's ``GRPOTrainer`` whose generation step is a batch of
harnessgrid episodes.

What is TRL's and unchanged: the model/optimizer/scheduler set-up, ``accelerate`` (DDP, FSDP),
the reference model and KL term, checkpointing, logging, and the loss itself
(``GRPOTrainer._compute_loss``: the clipped surrogate with ``loss_type``, ``epsilon``,
``beta``). What is replaced, because a multi-turn harness episode does not fit TRL's
one-completion-per-prompt rows:

* the data: one batch per optimizer step, the step index; the step's (task, harness) pairs
  come from the schedule, G rollouts each, split across processes;
* generation and scoring: the episodes run through their harnesses on the live model; rewards
  come from the task graders; GRPO advantages are per (task, harness) group, one per episode,
  shared by all the episode's segment rows; PPO's are per token (GAE with the critic);
  infrastructure failures are excluded, never scored 0;
* batching: every segment row is kept (TRL would drop rows beyond a multiple of
  ``steps_per_generation``), packed into micro-batches by token budget; gradients accumulate
  over the micro-batches of a step (synchronised across processes once, on the last);
* old log-probabilities: TRL's on-policy rule (the trainer's own recompute, detached) when the
  rollouts sampled from the live weights, so the update depends only on the sampled ids and a
  run reproduces; the ones recorded at sampling time when a separate engine (vLLM) sampled
  (:mod:`.batches`). Either way no extra forward; the gap between the recorded logprobs and
  the trainer's recompute is logged every step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from trl import GRPOTrainer  # type: ignore[attr-defined]

from harnessgrid.trainer.advantages import EpisodeOutcome, gae, group_advantages
from harnessgrid.trainer.batches import TrainRow, collate, micro_batches
from harnessgrid.trainer.checkpoints import CompleteCheckpoints
from harnessgrid.trainer.labelled_head import labelled_positions_only
from harnessgrid.trainer.rollout import RolloutJob, run_rollouts
from harnessgrid.trainer.signal import StepSignal, flat_groups, signal_tokens

if TYPE_CHECKING:
    from harnessgrid.trainer.config import ExperimentConfig
    from harnessgrid.trainer.plan import TrainingPlan
    from harnessgrid.trajectory import Trajectory

__all__ = ["HarnessTrainer", "StepReport", "trajectory_reward"]

logger = logging.getLogger(__name__)

RewardFunc = Callable[[Sequence["Trajectory"]], list[float | None]]


def trajectory_reward(kind: str = "score", format_bonus: float = 0.0) -> RewardFunc:
    """The default reward: each episode's grade (its score, or 1/0 for ``kind="pass"``), None
    for infrastructure failures; plus ``format_bonus`` times the episode's share of
    well-formed turns (:meth:`~harnessgrid.trajectory.Trajectory.well_formed_turns`) when
    set -- a shaping term for models that solve no task yet, so that rollouts which speak
    the harness's protocol are preferred. A custom reward function takes the same list of
    trajectories and returns one float (or None to exclude the episode) per trajectory."""
    from harnessgrid.trainer.advantages import episode_reward

    def harness_reward(trajectories: Sequence[Trajectory]) -> list[float | None]:
        out: list[float | None] = []
        for t in trajectories:
            r = episode_reward(t.score, t.passed, t.infra_failure, kind)  # type: ignore[arg-type]
            if r is not None and format_bonus and t.turns:
                r += format_bonus * t.well_formed_turns() / len(t.turns)
            out.append(r)
        return out

    harness_reward.__name__ = f"harness_{kind}" + ("_format" if format_bonus else "")
    return harness_reward


class StepReport(dict[str, Any]):
    """What one step did (one line of ``steps.jsonl``; see :meth:`HarnessTrainer._report`)."""


class HarnessTrainer(CompleteCheckpoints, GRPOTrainer):
    """GRPO (``critic=None``) or PPO (with a critic) on harnessgrid episodes.

    ``plan`` supplies the step's rollout jobs, the tasks, how to build a harness and the
    episode limits; ``on_step`` (main process) receives each :class:`StepReport`."""

    def __init__(self, *, experiment: ExperimentConfig, plan: TrainingPlan, model: Any,
                 tokenizer: Any, args: Any, reward_funcs: Sequence[RewardFunc] | None = None,
                 on_step: Callable[[StepReport], None] | None = None,
                 policy_options: dict[str, Any] | None = None) -> None:
        import datasets

        self.experiment = experiment
        self.plan = plan
        self.on_step = on_step
        self.policy_options = dict(policy_options or {})
        funcs = list(reward_funcs) if reward_funcs else [
            trajectory_reward(experiment.reward, experiment.format_bonus)]
        # TRL requires a reward source and names its metrics after it; the functions are called
        # here, on trajectories, not by TRL on completions.
        steps = datasets.Dataset.from_dict({"prompt": [""] * experiment.steps,
                                            "step": list(range(experiment.steps))})
        trl_funcs: Any = funcs
        super().__init__(model=model, reward_funcs=trl_funcs, args=args, train_dataset=steps,
                         processing_class=tokenizer)
        self._policy: Any = None
        #: this process's prompt tokens prefilled / read from the prefix cache in the last
        #: rollout (the hf policy's counters; none on Ray, whose workers generate)
        self._prefill_counts: dict[str, int] = {}
        self._capture: list[Any] | None = None
        self.critic: Any = None
        if experiment.algorithm == "ppo":
            from harnessgrid.trainer.critic import Critic

            self.critic = Critic(model.config._name_or_path, self.accelerator,
                                 learning_rate=experiment.ppo.critic_learning_rate,
                                 value_clip=experiment.ppo.value_clip,
                                 max_grad_norm=args.max_grad_norm, dtype=model.dtype)

    # -- data: one batch per optimizer step ----------------------------------------------------
    def get_train_dataloader(self) -> Any:
        """Step indices in order, the same on every process (each process then takes its
        share of the step's episodes). No shuffling: the schedule is the order."""
        from torch.utils.data import DataLoader

        steps: Any = list(range(self.experiment.steps))  # a list is a map-style dataset
        return DataLoader(steps, batch_size=1, collate_fn=lambda batch: {"steps": batch})

    # -- generation: the live model behind the hf: policy -------------------------------------
    def generation_policy(self) -> Any:
        """The token policy of the rollouts (created once; see :mod:`.generation`)."""
        if self._policy is None:
            from harnessgrid.trainer.generation import generation_policy

            self._policy = generation_policy(self)
        return self._policy

    def rollout(self, step: int) -> tuple[list[RolloutJob], list[Trajectory]]:
        """Run this process's share of ``step``'s episodes on the current weights."""
        from trl.models import unwrap_model_for_generation  # type: ignore[attr-defined]

        from harnessgrid.trainer.generation import sync_generation_weights

        jobs = self.plan.jobs(step)
        mine = jobs[self.accelerator.process_index::self.accelerator.num_processes]
        if self.experiment.rollout_backend == "ray":
            return mine, self._rollout_on_ray(step, mine)
        policy = self.generation_policy()
        sync_generation_weights(self, step)
        before = policy.stats.snapshot()
        with unwrap_model_for_generation(self.model_wrapped, self.accelerator):
            trajectories = asyncio.run(run_rollouts(
                mine, self.plan.tasks, policy, self.plan.limits,
                make_harness=self.plan.make_harness, concurrency=self.experiment.concurrency))
        after = policy.stats.snapshot()
        self._prefill_counts = {key: int(after[key] - before[key])
                                for key in ("prefilled_tokens", "reused_tokens")}
        return mine, trajectories

    def _rollout_on_ray(self, step: int, jobs: list[RolloutJob]) -> list[Trajectory]:
        """Episodes on a Ray cluster, generation on each worker from a snapshot of this step's
        weights (``OUT/rollout-policy/step-N``, which every node must see at the same path)."""
        import shutil

        from harnessgrid.trainer.rollout import run_rollouts_on_ray

        exp = self.experiment
        folder = Path(str(self.args.output_dir)) / "rollout-policy"
        snapshot = folder / f"step-{step:06d}"
        if self.accelerator.is_main_process and not (snapshot / "config.json").is_file():
            tmp = folder / f"step-{step:06d}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            self.accelerator.unwrap_model(self.model).save_pretrained(tmp)
            self._tokenizer.save_pretrained(tmp)
            os.replace(tmp, snapshot)
            for old in folder.glob("step-*"):  # keep only the weights being rolled out
                if old != snapshot:
                    shutil.rmtree(old, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        options = {"temperature": exp.temperature, "max_new_tokens": exp.max_new_tokens,
                   "seed": exp.seed, **self.policy_options}
        return run_rollouts_on_ray(
            jobs, self.plan.tasks, policy=f"hf:{snapshot}", policy_options=options,
            limits=self.plan.limits, suite=exp.suite,
            space={f.name: list(f.levels) for f in self.plan.space.factors},
            address=exp.ray_address)

    # -- one optimizer step ---------------------------------------------------------------------
    def training_step(self, model: Any, inputs: dict[str, Any],
                      num_items_in_batch: Any = None) -> Any:
        step = int(self.state.global_step)
        if inputs.get("steps") and inputs["steps"][0] != step:
            logger.debug("dataloader step %s != global step %d", inputs["steps"], step)
        t0 = time.perf_counter()
        jobs, trajectories = self.rollout(step)
        t1 = time.perf_counter()
        rewards = self._rewards(trajectories)
        outcomes = self._gather([EpisodeOutcome(j.episode_id, j.group, r)
                                 for j, r in zip(jobs, rewards, strict=True)])
        rows = self._rows(jobs, trajectories, outcomes)
        signal = self._signal(outcomes, rows)
        device = self.accelerator.device
        pad = int(self._tokenizer.pad_token_id)
        chunks = [collate(c, pad, device, mask_truncated=self.experiment.mask_truncated_turns,
                          recorded_as_old=self.experiment.generation == "vllm")
                  for c in micro_batches(rows, self.experiment.micro_batch_tokens)]
        loss_tokens = sum(float((c["completion_mask"] * c["tool_mask"]).sum()) for c in chunks)
        total_tokens = float(self.accelerator.reduce(torch.tensor(loss_tokens, device=device),
                                                     reduction="sum"))
        t2 = time.perf_counter()
        loss, gap, phases = self._policy_update(model, chunks, total_tokens, len(rows))
        value_loss = None
        t3 = time.perf_counter()
        if self.critic is not None:
            value_loss = self.critic.train_chunks(chunks, total_tokens)
        t4 = time.perf_counter()
        self._report(step, jobs, trajectories, rewards, rows, gap, value_loss, signal,
                     {"rollout_s": t1 - t0, "prepare_s": t2 - t1, "train_s": t4 - t2,
                      **phases, "critic_s": t4 - t3})
        return loss

    def _rewards(self, trajectories: Sequence[Trajectory]) -> list[float | None]:
        funcs: list[RewardFunc] = list(self._trl().reward_funcs)
        per_func = [f(trajectories) for f in funcs]
        weights = self.reward_weights.tolist()
        out: list[float | None] = []
        for i in range(len(trajectories)):
            values = [p[i] for p in per_func]
            out.append(None if any(v is None for v in values)
                       else sum(w * float(v) for w, v in zip(weights, values, strict=True)
                                if v is not None))
        return out

    def _signal(self, outcomes: Sequence[EpisodeOutcome], rows: Sequence[TrainRow]
                ) -> StepSignal:
        """The step's learning signal over all processes (outcomes are already gathered)."""
        groups, flat = flat_groups(outcomes)
        local = signal_tokens(rows, self.experiment.mask_truncated_turns)
        summed = self.accelerator.reduce(
            torch.tensor(local, dtype=torch.float64, device=self.accelerator.device),
            reduction="sum").tolist()
        return StepSignal(groups=groups, flat_groups=flat if self.critic is None else None,
                          signal_tokens=int(summed[0]), trained_tokens=int(summed[1]))

    def _gather(self, items: list[Any]) -> list[Any]:
        if self.accelerator.num_processes == 1:
            return items
        from accelerate.utils import gather_object

        return list(gather_object(items))

    def _rows(self, jobs: Sequence[RolloutJob], trajectories: Sequence[Trajectory],
              outcomes: Sequence[EpisodeOutcome]) -> list[TrainRow]:
        """This process's training rows: episodes with a reward, with their advantages."""
        exp = self.experiment
        valid = {o.episode_id for o in outcomes if o.reward is not None}
        per_episode = [(j, t, t.token_rows()) for j, t in zip(jobs, trajectories, strict=True)
                       if j.episode_id in valid]
        if self.critic is None:
            adv = group_advantages(outcomes, exp.scale_rewards)
            sign = -1.0 if exp.negate_advantages else 1.0
            return [TrainRow(row, sign * adv[j.episode_id]) for j, _, rows in per_episode
                    for row in rows]
        rows = self._ppo_rows(per_episode, {o.episode_id: o.reward for o in outcomes})
        if exp.negate_advantages:  # the critic still learns the true returns
            rows = [dataclasses.replace(r, advantage=tuple(-a for a in r.advantage)
                                        if isinstance(r.advantage, tuple) else -r.advantage)
                    for r in rows]
        return rows

    def _ppo_rows(self, per_episode: Sequence[tuple[RolloutJob, Trajectory, list[Any]]],
                  rewards: dict[str, float | None]) -> list[TrainRow]:
        """Per-token advantages: critic values before each model token, GAE over the episode's
        model tokens in order (stitched across its segment rows), whitened over the step."""
        exp, device = self.experiment, self.accelerator.device
        pad = int(self._tokenizer.pad_token_id)
        flat = [TrainRow(row, 0.0) for _, _, rows in per_episode for row in rows]
        values: dict[int, list[float]] = {}
        for chunk_rows in micro_batches(flat, exp.micro_batch_tokens):
            chunk = collate(chunk_rows, pad, device)
            v = self.critic.values(chunk).cpu()
            for i, r in enumerate(chunk_rows):
                values[id(r.row)] = v[i, :len(r.row.completion_ids)].tolist()
        staged: list[tuple[Any, list[float], list[float]]] = []
        for job, _, rows in per_episode:
            positions = [(i, k) for i, row in enumerate(rows)
                         for k, m in enumerate(row.mask) if m]
            reward = rewards[job.episode_id]
            assert reward is not None
            adv, ret = gae([values[id(rows[i])][k] for i, k in positions], reward,
                           exp.ppo.gamma, exp.ppo.lam)
            advs = [[0.0] * len(row.completion_ids) for row in rows]
            rets = [[0.0] * len(row.completion_ids) for row in rows]
            for (i, k), a, g in zip(positions, adv, ret, strict=True):
                advs[i][k], rets[i][k] = a, g
            staged.extend(zip(rows, advs, rets, strict=True))
        if exp.ppo.whiten_advantages:
            self._whiten(staged)
        return [TrainRow(row, tuple(a), tuple(values[id(row)]), tuple(r))
                for row, a, r in staged]

    def _whiten(self, staged: list[tuple[Any, list[float], list[float]]]) -> None:
        model_adv = [a[k] for row, a, _ in staged for k, m in enumerate(row.mask) if m]
        stats = torch.tensor([sum(model_adv), sum(x * x for x in model_adv), len(model_adv)],
                             dtype=torch.float64, device=self.accelerator.device)
        total, squares, n = self.accelerator.reduce(stats, reduction="sum").tolist()
        if n < 2:
            return
        mean = total / n
        std = math.sqrt(max(squares / n - mean * mean, 0.0))
        for row, a, _ in staged:
            for k, m in enumerate(row.mask):
                if m:
                    a[k] = (a[k] - mean) / (std + 1e-8)

    def _policy_update(self, model: Any, chunks: list[dict[str, Any]], total_tokens: float,
                       n_rows: int) -> tuple[Any, dict[str, float], dict[str, float]]:
        """Forward/backward every chunk (TRL's loss), gradients synchronised on the last.
        Returns the loss, the logprob gap and the time in forward+loss and in backward."""
        model.train()
        forward_s = backward_s = 0.0
        total = torch.zeros((), device=self.accelerator.device)
        gaps: list[Any] = []
        count = torch.tensor(total_tokens, device=self.accelerator.device)
        for i, chunk in enumerate(chunks):
            chunk["num_items_in_batch"] = count
            last = i == len(chunks) - 1
            with nullcontext() if last else self.accelerator.no_sync(model):
                if self.beta != 0.0:
                    chunk["ref_per_token_logps"] = self._reference_logps(chunk)
                self._capture = []
                t0 = time.perf_counter()
                with self.compute_loss_context_manager():
                    loss = self._trl()._compute_loss(model, chunk) * self._chunk_weight(
                        chunk, n_rows)
                t1 = time.perf_counter()
                self.accelerator.backward(loss)
                forward_s += t1 - t0
                backward_s += time.perf_counter() - t1
                gaps.append(self._logp_gap(chunk))
                self._capture = None
            total = total + loss.detach()
        if not chunks:  # nothing to learn here this step; keep DDP's collectives in step
            self.accelerator.backward(sum(p.sum() * 0.0 for p in model.parameters()))
        mean_gap = [g for g in gaps if g is not None]
        gap = {"mean": float(sum(g[0] for g in mean_gap) / max(1, sum(g[2] for g in mean_gap))),
               "max": max((g[1] for g in mean_gap), default=0.0)}
        return total, gap, {"loss_s": forward_s, "backward_s": backward_s}

    def _trl(self) -> Any:
        """This trainer as TRL's (untyped) class, for calling its methods."""
        return self

    def _chunk_weight(self, chunk: dict[str, Any], n_rows: int) -> float:
        """Loss types that TRL averages per batch (rather than dividing by the step's token
        count) are re-weighted so the chunks of a step add up to one batch's loss."""
        rows = int(chunk["completion_ids"].size(0))
        if self.loss_type in ("grpo", "dr_grpo"):
            return rows / max(n_rows, 1)
        if self.loss_type == "bnpo":
            tokens = float((chunk["completion_mask"] * chunk["tool_mask"]).sum())
            total = float(chunk["num_items_in_batch"]) / int(self.accelerator.num_processes)
            return tokens / max(total, 1.0)
        return 1.0

    def _reference_logps(self, chunk: dict[str, Any]) -> Any:
        ids = torch.cat([chunk["prompt_ids"], chunk["completion_ids"]], dim=1)
        attention = torch.cat([chunk["prompt_mask"], chunk["completion_mask"]], dim=1)
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.ref_model, ids, attention, chunk["completion_ids"].size(1))
        return logps

    def _get_per_token_logps_and_entropies(self, model: Any, *args: Any,
                                           **kwargs: Any) -> Any:
        parent: Any = super()
        with labelled_positions_only():  # the LM head only on completion tokens, on CPU too
            out = parent._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if self._capture is not None:
            self._capture.append(out[0].detach())
        return out

    def _logp_gap(self, chunk: dict[str, Any]) -> tuple[float, float, float] | None:
        """(sum, max, count) of |recomputed - sampling| logprob over the chunk's model tokens."""
        if not self._capture:
            return None
        mask = (chunk["completion_mask"] * chunk["tool_mask"]).bool()
        diff = (self._capture[0].float() - chunk["sampling_per_token_logps"]).abs()[mask]
        if diff.numel() == 0:
            return None
        return float(diff.sum()), float(diff.max()), float(diff.numel())

    # -- reporting -------------------------------------------------------------------------------
    def _report(self, step: int, jobs: Sequence[RolloutJob], trajectories: Sequence[Trajectory],
                rewards: Sequence[float | None], rows: Sequence[TrainRow],
                gap: dict[str, float], value_loss: float | None, signal: StepSignal,
                timing: dict[str, float]) -> None:
        local = [{"task": j.task_id, "harness": j.harness, "anchor": j.anchor, "slot": j.slot,
                  "position": j.position, "rollout": j.rollout, "episode_id": j.episode_id,
                  "reward": r, "score": t.score, "passed": t.passed, "termination": t.termination,
                  "turns": len(t.turns), "well_formed_turns": t.well_formed_turns(),
                  "segments": t.segments, "tokens_out": t.tokens_out,
                  "model_tokens": sum(row.model_tokens for row in t.token_rows()),
                  "error": (t.error or "")[:300] if t.infra_failure else None}
                 for j, t, r in zip(jobs, trajectories, rewards, strict=True)]
        episodes = self._gather(local)
        gaps = self._gather([gap])
        prefill = self._gather([self._prefill_counts])
        if self.experiment.save_trajectories:
            self._save_trajectories(step, trajectories)
        if not self.accelerator.is_main_process:
            return
        report = step_report(step, episodes, timing, rows_local=len(rows),
                             logp_gap={"mean": sum(g["mean"] for g in gaps) / len(gaps),
                                       "max": max(g["max"] for g in gaps)},
                             value_loss=value_loss, signal=signal)
        if any(prefill):  # summed over processes; absent when the rollouts ran on Ray
            report.update({key: sum(p[key] for p in prefill) for key in prefill[0]})
        if report["signal_tokens"] == 0:
            logger.warning("step %d had no learning signal: no trained token carried a non-zero "
                           "advantage (%s of %d groups without reward spread)", step,
                           signal.flat_groups, signal.groups)
        metrics = self._metrics["train"]
        for key in ("reward", "score", "pass_rate", "well_formed", "segments_per_episode",
                    "turns_per_episode", "infra_failures", "model_tokens_per_s",
                    "flat_group_share", "signal_tokens"):
            if report.get(key) is not None:
                metrics[f"harness/{key}"].append(float(report[key]))
        metrics["sampling/logp_gap_mean"].append(report["logp_gap"]["mean"])
        metrics["sampling/logp_gap_max"].append(report["logp_gap"]["max"])
        if value_loss is not None:
            metrics["value_loss"].append(value_loss)
        if self.on_step is not None:
            self.on_step(report)

    def _save_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        """This process's trajectories of ``step``, one file per (step, process), replaced
        atomically -- a redone step after a resume overwrites, never duplicates."""
        folder = Path(str(self.args.output_dir)) / "trajectories"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step-{step:06d}.rank{self.accelerator.process_index}.jsonl"
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(t.model_dump_json() + "\n" for t in trajectories))
        os.replace(tmp, path)

    # -- checkpoints (CompleteCheckpoints) ----------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        return {"config": self.experiment.fingerprint(), "schedule": self.plan.fingerprint()}

    def save_extra_state(self, folder: Path) -> None:
        if self.critic is not None:
            self.critic.save(folder / "critic")

    def _load_optimizer_and_scheduler(self, checkpoint: Any) -> None:
        parent: Any = super()
        parent._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and self.critic is not None:
            self.critic.load(Path(checkpoint) / "critic")


def step_report(step: int, episodes: Sequence[dict[str, Any]], timing: dict[str, float], *,
                rows_local: int, logp_gap: dict[str, float],
                value_loss: float | None, signal: StepSignal | None = None) -> StepReport:
    """Aggregate one step's episodes: pairs rolled out, reward per configuration, rates, and
    the learning signal (groups without reward spread, tokens with a non-zero advantage)."""
    valid = [e for e in episodes if e["reward"] is not None]
    by_pair: dict[tuple[int, str], dict[str, Any]] = {}
    by_config: dict[str, list[float]] = {}
    for e in episodes:
        pair = by_pair.setdefault((e["position"], e["harness"]), {
            "task": e["task"], "harness": e["harness"], "anchor": e["anchor"],
            "slot": e["slot"], "position": e["position"], "rewards": [], "infra_failures": 0})
        if e["reward"] is None:
            pair["infra_failures"] += 1
        else:
            pair["rewards"].append(e["reward"])
            by_config.setdefault(e["harness"], []).append(e["reward"])
    model_tokens = sum(e["model_tokens"] for e in valid)
    rollout_s = max(timing.get("rollout_s", 0.0), 1e-9)
    return StepReport(
        step=step, episodes=len(episodes), infra_failures=len(episodes) - len(valid),
        reward=mean([e["reward"] for e in valid]),
        score=mean([float(e.get("score") or 0.0) for e in valid]),
        pass_rate=mean([1.0 if e["passed"] else 0.0 for e in valid]),
        reward_per_config={k: sum(v) / len(v) for k, v in sorted(by_config.items())},
        pairs=list(by_pair.values()),
        segments_per_episode=mean([e["segments"] for e in valid]),
        turns_per_episode=mean([e["turns"] for e in valid]),
        well_formed=(sum(e.get("well_formed_turns", 0) for e in valid)
                     / max(1, sum(e["turns"] for e in valid)) if valid else None),
        model_tokens=model_tokens, model_tokens_per_s=model_tokens / rollout_s,
        rows=rows_local, logp_gap=logp_gap, value_loss=value_loss,
        terminations=_count(e["termination"] for e in episodes),
        errors=[e["error"] for e in episodes if e["error"]][:3],
        **(signal.as_report() if signal is not None else {}),
        **{k: round(v, 3) for k, v in timing.items()})


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
