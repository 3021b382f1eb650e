"""``harnessgrid run``: one episode, any harness, any policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from harnessgrid.cli import episode_options as opts
from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.tasks import Task
    from harnessgrid.trajectory import Trajectory


def find_task(ref: str, options: list[str] | None = None, judge: str | None = None) -> Task:
    """``SUITE/ID`` → the task (ids may contain ``/``; see ``tasks_cmd.find_task``)."""
    from harnessgrid.cli.tasks_cmd import find_task as find

    return find(ref, options or [], judge)[1]


def summary(traj: Trajectory, address: str | None = None) -> dict[str, Any]:
    """``run --json``'s record. ``task`` is the task's address (what ``--task`` and ``tasks
    show`` take), ``task_id`` its id in the suite; an ``--instruction`` run has no address."""
    return {"harness": traj.harness, "task": address, "task_id": traj.task_id,
            "suite": traj.suite or None, "policy": traj.policy,
            "score": traj.score, "passed": traj.passed, "subscores": traj.subscores,
            "termination": traj.termination, "error": traj.error,
            "grade_error": traj.grade_error, "grading": traj.grading,
            "grading_note": traj.grading_note, "turns": len(traj.turns),
            "tokens_in": traj.tokens_in, "tokens_out": traj.tokens_out,
            "wall_s": round(traj.wall_s, 3), "model_s": round(traj.model_s, 3),
            "tools_s": round(traj.tools_s, 3), "harness_s": round(traj.harness_s, 3),
            "wait_s": round(traj.wait_s, 3)}


#: Exit status of ``harnessgrid run`` when the episode ended as an infrastructure failure
#: (policy, sandbox or internal error): distinct from 2, a usage or configuration mistake. The
#: agent failing the task is not an error: exit 0.
EXIT_INFRA_FAILURE = 3

_TRACEBACK = "Traceback (most recent call last):"


def error_text(error: str | None) -> tuple[str, str]:
    """An episode's error as (message, traceback): the runtime stores the exception's text
    followed by its traceback; the message is what a person needs, the traceback is kept in
    the trajectory."""
    text = error or ""
    head, sep, tail = text.partition(_TRACEBACK)
    return head.strip(), (sep + tail).strip()


def show_infra_failure(traj: Trajectory) -> None:
    """A one-line summary (stdout), then the error as plain text (stderr)."""
    message, trace = error_text(traj.error)
    typer.echo(f"{traj.task_id} through {traj.harness} with {traj.policy}: infrastructure "
               f"failure ({traj.termination}) after {len(traj.turns)} turn(s), "
               f"{traj.wall_s:.1f}s; not scored")
    typer.echo(f"error: {message or '(no message recorded)'}", err=True)
    if trace:
        typer.echo("(the traceback is kept in the trajectory: --save FILE or --json)", err=True)


def show_conversation(traj: Trajectory) -> None:
    """Print what the model saw each turn: the whole view at a segment start, then only what
    was appended since, and what the model wrote."""
    from rich.console import Console
    from rich.panel import Panel

    console = Console()
    seen = 0
    for turn in traj.turns:
        start = 0 if (turn.index == 0 or turn.new_segment) else seen
        if turn.new_segment:
            console.rule("[yellow]context rewritten: new segment[/]")
        for m in turn.view[start:]:
            console.print(Panel(m.content or "(empty)", title=f"{m.role}"
                                + (f" · {m.kind}" if m.kind else ""), title_align="left",
                                border_style="blue" if m.role != "system" else "dim"),
                          highlight=False, markup=False)
        calls = "".join(f"\n→ {c.name}({json.dumps(c.arguments)[:300]})"
                        for c in turn.assistant.tool_calls)
        console.print(Panel((turn.assistant.content or "") + calls or "(empty)",
                            title=f"assistant · turn {turn.index + 1}", title_align="left",
                            border_style="green"), highlight=False, markup=False)
        seen = len(turn.view) + 1


def run(
    task: str | None = typer.Option(None, "--task", help="SUITE/ID of a task to run."),
    instruction: str | None = typer.Option(None, "--instruction", help="An ad-hoc task."),
    workspace: Path | None = typer.Option(None, "--workspace", help="Directory for an ad-hoc "
                                          "task (worked on in a copy unless --in-place)."),
    in_place: bool = typer.Option(False, "--in-place", help="Let the agent change --workspace."),
    harness: str = typer.Option(..., "--harness", help="Configuration code (S1-T0-O2-C1-W0; a "
                                "plugin level by name, S1-T0-O=diffstat-C1-W0; a named space's "
                                "micro:CODE; see `harnessgrid plugins list`), level list "
                                "(system_prompt=minimal,...,workflow=react) or adapter:NAME."),
    policy: str = opts.policy_option(),
    policy_opt: opts.PolicyOpt = [],  # noqa: B006 - typer reads the default, never mutates it
    suite_option: opts.SuiteOption = [],  # noqa: B006
    judge: opts.Judge = None,
    max_turns: opts.MaxTurns = opts.MAX_TURNS,
    wall_s: opts.WallS = opts.WALL_S,
    unsafe_no_sandbox: opts.UnsafeNoSandbox = False,
    env: opts.Env = None,
    show_durations: opts.ShowDurations = False,
    save: Path | None = typer.Option(None, "--save", help="Append the trajectory to this JSONL."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    show: bool = typer.Option(False, "--show", help="Render the conversation as the model saw it."),
) -> None:
    """Run one episode and print its score, termination reason, turns and costs.

    Exit status: 0 when the episode ran (whether or not the agent solved the task), 2 for a
    usage or configuration mistake (e.g. a missing API key), 3 when the episode ended as an
    infrastructure failure (policy_error, sandbox_error, internal_error): its error is printed
    on stderr after a one-line summary.
    """
    if (task is None) == (instruction is None):
        raise ConfigError("give either --task SUITE/ID or --instruction TEXT (with --workspace)")
    limits = opts.episode_limits(max_turns, wall_s, unsafe_no_sandbox, env, show_durations)
    options = opts.parse_options(policy_opt)
    if save is not None:  # before the episode: a path that cannot be written fails now
        from harnessgrid.paths import require_output_file

        require_output_file(save, "--save")
    if task is not None:
        traj = _task_episode(task, harness, policy, options, limits, suite_option, judge)
    else:
        traj = _ad_hoc_episode(instruction or "", workspace, in_place, harness, policy,
                               options, limits)
    if save is not None:
        from harnessgrid.trajectory import TrajectoryStore

        TrajectoryStore(save).append(traj)
    if show:
        show_conversation(traj)
    _report(traj, task, harness, as_json)


def _task_episode(task: str, harness: str, policy: str, options: dict[str, Any],
                  limits: EpisodeLimits, suite_option: list[str],
                  judge: str | None) -> Trajectory:
    """``--task SUITE/ID``: the task's episode, through its sessions when it has follow-ups
    (PinchBench multi-session); an oracle without a plan and a judge without its key are
    refused before it starts."""
    import asyncio

    from harnessgrid.engine.api import resolve_harness, resolve_policy
    from harnessgrid.engine.runtime import run_task_episode
    from harnessgrid.policies.scripted import check_policy_fits
    from harnessgrid.tasks import check_graders_ready

    the_task = find_task(task, suite_option, judge)
    check_policy_fits(policy, [the_task])  # no plan for the oracle: refused, not a 0
    check_graders_ready([the_task], judge)  # a judge without its key: now, not after it
    return asyncio.run(run_task_episode(resolve_harness(harness), the_task,
                                        resolve_policy(policy, options), limits))


def _ad_hoc_episode(instruction: str, workspace: Path | None, in_place: bool, harness: str,
                    policy: str, options: dict[str, Any], limits: EpisodeLimits) -> Trajectory:
    """``--instruction TEXT --workspace DIR``: an ad-hoc task on a copy of the directory
    (the directory itself with ``--in-place``)."""
    import asyncio

    from harnessgrid.engine.api import arun_agent

    if workspace is None:
        raise ConfigError("--instruction needs --workspace DIR")
    if not workspace.is_dir():
        what = "is not a directory" if workspace.exists() else "does not exist"
        raise ConfigError(f"--workspace {workspace} {what}",
                          hint="give the directory the agent works on (a copy of it, "
                               "unless --in-place); create it first with mkdir -p if it "
                               "should start empty")
    return asyncio.run(arun_agent(instruction, workspace, harness=harness, policy=policy,
                                  policy_options=options, in_place=in_place, limits=limits))


def _report(traj: Trajectory, task: str | None, harness: str, as_json: bool) -> None:
    """The episode's summary (a table, or one JSON object with its provenance), and the
    exit status of an infrastructure failure."""
    result = summary(traj, task)
    if as_json:
        from harnessgrid.plugin_system.registry import provenance

        # What produced it: harnessgrid's version, the plugin packages, the adapter's release.
        adapters = [harness.strip()] if harness.strip().startswith("adapter:") else []
        typer.echo(json.dumps({**result, "provenance": provenance(adapters)}))
    elif traj.infra_failure:
        show_infra_failure(traj)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(show_header=False, title=f"{traj.task_id} through {traj.harness}")
        for key, value in result.items():
            table.add_row(key, str(value))
        Console().print(table)
    if traj.infra_failure:
        if as_json:
            typer.echo(f"error: {error_text(traj.error)[0]}", err=True)
        # SystemExit, not typer.Exit: outside standalone mode click would swallow its code.
        raise SystemExit(EXIT_INFRA_FAILURE)
