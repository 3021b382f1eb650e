"""Checkpoints that are either complete or ignored (transformers writes a checkpoint folder
file by file, and a kill -9 part-way leaves a folder that looks like a checkpoint).

:class:`CompleteCheckpoints` is mixed into the trainers: after transformers has written a
checkpoint, it saves the trainer's own extra state (:meth:`save_extra_state`), then writes
``harnessgrid_state.json`` last, atomically; only then are older checkpoints rotated away.
Resume picks the newest folder that has the state file (:func:`latest_checkpoint`).

It also keeps two transformers habits from misleading the user: resuming does not warn that a
tied weight is missing (a checkpoint stores a shared tensor once: ``lm_head.weight`` of a model
with tied embeddings is ``embed_tokens.weight``), and no model card naming a base model of
``None`` is written for a local run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "CompleteCheckpoints", "latest_checkpoint"]

#: Written last into a checkpoint folder: a folder without it was cut short and is not resumed.
STATE_FILE = "harnessgrid_state.json"


class CompleteCheckpoints:
    """Mixin for a transformers ``Trainer`` subclass (put it first in the bases)."""

    args: Any
    state: Any
    model: Any

    def checkpoint_state(self) -> dict[str, Any]:
        """What the state file records besides the step (fingerprints to check on resume)."""
        return {}

    def save_extra_state(self, folder: Path) -> None:
        """Save state transformers does not know about (e.g. PPO's critic) into ``folder``."""

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        limit, self.args.save_total_limit = self.args.save_total_limit, None
        parent: Any = super()
        try:
            parent._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        run_dir = parent._get_output_dir(trial=trial)
        folder = Path(run_dir) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self.save_extra_state(folder)
        if self.args.should_save:
            state = {"step": int(self.state.global_step), **self.checkpoint_state(),
                     "complete": True}
            tmp = folder / (STATE_FILE + ".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, folder / STATE_FILE)
            if limit:
                rotate_checkpoints(output_dir=run_dir, save_total_limit=limit,
                                   best_model_checkpoint=self.state.best_model_checkpoint,
                                   use_mtime=True)


    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """transformers' missing/unexpected-key warning, without the tied names whose twin
        loaded; other missing or unexpected keys are still reported."""
        from types import SimpleNamespace

        missing = set(load_result.missing_keys)
        names: dict[int, list[str]] = {}
        for name, param in self.model.named_parameters(remove_duplicate=False):
            names.setdefault(id(param), []).append(name)
        loaded_twin = {name for group in names.values() for name in group
                       if any(other not in missing for other in group)}
        parent: Any = super()
        parent._issue_warnings_after_load(SimpleNamespace(
            missing_keys=[k for k in load_result.missing_keys if k not in loaded_twin],
            unexpected_keys=list(load_result.unexpected_keys)))

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """TRL's model card (``OUT/README.md``), only for a model going to the Hub
        (``trl.hub_model_id``) from a base model named there: otherwise it would read
        "a fine-tuned version of [None](https://huggingface.co/None)"."""
        base = str(getattr(self.model.config, "_name_or_path", "") or "")
        if getattr(self.args, "hub_model_id", None) is None or not base or os.path.isdir(base):
            return
        parent: Any = super()
        parent.create_model_card(*args, **kwargs)


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest checkpoint whose state file was written (complete)."""
    found = []
    for d in output_dir.glob("checkpoint-*"):
        suffix = d.name.removeprefix("checkpoint-")
        if suffix.isdigit() and (d / STATE_FILE).is_file():
            found.append((int(suffix), d))
    return max(found)[1] if found else None
