"""``harnessgrid demo``: the paper's comparison at CPU scale (see :mod:`harnessgrid.trainer.demo`).

Heavy imports happen inside the command, so ``harnessgrid --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harnessgrid.errors import ConfigError

Out = Annotated[Path, typer.Option("--out", help="Output directory, one folder per profile "
                                   "(re-use it to resume).")]
Quick = Annotated[bool, typer.Option("--quick", help="A first look in a few minutes "
                                     "(pipeline check; numbers are not meaningful).")]
Full = Annotated[bool, typer.Option("--full", help="Every condition (random-18, "
                                    "first-order-3, oa-18-k1 and the negated-advantage "
                                    "control too).")]
Seeds = Annotated[int | None, typer.Option("--seeds", min=1, help="Seeds per condition "
                                           "(default: the profile's).")]
Workers = Annotated[int | None, typer.Option("--workers", min=1, help="Runs in parallel "
                                             "(default: one per CPU).")]
Validation = Annotated[bool, typer.Option(
    "--validation", help="Score on the validation split and configurations instead of the "
                         "test holdout (for choosing a budget or learning rate; writes "
                         "OUT/PROFILE-validation).")]

TrainWarmStart = Annotated[bool, typer.Option(
    "--train-warm-start", help="Train the shared warm start here even when the shipped one "
                               "was made with the same parameters (which the demo otherwise "
                               "installs).")]


def demo_command(out: Out = Path("runs/demo"), quick: Quick = False, full: Full = False,
                 seeds: Seeds = None, workers: Workers = None,
                 validation: Validation = False,
                 train_warm_start: TrainWarmStart = False) -> None:
    """RL from one warm start through one harness and through the 18-run orthogonal array,
    scored on held-out harnesses and unseen levels: the paper's experiment, on CPU."""
    from rich.console import Console

    from harnessgrid.paths import require_output_dir
    from harnessgrid.trainer.run import require_training_extras

    if quick and full:
        raise ConfigError("--quick and --full exclude each other", hint="choose one")
    require_output_dir(out, "--out")  # before any import or line that implies it will work
    require_training_extras()
    from harnessgrid.engine.limits import EpisodeLimits, require_sandbox
    from harnessgrid.trainer.demo import (
        IN_SPACE,
        OUT_OF_SPACE_NOTE,
        PROFILES,
        SETTINGS,
        format_table,
        interval_words,
        run_demo,
    )

    require_sandbox(EpisodeLimits())
    profile = "quick" if quick else "full" if full else "default"
    console = Console(stderr=True)
    budget = PROFILES[profile]
    folder = out / (profile + ("-validation" if validation else ""))
    console.print(f"demo ({profile}): one warm start, then RL for {', '.join(budget.conditions)}"
                  f", {seeds or budget.seeds} seed(s); writing {folder}", highlight=False)

    def done(result: dict[str, Any]) -> None:
        scores = " · ".join(f"{k} {_percent(result['cells'][k])}" for k in SETTINGS)
        formed = _percent(result["well_formed"][IN_SPACE])
        minutes = sum(t or 0.0 for t in result["timings"].values()) / 60
        how = ("reused" if not result["stages_run"] else
               f"ran {', '.join(dict.fromkeys(result['stages_run']))}")
        console.print(f"  {result['condition']} seed {result['seed']}: after RL, Pass@1 "
                      f"{scores}; well-formed turns in-space {formed} ({minutes:.1f} min of "
                      f"stages; {how})", highlight=False)

    summary = run_demo(out, profile, seeds=seeds, workers=workers, on_result=done,
                       validation=validation, train_warm_start=train_warm_start)
    typer.echo(f"Pass@1 (%), {interval_words(summary)}:\n")
    typer.echo(format_table(summary))
    typer.echo("\nWell-formed turns (%): turns with a call the harness accepted "
               "(or the plan a plan-first workflow asks for):\n")
    typer.echo(format_table(summary, "well_formed"))
    typer.echo(f"\n{OUT_OF_SPACE_NOTE}")
    report = folder / "report.html"
    if not summary["all_reused"]:
        took = f"{summary['seconds'] / 60:.1f} min"
    elif summary["seconds"] is not None:
        took = f"every stage reused (they took {summary['seconds'] / 60:.1f} min when they ran)"
    else:
        took = "every stage reused"
    typer.echo(f"\n{took}; report: {report} (also report.md, results.json, *.png)")


def _percent(value: Any) -> str:
    """A value (or the mean of a cells mapping) in percent."""
    if isinstance(value, dict):
        value = sum(value.values()) / len(value) if value else None
    return "-" if value is None else f"{100 * value:.1f}%"
