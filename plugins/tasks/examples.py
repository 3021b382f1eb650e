"""``examples``: two small hand-written workspace tasks with graders and oracle plans.

A smoke-test suite that exists before any generated suite: the demo runs the scripted oracle
and the null policy on it through every training harness.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.models import Action
from harnessgrid.registrations import TaskSuiteSpec
from harnessgrid.sandboxing.grading_io import read_text
from harnessgrid.tasks import FunctionGrader, Task, TaskSuite


def _grade_upper(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
    out = read_text(ws, "out.txt")  # a regular file in the workspace, never a planted link
    return {"exists": float(out is not None), "content": float(out == "HELLO WORLD\n")}


UPPER_TASK = Task(
    id="upper", instruction="Write the upper-cased content of in.txt to out.txt.",
    files={"in.txt": "hello world\n"}, grader=FunctionGrader(_grade_upper),
    plan=(Action.of("read", path="in.txt"),
          Action.of("shell", command="tr a-z A-Z < in.txt > out.txt"),
          Action.of("read", path="out.txt")),
    suite="examples")


def _grade_config(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
    text = read_text(ws, "conf/app.ini") or ""
    log = read_text(ws, "notes/found.txt")
    return {"port_fixed": float("port = 8080\n" in text and "port = 80\n" not in text),
            "other_keys_kept": float("name = demo\n" in text),
            "finding_written": float(log == "conf/app.ini\n")}


EDIT_TASK = Task(
    id="config", instruction="In conf/app.ini set port to 8080 (leave other keys alone), then "
    "write the path of the file that mentions 'port' to notes/found.txt.",
    files={"conf/app.ini": "[server]\nname = demo\nport = 80\n", "README": "a demo\n"},
    grader=FunctionGrader(_grade_config),
    plan=(Action.of("list", path="."),
          Action.of("search", pattern="port", path="conf"),
          Action.of("edit", path="conf/app.ini", old="port = 80\n", new="port = 8080\n"),
          Action.of("write", path="notes/found.txt", content="conf/app.ini\n"),
          Action.of("read", path="conf/app.ini")),
    suite="examples")


def load(argument: str | None = None, **options: Any) -> TaskSuite:
    return TaskSuite(name="examples", splits={"eval": (UPPER_TASK, EDIT_TASK)})


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(name="examples", description="Two hand-written workspace tasks (smoke test).",
                        load=load)
