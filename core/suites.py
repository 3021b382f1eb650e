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

The built-in ``clawgym:PATH`` and ``pinchbench:PATH`` loaders use both.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError

__all__ = ["suite_name", "suite_path"]


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
