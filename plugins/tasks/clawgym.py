"""``clawgym:PATH`` — task suites in the ClawGym layout, harnessgrid's native on-disk format.

A suite is a directory of task folders (``PATH`` itself may be one task folder)::

    <suite>/<task>/data_entry.json   {"task_id", "user_query", "input_mount_dir"?,
                                      "metadata": {"category", "grading_type", ...}}
    <suite>/<task>/input_files/...   mirrored into the workspace
    <suite>/<task>/reward/check.py   grade(transcript, workspace_path) -> {name: score}
    <suite>/<task>/reward/reward.sh  last stdout line: a float in [0, 1]

An oracle plan (the abstract actions the ``scripted`` policy plays) goes under
``metadata.harnessgrid.plan`` as a list of actions in JSON (:func:`plan_metadata` writes it,
:func:`read_plan` reads it); a plan that does not read is an error naming the task and the
action, so ``tasks validate`` cannot pass a suite whose plans were lost. The exporter records
more there (origin, content hash, limits).

The suite is named by its address as given, ``clawgym:PATH`` (what ``load_suite`` was called
with), like every suite loaded from a path (see :mod:`harnessgrid.suites`).

The workspace is mounted at ``input_mount_dir`` — by default ``/root/.openclaw/workspace``,
where ClawGym's OpenClaw runs put it and where real ``reward.sh`` files look for
``reward/check.py`` — for the agent and the grader alike, so absolute paths in instructions
and graders hold. Graders are untrusted code and run in the sandbox
(:mod:`._sandboxed_grader`); ``reward/`` is mounted only while grading. When both files exist
``check.py`` is used (named sub-scores, and the transcript; converted suites' ``reward.sh`` only
averages what ``check.py`` prints) unless the option ``grader="reward.sh"`` says otherwise.

Scores (:func:`._sandboxed_grader.check_output_scores`): what ``check.py`` reports last — the
dict ``grade()`` returns, or the last JSON value a script-style check prints — is scored by
its own ``reward`` entry when it has one (a number in [0, 1]: the check's weighting; its other
entries in [0, 1] are kept as sub-scores, counts and notes skipped with a warning), else by
the mean of its entries, as ClawGym's ``reward.sh`` does. ``reward.sh`` itself averages every
entry, ``reward`` included, so for checks that report a reward the two differ: we follow the
check.

Category: ``metadata.category`` when the data gives one; ClawGym's data leaves it empty and
says no way to derive one, so such tasks are ``unknown`` (never a made-up ``general``).

A task folder that cannot be loaded (bad JSON, no ``user_query``, a bad plan or mount) is a
broken task of the suite, reported with its reason; the other tasks load.

Loader options: ``mount_path`` (for tasks without ``input_mount_dir``), ``split`` (``eval``
or ``train``; default ``eval``), ``grader`` (``auto``, ``check.py``, ``reward.sh``),
``grader_timeout_s``, ``native_graders`` (see :mod:`._clawgym_export`; default True).
:func:`export_clawgym` writes any suite in this layout.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harnessgrid import hookimpl
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action
from harnessgrid.registrations import TaskSuiteSpec
from harnessgrid.suites import load_each, suite_name, suite_path
from harnessgrid.tasks import UNKNOWN_CATEGORY, Grader, GradingContext, Task, TaskLimits, TaskSuite

from ._clawgym_export import ExportReport, RegeneratedGrader, export_clawgym, plan_metadata
from ._sandboxed_grader import (
    GradingLimits,
    check_output_scores,
    reward_from,
    run_in_sandbox,
    runner_command,
)

__all__ = ["DEFAULT_MOUNT", "ClawGymGrader", "ExportReport", "export_clawgym", "load",
           "load_task", "plan_metadata", "read_plan"]

DEFAULT_MOUNT = "/root/.openclaw/workspace"
_GRADER_CHOICES = ("auto", "check.py", "reward.sh")
_OPTIONS = {"mount_path", "split", "grader", "grader_timeout_s", "native_graders"}


class ClawGymGrader:
    """Runs a task's ``reward/check.py`` (through the grading runner, which passes the
    transcript) or ``reward/reward.sh`` in a fresh sandbox over the final workspace's copy."""

    def __init__(self, reward_dir: Path, mount_path: str, entry: str,
                 limits: GradingLimits | None = None) -> None:
        self.reward_dir = reward_dir
        self.mount_path = mount_path
        self.entry = entry
        self.limits = limits or GradingLimits()

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        """Graded outside an episode: sandboxed, with no environment."""
        return self.grade_in(workspace, transcript, GradingContext())

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]:
        """Graded for an episode: in its environment, sandboxed unless it was not."""
        reward = f"{self.mount_path}/reward"
        if self.entry == "check.py":
            command = runner_command(f"{reward}/check.py", self.mount_path, context.environment)
        else:
            command = f"bash {reward}/reward.sh"
        result = run_in_sandbox(workspace, self.mount_path, command, files={},
                                transcript=transcript, context=context,
                                reward_dir=self.reward_dir, limits=self.limits)
        what = f"reward/{self.entry}"
        if self.entry == "check.py":
            return check_output_scores(result, what)
        return {"reward": reward_from(result, what)}

    def sources(self) -> dict[str, str]:
        """The reward folder's text files by path (``harnessgrid env check`` reads what they
        import and run; a data file it cannot decode is left out)."""
        found: dict[str, str] = {}
        for path in sorted(self.reward_dir.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= 1 << 19:
                try:
                    found[f"reward/{path.relative_to(self.reward_dir).as_posix()}"] = \
                        path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
        return found

    def export_reward(self, dest: Path) -> None:
        """The reward folder as it is (the exporter's hook for graders that are files)."""
        shutil.copytree(self.reward_dir, dest, symlinks=True)

    def __repr__(self) -> str:
        return f"ClawGymGrader({str(self.reward_dir)!r}, entry={self.entry!r})"


def load(argument: str | None = None, **options: Any) -> TaskSuite:
    """The suite at ``argument`` (a directory of task folders, or one task folder)."""
    root = suite_path("clawgym", argument, options, _OPTIONS)
    if not root.is_dir():
        raise ConfigError(f"clawgym suite directory {argument!r} does not exist",
                          hint="point clawgym:PATH at a folder of task folders")
    split = str(options.get("split", "eval"))
    if split not in ("train", "eval"):
        raise ConfigError(f"split {split!r} is not train or eval", hint="pass split=train|eval")
    folders = ([root] if (root / "data_entry.json").is_file() else
               sorted(p for p in root.iterdir() if (p / "data_entry.json").is_file()))
    if not folders:
        raise ConfigError(f"no task folders (with data_entry.json) under {argument!r}",
                          hint="a ClawGym suite is <suite>/<task>/data_entry.json")
    name = suite_name("clawgym", str(argument))
    _grader_choice(str(options.get("grader", "auto")))  # a bad option fails the suite, once
    tasks, broken = load_each(folders, lambda f: load_task(f, suite=name, **options),
                              _task_id)
    seen: dict[str, str] = {}
    for task in tasks:
        if task.id in seen:
            raise ConfigError(f"task id {task.id!r} is used by {seen[task.id]} and "
                              f"{task.metadata['source']}",
                              hint="give every task folder a unique task_id")
        seen[task.id] = str(task.metadata["source"])
    return TaskSuite(name=name, splits={split: tuple(tasks)}, broken=tuple(broken))


def load_task(folder: Path, *, suite: str = "", mount_path: str = DEFAULT_MOUNT,
              grader: str = "auto", grader_timeout_s: float = 60.0,
              native_graders: bool = True, split: str = "eval") -> Task:
    """One task folder as a :class:`Task` (``split`` is accepted and ignored here)."""
    entry_path = folder / "data_entry.json"
    try:
        entry = json.loads(entry_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{entry_path}: cannot read it as JSON: {exc}") from None
    if not isinstance(entry, dict):
        raise ConfigError(f"{entry_path}: expected a JSON object, got {type(entry).__name__}")
    query = entry.get("user_query")
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"{entry_path}: 'user_query' is missing or empty",
                          hint="data_entry.json needs the instruction as user_query")
    task_id = str(entry.get("task_id") or folder.name)
    metadata = _mapping(entry.get("metadata"))
    mount = _mount(entry.get("input_mount_dir") or mount_path, entry_path)
    inputs = folder / "input_files"
    own = _mapping(metadata.get("harnessgrid"))
    return Task(
        id=task_id, instruction=query, source_dir=inputs if inputs.is_dir() else None,
        grader=_grader(folder / "reward", mount, grader, grader_timeout_s, own, native_graders),
        plan=read_plan(own.get("plan"), task_id, entry_path), tags=_strings(metadata.get("tags")),
        category=str(metadata.get("category") or UNKNOWN_CATEGORY),
        difficulty=_int(metadata.get("difficulty"), 1),
        limits=TaskLimits.model_validate(own.get("limits") or {}), mount_path=mount, suite=suite,
        metadata={**metadata, "grading_type": metadata.get("grading_type", "automated"),
                  "source": str(folder)},
        # ClawGym ran in a prepared image: python, pandas, numpy, pytest, pyyaml (issue 14).
        # A task may name another (or null) under metadata.harnessgrid.environment.
        environment=own.get("environment", "clawgym"))


def _task_id(folder: Path) -> str:
    """The id a task folder declares, for naming it when it is broken (else its name)."""
    try:
        entry = json.loads((folder / "data_entry.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return folder.name
    found = entry.get("task_id") if isinstance(entry, dict) else None
    return str(found or folder.name)


def _grader_choice(choice: str) -> None:
    if choice not in _GRADER_CHOICES:
        raise ConfigError(f"grader={choice!r} is not one of {', '.join(_GRADER_CHOICES)}")


def _grader(reward: Path, mount: str, choice: str, timeout_s: float, own: dict[str, Any],
            native: bool) -> Grader | None:
    _grader_choice(choice)
    if native and RegeneratedGrader.applies(own):
        return RegeneratedGrader(str(own["suite"]), str(own["task_id"]),
                                 str(own.get("content_hash", "")))
    has = {name: (reward / name).is_file() for name in ("check.py", "reward.sh")}
    entry = next((n for n in (("check.py", "reward.sh") if choice == "auto" else (choice,))
                  if has[n]), None)
    if entry is None:
        return None
    return ClawGymGrader(reward, mount, entry, GradingLimits(timeout_s=float(timeout_s)))


def _mount(value: Any, where: Path) -> str:
    text = str(value)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not text.startswith("/") or not parts or ".." in parts:
        raise ConfigError(f"{where}: input_mount_dir {text!r} is not an absolute path",
                          hint=f"use an absolute directory such as {DEFAULT_MOUNT}")
    mount = "/" + "/".join(parts)
    from harnessgrid.sandboxing.sandbox import mount_conflict  # the sandbox's own rule, not a copy

    reserved = mount_conflict(mount)
    if reserved is not None:
        raise ConfigError(f"{where}: input_mount_dir {mount!r} would hide {reserved} in the "
                          "sandbox", hint=f"mount the workspace elsewhere, e.g. {DEFAULT_MOUNT}")
    return mount


def _mapping(raw: Any) -> dict[str, Any]:
    return {str(k): v for k, v in raw.items()} if isinstance(raw, dict) else {}


def _strings(raw: Any) -> tuple[str, ...]:
    return tuple(str(t) for t in raw) if isinstance(raw, list) else ()


def _int(raw: Any, default: int) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default


def read_plan(raw: Any, task_id: str, where: Path | str = "data_entry.json") -> tuple[
        Action, ...]:
    """The oracle plan under ``metadata.harnessgrid.plan``: a list of actions as JSON objects
    (``{"kind": "write", "args": {"path": "out.txt", "content": "hi\\n"}}``, what
    ``Action.model_dump()`` gives). ``None`` or a missing key means no plan; anything else that
    is not a list of valid actions is a :class:`ConfigError` naming the task and the bad action,
    never a silently dropped plan (``tasks validate`` would then report a solvable task as
    merely unplanned)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: task {task_id!r}: metadata.harnessgrid.plan must be a list "
                          f"of actions, got {type(raw).__name__}",
                          hint='write [{"kind": "read", "args": {"path": "notes.txt"}}, ...]')
    plan = []
    for number, item in enumerate(raw, 1):
        try:
            plan.append(Action.model_validate(item))
        except (TypeError, ValueError) as exc:
            details = exc.errors() if isinstance(exc, ValidationError) else []
            problem = "; ".join(str(e["msg"]) for e in details) or str(exc)
            raise ConfigError(
                f"{where}: task {task_id!r}: action {number} of metadata.harnessgrid.plan, "
                f"{json.dumps(item, default=str)[:200]}, is not a valid action: {problem}",
                hint="an action is {\"kind\": KIND, \"args\": {...}} with exactly the arguments "
                     "of its kind: read/list {path}, write {path, content}, edit {path, old, "
                     "new}, search {pattern, path}, shell {command}, finish {message}") from None
    return tuple(plan)


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(
        name="clawgym", load=load, takes_argument=True,
        description="Tasks in the ClawGym layout (data_entry.json, input_files/, reward/); "
                    "graders run sandboxed. Address: clawgym:PATH.")
