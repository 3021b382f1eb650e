"""``harnessgrid design …`` and ``harnessgrid schedule …``: look at designs before training.

Module import stays light (typer only); numpy, OApackage and rich load inside the commands, so
``harnessgrid --help`` is fast. Bad input raises :class:`ConfigError`, which the main CLI prints
as a message and a hint.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from harnessgrid.designs import Design, Variant
    from harnessgrid.designs.schedule import Pairing
    from harnessgrid.space import FactorSpace, HarnessConfig

design_app = typer.Typer(help="Designs over the harness factor space: show, check, hold out.",
                         no_args_is_help=True)
schedule_app = typer.Typer(help="Training schedules: which (task, harness) pairs each step "
                                "rolls out.", no_args_is_help=True)

KINDS = ("oa", "nearly-orthogonal", "full", "first-order", "random", "single")

With = Annotated[list[str] | None, typer.Option(
    "--with", metavar="FACTOR:LEVEL",
    help="Add a registered level to the default space (repeatable), e.g. observation:diffstat.")]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Kind = Annotated[str, typer.Option("--kind", help=f"Design: {', '.join(KINDS)} (oa: the "
                                   "smallest strength-2 orthogonal array, exact but possibly "
                                   "large; nearly-orthogonal: --runs N runs, levels balanced, "
                                   "pair imbalance minimised).")]
Runs = Annotated[int | None, typer.Option("--runs", metavar="N",
                                          help="Runs of --kind nearly-orthogonal.")]
VariantOpt = Annotated[str, typer.Option(
    "--variant", help="OA choice: min_aberration (the paper's) or local (nearer neighbours).")]
Config = Annotated[str | None, typer.Option("--config", metavar="CODE",
                                            help="The configuration of --kind single: a code "
                                                 "(a plugin level by name, O=NAME; see "
                                                 "`harnessgrid plugins list`) or a level list.")]


def _space_from_options(with_levels: list[str] | None) -> FactorSpace:
    """The default 3^5 space plus each ``FACTOR:LEVEL`` of ``--with``, added levels after the
    built-ins in the registry's order (sorted by name), whatever order they are given in.

    When the plugin registry is available, every added name must be a registered level of its
    factor, so a typo fails here rather than when the harness is composed."""
    from harnessgrid.space import FACTORS, FactorSpace

    space = FactorSpace.default()
    registered = _registered_levels() if with_levels else None
    for spec in with_levels or []:
        factor, sep, level = spec.partition(":")
        if not sep or not factor or not level:
            raise ConfigError(f"bad --with value {spec!r}",
                              hint="write FACTOR:LEVEL, e.g. --with observation:diffstat")
        if factor not in FACTORS:
            raise ConfigError(f"unknown factor {factor!r} in --with {spec}",
                              hint=f"factors are {', '.join(FACTORS)}")
        if registered is not None and level not in registered.get(factor, set()):
            known = ", ".join(sorted(registered.get(factor, set()))) or "none"
            raise ConfigError(f"no plugin provides level {level!r} of factor {factor!r}",
                              hint=f"registered {factor} levels: {known}; install the plugin "
                                   "that provides it (see `harnessgrid plugins list`)")
        if registered is None and level not in space.factor(factor).levels:
            space = space.extend(factor, level)
    if registered is not None:
        from harnessgrid.plugin_system.composition import registry_space

        space = registry_space(with_levels or [])
    return space


def _registered_levels() -> dict[str, set[str]] | None:
    """``{factor: level names}`` from the plugin registry, or ``None`` when there is none."""
    try:
        from harnessgrid.plugin_system.registry import get_registry
    except ImportError:
        return None
    table: Any = getattr(get_registry(), "factor_levels", None)
    if table is None:
        return None
    out: dict[str, set[str]] = {}
    for key, value in dict(table).items():
        if isinstance(key, tuple):  # {(factor, name): level class}
            out.setdefault(key[0], set()).add(key[1])
        else:  # {factor: names or level classes}
            out.setdefault(key, set()).update(getattr(v, "name", v) for v in value)
    return out


def _config(space: FactorSpace, spec: str) -> HarnessConfig:
    """``--config``: a code (read where every command reads codes) or a level list, as a
    configuration of the design's space."""
    try:
        from harnessgrid.plugin_system.composition import config_in, resolve_config
    except ImportError:  # no registry: codes of the design's own space
        return space.parse(spec)
    return config_in(resolve_config(spec), space)


def _codes(space: FactorSpace) -> Callable[[HarnessConfig], str]:
    """How configurations of ``space`` are printed: as the harness address `--harness`, `eval
    --harnesses` and `harness show` read on every machine (a space over the paper's levels
    prints its own stable codes, ``S0-T0-O=diffstat-C0-W0``; a plugin's named space
    ``NAME:CODE``)."""
    if space.extends_paper:
        return lambda c: c.code
    try:
        from harnessgrid.plugin_system.composition import harness_address
    except ImportError:
        return lambda c: c.code
    return harness_address


def _build_design(space: FactorSpace, kind: str, n: int, seed: int, config: str | None,
                  variant: str, runs: int | None = None) -> Design:
    from harnessgrid import designs

    if variant not in ("min_aberration", "local"):
        raise ConfigError(f"unknown --variant {variant!r}", hint="min_aberration or local")
    if runs is not None and kind != "nearly-orthogonal":
        raise ConfigError(f"--runs {runs} sets the size of --kind nearly-orthogonal, not of "
                          f"--kind {kind}", hint="add --kind nearly-orthogonal, or drop --runs")
    match kind:
        case "oa":
            return designs.orthogonal_design(space, variant=cast("Variant", variant))
        case "nearly-orthogonal":
            if runs is None:
                balanced = designs.balancing_runs(space.sizes, max(space.sizes))
                raise ConfigError("--kind nearly-orthogonal needs --runs N",
                                  hint=f"e.g. --runs 18; multiples of {balanced} balance every "
                                       "factor's levels; --kind oa gives the exact array")
            return designs.nearly_orthogonal_design(space, runs, seed)
        case "full":
            return designs.full_design(space)
        case "first-order":
            return designs.first_order_design(space)
        case "random":
            return designs.random_design(space, n, seed)
        case "single":
            if config is None:
                raise ConfigError("--kind single needs --config CODE",
                                  hint="e.g. --kind single --config S1-T0-O2-C1-W0")
            return designs.single_design(_config(space, config))
    raise ConfigError(f"unknown design --kind {kind!r}", hint=f"use one of {', '.join(KINDS)}")


def _balance_note(design: Design) -> str | None:
    """What a design whose run count cannot balance every factor's levels should say."""
    from harnessgrid.designs import balancing_runs

    uneven = [f for f in design.space.factors if len(design) % len(f.levels)]
    if not uneven:
        return None
    which = ", ".join(f"{f.name} ({len(f.levels)} levels)" for f in uneven)
    return (f"{len(design)} runs cannot hold every level of {which} equally often: their "
            "level counts differ by one; "
            f"{balancing_runs(design.space.sizes, len(design))} runs balance every factor")


def _print_design(design: Design, as_json: bool, title: str) -> None:
    note = _balance_note(design) if design.kind == "nearly_orthogonal" else None
    if note:
        typer.echo(f"note: {note}", err=True)
    if as_json:
        typer.echo(json.dumps(design.as_dicts(), indent=2))
        return
    from harnessgrid.cli.output import print_table

    code = _codes(design.space)
    print_table(f"{title}: {len(design)} configurations",
                [("#", "right"), "code", *(f.name for f in design.space.factors)],
                [(i, code(c), *c.levels.values()) for i, c in enumerate(design.configs)])


@design_app.command("show")
def show(kind: Kind = "oa",
         n: Annotated[int, typer.Option("--n", help="Runs of --kind random.")] = 18,
         runs: Runs = None,
         seed: Annotated[int, typer.Option("--seed", help="Seed of --kind random and "
                                                         "nearly-orthogonal.")] = 0,
         config: Config = None, variant: VariantOpt = "min_aberration",
         with_levels: With = None, as_json: Json = False) -> None:
    """Print a design: a table of codes and level names (JSON: a list of {factor: level})."""
    design = _build_design(_space_from_options(with_levels), kind, n, seed, config, variant,
                           runs)
    _print_design(design, as_json, f"{kind} design")


@design_app.command("check")
def check(kind: Kind = "oa", n: Annotated[int, typer.Option("--n")] = 18,
          runs: Runs = None, seed: Annotated[int, typer.Option("--seed")] = 0,
          config: Config = None, variant: VariantOpt = "min_aberration",
          with_levels: With = None, as_json: Json = False) -> None:
    """Diagnostics: strength, GWLP, level balance, pair balance and how far it is from
    orthogonal (|count − expected| per level pair, χ², Cramér's V), Hamming distances,
    nearest neighbours."""
    design = _build_design(_space_from_options(with_levels), kind, n, seed, config, variant,
                           runs)
    diag = design.diagnostics()
    if as_json:
        typer.echo(diag.model_dump_json(indent=2))
        return
    from harnessgrid.cli.output import print_table

    mean_nn = diag.mean_nearest_distance
    imb = diag.pair_imbalance
    note = _balance_note(design)
    print_table(f"{kind} design: {diag.n_runs} runs", ("measure", "value"), [
        ("strength", diag.strength),
        (f"GWLP A0..A{len(diag.gwlp) - 1}", ", ".join(f"{a:g}" for a in diag.gwlp)),
        ("every level equally often", diag.levels_balanced),
        ("every level pair equally often", diag.pair_balanced),
        ("pair imbalance: max / mean |count - expected|",
         f"{imb.max_abs_deviation:.3g} / {imb.mean_abs_deviation:.3g}"),
        ("pair imbalance: sum of (count - expected)^2", f"{imb.sum_squared_deviation:.4g}"),
        ("chi-square over factor pairs", f"{imb.chi_square:.4g}"),
        ("Cramer's V, mean / max over pairs (0 = orthogonal)",
         f"{imb.mean_cramers_v:.3f} / {imb.max_cramers_v:.3f}"),
        ("mean nearest-neighbour distance", "-" if mean_nn is None else f"{mean_nn:.3f}"),
        ("Rao bound, strength 2 / 3", f"{diag.rao_bound_strength2} / {diag.rao_bound_strength3}"),
    ], header=False)
    if note:
        typer.echo(f"note: {note}")
    print_table("level counts per factor", ("factor", "counts (per level)", "balanced"),
                [(lv.factor, " ".join(map(str, lv.counts)),
                  "yes" if lv.balanced else ("within one" if lv.even else "no"))
                 for lv in diag.level_balance])
    print_table("Hamming distance between runs", [("distance", "right"), ("run pairs", "right")],
                list(enumerate(diag.hamming_histogram)))
    print_table("level-pair counts per factor pair",
                ("factors", "counts (rows: first factor's levels)", "balanced",
                 ("max |dev|", "right"), ("Cramer's V", "right")),
                [(" × ".join(p.factors), " / ".join(" ".join(map(str, r)) for r in p.counts),
                  "yes" if p.balanced else "no", f"{p.max_abs_deviation:.3g}",
                  f"{p.cramers_v:.3f}") for p in diag.pair_balance])
    code = _codes(design.space)
    print_table("nearest neighbours", ["code", ("distance", "right"), ("ties", "right")],
                [(code(c), "-" if nearest is None else nearest, ties) for c, nearest, ties
                 in zip(design.configs, diag.nearest_distance, diag.nearest_ties, strict=True)])


@design_app.command("holdout")
def holdout_cmd(n: Annotated[int, typer.Option("--n", help="Held-out configurations.")] = 18,
                seed: Annotated[int, typer.Option("--seed", help="Held-out set seed.")] = 0,
                kind: Kind = "oa",
                design_n: Annotated[int, typer.Option("--design-n",
                                                      help="Runs of a random design.")] = 18,
                design_seed: Annotated[int, typer.Option("--design-seed")] = 0,
                runs: Runs = None,
                config: Config = None, variant: VariantOpt = "min_aberration",
                with_levels: With = None, as_json: Json = False) -> None:
    """Held-out in-space configurations: outside the training design, levels balanced."""
    from harnessgrid.designs import holdout

    space = _space_from_options(with_levels)
    train = _build_design(space, kind, design_n, design_seed, config, variant, runs)
    _print_design(holdout(train, n, seed), as_json, f"held out from the {kind} design")


@schedule_app.command("preview")
def preview(steps: Annotated[int, typer.Option("--steps", help="Steps to show.")] = 4,
            k: Annotated[int, typer.Option("--k", help="Configurations per task.")] = 2,
            pairing: Annotated[str, typer.Option("--pairing",
                                                 help="hamming, random or repeat.")] = "hamming",
            tasks_per_step: Annotated[int, typer.Option("--tasks-per-step")] = 16,
            n_tasks: Annotated[int, typer.Option("--n-tasks",
                                                 help="Number of synthetic task ids.")] = 100,
            seed: Annotated[int, typer.Option("--seed", help="Schedule seed.")] = 0,
            kind: Kind = "oa",
            design_n: Annotated[int, typer.Option("--design-n")] = 18,
            design_seed: Annotated[int, typer.Option("--design-seed")] = 0,
            runs: Runs = None,
            config: Config = None, variant: VariantOpt = "min_aberration",
            with_levels: With = None, as_json: Json = False) -> None:
    """The (task, configuration) pairs of the first training steps."""
    from harnessgrid.designs.schedule import Schedule
    from harnessgrid.space import FactorSpace

    if steps < 1 or n_tasks < 1:
        raise ConfigError(f"--steps {steps} and --n-tasks {n_tasks} must be at least 1",
                          hint="e.g. --steps 4 --n-tasks 100")
    design = _build_design(_space_from_options(with_levels), kind, design_n, design_seed,
                           config, variant, runs)
    schedule = Schedule(design, [f"task-{i:05d}" for i in range(n_tasks)], k=k,
                        pairing=cast("Pairing", pairing), tasks_per_step=tasks_per_step,
                        seed=seed)
    rows = schedule.preview(steps)
    if design.space != FactorSpace.default():  # print codes as every command reads them
        code = _codes(design.space)
        for row in rows:
            for key in ("config", "anchor"):
                row[key] = code(design.space.parse(str(row[key])))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from harnessgrid.cli.output import print_table

    print_table(f"schedule: k={k}, pairing={pairing}, {tasks_per_step} tasks per step, "
                f"{len(design)}-run {kind} design", list(rows[0]),
                [list(row.values()) for row in rows])
