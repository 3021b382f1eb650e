"""``harnessgrid eval`` and ``harnessgrid report``: the paper's evaluation protocol from the
command line (see :mod:`harnessgrid.evaluation`).

``eval`` is resumable: re-running the same command continues where a killed one stopped, and
runs again the episodes stored as infrastructure failures (``--keep-failures`` keeps them).
Exit status: 0, also when some episodes failed for infrastructure reasons (a summary on stderr
says how many and why); 3 when every episode of the evaluation is an infrastructure failure; 2
for a usage or configuration mistake; 130 when interrupted.
``report DIR`` (re)writes the tables, plots and ``report.html`` of a directory, and
``report compare BASE NEW`` puts two evaluations side by side.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from harnessgrid.cli import episode_options as opts
from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.evaluation.results import EvalResult
    from harnessgrid.evaluation.run import EvalOutcome


def eval_command(
    policy: str = opts.policy_option(),
    suites: str = typer.Option(..., "--suites", help="Comma-separated suites, e.g. "
                               "examples,grid-bench,clawgym:/data/bench."),
    out: Path = typer.Option(..., "--out", help="Evaluation directory (created; re-use it to "
                             "resume)."),
    settings: str = typer.Option("in-space,out-of-space", "--settings",
                                 help="Any of in-space, out-of-space, original (train: its "
                                 "name before 0.2.3, deprecated)."),
    runs: int = typer.Option(3, "--runs", min=1, help="Independent runs (Pass@1 averaged over "
                             "runs, with the spread)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Episodes at once "
                                    "(without --ray)."),
    workers: int = typer.Option(1, "--workers", metavar="N", help="Spread the episodes over "
                                "N worker processes, each with its own event loop and a share "
                                "of --concurrency, for when one process's CPU is the limit "
                                "(many episodes against a fast model server). Results are "
                                "stored here; a worker that dies costs only its episodes, as "
                                "infrastructure failures run again on resume."),
    ray: str | None = typer.Option(None, "--ray", metavar="ADDRESS", help="Run the episodes "
                                   "as Ray tasks on the cluster at ADDRESS (HOST:PORT printed "
                                   "by `ray start --head`, or auto for the cluster started on "
                                   "this machine), one per cluster CPU; results are stored "
                                   "here as they end. Needs harnessgrid[ray] on every node."),
    harnesses: str | None = typer.Option(None, "--harnesses", help="In-space configurations: "
                                         "CODE,CODE,... (a plugin level by name, e.g. "
                                         "S0-T0-O=diffstat-C0-W0; micro:CODE for a named "
                                         "space; see `harnessgrid plugins list`), level lists "
                                         "(system_prompt=minimal,...,workflow=react), or all "
                                         "(default: the 18 held out of the orthogonal "
                                         "training design)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="First N tasks per suite."),
    split: str | None = typer.Option(None, "--split", help="Suite split (default: eval when "
                                     "the suite has one, else every task)."),
    original: str | None = typer.Option(None, "--original", help="For the original setting: "
                                        "the harnesses the policy trained through, one or "
                                        "more (CODE, level list or adapter:NAME), or oa for "
                                        "the orthogonal array (harnessgrid train's default "
                                        "design)."),
    approve: str | None = typer.Option(
        None, "--approve", help="MODULE:FUNCTION: a product's approval callback every tool "
        "call of every episode passes before it runs (it takes a ToolCallRequest and returns "
        "allow(), deny(reason), modify(...) or None), imported where the episodes run."),
    adapters: str = typer.Option("claude-code,openclaw", "--adapters",
                                 help="Adapters of the out-of-space setting: NAME or "
                                 "NAME@VERSION (the release it emulates), comma-separated, or "
                                 "all (every registered adapter). The default is the paper's "
                                 "two shells, whatever else is installed."),
    holdout_seed: int = typer.Option(0, "--holdout-seed", help="Seed of the held-out "
                                     "configurations."),
    policy_opt: opts.PolicyOpt = [],  # noqa: B006 - typer reads the default, never mutates it
    suite_option: opts.SuiteOption = [],  # noqa: B006
    judge: opts.Judge = None,
    max_turns: opts.MaxTurns = opts.MAX_TURNS,
    wall_s: opts.WallS = opts.WALL_S,
    unsafe_no_sandbox: opts.UnsafeNoSandbox = False,
    env: opts.Env = None,
    show_durations: opts.ShowDurations = False,
    keep_failures: bool = typer.Option(False, "--keep-failures", help="On resume, keep the "
                                       "episodes stored as infrastructure failures (policy, "
                                       "sandbox or internal errors) instead of running them "
                                       "again."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not write the report."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Report without plots."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no tables."),
) -> None:
    """Evaluate a policy: every task through every harness of each setting, RUNS times.

    Results are stored as each episode ends; re-run the same command to resume (with or
    without --ray). A resume also runs again the episodes stored as infrastructure failures
    (e.g. after fixing an API key), keeping the failed records in the files; --keep-failures
    keeps them instead.

    Exit status: 0 when the evaluation ran, even if some episodes failed for infrastructure
    reasons (stderr says how many and why); 3 when every episode is an infrastructure failure;
    2 for a usage or configuration mistake (e.g. a missing API key); 130 when interrupted.
    """
    from harnessgrid.evaluation.plan import split_harnesses, split_list
    from harnessgrid.evaluation.run import EvalConfig, evaluate

    # the renamed `train` setting warns in the library; a command-line user must see it too
    warnings.filterwarnings("always", message="the evaluation setting `train`",
                            category=DeprecationWarning)
    suite_list = split_list(suites)
    if not suite_list:
        raise ConfigError("--suites is empty", hint="e.g. --suites examples")
    config = EvalConfig(
        policy=policy, policy_options=opts.parse_options(policy_opt), suites=tuple(suite_list),
        suite_options=opts.loader_options(suite_option, judge),
        settings=tuple(split_list(settings)), runs=runs,
        harnesses=tuple(split_harnesses(harnesses)) or None, original=original,
        adapters=tuple(split_list(adapters)), holdout_seed=holdout_seed, limit=limit,
        split=split, concurrency=concurrency, workers=workers, ray=ray,
        keep_failures=keep_failures, approver=approve,
        limits=opts.episode_limits(max_turns, wall_s, unsafe_no_sandbox, env, show_durations))
    try:
        outcome = evaluate(config, out, progress=not quiet)
    except KeyboardInterrupt:
        typer.secho(f"interrupted: finished episodes are stored in {out}; re-run the same "
                    "command to resume", fg="yellow", err=True)
        # SystemExit, not typer.Exit: in non-standalone mode click returns typer.Exit's code
        # from app() instead of raising it, and the code would be lost.
        raise SystemExit(130) from None
    if not quiet:
        _say_outcome(outcome)
    if not no_report:
        _write_and_print(out, plots=not no_plots, as_json=False, quiet=quiet, brief=True)
    failures = outcome.infra_failures
    if failures:  # printed even with --quiet: these episodes say nothing about the policy
        for line in infra_summary(failures, outcome.total, keep_failures):
            typer.secho(line, fg="red" if len(failures) == outcome.total else "yellow",
                        err=True)
    if failures and len(failures) == outcome.total:
        raise SystemExit(EXIT_ALL_INFRA_FAILURES)


def _say_outcome(outcome: EvalOutcome) -> None:
    """One line on stderr: episodes run, already stored, recovered and retried."""
    typer.echo(f"{outcome.ran} episode(s) run, {outcome.skipped} already stored"
               + (f", {outcome.recovered} recovered" if outcome.recovered else "")
               + (f", {outcome.retried} infrastructure failure(s) retried"
                  if outcome.retried else "")
               + f" ({outcome.seconds:.1f}s)", err=True)


#: Exit status of ``harnessgrid eval`` when every episode is an infrastructure failure.
EXIT_ALL_INFRA_FAILURES = 3


def infra_summary(failures: list[EvalResult], total: int, kept: bool) -> list[str]:
    """How many episodes failed for infrastructure reasons and why: one line for the count,
    one per distinct reason (termination and the error's first line), most frequent first."""
    from collections import Counter

    from harnessgrid.cli.run_cmd import error_text

    reasons = Counter((r.termination, _first_line(error_text(r.error)[0])) for r in failures)
    every = "all " if len(failures) == total else ""
    lines = [f"infrastructure failures: {every}{len(failures)} of {total} episode(s) "
             f"({len(reasons)} distinct reason(s)); they are not scored"]
    for (termination, message), count in reasons.most_common(5):
        lines.append(f"  {count} × {termination}: {message or '(no message)'}")
    if len(reasons) > 5:
        lines.append(f"  ... and {len(reasons) - 5} other reason(s): see the report")
    lines.append("  fix the cause and re-run the same command to run them again"
                 + (" (without --keep-failures)" if kept else ""))
    return lines


def _first_line(text: str, width: int = 240) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[:width - 1] + "…"


def _write_and_print(out: Path, *, plots: bool, as_json: bool, quiet: bool,
                     brief: bool = False) -> None:
    from harnessgrid.evaluation.report import load_report, write_report
    from harnessgrid.evaluation.tables import render_markdown

    report = load_report(out)
    files = write_report(report, out, plots=plots)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    elif not quiet:
        typer.echo(render_markdown(report, brief=brief))
    if not quiet:
        typer.echo(f"wrote {files.markdown}, {files.json}, {files.html} and "
                   f"{len(files.csv)} CSV tables in {files.csv[0].parent}", err=True)


def report_command(
    paths: list[str] = typer.Argument(..., metavar="DIR | compare BASE NEW",
                                      help="An evaluation directory, or `compare BASE NEW` "
                                      "(directories or report.json files)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of markdown."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the plots."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Write the files, print nothing."),
) -> None:
    """Write and print the report of an evaluation directory (markdown, CSV, JSON, plots,
    report.html), or compare two evaluations: `report compare BASE NEW`."""
    if paths and paths[0] == "compare":
        if len(paths) != 3:
            raise ConfigError("compare takes two evaluations",
                              hint="harnessgrid report compare BASE_DIR NEW_DIR")
        _compare(paths[1], paths[2], as_json)
        return
    if len(paths) != 1:
        raise ConfigError(f"report takes one directory, got {len(paths)}: {' '.join(paths)}",
                          hint="harnessgrid report DIR, or harnessgrid report compare BASE NEW")
    from harnessgrid.paths import require_output_dir

    out = require_output_dir(paths[0], "DIR")  # the report is written into it
    _write_and_print(out, plots=not no_plots, as_json=as_json, quiet=quiet)


def _compare(base: str, new: str, as_json: bool) -> None:
    from harnessgrid.evaluation.compare import compare_reports, render_comparison
    from harnessgrid.evaluation.report import load_report

    comparison = compare_reports(load_report(base), load_report(new), base, new)
    if as_json:
        json.dump(comparison.model_dump(mode="json"), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        typer.echo(render_comparison(comparison))
