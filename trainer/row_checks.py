"""The training run's side of :mod:`harnessgrid.policies.chat_template_check`: which of the run's
harnesses need the chat template to render tools, and the demonstration rows of SFT.

Called by :func:`~harnessgrid.trainer.run.train` and
:func:`~harnessgrid.trainer.sft.train_sft` right after the model is loaded (before any episode
runs), and by SFT again on its demonstration rows before TRL sees them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.policies.chat_template_check import (
    require_trainable_rows,
    require_trainable_template,
)

if TYPE_CHECKING:
    from harnessgrid.trainer.plan import TrainingPlan

__all__ = ["check_demonstration_rows", "check_model_for_run", "native_tool_harnesses"]


def native_tool_harnesses(plan: TrainingPlan) -> list[str]:
    """The run's harnesses that pass tool schemas through ``tools=`` (one per tool interface:
    that factor alone decides it; the adapter of a black-box run)."""
    if plan.adapter is not None:
        specs = [plan.adapter]
    else:
        by_interface: dict[str, str] = {}
        for config in plan.design.configs:
            by_interface.setdefault(config.level("tool_interface"), config.code)
        specs = list(by_interface.values())
    return [spec for spec in specs if plan.make_harness(spec).native_tools]


def check_model_for_run(plan: TrainingPlan, model_name: str, tokenizer: Any,
                        model: Any = None) -> None:
    """Refuse (ConfigError) a tokenizer whose template or eos/pad the run cannot train on."""
    native = native_tool_harnesses(plan)
    require_trainable_template(tokenizer, native_tools=bool(native), model=model_name,
                               config=getattr(model, "config", None), harnesses=native)


def check_demonstration_rows(dataset: Any, tokenizer: Any, *, model_name: str,
                             folder: Path) -> None:
    """Refuse SFT rows that train only end-of-turn tokens (a sample of them)."""
    count = len(dataset)
    step = max(1, count // 256)
    picked = dataset.select(range(0, count, step))
    rows = list(zip(picked["input_ids"], picked["assistant_masks"], strict=True))
    require_trainable_rows(tokenizer, rows, model=model_name,
                           where=f"in {folder} (a rerun reuses them: delete the folder once "
                                 "the template is fixed)")
