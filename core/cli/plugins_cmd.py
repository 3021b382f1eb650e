"""``harnessgrid plugins``: what is registered and where it came from, what was skipped and
why, and a template for a new plugin package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from harnessgrid.registry import Registry

plugins_app = typer.Typer(help="Inspect registered plugins, or start a new one.",
                          no_args_is_help=True)

#: JSON/table kind of a registration → the kind the registry keys its origin by.
_ORIGIN_KIND = {"factor level": "factor level", "adapter": "adapter", "task suite": "task suite",
                "policy": "policy backend"}


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
    from harnessgrid.registry import PluginWarning, get_registry

    with warnings.catch_warnings():  # listed below, with the rest
        warnings.simplefilter("ignore", PluginWarning)
        reg = get_registry()
    if check:
        _check_adapters(reg)
    rows = _rows(reg)

    def others(kind: str, name: str) -> list[str]:
        return reg.clashes.get((_ORIGIN_KIND[kind], name), [])[1:]

    if as_json:
        codes = _level_codes()
        typer.echo(json.dumps({
            "plugins": [{"name": p.name, "source": p.source} for p in reg.plugins],
            "registrations": [{"kind": k, "name": n, "description": d, "plugin": p,
                               "also_registered_by": others(k, o),
                               "code": codes[n][2] if k == "factor level" and n in codes
                               else None,
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


def _level_codes() -> dict[str, tuple[int, int, str]]:
    """``factor:level`` → (factor index, level index, ``O3``): the numbering harness codes use
    (built-in levels first, then the others by name; see :func:`harnessgrid.harness_space`)."""
    from harnessgrid.composition import harness_space

    try:
        space = harness_space()
    except Exception:  # noqa: BLE001 - a listing must not fail over its extra column
        return {}
    return {f"{f.name}:{level}": (i, j, f"{f.letter}{j}")
            for i, f in enumerate(space.factors) for j, level in enumerate(f.levels)}


def _print_human(reg: Registry, rows: list[tuple[str, str, str, str, str]], others: Any,
                 console: Any, print_table: Any) -> None:
    kinds = {"factor level": "factor levels", "adapter": "adapters",
             "task suite": "task suites", "policy": "policy backends"}
    codes = _level_codes()
    for kind, plural in kinds.items():
        group = []
        for k, n, d, p, o in rows:
            if k == kind:
                also = others(k, o)
                owner = _short(p) + (f" (also {', '.join(also)}: skipped)" if also else "")
                group.append((n, owner, d))
        if kind == "factor level":  # with the code part that names the level in a harness code
            group.sort(key=lambda row: codes.get(row[0], (99, 999, ""))[:2])
            print_table(f"{plural} ({len(group)}; code = its part of a harness code)",
                        ("code", "name", "plugin", "description"),
                        [(codes.get(n, (0, 0, "?"))[2], n, o, d) for n, o, d in group],
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


@plugins_app.command("new")
def new_plugin(
    name: str = typer.Argument(..., help="Python package name of the plugin, e.g. my_levels."),
    directory: Path | None = typer.Option(None, "--dir", help="The package folder to create "
                                          "(default: ./NAME); it must not exist or be empty."),
) -> None:
    """Create a plugin package: pyproject.toml with the `harnessgrid` entry point, one
    observation level, a test of it and a README. `pip install -e NAME` and `pytest NAME`
    then work, and `harnessgrid plugins list` shows observation:NAME."""
    from harnessgrid.paths import require_output_dir
    from harnessgrid.plugin_template import write_plugin_package

    require_output_dir(directory if directory is not None else Path.cwd() / name,
                       "--dir" if directory is not None else "the plugin folder (./NAME)")
    root = write_plugin_package(name, directory)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    typer.echo(f"created {root}:")
    for f in files:
        typer.echo(f"  {f}")
    typer.echo(f"next: pip install -e {root} && pytest {root}")
