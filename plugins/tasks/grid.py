"""Plugin registering the generated suites: ``grid`` (train), ``grid-bench`` and ``grid-long``
(eval). See :mod:`harnessgrid.plugins.tasks.generated` for the families and
:mod:`harnessgrid.plugins.tasks.generated.splits` for how the splits are built and kept disjoint.

The generator is imported only when a suite is loaded, so listing plugins stays cheap; loading
reads the shipped split index and builds a task only when it is asked for. Every loader takes one option,
``families`` (a list or ``"a,b"``), to restrict a suite to some families.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.errors import ConfigError
from harnessgrid.registrations import TaskSuiteSpec


def _loader(builder: str) -> Callable[..., Any]:
    def load(argument: str | None = None, **options: Any) -> Any:
        unknown = sorted(set(options) - {"families"})
        if unknown:
            raise ConfigError(f"unknown option(s) for the generated suites: {', '.join(unknown)}",
                              hint="the only option is families=NAME,NAME")
        from harnessgrid.plugins.tasks import generated

        return getattr(generated, builder)(options.get("families"))

    return load


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(
        name="grid", load=_loader("grid_suite"),
        description="Generated workspace tasks (files, CSV/JSON, logs, configs, scripts) in 25 "
                    "families covering the six behaviours; split `train`, 14,000 tasks.")
    yield TaskSuiteSpec(
        name="grid-bench", load=_loader("bench_suite"),
        description="200 generated eval tasks spread over all families (split `eval`), "
                    "disjoint from `grid` by content hash and parameters.")
    yield TaskSuiteSpec(
        name="grid-long", load=_loader("long_suite"),
        description="72 long-horizon generated eval tasks, each needing at least 8 actions "
                    "(split `eval`), disjoint from `grid` and `grid-bench`.")
