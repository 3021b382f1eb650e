"""Tasks, graders and task suites (DESIGN §3, §7).

A grader returns named sub-scores in [0, 1]; the task score is their mean and *pass* means the
score is exactly 1. A grader that cannot produce scores (crash, timeout, garbage) raises
:class:`GraderError`, which the runtime records as ``grader_error`` — never a silent 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from harnessgrid.errors import ConfigError
from harnessgrid.models import Action

BEHAVIOURS: tuple[str, ...] = ("state_tracking", "workflow_compliance", "error_recovery",
                               "observation_reading", "tool_selection", "planning")


class GraderError(Exception):
    """The grader failed to produce scores; the episode is ungraded, not failed."""


@runtime_checkable
class Grader(Protocol):
    """Scores a finished episode from the final workspace (a copy) and the transcript (a list of
    OpenClaw-style session events, see :mod:`harnessgrid.trajectory`)."""

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]: ...


class FunctionGrader:
    """A grader from a plain function — for trusted, in-process checks of generated tasks."""

    def __init__(self, fn: Callable[[Path, list[dict[str, Any]]], Mapping[str, float]]) -> None:
        self.fn = fn

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        scores = dict(self.fn(workspace, transcript))
        return validate_scores(scores)


def validate_scores(scores: Any) -> dict[str, float]:
    """Check a grader's output: a non-empty ``{name: float in [0, 1]}``."""
    if not isinstance(scores, dict) or not scores:
        raise GraderError(f"grader must return a non-empty dict of sub-scores, got {scores!r:.200}")
    out: dict[str, float] = {}
    for name, value in scores.items():
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise GraderError(f"sub-score {name!r} = {value!r:.80} is not a number in [0, 1]")
        out[str(name)] = float(value)
    return out


class TaskLimits(BaseModel):
    """Per-task limits; the runtime's episode limits take the stricter of the two."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int | None = None
    wall_s: float | None = None


class Task(BaseModel):
    """One task: an instruction, the files the workspace starts with, and a grader.

    ``plan`` is the oracle's abstract action plan (the scripted policy plays it through any
    harness); ``mount_path`` is where the workspace appears inside the sandbox, so absolute
    paths in the instruction hold.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    id: str
    instruction: str
    files: dict[str, str | bytes] = Field(default_factory=dict)
    source_dir: Path | None = None
    grader: Grader | None = None
    plan: tuple[Action, ...] = ()
    tags: tuple[str, ...] = ()
    category: str = "general"
    difficulty: int = 1
    limits: TaskLimits = TaskLimits()
    mount_path: str = "/workspace"
    suite: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    def content_hash(self) -> str:
        """Hash of what the agent is given (instruction + files): used to keep splits disjoint."""
        h = hashlib.sha256(self.instruction.encode())
        for path, data in sorted(self.initial_files().items()):
            h.update(b"\0" + path.encode() + b"\0")
            h.update(data)
        return h.hexdigest()[:16]

    def initial_files(self) -> dict[str, bytes]:
        """Every file the workspace starts with: ``source_dir``'s, overlaid by ``files``."""
        out: dict[str, bytes] = {}
        if self.source_dir is not None and self.source_dir.is_dir():
            for p in sorted(self.source_dir.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    out[p.relative_to(self.source_dir).as_posix()] = p.read_bytes()
        for path, data in self.files.items():
            out[path] = data if isinstance(data, bytes) else data.encode()
        return out

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "suite": self.suite, "category": self.category,
                "tags": list(self.tags), "difficulty": self.difficulty,
                "instruction": self.instruction, "files": sorted(self.initial_files()),
                "plan_length": len(self.plan)}


class TaskSuite(BaseModel):
    """A named, versioned, deterministic collection of tasks with splits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str = "1"
    splits: dict[str, tuple[Task, ...]]

    def tasks(self, split: str | None = None) -> Sequence[Task]:
        if split is None:
            return [t for tasks in self.splits.values() for t in tasks]
        if split not in self.splits:
            raise ConfigError(f"suite {self.name!r} has no split {split!r}",
                              hint=f"splits: {', '.join(self.splits)}")
        return self.splits[split]

    def get(self, task_id: str) -> Task:
        for task in self.tasks():
            if task.id == task_id:
                return task
        raise ConfigError(f"suite {self.name!r} has no task {task_id!r}",
                          hint=f"list them with `harnessgrid tasks list --suite {self.name}`")


def load_suite(spec: str, **options: Any) -> TaskSuite:
    """Load a suite by its address: ``grid-bench``, ``clawgym:/path``, ``pinchbench:/path``."""
    from harnessgrid.registry import get_registry

    name, sep, argument = spec.partition(":")
    entry = get_registry().task_suite(name)
    if entry.takes_argument and not argument:
        raise ConfigError(f"task suite {name!r} needs an argument", hint=f"write {name}:PATH")
    if argument and not entry.takes_argument:
        raise ConfigError(f"task suite {name!r} takes no argument, got {spec!r}",
                          hint=f"write just {name}")
    suite = entry.load(argument or None, **options)
    if not isinstance(suite, TaskSuite):
        raise ConfigError(f"task suite plugin {name!r} returned {type(suite).__name__}, "
                          "not a TaskSuite")
    return suite

