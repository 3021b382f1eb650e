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
Quick = Annotated[bool, typer.Option("--quick", help="A first look in about 3 minutes "
                                     "(pipeline check; numbers are not meaningful).")]
Full = Annotated[bool, typer.Option("--full", help="All five conditions, 3 seeds.")]
Seeds = Annotated[int | None, typer.Option("--seeds", min=1, help="Seeds per condition "
                                           "(default: quick 1, default 1, full 3).")]
Workers = Annotated[int | None, typer.Option("--workers", min=1, help="Runs in parallel "
                                             "(default: one per CPU).")]


def demo_command(out: Out = Path("runs/demo"), quick: Quick = False, full: Full = False,
                 seeds: Seeds = None, workers: Workers = None) -> None:
    """Train a micro model through one harness and through the 18-run orthogonal array, then
    evaluate both on held-out harnesses: the paper's result, on CPU."""
    from rich.console import Console

    from harnessgrid.paths import require_output_dir
    from harnessgrid.trainer.run import require_training_extras

    if quick and full:
        raise ConfigError("--quick and --full exclude each other", hint="choose one")
    require_output_dir(out, "--out")  # before any import or line that implies it will work
    require_training_extras()
    from harnessgrid.engine.runtime import EpisodeLimits, require_sandbox
    from harnessgrid.trainer.demo import (
        NOT_MEASURABLE,
        OUT_OF_SPACE_NOTE,
        PROFILES,
        format_table,
        run_demo,
        spread_words,
    )

    require_sandbox(EpisodeLimits())
    profile = "quick" if quick else "full" if full else "default"
    console = Console(stderr=True)
    budget = PROFILES[profile]
    console.print(f"demo ({profile}): conditions {', '.join(budget.conditions)}, "
                  f"{seeds or budget.seeds} seed(s); writing {out / profile}", highlight=False)

    def done(result: dict[str, Any]) -> None:
        scores = " · ".join(f"{k} {NOT_MEASURABLE if k == 'out-of-space' else _percent(v)}"
                            for k, v in result["scores"].items())
        formed = _percent(result["well_formed"]["in-space"])
        minutes = sum(t or 0.0 for t in result["timings"].values()) / 60
        how = ("reused" if not result["stages_run"] else
               f"ran {', '.join(result['stages_run'])}")
        console.print(f"  {result['condition']} seed {result['seed']}: Pass@1 {scores}; "
                      f"well-formed turns in-space {formed} ({minutes:.1f} min of stages; "
                      f"{how})", highlight=False)

    summary = run_demo(out, profile, seeds=seeds, workers=workers, on_result=done)
    typer.echo(f"Pass@1 (%), {spread_words(summary)}:\n")
    typer.echo(format_table(summary))
    typer.echo("\nWell-formed turns (%): turns with a call the harness accepted "
               "(or the plan a plan-first workflow asks for):\n")
    typer.echo(format_table(summary, "table_well_formed"))
    typer.echo(f"\n{OUT_OF_SPACE_NOTE}")
    report = out / profile / "report.html"
    if not summary["all_reused"]:
        took = f"{summary['seconds'] / 60:.1f} min"
    elif summary["seconds"] is not None:
        took = f"every stage reused (they took {summary['seconds'] / 60:.1f} min when they ran)"
    else:
        took = "every stage reused"
    typer.echo(f"\n{took}; report: {report} (also report.md, results.json, *.png)")


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
