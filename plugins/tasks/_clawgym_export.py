"""Writing any task suite in the ClawGym layout, so other tools can use our tasks.

The hard part is ``reward/``: ClawGym wants a ``check.py`` file, while a generated task's
grader is a Python function inside harnessgrid. Pickling it is not an option (unpickling is
code execution, and the bytes would tie the file to one interpreter), and decompiling closures
is not reliable. So each grader is exported the way it can be:

- graders that *are* files (ClawGym's ``reward/``, PinchBench automated checks) provide
  ``export_reward(dest)`` and are written as they are;
- an in-process grader of a suite that can be loaded by name alone (``grid``, ``grid-bench``,
  ``examples``, ...) gets a ``check.py`` that imports harnessgrid, rebuilds the task from
  ``(suite, task_id)`` — generation is deterministic — checks the rebuilt task's content hash
  against the exported one (a different harnessgrid version must not grade silently) and calls
  its grader. It needs ``pip install harnessgrid`` where it runs;
- anything else (LLM-judge grading, a grader of a suite loaded from a path) is skipped, and the
  report says why.

Every graded task also gets the canonical ``reward.sh`` (mean of what ``check.py`` prints).
``data_entry.json``'s ``metadata.harnessgrid`` records the origin, content hash, limits and
the oracle plan, so harnessgrid reading the export back gets tasks that still have oracle
plans, and — with ``native_graders`` (the loader's default) — grades rebuilt tasks with the
registered suite's own grader in-process instead of running ``check.py`` in a sandbox where
harnessgrid is not installed. That is no wider trust than running ``grid`` directly: only
suites registered under a plain name qualify, and the code run is theirs, not the file's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harnessgrid
from harnessgrid.errors import ConfigError
from harnessgrid.models import Action
from harnessgrid.tasks import (
    UNKNOWN_CATEGORY,
    GraderError,
    GradingContext,
    Task,
    TaskSuite,
    grader_call,
)


class NotExportable(Exception):
    """A grader that has no ClawGym form; the message says why."""


MAIN_SHIM = '''

if __name__ == "__main__":  # added by harnessgrid: python3 check.py WORKSPACE [TRANSCRIPT]
    import json as _json
    import os as _os
    import sys as _sys

    _path = _sys.argv[2] if len(_sys.argv) > 2 else _os.environ.get("HARNESSGRID_TRANSCRIPT")
    _events = []
    if _path:
        with open(_path, encoding="utf-8") as _fh:
            _events = [_json.loads(_line) for _line in _fh if _line.strip()]
    print(_json.dumps(grade(_events, _sys.argv[1])))
'''
"""Appended to a ``grade()``-only check so it also runs as a script, as ClawGym expects."""

REWARD_SH = '''#!/usr/bin/env bash
# Written by harnessgrid: the task's score is the mean of the sub-scores that check.py
# prints as a JSON object on its last stdout line. Usage: reward.sh [WORKSPACE]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/check.py" "${1:-$(dirname "$here")}" | python3 -c '
import json, sys
scores = json.loads(sys.stdin.read().strip().splitlines()[-1])
print(sum(float(v) for v in scores.values()) / len(scores))
'
'''

_REGENERATE = '''"""Grader of harnessgrid task {task_id!r} (suite {suite!r}), exported to the ClawGym layout.

The original grader is Python code inside harnessgrid, so this file rebuilds the task from its
suite and id (generation is deterministic) and calls that grader. It needs harnessgrid
(version {version} wrote it) where it runs, and refuses to grade when the rebuilt task differs
from the exported one. As a script: python3 check.py WORKSPACE [TRANSCRIPT.jsonl]
"""

from pathlib import Path

SUITE = {suite!r}
TASK_ID = {task_id!r}
CONTENT_HASH = {content_hash!r}


def grade(transcript, workspace_path):
    from harnessgrid.plugin_system.registry import load_suite

    task = load_suite(SUITE).get(TASK_ID)
    if task.content_hash() != CONTENT_HASH:
        raise RuntimeError(f"task {{TASK_ID}} rebuilt by this harnessgrid differs from the "
                           "exported one: install the version that exported it")
    return task.grader.grade(Path(workspace_path), list(transcript or []))
'''


def write_reward(dest: Path, check_source: str) -> None:
    """``dest/check.py`` (with a script entry point) and the canonical ``dest/reward.sh``."""
    dest.mkdir(parents=True, exist_ok=True)
    if "__main__" not in check_source:
        check_source = check_source.rstrip("\n") + "\n" + MAIN_SHIM
    (dest / "check.py").write_text(check_source, encoding="utf-8")
    (dest / "reward.sh").write_text(REWARD_SH, encoding="utf-8")
    os.chmod(dest / "reward.sh", 0o755)


def _rebuildable(suite: str) -> bool:
    """Whether ``suite`` names a registered suite that loads without an argument."""
    from harnessgrid.plugin_system.registry import get_registry

    spec = get_registry().task_suites.get(suite)
    return spec is not None and not spec.takes_argument


_SUITES: dict[str, TaskSuite] = {}
_SUITES_LOCK = threading.Lock()


def _named_suite(name: str) -> TaskSuite:
    """Load a named suite once per process: graders run in parallel worker threads, and
    building a generated suite is seconds of CPU that must not be repeated per task."""
    from harnessgrid.plugin_system.registry import load_suite

    with _SUITES_LOCK:
        if name not in _SUITES:
            _SUITES[name] = load_suite(name)
        return _SUITES[name]


class RegeneratedGrader:
    """The grader of a task exported by harnessgrid from a named suite: the task is rebuilt
    from the registered suite (on first use) and its own grader runs, in-process."""

    def __init__(self, suite: str, task_id: str, content_hash: str) -> None:
        self.suite = suite
        self.task_id = task_id
        self.content_hash = content_hash
        self._task: Task | None = None

    @staticmethod
    def applies(origin: dict[str, Any]) -> bool:
        return bool(origin.get("suite") and origin.get("task_id")
                    and _rebuildable(str(origin["suite"])))

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        """Graded outside an episode: as the rebuilt task's grader grades then."""
        return self.grade_in(workspace, transcript, GradingContext())

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]:
        """Graded for an episode: the rebuilt task's grader is told its context too (when it
        is one that wants it, see :class:`~harnessgrid.tasks.ContextGrader`)."""
        if self._task is None:
            try:
                task = _named_suite(self.suite).get(self.task_id)
            except ConfigError as exc:
                raise GraderError(f"cannot rebuild exported task {self.task_id!r} from suite "
                                  f"{self.suite!r}: {exc.message}") from None
            if self.content_hash and task.content_hash() != self.content_hash:
                raise GraderError(f"task {self.task_id!r} rebuilt from suite {self.suite!r} "
                                  "differs from the exported one (another harnessgrid version "
                                  "exported it)")
            self._task = task
        if self._task.grader is None:
            raise GraderError(f"task {self.task_id!r} of suite {self.suite!r} has no grader")
        return grader_call(self._task.grader, context)(workspace, transcript)

    def __repr__(self) -> str:
        return f"RegeneratedGrader({self.suite!r}, {self.task_id!r})"


@dataclass
class ExportReport:
    """What :func:`export_clawgym` wrote: task id → folder, and task id → why it was skipped."""

    out_dir: Path
    exported: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    ungraded: list[str] = field(default_factory=list)


def export_clawgym(suite: TaskSuite, out_dir: Path, *, split: str | None = None,
                   limit: int | None = None) -> ExportReport:
    """Write ``suite`` (one split, or all; the first ``limit`` tasks) to ``out_dir``, one
    ClawGym task folder per task. ``out_dir`` must be new or empty."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"export directory {str(out_dir)!r} exists and is not empty",
                          hint="choose a new directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ExportReport(out_dir=out_dir)
    used: set[str] = set()
    tasks = list(suite.tasks(split))[:limit]
    for task in tasks:
        folder = _folder_name(task.id, used)
        try:
            _export_task(task, suite.name, out_dir / folder)
        except NotExportable as exc:
            shutil.rmtree(out_dir / folder, ignore_errors=True)
            report.skipped[task.id] = str(exc)
            continue
        used.add(folder)
        report.exported[task.id] = folder
        if task.grader is None:
            report.ungraded.append(task.id)
    for bad in suite.broken:  # tasks the loader could not build: nothing to write
        report.skipped.setdefault(bad.id, f"broken: {bad.reason}")
    return report


def _export_task(task: Task, suite_name: str, dest: Path) -> None:
    dest.mkdir()
    grader = task.grader
    grading_type = "automated" if grader is not None else "none"
    export = getattr(grader, "export_reward", None)
    if grader is None:
        pass
    elif callable(export):
        export(dest / "reward")
    elif _rebuildable(suite_name):
        write_reward(dest / "reward", _REGENERATE.format(
            suite=suite_name, task_id=task.id, content_hash=task.content_hash(),
            version=harnessgrid.__version__))
    else:
        raise NotExportable(f"its grader ({type(grader).__name__}) is Python code of suite "
                            f"{suite_name!r}, which cannot be rebuilt by name alone")
    inputs = dest / "input_files"
    if task.source_dir is not None:
        shutil.copytree(task.source_dir, inputs, symlinks=True)
    for rel, content in task.files.items():
        target = inputs / _relative(rel, task.mount_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        target.write_bytes(data)
    origin = {"suite": suite_name, "task_id": task.id, "content_hash": task.content_hash(),
              "version": harnessgrid.__version__,
              **plan_metadata(task.plan),
              "limits": task.limits.model_dump(exclude_none=True)}
    extra = json.loads(json.dumps(task.metadata, default=str))  # JSON-safe copy
    entry = {"task_id": task.id, "user_query": task.instruction,
             "input_mount_dir": task.mount_path,
             # "unknown" is our word for "the data names none": write none back
             "metadata": {**extra, "category": "" if task.category == UNKNOWN_CATEGORY
                          else task.category, "grading_type": grading_type,
                          "tags": list(task.tags), "difficulty": task.difficulty,
                          "harnessgrid": origin}}
    (dest / "data_entry.json").write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")


def plan_metadata(plan: Sequence[Action]) -> dict[str, Any]:
    """``{"plan": [...]}``, to put under ``metadata.harnessgrid`` of a ``data_entry.json``: how
    an oracle plan is recorded in the ClawGym layout (``clawgym.read_plan`` reads it back)."""
    return {"plan": [a.model_dump() for a in plan]}


def _relative(path: str, mount_path: str) -> str:
    """A task file's path relative to the workspace (tasks may name it under the mount)."""
    if path.startswith(mount_path.rstrip("/") + "/"):
        path = path[len(mount_path.rstrip("/")) + 1:]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or path.startswith("/"):
        raise NotExportable(f"its file path {path!r} is not inside the workspace")
    return "/".join(parts)


def _folder_name(task_id: str, used: set[str]) -> str:
    """A folder name from a task id (``grid/csv_sum-00001`` → ``grid__csv_sum-00001``)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "__", task_id).strip(".") or "task"
    name, n = base, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    return name
