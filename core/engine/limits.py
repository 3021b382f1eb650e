"""The limits of an episode, declared once: what ``run``, ``eval``, sessions and training
rollouts take (``EpisodeLimits``), how a task's own limits tighten them, and the check that
this machine can sandbox episodes under them.

Kept apart from the runtime so that a config (``harnessgrid train``'s ``limits:`` table, an
evaluation's manifest) can name and validate limits without loading the episode machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from harnessgrid.errors import SandboxError
from harnessgrid.sandboxing.sandbox import INSTALL_HINT, SandboxLimits, check_bwrap
from harnessgrid.trajectory import STORED_REPLY_BYTES

if TYPE_CHECKING:
    from harnessgrid.tasks import Task

__all__ = ["EpisodeLimits", "effective_limits", "require_sandbox"]


class EpisodeLimits(BaseModel):
    """Limits of one episode. A task's own limits apply when stricter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = 30
    max_context_tokens: int = 32_768
    max_total_tokens: int | None = None
    wall_s: float = 600.0
    max_format_errors: int = 5
    grader_timeout_s: float = 120.0
    sandbox: SandboxLimits = SandboxLimits()
    unsafe_no_sandbox: bool = False
    environment: str | None = None
    """``--env NAME``: the environment every episode runs in, instead of the task's own;
    ``"none"`` for none. It must be built (:mod:`harnessgrid.sandboxing.environments`)."""
    durations: Literal["hidden", "measured"] = "hidden"
    """What the model is told of how long its actions took (a level that shows it, such as
    the ``annotated`` observation's header). ``hidden`` (the default): nothing, an
    observation is formatted from a ``ToolResult`` whose ``duration_s`` is NaN (unknown:
    ``Environment.shown``), so that a run repeats - the same seed, the same prompts - however
    loaded the machine is. ``measured``: the wall-clock time, as a real shell shows it; the
    prompts then depend on the machine's load and a run does not repeat exactly. Trajectories
    and timing reports always have the measured times."""
    stored_reply_bytes: int = Field(default=STORED_REPLY_BYTES, ge=1024)
    """The most bytes a model reply takes in the stored trajectory (each copy of it: the
    turn, the history, the call records) and in ``model_reply`` events, as
    ``sandbox.output_bytes`` bounds a command's output: the strings of a longer reply are cut
    there, each with a marker giving its original size, and the turn records the reply's
    size (``original_reply_bytes``). The episode runs on the whole reply; token ids are never
    cut (:mod:`harnessgrid.trajectory`, "Stored replies")."""

    @model_serializer(mode="wrap")
    def _omit_later_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Evaluations stored before these settings existed compare their saved limits with
        # these on resume: a setting at its default must dump as it did then (absent).
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _LATER_DEFAULTS.items():
                if name in data and data[name] == default:
                    del data[name]
        return data


#: Settings added to :class:`EpisodeLimits` after evaluations were stored, with the default
#: that such evaluations ran with.
_LATER_DEFAULTS: dict[str, Any] = {"environment": None,
                                   "stored_reply_bytes": STORED_REPLY_BYTES,
                                   "durations": "hidden"}


def effective_limits(limits: EpisodeLimits, task: Task) -> EpisodeLimits:
    """The stricter of the episode's limits and the task's own (as every episode takes them)."""
    update: dict[str, Any] = {}
    if task.limits.max_turns is not None:
        update["max_turns"] = min(limits.max_turns, task.limits.max_turns)
    if task.limits.wall_s is not None:
        update["wall_s"] = min(limits.wall_s, task.limits.wall_s)
    return limits.model_copy(update=update) if update else limits


def require_sandbox(limits: EpisodeLimits) -> None:
    """Refuse up front, with the install hint, when episodes would need a sandbox this machine
    cannot make; better one clear error than one ``sandbox_error`` per episode."""
    if limits.unsafe_no_sandbox:
        return
    problem = check_bwrap()
    if problem is not None:
        raise SandboxError(problem, hint=INSTALL_HINT)
