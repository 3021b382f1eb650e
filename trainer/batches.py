"""Segment rows → padded tensors in micro-batches bounded by a token budget.

TRL's own batching keeps ``per_device_train_batch_size x steps_per_generation`` rows and drops
the rest; segment rows vary in number and length from step to step, so here every row of the
step is kept and rows are packed, longest first, into chunks whose padded size (rows x
(longest prompt + longest completion)) stays within ``micro_batch_tokens``. A row longer than
the budget gets a chunk of its own. The layout is TRL's multi-turn one: prompt ids left-padded,
completion ids right-padded, ``tool_mask`` 0 on harness-inserted tokens, the recorded sampling
logprobs as ``sampling_per_token_logps``.

Old logprobs: a step trains once on the rollouts of the weights it starts from, so when the
rollouts sampled from those weights in this process's own numerics (``generation: hf``, local or
on Ray workers) the old logprobs are the trainer's own recompute, detached -- TRL's on-policy
rule: ``old_per_token_logps`` is left out and TRL uses ``per_token_logps.detach()``. The
recorded ones differ from that recompute only by the rounding of whichever episodes shared a
generation batch (about 1e-6), and using them would make the update depend on that timing,
so two runs with the same seed would drift apart. A separate engine (``generation: vllm``) has
numerics of its own; there the recorded logprobs are the old ones (``recorded_as_old``), which
makes the ratio an importance correction for the engine's mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessgrid.token_rows import TokenRow

__all__ = ["TrainRow", "collate", "loss_mask", "micro_batches"]


@dataclass(frozen=True)
class TrainRow:
    """A segment row with what the loss needs: one advantage for the row (GRPO: the episode's)
    or one per completion token (PPO), and for PPO the critic's old values and the returns."""

    row: TokenRow
    advantage: float | tuple[float, ...]
    old_values: tuple[float, ...] | None = None
    returns: tuple[float, ...] | None = None

    @property
    def padded_width(self) -> int:
        return len(self.row.prompt_ids) + len(self.row.completion_ids)


def loss_mask(row: TokenRow, mask_truncated: bool) -> list[int]:
    """1 on the row's model tokens; with ``mask_truncated``, 0 on turns cut by the length
    limit too (their ending was written by the harness, not chosen by the model)."""
    mask = list(row.mask)
    if mask_truncated and row.truncated:
        for turn, (start, end) in zip(row.turns, row.spans, strict=True):
            if turn in row.truncated:
                mask[start:end] = [0] * (end - start)
    return mask


def micro_batches(rows: Sequence[TrainRow], token_budget: int) -> list[list[TrainRow]]:
    """Rows packed longest-first into chunks of at most ``token_budget`` padded tokens."""
    ordered = sorted(rows, key=lambda r: (len(r.row.prompt_ids), len(r.row.completion_ids)),
                     reverse=True)
    chunks: list[list[TrainRow]] = []
    current: list[TrainRow] = []
    max_p = max_c = 0
    for r in ordered:
        p, c = len(r.row.prompt_ids), len(r.row.completion_ids)
        width = max(max_p, p) + max(max_c, c)
        if current and (len(current) + 1) * width > token_budget:
            chunks.append(current)
            current, max_p, max_c = [], 0, 0
        current.append(r)
        max_p, max_c = max(max_p, p), max(max_c, c)
    if current:
        chunks.append(current)
    return chunks


def collate(rows: Sequence[TrainRow], pad_id: int, device: Any, *,
            mask_truncated: bool = False, recorded_as_old: bool = False) -> dict[str, Any]:
    """One chunk as the tensors TRL's ``_compute_loss`` reads (plus PPO's value targets);
    ``recorded_as_old``: the sampling logprobs are the old logprobs too (module docstring)."""
    import torch

    n = len(rows)
    max_p = max(len(r.row.prompt_ids) for r in rows)
    max_c = max(len(r.row.completion_ids) for r in rows)
    prompt_ids = torch.full((n, max_p), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, max_p), dtype=torch.long)
    completion_ids = torch.full((n, max_c), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((n, max_c), dtype=torch.long)
    tool_mask = torch.zeros((n, max_c), dtype=torch.long)
    sampling_logps = torch.zeros((n, max_c), dtype=torch.float32)
    per_token = any(isinstance(r.advantage, tuple) for r in rows)
    advantages = torch.zeros((n, max_c) if per_token else (n,), dtype=torch.float32)
    has_values = rows[0].old_values is not None
    old_values = torch.zeros((n, max_c), dtype=torch.float32) if has_values else None
    returns = torch.zeros((n, max_c), dtype=torch.float32) if has_values else None
    for i, r in enumerate(rows):
        p, c = len(r.row.prompt_ids), len(r.row.completion_ids)
        prompt_ids[i, max_p - p:] = torch.tensor(r.row.prompt_ids, dtype=torch.long)
        prompt_mask[i, max_p - p:] = 1
        completion_ids[i, :c] = torch.tensor(r.row.completion_ids, dtype=torch.long)
        completion_mask[i, :c] = 1
        tool_mask[i, :c] = torch.tensor(loss_mask(r.row, mask_truncated), dtype=torch.long)
        sampling_logps[i, :c] = torch.tensor(r.row.logprobs, dtype=torch.float32)
        if isinstance(r.advantage, tuple):
            advantages[i, :c] = torch.tensor(r.advantage, dtype=torch.float32)
        else:
            advantages[i] = r.advantage
        if old_values is not None and returns is not None:
            assert r.old_values is not None
            assert r.returns is not None
            old_values[i, :c] = torch.tensor(r.old_values, dtype=torch.float32)
            returns[i, :c] = torch.tensor(r.returns, dtype=torch.float32)
    out: dict[str, Any] = {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "tool_mask": tool_mask, "sampling_per_token_logps": sampling_logps,
        "advantages": advantages,
    }
    if recorded_as_old:
        out["old_per_token_logps"] = sampling_logps
    if old_values is not None:
        out["old_values"], out["returns"] = old_values, returns
    return {k: v.to(device) for k, v in out.items()}
