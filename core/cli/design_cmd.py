"""``harnessgrid design`` and ``harnessgrid schedule``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.designs import Design
    from harnessgrid.space import FactorSpace

design_app = typer.Typer(help="Designs over the harness factor space.", no_args_is_help=True)
schedule_app = typer.Typer(help="Training schedules over a design.", no_args_is_help=True)

WITH = typer.Option([], "--with", help="Add a registered level to the space: FACTOR:LEVEL "
                    "(repeatable), e.g. observation:diffstat.")
JSON = typer.Option(False, "--json", help="Machine-readable output.")


def _space(with_levels: list[str]) -> FactorSpace:
    from harnessgrid.composition import registry_space

    return registry_space(with_levels)


def _build(kind: str, space: FactorSpace, n: int, seed: int, config: str | None,
           variant: str) -> Design:
    from harnessgrid import designs

    match kind:
        case "oa":
            return designs.orthogonal_design(space, variant=variant)  # type: ignore[arg-type]
        case "full":
            return designs.full_design(space)
        case "first-order":
            return designs.first_order_design(space)
        case "random":
            return designs.random_design(space, n, seed)
        case "single":
            if config is None:
                raise ConfigError("--kind single needs --config CODE", hint="e.g. S0-T0-O0-C0-W0")
            return designs.single_design(space.parse(config))
    raise ConfigError(f"unknown design kind {kind!r}",
                      hint="oa, full, first-order, random or single")


def _print_design(design: Design, as_json: bool, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(design.as_dicts(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title}: {len(design)} configurations")
    table.add_column("code")
    for f in design.space.factors:
        table.add_column(f.name)
    for c in design.configs:
        table.add_row(c.code, *c.levels.values())
    Console().print(table)


@design_app.command("show")
def show(kind: str = typer.Option("oa", "--kind", help="oa, full, first-order, random, single."),
         n: int = typer.Option(18, "--n", help="Runs of a random design."),
         seed: int = typer.Option(0, "--seed"),
         config: str | None = typer.Option(None, "--config", help="CODE for --kind single."),
         variant: str = typer.Option("min_aberration", "--variant",
                                     help="OA choice: min_aberration or local."),
         with_levels: list[str] = WITH, as_json: bool = JSON) -> None:
    """Print a design (JSON: a list of {factor: level} objects)."""
    design = _build(kind, _space(with_levels), n, seed, config, variant)
    _print_design(design, as_json, f"{kind} design")


@design_app.command("check")
def check(kind: str = typer.Option("oa", "--kind"), n: int = typer.Option(18, "--n"),
          seed: int = typer.Option(0, "--seed"), config: str | None = typer.Option(None, "--config"),
          variant: str = typer.Option("min_aberration", "--variant"),
          with_levels: list[str] = WITH, as_json: bool = JSON) -> None:
    """Diagnostics: strength, GWLP, pair balance, Hamming histogram, nearest neighbours."""
    design = _build(kind, _space(with_levels), n, seed, config, variant)
    diag = design.diagnostics()
    if as_json:
        typer.echo(diag.model_dump_json(indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{kind} design: {diag.n_runs} runs", show_header=False)
    rows = {"strength": diag.strength, "GWLP (A0..Ak)": diag.gwlp,
            "every level pair equally often": diag.pair_balanced,
            "Hamming distance histogram": diag.hamming_histogram,
            "nearest-neighbour distance (per run)": diag.nearest_distance,
            "nearest-neighbour ties (per run)": diag.nearest_ties,
            "mean nearest-neighbour distance": round(diag.mean_nearest_distance, 3),
            "Rao bound (strength 2 / 3)": f"{diag.rao_bound_strength2} / "
                                          f"{diag.rao_bound_strength3}"}
    for key, value in rows.items():
        table.add_row(key, str(value))
    Console().print(table)


@design_app.command("holdout")
def holdout_cmd(n: int = typer.Option(18, "--n"), seed: int = typer.Option(0, "--seed"),
                variant: str = typer.Option("min_aberration", "--variant"),
                with_levels: list[str] = WITH, as_json: bool = JSON) -> None:
    """Held-out in-space configurations: outside the OA, every level equally represented."""
    from harnessgrid import designs

    train = designs.orthogonal_design(_space(with_levels), variant=variant)  # type: ignore[arg-type]
    _print_design(designs.holdout(train, n, seed), as_json, "held-out configurations")


@schedule_app.command("preview")
def preview(steps: int = typer.Option(4, "--steps", min=1),
            k: int = typer.Option(2, "--k", min=1),
            pairing: str = typer.Option("hamming", "--pairing", help="hamming, random, repeat."),
            tasks_per_step: int = typer.Option(16, "--tasks-per-step", min=1),
            n_tasks: int = typer.Option(100, "--n-tasks", min=1, help="Synthetic task ids."),
            seed: int = typer.Option(0, "--seed"),
            variant: str = typer.Option("min_aberration", "--variant"),
            with_levels: list[str] = WITH, as_json: bool = JSON) -> None:
    """Which (task, configuration) pairs the first training steps roll out."""
    from harnessgrid import designs
    from harnessgrid.schedule import Schedule

    design = designs.orthogonal_design(_space(with_levels), variant=variant)  # type: ignore[arg-type]
    schedule = Schedule(design, [f"task-{i:05d}" for i in range(n_tasks)], k=k,
                        pairing=pairing, tasks_per_step=tasks_per_step, seed=seed)  # type: ignore[arg-type]
    items = schedule.preview(steps)
    if as_json:
        typer.echo(json.dumps([{"step": it.step, "task": it.task_id, "config": it.config.code,
                                "slot": it.slot, "anchor": it.anchor.code} for it in items]))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"schedule: k={k}, pairing={pairing}, {tasks_per_step} tasks per step")
    for col in ("step", "task", "config", "slot", "anchor", "distance"):
        table.add_column(col)
    for it in items:
        table.add_row(str(it.step), it.task_id, it.config.code, str(it.slot), it.anchor.code,
                      str(it.anchor.hamming(it.config)))
    Console().print(table)
