"""Helpers for task-suite plugins whose suites are loaded from a path (``NAME:PATH``).

A :class:`~harnessgrid.registrations.TaskSuiteSpec` with ``takes_argument=True`` is addressed as
``NAME:ARGUMENT``; ``load_suite`` calls its ``load(ARGUMENT, **options)``. Two conventions make
such a suite behave like a built-in one everywhere:

- **its name is its address**, exactly as the user gave it: ``suite_name("clawgym", "./bench")``
  is ``"clawgym:./bench"``. Give it to ``TaskSuite(name=...)`` and to every ``Task(suite=...)``:
  trajectories and results then say where a task came from, ``load_suite(suite.name)`` loads
  the suite again (from the same working directory, for a relative path), and the ClawGym
  exporter does not take it for a suite it can rebuild by a plain registered name;
- **unknown loader options are an error**, and a missing path is one too: :func:`suite_path`
  checks both and resolves the path (``~`` expanded, made absolute).

The built-in ``clawgym:PATH`` and ``pinchbench:PATH`` loaders use both, and
:func:`load_each`: a task that cannot be built (a missing asset, a malformed file) becomes a
:class:`~harnessgrid.tasks.BrokenTask` with its reason instead of failing the whole suite.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harnessgrid.errors import ConfigError, HarnessgridError

if TYPE_CHECKING:
    from harnessgrid.tasks import BrokenTask, Task

__all__ = ["load_each", "suite_name", "suite_path"]

_Source = TypeVar("_Source")


def suite_name(scheme: str, argument: str) -> str:
    """The name of the suite loaded from ``scheme:argument``: that address, as given."""
    return f"{scheme}:{argument}"


def suite_path(scheme: str, argument: str | None, options: Mapping[str, Any],
               allowed: Collection[str]) -> Path:
    """The resolved path of ``scheme:PATH``, after rejecting loader options not in ``allowed``
    (``--option KEY=VALUE`` on the command line) and a missing path, each with a
    :class:`ConfigError` that says what to write instead."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown option(s) for {scheme} suites: {', '.join(unknown)}",
                          hint=f"options: {', '.join(sorted(allowed)) or 'none'}")
    if not argument:
        raise ConfigError(f"the {scheme} suite needs a path", hint=f"write {scheme}:PATH")
    return Path(argument).expanduser().resolve()


def load_each(sources: Iterable[_Source], build: Callable[[_Source], Task],
              id_of: Callable[[_Source], str]) -> tuple[list[Task], list[BrokenTask]]:
    """Build one task per source; a source whose ``build`` raises a
    :class:`~harnessgrid.errors.HarnessgridError` (what loaders raise for bad task files)
    becomes a :class:`~harnessgrid.tasks.BrokenTask` named ``id_of(source)`` with the error
    (and its hint) as the reason. Other exceptions are bugs and propagate. Returns the good
    tasks and the broken ones, each in source order; give both to ``TaskSuite(splits=...,
    broken=...)``."""
    from harnessgrid.tasks import BrokenTask

    tasks: list[Task] = []
    broken: list[BrokenTask] = []
    for source in sources:
        try:
            tasks.append(build(source))
        except HarnessgridError as exc:
            reason = exc.message + (f" ({exc.hint})" if exc.hint else "")
            broken.append(BrokenTask(id=id_of(source), reason=reason, source=str(source)))
    return tasks, broken
