"""Tasks, graders and task suites.

A grader returns named sub-scores in [0, 1]; the task score is their mean — or the grader's
own total when it returns :class:`Scores` with one (weights, a check's own reward) — and
*pass* means the score is exactly 1. A grader that cannot produce scores (crash, timeout, garbage) raises
:class:`GraderError`, which the runtime records as ``grader_error`` — never a silent 0.

Every result says how it was graded (:data:`GRADINGS`): a score resting on less than the
task's whole rubric (a PinchBench hybrid graded without its judge: ``automated_only``) is kept
but never a pass, since the part that was not assessed could have failed it.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SkipValidation, field_validator

from harnessgrid._deprecated import module_getattr
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action

if TYPE_CHECKING:
    from harnessgrid.environment_record import EnvironmentRecord

BEHAVIOURS: tuple[str, ...] = ("state_tracking", "workflow_compliance", "error_recovery",
                               "observation_reading", "tool_selection", "planning")


class GraderError(Exception):
    """The grader failed to produce scores; the episode is ungraded, not failed."""


UNKNOWN_CATEGORY = "unknown"
"""The category of a task whose data names none and whose format says no way to derive one
(reports say so rather than inventing a ``general`` bucket)."""


GRADINGS: tuple[str, ...] = ("automated", "judge", "hybrid", "automated_only", "ungraded")
"""How a result was graded: by code, by an LLM judge, by both, by the code part alone of a
rubric that also has a judged part (``automated_only``: never a pass), or not at all."""
PARTIAL_GRADINGS: frozenset[str] = frozenset({"automated_only"})
"""Gradings that cover less than the task's full rubric."""


#: Loaders' names for a grading that :data:`GRADINGS` spells otherwise (PinchBench's front matter).
_GRADING_ALIASES = {"llm_judge": "judge", "none": "ungraded"}


def planned_grading(task: Task) -> str:
    """How ``task`` will be graded, in the words of :data:`GRADINGS` that results use: what its
    loader says (``metadata["graded_as"]``, else ``metadata["grading_type"]``), ``automated``
    for a grader that does not say (a check), ``ungraded`` without a grader."""
    if task.grader is None:
        return "ungraded"
    said = str(task.metadata.get("graded_as") or task.metadata.get("grading_type")
               or "automated")
    return _GRADING_ALIASES.get(said, said)


def infer_grading(score: Any, subscores: Any, grade_error: Any) -> str:
    """The grading of a result stored before results said it: ungraded without a score, else
    what the sub-score names show (a PinchBench judge writes ``llm_judge``), else automated."""
    if score is None or grade_error:
        return "ungraded"
    names = set(subscores) if isinstance(subscores, dict) else set()
    if "llm_judge" in names:
        return "hybrid" if "automated" in names else "judge"
    return "automated"


class Scores(dict[str, float]):
    """A grader's sub-scores, plus what it says about them.

    ``total`` is the task score when the grader's own rule is not the plain mean of the
    sub-scores (a PinchBench hybrid's ``grading_weights``, the ``reward`` a ClawGym check
    computes itself); ``warnings`` say what the grader skipped (a non-numeric sub-score).
    A plain dict from a grader means: the mean, no warnings. ``grading`` is one of
    :data:`GRADINGS` (None: ``automated``, what a code check is); ``partial`` says why the
    scores cover less than the task's rubric, and makes the result never a pass.
    """

    def __init__(self, values: Mapping[str, float] | None = None, *,
                 total: float | None = None, warnings: Sequence[str] = (),
                 grading: str | None = None, partial: str | None = None) -> None:
        super().__init__(values or {})
        self.total = total
        self.warnings: tuple[str, ...] = tuple(warnings)
        self.grading = grading
        self.partial = partial


def task_score(scores: Mapping[str, float]) -> float:
    """The task score of validated sub-scores: the grader's ``total`` when it gives one, else
    their mean."""
    if isinstance(scores, Scores) and scores.total is not None:
        return float(scores.total)
    return sum(scores.values()) / len(scores)


@runtime_checkable
class Grader(Protocol):
    """Scores a finished episode from the final workspace (a copy) and the transcript (a list of
    OpenClaw-style session events, see :mod:`harnessgrid.trajectory`)."""

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]: ...


@dataclass(frozen=True)
class GradingContext:
    """The sandbox settings of the episode being graded, for graders that run code.

    ``environment`` is the environment the episode ran in (None: none), to mount in the
    grader's sandbox too; ``unsafe_no_sandbox`` says the episode ran unsandboxed (no
    bubblewrap on this host), so the grader's commands run as plain subprocesses as well. The
    default is what a grader called outside any episode gets: sandboxed, no environment.
    """

    environment: EnvironmentRecord | None = None
    unsafe_no_sandbox: bool = False


@runtime_checkable
class ContextGrader(Protocol):
    """A grader that wants the episode's :class:`GradingContext` (one that starts a sandbox).

    The runtime calls ``grade_in`` instead of ``grade``; ``grade`` remains the plain
    :class:`Grader` entry point for callers outside an episode (it should
    mean ``grade_in`` with the default context: sandboxed, no environment)."""

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]: ...

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]: ...


def grader_call(grader: Grader, context: GradingContext) -> Callable[
        [Path, list[dict[str, Any]]], dict[str, float]]:
    """How to call ``grader`` for an episode graded in ``context``: ``grade_in`` with the
    context for a :class:`ContextGrader` (one whose class declares it, as for the harness
    capabilities: :func:`harnessgrid.harness.provides`), else the plain ``grade``."""
    from harnessgrid.harness import provides

    if provides(grader, ContextGrader) and isinstance(grader, ContextGrader):
        return functools.partial(grader.grade_in, context=context)
    return grader.grade


@runtime_checkable
class ReadyCheckingGrader(Protocol):
    """A grader that can tell before any episode runs that it would fail (an LLM judge
    without an API key): ``check_ready()`` raises a :class:`~harnessgrid.errors.ConfigError`
    saying so, and returns otherwise."""

    def check_ready(self) -> None: ...


def check_graders_ready(tasks: Sequence[Task], judge: str | None = None) -> None:
    """Let every grader that can say it will fail (an LLM judge without an API key) say so
    now, as a ConfigError, before the first episode: found at grading time it would cost
    every episode (and its retries) and read as a grade error, not as the setup mistake it
    is. A grader opts in by implementing :class:`ReadyCheckingGrader`.

    ``judge`` (``--judge MODEL``): the judge is asked for, and so needs its key, only where a
    task is graded by one; when none of ``tasks`` is, a warning says the judge goes unused
    (the run goes on: its results are the same with or without it)."""
    import warnings

    from harnessgrid.harness import provides

    gradings = sorted({planned_grading(task) for task in tasks}) if judge else []
    if gradings and not {"judge", "hybrid"} & set(gradings):
        warnings.warn(f"--judge {judge} grades none of these {len(tasks)} task(s) (graded: "
                      f"{', '.join(gradings)}), so it is not called and needs no key",
                      UserWarning, stacklevel=2)
    for task in tasks:
        grader = task.grader
        if provides(grader, ReadyCheckingGrader) and isinstance(grader, ReadyCheckingGrader):
            grader.check_ready()


class FunctionGrader:
    """A grader from a plain function — for trusted, in-process checks of generated tasks.

    The function runs on the host over a copy of the final workspace whose symlinks out of it
    are neutralized; it must read files only through
    :func:`harnessgrid.sandboxing.grading_io.read_text` (or ``read_bytes``): regular files inside
    the workspace, no link followed, at most
    :data:`harnessgrid.sandboxing.grading_io.MAX_GRADED_FILE_BYTES` — never ``Path.read_text``."""

    def __init__(self, fn: Callable[[Path, list[dict[str, Any]]], Mapping[str, float]]) -> None:
        self.fn = fn

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        scores = self.fn(workspace, transcript)
        return validate_scores(scores if isinstance(scores, Scores) else dict(scores))


def validate_scores(scores: Any) -> Scores:
    """Check a grader's output: a non-empty ``{name: float in [0, 1]}`` (a :class:`Scores`
    keeps its ``total``, which must be in [0, 1] too, and its warnings)."""
    if not isinstance(scores, dict) or not scores:
        raise GraderError(f"grader must return a non-empty dict of sub-scores, got {scores!r:.200}")
    out: dict[str, float] = {}
    for name, value in scores.items():
        out[str(name)] = _unit(value, f"sub-score {name!r}")
    if not isinstance(scores, Scores):  # a plain dict: the mean, nothing else to say
        return Scores(out)
    return Scores(out, total=None if scores.total is None else _unit(scores.total,
                                                                     "the total score"),
                  warnings=scores.warnings, grading=scores.grading, partial=scores.partial)


def _unit(value: Any, what: str) -> float:
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise GraderError(f"{what} = {value!r:.80} is not a number in [0, 1]")
    return float(value)


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
    environment: str | None = None
    """The named environment (:mod:`harnessgrid.sandboxing.environments`) the task's suite runs in,
    e.g. ``clawgym``; ``--env`` overrides it."""
    followups: tuple[str, ...] = ()
    """Further user messages, each sent once the agent has answered the previous one, in the
    same conversation and workspace (a PinchBench multi-session task's later sessions); the
    task is graded once, after the last. :func:`harnessgrid.engine.runtime.run_task_episode`
    runs them."""

    def content_hash(self) -> str:
        """Hash of what the agent is given (instruction, follow-ups, files): used to keep
        splits disjoint."""
        h = hashlib.sha256(self.instruction.encode())
        for message in self.followups:  # none for single-message tasks: their hash is as it was
            h.update(b"\0followup\0" + message.encode())
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
                "plan_length": len(self.plan),
                **({"followups": list(self.followups)} if self.followups else {})}


class TaskList(Sequence[Task]):
    """A split whose ids are known up front and whose tasks are built on first access.

    Generated suites hold thousands of tasks that are deterministic from their id; a command
    that shows or runs one task should build that one, not all of them. ``make(i)`` builds task
    ``i``; built tasks are kept (they are immutable), and ``ids`` never builds anything.
    """

    def __init__(self, ids: Sequence[str], make: Callable[[int], Task]) -> None:
        self.ids: tuple[str, ...] = tuple(ids)
        self._make = make
        self._built: dict[int, Task] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Task]: ...
    def __getitem__(self, index: int | slice) -> Task | Sequence[Task]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]  # IndexError and negative indices as for a tuple
        task = self._built.get(i)
        if task is None:
            task = self._built[i] = self._make(i)
            if task.id != self.ids[i]:
                raise RuntimeError(f"task {i} was listed as {self.ids[i]!r} but built as "
                                   f"{task.id!r}")
        return task

    def __iter__(self) -> Iterator[Task]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"TaskList({len(self)} tasks, {len(self._built)} built)"


class BrokenTask(BaseModel):
    """A task its loader could not build (a missing asset, a malformed file, a form the
    runtime cannot run), with the reason. A suite lists it beside its good tasks so one bad
    task never makes the others unusable: ``tasks list``/``validate`` and evaluation reports
    show it as skipped, with ``reason``; asking for it by id is an error that gives it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    reason: str
    source: str = ""


def task_ids(tasks: Sequence[Task]) -> tuple[str, ...]:
    """The ids of a split, without building a lazy one."""
    return tasks.ids if isinstance(tasks, TaskList) else tuple(t.id for t in tasks)


def _chain(parts: Sequence[Sequence[Task]]) -> Sequence[Task]:
    """Several splits as one sequence, still lazy where they are."""
    if not any(isinstance(p, TaskList) for p in parts):
        return [t for p in parts for t in p]
    where = [(p, i) for p in parts for i in range(len(p))]
    return TaskList([i for p in parts for i in task_ids(p)],
                    lambda n: where[n][0][where[n][1]])


class TaskSuite(BaseModel):
    """A named, versioned, deterministic collection of tasks with splits.

    A split is a tuple of tasks or a :class:`TaskList` (built on demand); ``get`` finds a task
    by id through an index of ids, so it builds only the task asked for. ``broken`` holds the
    tasks the loader could not build, each with its reason (see
    :func:`harnessgrid.suites.load_each`); they are in no split. ``aliases`` map other names
    of a task (a file named unlike the id it declares) to its id: ``get`` and ``split_of``
    accept them, an id always wins over an alias, and results name the id.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str = "1"
    # SkipValidation: pydantic would iterate (build) a lazy split; the validator checks instead.
    splits: Annotated[dict[str, Sequence[Task]], SkipValidation]
    broken: tuple[BrokenTask, ...] = ()
    aliases: dict[str, str] = Field(default_factory=dict)
    _index: dict[str, tuple[str, int]] | None = PrivateAttr(default=None)

    @field_validator("splits", mode="before")
    @classmethod
    def _check_splits(cls, value: Any) -> dict[str, Sequence[Task]]:
        if not isinstance(value, Mapping):
            raise ValueError(f"splits must map split names to tasks, got {type(value).__name__}")
        out: dict[str, Sequence[Task]] = {}
        for name, tasks in value.items():
            if isinstance(tasks, TaskList):
                out[str(name)] = tasks
                continue
            items = tuple(tasks)
            bad = next((t for t in items if not isinstance(t, Task)), None)
            if bad is not None:
                raise ValueError(f"split {name!r} holds a {type(bad).__name__}, not a Task")
            out[str(name)] = items
        return out

    def tasks(self, split: str | None = None) -> Sequence[Task]:
        if split is None:
            return _chain(list(self.splits.values()))
        if split not in self.splits:
            raise ConfigError(f"suite {self.name!r} has no split {split!r}",
                              hint=f"splits: {', '.join(self.splits)}")
        return self.splits[split]

    def split_of(self, task_id: str) -> str | None:
        """The split holding ``task_id`` (an id or an alias), or None."""
        found = self._locate(self.resolve(task_id))
        return found[0] if found else None

    def resolve(self, name: str) -> str:
        """The id ``name`` stands for: itself when a task (good or broken) has that id, else
        the id its alias names, else ``name`` unchanged."""
        if self._locate(name) is not None or any(b.id == name for b in self.broken):
            return name
        return self.aliases.get(name, name)

    def _locate(self, task_id: str) -> tuple[str, int] | None:
        if self._index is None:
            index: dict[str, tuple[str, int]] = {}
            for name, tasks in self.splits.items():
                for i, tid in enumerate(task_ids(tasks)):
                    index.setdefault(tid, (name, i))  # the first of a repeated id, as listed
            self._index = index
        return self._index.get(task_id)

    def get(self, task_id: str) -> Task:
        """The task with id (or alias) ``task_id``; a :class:`ConfigError` giving the reason
        for a broken one, or naming the command that lists the suite."""
        task_id = self.resolve(task_id)
        found = self._locate(task_id)
        bad = next((b for b in self.broken if b.id == task_id), None)
        if found is None and bad is not None:
            raise ConfigError(f"task {task_id!r} of suite {self.name!r} is broken: {bad.reason}",
                              hint="fix the task's files; the suite's other tasks still load "
                                   f"(`harnessgrid tasks list {self.name}` shows which)")
        if found is None:
            raise ConfigError(f"suite {self.name!r} has no task {task_id!r}",
                              hint=f"`harnessgrid tasks list {self.name}` prints each task's "
                                   "address")
        return self.splits[found[0]][found[1]]


if not TYPE_CHECKING:  # old paths of names that moved out (load_suite): harnessgrid._deprecated
    __getattr__ = module_getattr(__name__)
