"""The example tasks as a third-party suite named ``probe``, for tests that install it through
a real entry point (see levels_for_tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK
from harnessgrid.registrations import TaskSuiteSpec
from harnessgrid.tasks import TaskSuite

__all__ = ["EDIT_TASK", "UPPER_TASK"]


def load(argument: str | None = None, **options: Any) -> TaskSuite:
    return TaskSuite(name="probe", splits={"eval": (UPPER_TASK, EDIT_TASK)})


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(name="probe", description="The example tasks, as a plugin.", load=load)
