"""PPO's learned value baseline.

TRL 1.16 has no PPOTrainer and no value-head class, so the critic is a plain transformers
token-classification model with one label -- the policy checkpoint's backbone with a fresh
``score`` head, one value per position -- trained with its own optimizer on a clipped value
loss. The value of model token t is read at the position *before* it (the hidden state that
chose it), as in classic RLHF PPO.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

__all__ = ["Critic"]

_STATE = "critic_optimizer.pt"


class Critic:
    def __init__(self, model_path: str, accelerator: Any, *, learning_rate: float,
                 value_clip: float, max_grad_norm: float | None, dtype: Any) -> None:
        import torch
        from transformers import AutoModelForTokenClassification
        from transformers.utils import logging

        hf_logging: Any = logging  # partially typed upstream

        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # "newly initialized: score.weight" is the point here
        try:
            model = AutoModelForTokenClassification.from_pretrained(model_path, num_labels=1,
                                                                    dtype=dtype)
        finally:
            hf_logging.set_verbosity(level)
        optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
        self.accelerator = accelerator
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.value_clip = value_clip
        self.max_grad_norm = max_grad_norm

    def _values(self, chunk: dict[str, Any]) -> Any:
        import torch

        ids = torch.cat([chunk["prompt_ids"], chunk["completion_ids"]], dim=1)
        attention = torch.cat([chunk["prompt_mask"], chunk["completion_mask"]], dim=1)
        out = self.model(input_ids=ids, attention_mask=attention).logits[..., 0].float()
        p, c = chunk["prompt_ids"].size(1), chunk["completion_ids"].size(1)
        return out[:, p - 1:p + c - 1]  # value before each completion token

    def values(self, chunk: dict[str, Any]) -> Any:
        """Values before each completion token, (B, C), without gradients."""
        import torch

        with torch.no_grad():
            return self._values(chunk)

    def train_chunks(self, chunks: list[dict[str, Any]], total_tokens: float) -> float:
        """One critic update over all chunks of a step: clipped value loss, mean over the
        step's model tokens (``total_tokens``, summed over processes). Returns the loss."""
        import torch

        self.model.train()
        scale = self.accelerator.num_processes / max(total_tokens, 1.0)
        total = 0.0
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            with nullcontext() if last else self.accelerator.no_sync(self.model):
                mask = (chunk["completion_mask"] * chunk["tool_mask"]).float()
                v = self._values(chunk)
                old, ret = chunk["old_values"], chunk["returns"]
                clipped = old + torch.clamp(v - old, -self.value_clip, self.value_clip)
                per_token = 0.5 * torch.maximum((v - ret) ** 2, (clipped - ret) ** 2)
                loss = (per_token * mask).sum() * scale
                self.accelerator.backward(loss)
                total += float(loss.detach())
        if not chunks:  # keep collective ops in step with the other processes
            self.accelerator.backward(sum(p.sum() * 0.0 for p in self.model.parameters()))
        if self.max_grad_norm:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def save(self, directory: str | Path) -> None:
        import torch

        directory = Path(directory)
        unwrapped = self.accelerator.unwrap_model(self.model)
        if self.accelerator.is_main_process:
            unwrapped.save_pretrained(directory)
            torch.save(self.optimizer.state_dict(), directory / _STATE)

    def load(self, directory: str | Path) -> None:
        import torch
        from safetensors.torch import load_file

        directory = Path(directory)
        unwrapped = self.accelerator.unwrap_model(self.model)
        unwrapped.load_state_dict(load_file(str(directory / "model.safetensors")))
        state = torch.load(directory / _STATE, map_location="cpu", weights_only=True)
        self.optimizer.load_state_dict(state)
