"""Project only the labelled positions through the LM head, on CPU too.

TRL 1.16's fused LM head (``model(..., labels=..., fused_lm_head=True)``, which its SFT and
GRPO losses call) takes the hidden states of only the positions that carry a label on CUDA and
XPU. Elsewhere it projects *every* position and masks afterwards, because on Neuron a batch-
dependent number of positions would recompile the graph at every step. A CPU compiles nothing,
so there the full projection is pure waste: on the demo's SFT rows (415 tokens on average, 58
of them trained, 44 % of each batch padding) it was 63 % of a step, and with this module an
SFT step of the demo costs 0.99 s instead of 2.09 s (benchmarks/README.md, "SFT step").

Inside :func:`labelled_positions_only`, TRL's choice answers "only the labelled positions" for
CPU tensors as well. The log-probabilities are the same numbers (each position's row of logits
is computed the same way, only fewer rows are). Outside the block nothing changes, so a TRL
trainer of the user's own in the same process runs exactly as TRL ships it.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["labelled_positions_only"]

_state = threading.local()
_trl_choice: Callable[[Any], bool] | None = None


def _choice(device: Any) -> bool:
    if getattr(_state, "depth", 0) and device.type == "cpu":
        return True
    assert _trl_choice is not None
    return _trl_choice(device)


def _install() -> bool:
    """Route TRL's choice through :func:`_choice` (once); False when this TRL has no such
    choice to make."""
    global _trl_choice
    import trl.trainer.utils as trl_utils

    current = getattr(trl_utils, "_use_triton", None)
    if current is _choice:
        return True
    if not callable(current):
        return False
    _trl_choice = current
    trl_utils._use_triton = _choice  # type: ignore[attr-defined]
    return True


@contextmanager
def labelled_positions_only() -> Iterator[None]:
    """Within the block, TRL's fused LM head on CPU projects only labelled positions."""
    if not _install():
        warnings.warn("this TRL version's fused LM head has no position choice to override "
                      "(harnessgrid was written for trl 1.16): CPU steps project every "
                      "position through the LM head, which is correct but about twice as "
                      "slow", stacklevel=3)
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
