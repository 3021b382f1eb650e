"""One evaluation result: the small, flat record the reports are computed from.

A full :class:`~harnessgrid.trajectory.Trajectory` holds every view the model saw, so a long
episode weighs megabytes; reports need a few numbers per episode. Each result therefore carries
its key (setting, suite, task, harness, run), what the tables group by (configuration levels,
behaviour tags), the outcome, the costs, and the byte offset of its full trajectory in
``trajectories.jsonl`` (so one trajectory can be read back without scanning the file).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from harnessgrid.models import clean_text
from harnessgrid.tasks import PARTIAL_GRADINGS, infer_grading
from harnessgrid.trajectory import Trajectory

#: Where the evaluation key and task facts travel inside ``Trajectory.meta``.
META_KEY = "eval"
#: The termination of a record saying that a result's trajectory is no longer in
#: ``trajectories.jsonl`` (see :mod:`harnessgrid.evaluation.store`): its episode runs again.
TRAJECTORY_LOST = "trajectory_lost"


class ResultKey(NamedTuple):
    """What makes an episode unique in an evaluation: a result is stored once per key."""

    setting: str
    suite: str
    task: str
    harness: str  # a configuration code (S1-T0-O2-C1-W0) or adapter:NAME
    run: int

    def describe(self) -> str:
        return f"{self.setting} {self.suite}/{self.task} via {self.harness} run {self.run}"


class EvalResult(BaseModel):
    """The outcome and cost of one episode of an evaluation.

    ``scored`` episodes count toward pass rates; infrastructure failures (sandbox crash, policy
    error) and ungraded episodes (grader error, task without grader) are counted separately and
    never as 0.
    """

    # extra="ignore": a newer harnessgrid may add fields; an older report still reads the file.
    model_config = ConfigDict(frozen=True, extra="ignore")

    setting: str
    suite: str
    task: str
    harness: str
    run: int
    harness_name: str = ""  # what the harness called itself (an adapter's own name)
    levels: dict[str, str] | None = None  # factor → level; None for adapters
    tags: tuple[str, ...] = ()
    category: str = "general"
    termination: str
    infra_failure: bool = False
    error: str | None = None
    score: float | None = None
    passed: bool | None = None
    subscores: dict[str, float] = {}
    grade_error: str | None = None
    #: How it was graded (:data:`harnessgrid.tasks.GRADINGS`); records written before this
    #: field read it from their scores. A ``partial`` one (``automated_only``) keeps its score
    #: but is no pass, and is counted apart with ``grading_note`` saying why.
    grading: str = "ungraded"
    grading_note: str | None = None
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0
    tools_s: float = 0.0
    harness_s: float = 0.0
    wait_s: float = 0.0  # waiting for the event loop (see TurnRecord); 0 in older stores
    #: The environment the task declares but that was not built: the episode ran on the bare
    #: sandbox, so its score says little about the task (see harnessgrid.sandboxing.environments).
    missing_environment: str | None = None
    grade_s: float = 0.0
    episode_id: str = ""
    traj_offset: int = -1  # byte offset of the trajectory's line in trajectories.jsonl
    finished_at: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _stored_grading(cls, data: Any) -> Any:
        if isinstance(data, dict) and "grading" not in data:
            data = {**data, "grading": infer_grading(data.get("score"), data.get("subscores"),
                                                     data.get("grade_error"))}
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        """Errors and names as stored: no lone surrogates (see :func:`clean_text`)."""
        if isinstance(value, str):
            return clean_text(value)
        if isinstance(value, dict):
            return {clean_text(k) if isinstance(k, str) else k: v for k, v in value.items()}
        return value

    @property
    def key(self) -> ResultKey:
        return ResultKey(self.setting, self.suite, self.task, self.harness, self.run)

    @property
    def scored(self) -> bool:
        """Counts toward pass rates: graded and not an infrastructure failure."""
        return not self.infra_failure and self.passed is not None

    @property
    def partial(self) -> bool:
        """Graded on less than the task's rubric: a score, but neither a pass nor a fail."""
        return not self.infra_failure and self.grading in PARTIAL_GRADINGS

    @property
    def ungraded(self) -> bool:
        """The agent ran, but no score came back (grader error or no grader)."""
        return not self.infra_failure and self.passed is None and not self.partial

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def trajectory_lost(self) -> bool:
        """This record says that its episode's trajectory was lost (:meth:`lost_result`)."""
        return self.termination == TRAJECTORY_LOST

    def lost_result(self, reason: str) -> EvalResult:
        """The record that replaces this result once its trajectory is found lost: an
        infrastructure failure (the episode says nothing until it runs again), of the same
        episode, pointing at no trajectory; the score it had stays in the file."""
        return EvalResult.model_validate({
            **self.model_dump(), "termination": TRAJECTORY_LOST, "infra_failure": True,
            "error": f"trajectory lost: {reason}"[:500], "score": None, "passed": None,
            "subscores": {}, "grade_error": None, "grading": "ungraded",
            "grading_note": None, "traj_offset": -1})

    @classmethod
    def from_trajectory(cls, traj: Trajectory, offset: int = -1) -> EvalResult:
        """The result of a trajectory whose ``meta["eval"]`` holds its key (see
        :func:`tag_trajectory`). What the two models both have is copied as it stands
        (:data:`COPIED`); the rest is the result's own."""
        meta: dict[str, Any] = traj.meta[META_KEY]
        return cls(
            **{name: getattr(traj, name) for name in COPIED},
            setting=meta["setting"], suite=meta["suite"], task=meta["task"],
            harness=meta["harness"], run=int(meta["run"]), harness_name=traj.harness,
            # an adapter is a black box even when built from factor levels: no levels
            levels=None if meta["harness"].startswith("adapter:") else traj.config,
            tags=tuple(meta.get("tags", ())), category=meta.get("category", "general"),
            infra_failure=traj.infra_failure, error=(traj.error or "")[:500] or None,
            turns=len(traj.turns), missing_environment=_missing_environment(traj),
            traj_offset=offset, finished_at=traj.started_at + traj.wall_s)


#: The fields a result copies from its trajectory unchanged: those both models declare, read
#: from the models, so a field added to both is carried without another line. Named apart are
#: the ones the two mean differently: the harness (its address here, its name there), the suite
#: (the spec evaluated here), the error (cut here), the turns (counted here).
COPIED: tuple[str, ...] = tuple(sorted(
    set(EvalResult.model_fields) & set(Trajectory.model_fields)
    - {"harness", "suite", "error", "turns"}))


def _missing_environment(traj: Trajectory) -> str | None:
    env = traj.environment or {}
    return env.get("name") if env.get("missing") == "true" else None


def tag_trajectory(traj: Trajectory, key: ResultKey, tags: tuple[str, ...],
                   category: str) -> None:
    """Write the key and the task facts the reports group by into the trajectory itself, so a
    trajectory alone is enough to rebuild its result after a crash."""
    traj.meta[META_KEY] = {**key._asdict(), "tags": list(tags), "category": category}
