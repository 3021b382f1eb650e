"""``harnessgrid tasks``: list, inspect, validate and export task suites.

Suites are addressed as ``load_suite`` takes them (``grid``, ``grid-bench``, ``examples``,
``clawgym:PATH``, ``pinchbench:PATH``); ``--option KEY=VALUE`` and ``--judge MODEL`` reach the
suite's loader. ``validate`` is the check a suite author runs before publishing: through one
harness, the scripted oracle must pass every task that has a plan, the null policy (which sends
nothing) must fail every task — one it passes has a *weak grader* — and grading the same final workspace twice must give the same scores. External
suites have no oracle plans — that is reported per task, not counted as a failure — and
judge-graded tasks without a judge are counted as ungraded, not as failures. A task its loader
could not build (``TaskSuite.broken``) is listed with its reason by ``list`` and ``validate``
(where it is skipped, and makes the check fail); ``show`` of it says why.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from harnessgrid.cli.episode_options import loader_options
from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.tasks import BrokenTask, Task, TaskSuite
    from harnessgrid.trajectory import Trajectory


def _grading(task: Task) -> str:
    from harnessgrid.tasks import planned_grading  # pydantic: not at --help time

    return planned_grading(task)


tasks_app = typer.Typer(help="Task suites: list, show, validate and export tasks.",
                        no_args_is_help=True)

OPTION = typer.Option([], "--option", "-o", help="KEY=VALUE for the suite loader, e.g. "
                      "assets=DIR, judge_api_base=URL, split=train.")
JUDGE = typer.Option(None, "--judge", help="litellm model for LLM-judge grading "
                     "(PinchBench llm_judge / hybrid tasks), e.g. openai/gpt-4o-mini.")
AS_JSON = typer.Option(False, "--json", help="Machine-readable output.")


def open_suite(spec: str, options: list[str], judge: str | None = None) -> TaskSuite:
    """Load ``spec`` with ``--option`` pairs (and ``--judge``) as loader options."""
    from harnessgrid.plugin_system.registry import load_suite

    return load_suite(spec, **loader_options(options, judge))


def find_task(ref: str, options: list[str], judge: str | None = None) -> tuple[TaskSuite, Task]:
    """``SUITE/ID``. Task ids may hold ``/`` (``grid-bench/grid/csv_sum-100003``) and suite
    paths do (``clawgym:/data/bench/task_7``), so: a plain suite name ends at the first ``/``;
    for ``NAME:PATH`` every split point whose PATH exists is tried, longest first."""
    head = ref.split("/", 1)[0]
    if ":" not in head:
        suite_name, _, task_id = ref.partition("/")
        if not task_id:
            raise ConfigError(f"bad task reference {ref!r}",
                              hint="write SUITE/ID, e.g. examples/upper")
        suite = open_suite(suite_name, options, judge)
        if suite.split_of(task_id) is None and suite.split_of(ref) is not None:
            return suite, suite.get(ref)  # a bare id that starts with its suite's name
        return suite, suite.get(task_id)
    cuts = [i for i, ch in enumerate(ref) if ch == "/" and 0 < i < len(ref) - 1]
    error: ConfigError | None = None
    for cut in reversed(cuts):
        spec, task_id = ref[:cut], ref[cut + 1:]
        if not Path(spec.partition(":")[2]).expanduser().exists():
            continue
        try:
            suite = open_suite(spec, options, judge)
            return suite, suite.get(task_id)
        except ConfigError as exc:
            error = error or exc
    raise error or ConfigError(f"bad task reference {ref!r}",
                               hint="write NAME:PATH/ID with an existing PATH")


def split_of(suite: TaskSuite, task: Task) -> str:
    return suite.split_of(task.id) or ""


def task_row(address: str, split: str, task: Task) -> dict[str, Any]:
    """One task as ``tasks list`` shows it; ``address`` is what ``run --task`` takes."""
    return {"address": address, "id": task.id, "split": split, "category": task.category,
            "tags": list(task.tags), "difficulty": task.difficulty, "grading": _grading(task),
            "plan_length": len(task.plan), "sessions": 1 + len(task.followups)}


def broken_row(address: str, broken: BrokenTask) -> dict[str, Any]:
    """A task the loader could not build, as ``tasks list`` shows it."""
    return {"address": address, "id": broken.id, "split": "", "category": "", "tags": [],
            "difficulty": None, "grading": "broken", "plan_length": 0, "sessions": None,
            "broken": broken.reason}


def _list_suites(as_json: bool) -> None:
    from harnessgrid.cli.output import print_table
    from harnessgrid.plugin_system.registry import get_registry

    specs = get_registry().task_suites.values()
    suites = [{"name": s.name, "address": f"{s.name}:PATH" if s.takes_argument else s.name,
               "description": s.description} for s in specs]
    if as_json:
        typer.echo(json.dumps(suites, indent=2))
        return
    print_table("task suites", ("address", "description"),
                [(e["address"], e["description"]) for e in suites])


@tasks_app.command("list")
def list_tasks(suite: str | None = typer.Argument(None, help="A suite address (grid-bench, "
                                                  "clawgym:PATH, ...); without it, list the "
                                                  "registered suites.", show_default=False),
               suite_option: str | None = typer.Option(None, "--suite", hidden=True),
               split: str | None = typer.Option(None, "--split", help="train or eval."),
               limit: int | None = typer.Option(None, "--limit", min=1, help="Show at most N "
                                                "tasks (a table shows 50 unless told)."),
               option: list[str] = OPTION, judge: str | None = JUDGE,
               as_json: bool = AS_JSON) -> None:
    """List the registered suites, or the tasks of one suite with their addresses (what
    ``run --task`` and ``tasks show`` take)."""
    from harnessgrid.cli.output import print_table
    from harnessgrid.tasks import task_ids

    if suite and suite_option and suite != suite_option:
        raise ConfigError(f"two suites given: {suite!r} and --suite {suite_option!r}",
                          hint="give the suite once: harnessgrid tasks list SUITE")
    suite = suite or suite_option
    if suite is None:
        _list_suites(as_json)
        return
    loaded = open_suite(suite, option, judge)
    loaded.tasks(split)  # an unknown split is a ConfigError naming the splits
    chosen = [(name, tasks) for name, tasks in loaded.splits.items() if split in (None, name)]
    total = sum(len(tasks) for _, tasks in chosen)
    wanted = limit if limit is not None else (total if as_json else 50)
    rows: list[dict[str, Any]] = []
    for name, tasks in chosen:  # build only the tasks shown: generated splits are lazy
        ids = task_ids(tasks)
        for i in range(min(len(tasks), wanted - len(rows))):
            rows.append(task_row(f"{suite}/{ids[i]}", name, tasks[i]))
    broken = [broken_row(f"{suite}/{b.id}", b) for b in loaded.broken]  # always all of them
    if as_json:
        typer.echo(json.dumps(rows + broken, indent=2))
        return
    # A sessions column only where some task has follow-ups (PinchBench multi-session).
    sessions = any(r["sessions"] > 1 for r in rows)
    print_table(f"{loaded.name} (version {loaded.version}): {total} tasks"
                + (f", {len(broken)} broken" if broken else ""),
                ("address", "split", "category", "tags", "grading", "plan")
                + (("sessions",) if sessions else ()),
                [(r["address"], r["split"], r["category"], ", ".join(r["tags"]), r["grading"],
                  str(r["plan_length"] or "-")) + ((str(r["sessions"]),) if sessions else ())
                 for r in rows])
    if total > len(rows):
        typer.echo(f"… {total - len(rows)} more (--limit N, or --json)")
    for row in broken:
        typer.echo(f"broken, skipped: {row['address']}: {row['broken']}")


def task_files(task: Task) -> list[tuple[str, int]]:
    """Every file the workspace starts with, and its size."""
    found: dict[str, int] = {}
    if task.source_dir is not None:
        for root, _dirs, names in os.walk(task.source_dir):
            for name in names:
                path = Path(root) / name
                found[str(path.relative_to(task.source_dir))] = path.lstat().st_size
    for rel, content in task.files.items():
        found[rel] = len(content.encode() if isinstance(content, str) else content)
    return sorted(found.items())


@tasks_app.command("show")
def show(ref: str = typer.Argument(..., help="SUITE/ID, e.g. examples/upper or "
                                   "clawgym:./suite/task_1."),
         option: list[str] = OPTION, judge: str | None = JUDGE,
         as_json: bool = AS_JSON) -> None:
    """Print one task: instruction, files, grading, oracle plan and metadata."""
    suite, task = find_task(ref, option, judge)
    info: dict[str, Any] = {**task.summary(), "suite": suite.name, "split": split_of(suite, task),
            "mount_path": task.mount_path, "grading": _grading(task),
            "grader": type(task.grader).__name__ if task.grader else None,
            "limits": task.limits.model_dump(exclude_none=True),
            "files": [{"path": p, "bytes": n} for p, n in task_files(task)],
            "plan": [str(a) for a in task.plan],
            "metadata": json.loads(json.dumps(task.metadata, default=str))}
    if as_json:
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.panel import Panel

    console = Console()
    console.print(Panel(task.instruction, title=f"{suite.name} / {task.id}",
                        title_align="left"), highlight=False, markup=False)
    for number, message in enumerate(task.followups, 2):  # a multi-session task's later prompts
        console.print(Panel(message, title=f"session {number}", title_align="left"),
                      highlight=False, markup=False)
    for key in ("split", "category", "tags", "difficulty", "mount_path", "grading", "grader",
                "limits"):
        console.print(f"[bold]{key}[/]: {info[key]}", highlight=False)
    console.print("[bold]files[/]:", highlight=False)
    for item in info["files"]:
        console.print(f"  {item['path']}  ({item['bytes']} bytes)", highlight=False, markup=False)
    console.print("[bold]oracle plan[/]:" + ("" if task.plan else " none"), highlight=False)
    for i, action in enumerate(info["plan"], 1):
        console.print(f"  {i}. {action}", highlight=False, markup=False)


@dataclass
class TaskCheck:
    """What ``validate`` found for one task. ``ok`` is False only for real problems."""

    id: str
    grading: str
    oracle: str  # pass | fail | no plan | ungraded | partial (full marks on part of the rubric)
    null: str  # fails | passes | ungraded | grade error
    deterministic: bool | None
    note: str = ""

    @property
    def ok(self) -> bool:
        return (self.oracle != "fail" and self.null in ("fails", "ungraded")
                and self.deterministic is not False)


async def _episode(harness: Harness, task: Task, empty: bool,
                   limits: EpisodeLimits) -> tuple[Trajectory, Any]:
    """One episode on a workspace we keep (for regrading), and that workspace."""
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.policies.scripted import ScriptedPolicy
    from harnessgrid.sandboxing.workspace import Workspace

    ws = Workspace.create(task.files, task.source_dir, mount_path=task.mount_path)
    traj = await run_episode(harness, task, ScriptedPolicy(empty=empty), limits, workspace=ws)
    return traj, ws


async def _regrade(task: Task, harness: Harness, ws: Any, traj: Trajectory,
                   timeout_s: float) -> str:
    """Grade ``ws`` again (on a fresh copy, with the transcript the first grading read) and
    describe the outcome like the first grading."""
    import asyncio

    from harnessgrid.engine.grading import grading_copy
    from harnessgrid.harness import grading_transcript
    from harnessgrid.sandboxing.scratch import scratch_dir

    assert task.grader is not None
    with scratch_dir("hg-regrade-") as tmp:
        copy = grading_copy(ws, tmp / "ws")  # as the first grading: links out lead nowhere
        try:
            scores = await asyncio.wait_for(asyncio.to_thread(
                task.grader.grade, copy.root, grading_transcript(harness, traj)), timeout_s)
            return json.dumps(scores, sort_keys=True)
        except Exception as exc:  # noqa: BLE001 - compared, not raised
            return f"error: {exc}"


def _first(traj: Trajectory) -> str:
    if traj.grade_error is not None:
        return f"error: {traj.grade_error}"
    return json.dumps(traj.subscores, sort_keys=True)


async def check_task(harness: Harness, task: Task, limits: EpisodeLimits) -> TaskCheck:
    """Oracle (if planned), null, and a second grading of the oracle's (else null's) result."""
    check = TaskCheck(id=task.id, grading=_grading(task), oracle="no plan", null="fails",
                      deterministic=None)
    if task.grader is None:
        check.null, check.note = "ungraded", "task has no grader"
        return check
    workspaces = []
    try:
        regrade_from = None
        if task.plan:
            traj, ws = await _episode(harness, task, False, limits)
            workspaces.append(ws)
            ungraded = (traj.grade_error or "").startswith("ungraded")
            check.oracle = "pass" if traj.passed else ("ungraded" if ungraded else "fail")
            if traj.grading_note and traj.score == 1.0:  # full marks on the part graded
                check.oracle, check.note = "partial", traj.grading_note
            elif not traj.passed:
                check.note = (traj.grade_error or traj.error
                              or f"oracle scored {traj.score} ({traj.termination})")
            regrade_from = (traj, ws)
        traj, ws = await _episode(harness, task, True, limits)
        workspaces.append(ws)
        if traj.grade_error is not None:
            ungraded = traj.grade_error.startswith("ungraded")
            check.null = "ungraded" if ungraded else "grade error"
            check.note = check.note or traj.grade_error
        elif traj.score == 1.0:  # a partial grading's full marks count: its checks are weak
            check.null = "passes"
            check.note = check.note or ("weak grader: it passes the null policy, which sends "
                                        "nothing")
        regrade_from = regrade_from or (traj, ws)
        if check.null != "ungraded":
            first = _first(regrade_from[0])
            again = await _regrade(task, harness, regrade_from[1], regrade_from[0],
                                   limits.grader_timeout_s)
            check.deterministic = first == again
            if not check.deterministic:
                check.note = check.note or f"regrading gave {again[:120]} after {first[:120]}"
    finally:
        for ws in workspaces:
            ws.cleanup()
    return check


async def validate_tasks(harness: Harness, tasks: list[Task], limits: EpisodeLimits,
                         concurrency: int, progress: Any = None) -> list[TaskCheck]:
    import asyncio

    sem = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> TaskCheck:
        async with sem:
            result = await check_task(harness, task, limits)
        if progress is not None:
            progress()
        return result

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def summarize(checks: list[TaskCheck]) -> dict[str, int]:
    def count(pred: Any) -> int:
        return sum(1 for c in checks if pred(c))

    return {"tasks": len(checks), "ok": count(lambda c: c.ok),
            "oracle_pass": count(lambda c: c.oracle == "pass"),
            "oracle_fail": count(lambda c: c.oracle == "fail"),
            "no_plan": count(lambda c: c.oracle == "no plan"),
            "null_passes": count(lambda c: c.null == "passes"),
            "broken": count(lambda c: c.grading == "broken"),
            "grade_errors": count(lambda c: c.null == "grade error"),
            "ungraded": count(lambda c: c.null == "ungraded"),
            "automated_only": count(lambda c: c.grading == "automated_only"),
            "nondeterministic": count(lambda c: c.deterministic is False)}


@tasks_app.command("validate")
def validate(suite: str = typer.Argument(..., help="Suite address."),
             sample: int | None = typer.Option(None, "--sample", min=1, help="Check a seeded "
                                               "random sample of N tasks (default: all)."),
             seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
             split: str | None = typer.Option(None, "--split", help="train or eval."),
             harness: str = typer.Option("S0-T0-O0-C0-W0", "--harness", help="Configuration "
                                         "code (or adapter:NAME) to run the episodes through."),
             concurrency: int = typer.Option(4, "--concurrency", min=1),
             option: list[str] = OPTION, judge: str | None = JUDGE,
             as_json: bool = AS_JSON) -> None:
    """Oracle passes, null fails, grading is deterministic — for every (sampled) task."""
    import asyncio

    from rich.console import Console
    from rich.progress import Progress

    from harnessgrid.cli.output import print_table
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.engine.limits import EpisodeLimits

    loaded = open_suite(suite, option, judge)
    every = loaded.tasks(split)
    picked: Sequence[int] = range(len(every))
    if sample is not None and sample < len(every):  # sample indices: build only those tasks
        picked = sorted(random.Random(seed).sample(range(len(every)), sample))
    tasks = [every[i] for i in picked]
    from harnessgrid.tasks import check_graders_ready

    check_graders_ready(tasks)  # a judge without its key: now, not once per task
    the_harness = resolve_harness(harness)
    skipped = [TaskCheck(id=b.id, grading="broken", oracle="skipped", null="skipped",
                         deterministic=None, note=b.reason) for b in loaded.broken]
    limits = EpisodeLimits()
    if as_json:
        checks = asyncio.run(validate_tasks(the_harness, tasks, limits, concurrency))
    else:
        with Progress(transient=True) as bar:
            job = bar.add_task(f"validating {len(tasks)} tasks", total=len(tasks))
            checks = asyncio.run(validate_tasks(the_harness, tasks, limits, concurrency,
                                                lambda: bar.advance(job)))
    checks += skipped
    totals = summarize(checks)
    failed = totals["ok"] < totals["tasks"]
    if as_json:
        typer.echo(json.dumps({"suite": loaded.name, "harness": the_harness.name,
                               "summary": totals,
                               "weak_graders": [c.id for c in checks if c.null == "passes"],
                               "tasks": [{**asdict(c), "ok": c.ok} for c in checks]}, indent=2))
    else:
        print_table(f"{loaded.name} through {the_harness.name}",
                    ("task", "ok", "grading", "oracle", "null", "deterministic", "note"),
                    [(c.id, "yes" if c.ok else "NO", c.grading, c.oracle, c.null,
                      "-" if c.deterministic is None else ("yes" if c.deterministic else "NO"),
                      c.note) for c in checks])
        console = Console()
        console.print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in totals.items()),
                      highlight=False, soft_wrap=True)
        weak = [c.id for c in checks if c.null == "passes"]
        if weak:
            console.print(f"weak grader: {len(weak)} task(s) pass under the null policy, which "
                          f"sends nothing: {', '.join(weak)}; their checks accept a workspace "
                          "nobody touched", highlight=False, soft_wrap=True)
        if totals["ungraded"] or totals["automated_only"]:
            console.print(f"{totals['ungraded']} task(s) ungraded and "
                          f"{totals['automated_only']} graded on their automated part only: "
                          "pass --judge MODEL for LLM-judge grading", highlight=False)
    if failed:
        raise typer.Exit(1)


@tasks_app.command("export")
def export(suite: str = typer.Argument(..., help="Suite address."),
           out_dir: str = typer.Argument(..., help="New (or empty) directory to write."),
           fmt: str = typer.Option("clawgym", "--format", help="Output layout: clawgym."),
           split: str | None = typer.Option(None, "--split", help="train or eval."),
           limit: int | None = typer.Option(None, "--limit", min=1, help="First N tasks."),
           option: list[str] = OPTION, judge: str | None = JUDGE,
           as_json: bool = AS_JSON) -> None:
    """Write a suite in the ClawGym layout (one folder per task)."""
    from harnessgrid.paths import require_output_dir
    from harnessgrid.plugins.tasks.clawgym import export_clawgym

    if fmt != "clawgym":
        raise ConfigError(f"unknown export format {fmt!r}", hint="the only format is clawgym")
    require_output_dir(out_dir, "OUT_DIR")
    report = export_clawgym(open_suite(suite, option, judge), Path(out_dir), split=split,
                            limit=limit)
    if as_json:
        typer.echo(json.dumps({"out_dir": str(report.out_dir), "exported": report.exported,
                               "skipped": report.skipped, "ungraded": report.ungraded},
                              indent=2))
        return
    typer.echo(f"exported {len(report.exported)} task(s) to {report.out_dir}")
    if report.ungraded:
        typer.echo(f"{len(report.ungraded)} of them without a grader (no reward/)")
    for task_id, why in report.skipped.items():
        typer.echo(f"skipped {task_id}: {why}")
