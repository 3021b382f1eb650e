"""``harnessgrid plugins``: what is registered and where it came from, what was skipped and
why, and a template for a new plugin package.

Factor levels are listed with the part of a harness code that names them: the paper's 15
built-in levels by position (``O2``), every plugin level by name (``O=diffstat``), the same on
every machine; named spaces (``micro``) follow, their codes written ``NAME:CODE``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from harnessgrid.plugin_system.registry import Registry

plugins_app = typer.Typer(help="Inspect registered plugins, or start a new one.",
                          no_args_is_help=True)

#: JSON/table kind of a registration → the kind the registry keys its origin by.
_ORIGIN_KIND = {"factor level": "factor level", "space": "space", "adapter": "adapter",
                "task suite": "task suite", "policy": "policy backend"}


def _short(origin: str) -> str:
    """``built-in`` for harnessgrid's own plugin modules (``--json`` gives the module)."""
    return "built-in" if origin.startswith("harnessgrid.plugins.") else origin


def _check_adapters(reg: Registry) -> None:
    """Create every adapter once (with no options, as the command line does); a broken one is
    recorded in ``reg.problems`` by the registry's check."""
    from harnessgrid.errors import HarnessgridError

    for name in list(reg.adapters):
        try:
            reg.adapter(name).create()
        except HarnessgridError:
            continue  # recorded (a third party's); a built-in's own error is not ours to hide


def _rows(reg: Registry) -> list[tuple[str, str, str, str, str]]:
    """(kind, name as a user writes it, description, plugin, origin name) per registration."""
    rows = [("factor level", f"{f}:{n}", cls.description, reg.origin[("factor level", f"{f}:{n}")],
             f"{f}:{n}") for (f, n), cls in reg.factor_levels.items()]
    rows += [("space", n, s.description, reg.origin[("space", n)], n)
             for n, s in reg.spaces.items()]
    # An adapter's version is the version of the shell it emulates: part of what it is.
    rows += [("adapter", f"adapter:{n}", f"v{a.version}: {a.description}"
              if a.version else a.description, reg.origin[("adapter", n)], n)
             for n, a in reg.adapters.items()]
    rows += [("task suite", n, s.description, reg.origin[("task suite", n)], n)
             for n, s in reg.task_suites.items()]
    rows += [("policy", f"{n}:" if n not in {"scripted", "null"} else n, p.description,
              reg.origin[("policy backend", n)], n) for n, p in reg.policies.items()]
    return rows


@plugins_app.command("list")
def list_plugins(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    check: bool = typer.Option(False, "--check", help="Also create each adapter once and check "
                               "that it is a harness; exit 1 when any plugin problem is listed."),
) -> None:
    """List plugins, the factor levels, adapters, task suites and policies they register, and
    every plugin contribution that was skipped (a plugin that failed to load, a hook that
    raised, an invalid level or adapter, a name another plugin registered first) and why."""
    import warnings

    from rich.console import Console

    from harnessgrid.cli.output import print_table
    from harnessgrid.plugin_system.registry import PluginWarning, get_registry

    with warnings.catch_warnings():  # listed below, with the rest
        warnings.simplefilter("ignore", PluginWarning)
        reg = get_registry()
    if check:
        _check_adapters(reg)
    rows = _rows(reg)

    def others(kind: str, name: str) -> list[str]:
        return reg.clashes.get((_ORIGIN_KIND[kind], name), [])[1:]

    if as_json:
        codes = _level_codes(reg)
        typer.echo(json.dumps({
            "plugins": [{"name": p.name, "source": p.source} for p in reg.plugins],
            "registrations": [{"kind": k, "name": n, "description": d, "plugin": p,
                               "also_registered_by": others(k, o),
                               "code": codes[n][2] if k == "factor level" and n in codes
                               else None,
                               "levels": _space_levels(reg, o) if k == "space" else None,
                               "version": reg.adapters[o].version if k == "adapter" else None}
                              for k, n, d, p, o in rows],
            "problems": [{"plugin": p.plugin, "error": p.error, "contribution": p.contribution,
                          "kind": p.kind, "kept": p.kept} for p in reg.problems],
            "clashes": [{"kind": kind, "name": name, "used": owners[0], "skipped": owners[1:]}
                        for (kind, name), owners in reg.clashes.items()],
            "contributions": [{"plugin": c.plugin, "hook": c.hook, "kind": c.kind,
                               "name": c.name, "registered": c.registered, "reason": c.reason}
                              for c in reg.contributions if reg.info(c.plugin).source != "builtin"],
        }, indent=2))
    else:
        _print_human(reg, rows, others, Console(), print_table)
    if check and reg.problems:
        raise typer.Exit(1)


def _level_codes(reg: Registry) -> dict[str, tuple[int, int, str]]:
    """``factor:level`` → (factor index, order, code part): a built-in level by its position in
    the paper's grid (``O2``), any other by name (``O=diffstat``), as codes write them."""
    from harnessgrid.space import DEFAULT_LEVELS, FACTOR_LETTERS, FACTORS

    out = {}
    for factor, name in reg.factor_levels:
        builtin, letter = DEFAULT_LEVELS[factor], FACTOR_LETTERS[factor]
        out[f"{factor}:{name}"] = ((FACTORS.index(factor), builtin.index(name), f"{letter}"
                                    f"{builtin.index(name)}") if name in builtin else
                                   (FACTORS.index(factor), len(builtin), f"{letter}={name}"))
    return out


def _space_levels(reg: Registry, name: str) -> dict[str, list[str]]:
    """A named space's levels per factor, in the order its codes number them."""
    return {f.name: list(f.levels) for f in reg.spaces[name].space.factors}


def _print_human(reg: Registry, rows: list[tuple[str, str, str, str, str]], others: Any,
                 console: Any, print_table: Any) -> None:
    kinds = {"factor level": "factor levels", "space": "named spaces", "adapter": "adapters",
             "task suite": "task suites", "policy": "policy backends"}
    for kind, plural in kinds.items():
        group = []
        for k, n, d, p, o in rows:
            if k == kind:
                also = others(k, o)
                owner = _short(p) + (f" (also {', '.join(also)}: skipped)" if also else "")
                group.append((n, owner, d))
        if kind == "factor level":
            _print_levels(reg, group, console, print_table)
        elif kind == "space":
            print_table(f"{plural} ({len(group)}; a code of one is written NAME:CODE, e.g. "
                        "micro:S0-T1-O2-C0-W1, numbered as the space orders its levels)",
                        ("name", "plugin", "levels (code order)", "description"),
                        [(f"{n}:", o, _ordered(reg, n), d) for n, o, d in group],
                        console=console)
        else:
            print_table(f"{plural} ({len(group)})", ("name", "plugin", "description"), group,
                        console=console)
        console.print()
    console.print(f"{len(reg.plugins)} plugins registered " + ", ".join(
        f"{sum(r[0] == k for r in rows)} {plural}" for k, plural in kinds.items()),
        highlight=False)
    if not reg.problems:
        return
    console.print()
    problems = sorted(reg.problems, key=lambda p: p.plugin)  # stable: per plugin, in order
    print_table(f"plugin problems ({len(problems)}): skipped or broken, and why",
                ("plugin", "contribution", "why"),
                [(p.plugin, p.contribution or "the whole plugin", p.error) for p in problems],
                console=console)
    # Per plugin with a problem: what of it did register, so "skipped" is never read as "all".
    broken = {(p.plugin, p.contribution) for p in problems if p.kind == "broken"}
    for plugin in dict.fromkeys(p.plugin for p in problems):
        done = [c.label + (" (broken)" if (plugin, c.label) in broken else "")
                for c in reg.contributions if c.plugin == plugin and c.registered]
        console.print(f"{plugin}: registered {', '.join(done) if done else 'nothing'}",
                      highlight=False, markup=False, soft_wrap=True)


def _print_levels(reg: Registry, group: list[tuple[str, str, str]], console: Any,
                  print_table: Any) -> None:
    """The paper's built-in levels (numbered), then every plugin level (named), each with the
    part of a harness code that names it."""
    codes = _level_codes(reg)
    group.sort(key=lambda row: (*codes.get(row[0], (99, 999, ""))[:2], row[0]))
    builtin = [(codes[n][2], n, o, d) for n, o, d in group if "=" not in codes[n][2]]
    plugin = [(codes[n][2], n, o, d) for n, o, d in group if "=" in codes[n][2]]
    print_table(f"factor levels of the paper's space ({len(builtin)}; code = its part of a "
                "harness code, e.g. S1-T0-O2-C1-W0)", ("code", "name", "plugin", "description"),
                builtin, console=console)
    console.print()
    print_table(f"plugin levels ({len(plugin)}; named in a code, e.g. S0-T0-O=NAME-C0-W0, "
                "the same on every machine)", ("code", "name", "plugin", "description"),
                plugin, console=console)


def _ordered(reg: Registry, name: str) -> str:
    """``S: a b c; T: ...``: a named space's levels in code order (S0 is the first)."""
    from harnessgrid.space import FACTOR_LETTERS

    return "; ".join(f"{FACTOR_LETTERS[f]}: {' '.join(levels)}"
                     for f, levels in _space_levels(reg, name).items())


@plugins_app.command("new")
def new_plugin(
    name: str = typer.Argument(..., help="Python package name of the plugin, e.g. my_levels."),
    directory: Path | None = typer.Option(None, "--dir", help="The package folder to create "
                                          "(default: ./NAME); it must not exist or be empty."),
    adapter: str | None = typer.Option(None, "--adapter", metavar="ADAPTER", help="Make the "
                                       "package of an adapter (an emulated shell) named "
                                       "ADAPTER instead of an observation level: "
                                       "adapter:ADAPTER with native run and write tools, tests "
                                       "running harnessgrid.testing's contract checker, typed "
                                       "for mypy --strict."),
) -> None:
    """Create a plugin package: pyproject.toml with the `harnessgrid` entry point, one
    observation level (or, with --adapter, one adapter), its tests and a README. `pip install
    -e NAME` and `pytest NAME` then work, and `harnessgrid plugins list` shows observation:NAME
    (adapter:ADAPTER)."""
    from harnessgrid.paths import require_output_dir
    from harnessgrid.plugin_system.plugin_template import write_plugin_package

    require_output_dir(directory if directory is not None else Path.cwd() / name,
                       "--dir" if directory is not None else "the plugin folder (./NAME)")
    root = write_plugin_package(name, directory, adapter=adapter)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    typer.echo(f"created {root}:")
    for f in files:
        typer.echo(f"  {f}")
    typer.echo(f"next: pip install -e '{root}[test]' && pytest {root}"
               + (f" && mypy --strict {root}/src" if adapter is not None else ""))
