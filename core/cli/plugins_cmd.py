"""``harnessgrid plugins``: what is registered and where it came from."""

from __future__ import annotations

import json

import typer

plugins_app = typer.Typer(help="Inspect registered plugins.", no_args_is_help=True)


def _short(origin: str) -> str:
    """``built-in`` for harnessgrid's own plugin modules (``--json`` gives the module)."""
    return "built-in" if origin.startswith("harnessgrid.plugins.") else origin


@plugins_app.command("list")
def list_plugins(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")
                 ) -> None:
    """List plugins, the factor levels, adapters, task suites and policies they register, and
    any third-party plugin that was skipped because it is broken."""
    from rich.console import Console

    from harnessgrid.cli.output import print_table
    from harnessgrid.registry import get_registry

    reg = get_registry()
    rows = [("factor level", f"{f}:{n}", cls.description, reg.origin[("factor level", f"{f}:{n}")])
            for (f, n), cls in reg.factor_levels.items()]
    rows += [("adapter", f"adapter:{n}", a.description, reg.origin[("adapter", n)])
             for n, a in reg.adapters.items()]
    rows += [("task suite", n, s.description, reg.origin[("task suite", n)])
             for n, s in reg.task_suites.items()]
    rows += [("policy", f"{n}:" if n not in {"scripted", "null"} else n, p.description,
              reg.origin[("policy backend", n)]) for n, p in reg.policies.items()]
    if as_json:
        typer.echo(json.dumps({
            "plugins": [{"name": p.name, "source": p.source} for p in reg.plugins],
            "registrations": [{"kind": k, "name": n, "description": d, "plugin": p}
                              for k, n, d, p in rows],
            "problems": [{"plugin": p.plugin, "error": p.error} for p in reg.problems],
        }, indent=2))
        return
    console = Console()
    kinds = {"factor level": "factor levels", "adapter": "adapters",
             "task suite": "task suites", "policy": "policy backends"}
    for kind, plural in kinds.items():
        group = [(n, _short(p), d) for k, n, d, p in rows if k == kind]
        print_table(f"{plural} ({len(group)})", ("name", "plugin", "description"), group,
                    console=console)
        console.print()
    console.print(f"{len(reg.plugins)} plugins registered " + ", ".join(
        f"{sum(r[0] == k for r in rows)} {plural}" for k, plural in kinds.items()),
        highlight=False)
    for problem in reg.problems:
        console.print(f"[red]skipped broken plugin[/] {problem.plugin}: {problem.error}",
                      highlight=False)
