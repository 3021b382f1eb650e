"""``harnessgrid env``: build, list, show, remove and check sandbox environments (issue 14);
``check`` (and ``build --check``) says what a suite's tasks call that an environment lacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from harnessgrid.sandboxing.env_needs import Gap
    from harnessgrid.sandboxing.environments import EnvironmentRecord

env_app = typer.Typer(help="Sandbox environments: read-only toolchains (a Python venv or a "
                           "rootfs) mounted into every sandbox of an episode.",
                      no_args_is_help=True)

AS_JSON = typer.Option(False, "--json", help="Machine-readable output.")


@env_app.command("build")
def build(name: str = typer.Argument(..., help="Environment name (e.g. clawgym)."),
          requirements: str | None = typer.Option(
              None, "--requirements", "-r", help="requirements.txt to install; without it, the "
              "built-in list called NAME (clawgym); `-r ''` for a bare venv."),
          force: bool = typer.Option(False, "--force", help="Rebuild even if already built."),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the path."),
          check: list[str] = typer.Option([], "--check", help="A suite (e.g. clawgym:PATH) "
                                           "whose tasks to check against the built "
                                           "environment, as `env check SUITE --env NAME`; "
                                           "repeatable."),
          ) -> None:
    """Build a Python venv (uv if installed, else pip) outside the sandbox. Content-addressed:
    the same requirements on the same Python and platform are built once. A built-in list's
    programs that no venv can hold (ClawGym's ruby) are named when the host lacks them. With
    --check, exit status 1 when a suite's tasks call something it lacks (it is built anyway)."""
    from harnessgrid.sandboxing.environments import (
        build_venv,
        builtin_system_tools,
        read_requirements,
    )

    text = read_requirements(requirements, name)
    log = None if quiet else (lambda msg: typer.echo(msg, err=True))
    record = build_venv(name, text, force=force, log=log,
                        system_tools=builtin_system_tools(requirements, name))
    typer.echo(record.path if quiet else f"{record.name}: venv {record.digest} at {record.path}")
    _say_missing_system_tools(record)
    gaps = [gap for suite in check for gap in _check_suite(suite, name, [])]
    _print_gaps(gaps, as_json=False)
    if any(not gap.ok for gap in gaps):
        raise typer.Exit(1)


@env_app.command("check")
def check_(suite: str = typer.Argument(..., help="A suite address: clawgym:PATH, "
                                       "pinchbench:PATH, ..."),
           env: str | None = typer.Option(None, "--env", help="Check against this "
                                          "environment instead of each task's own; `none` "
                                          "for the bare sandbox."),
           option: list[str] = typer.Option([], "--option", "-o", help="KEY=VALUE for the "
                                            "suite loader, e.g. assets=DIR."),
           as_json: bool = AS_JSON) -> None:
    """What the suite's tasks call that their environment lacks: the Python modules their
    graders, workspace scripts and instructions import (and the readers of their files, e.g.
    openpyxl for .xlsx) that the environment's python cannot import, and the programs they
    run that its PATH lacks, checked in a sandbox with the environment mounted. Exit status 1
    when anything is missing (or an environment the tasks declare is not built)."""
    gaps = _check_suite(suite, env, option)
    _print_gaps(gaps, as_json)
    if any(not gap.ok for gap in gaps):
        raise typer.Exit(1)


def _check_suite(suite: str, env: str | None, option: list[str]) -> list[Gap]:
    from harnessgrid.cli.tasks_cmd import open_suite
    from harnessgrid.sandboxing.env_needs import check_tasks

    if env is not None and env.lower() != "none":
        from harnessgrid.sandboxing.environments import get_environment

        get_environment(env)  # a missing one is a usage error, named with its build command
    return check_tasks(open_suite(suite, option).tasks(), env)


def _print_gaps(gaps: list[Gap], as_json: bool) -> None:
    from harnessgrid.sandboxing.env_needs import as_json as gaps_json
    from harnessgrid.sandboxing.env_needs import render

    if as_json:
        typer.echo(gaps_json(gaps))
        return
    for line in render(gaps):
        typer.echo(line)


def _say_missing_system_tools(record: EnvironmentRecord) -> None:
    """On stderr, even with --quiet: the environment is built, but the tasks that call these
    programs cannot run until the host (or a rootfs) provides them."""
    from harnessgrid.sandboxing.environments import missing_system_tools, system_tool_hint

    for tool in missing_system_tools(record):
        typer.echo(f"warning: {record.name}'s tasks call {tool}, which a venv cannot carry "
                   f"(it is no Python package) and this host lacks: {system_tool_hint(tool)}",
                   err=True)


@env_app.command("add")
def add(name: str = typer.Argument(..., help="Environment name."),
        rootfs: Path = typer.Option(..., "--rootfs", help="Root file system directory (e.g. an "
                                    "exported OCI image); its /usr, /bin, /lib* and /etc "
                                    "replace the host's in the sandbox.")) -> None:
    """Name an existing root file system as an environment (used in place, not copied)."""
    from harnessgrid.sandboxing.environments import add_rootfs

    record = add_rootfs(name, rootfs)
    typer.echo(f"{record.name}: rootfs {record.digest} at {record.path}")


@env_app.command("list")
def list_(as_json: bool = AS_JSON) -> None:
    """The named environments and where they live."""
    from harnessgrid.sandboxing.environments import env_root, is_built, list_environments

    records = list_environments()
    if as_json:
        typer.echo(json.dumps([{**r.model_dump(mode="json"), "usable": is_built(r.name)}
                               for r in records], indent=2))
        return
    if not records:
        typer.echo(f"no environments in {env_root()}; build one with `harnessgrid env build "
                   "clawgym` or `harnessgrid env build NAME -r requirements.txt`")
        return
    for r in records:
        state = "" if is_built(r.name) else "  (files missing: build it again)"
        typer.echo(f"{r.name:<16} {r.kind:<6} {r.digest}  {r.path}{state}")


@env_app.command("show")
def show(name: str = typer.Argument(..., help="Environment name."),
         as_json: bool = AS_JSON) -> None:
    """What an environment is, what it was built from, and whether it is usable."""
    from harnessgrid.sandboxing.environments import get_environment, missing_system_tools

    record = get_environment(name)
    if as_json:
        typer.echo(json.dumps(record.model_dump(mode="json"), indent=2))
        return
    for key, value in record.model_dump().items():
        if key not in ("requirements", "system_tools"):
            typer.echo(f"{key}: {value}")
    if record.kind == "venv":
        typer.echo("requirements:" + ("".join(f"\n  {line}" for line in
                                              record.requirements.splitlines()) or " (none)"))
    missing = set(missing_system_tools(record))
    typer.echo("system tools:" + ("".join(
        f"\n  {tool} ({'missing on this host' if tool in missing else 'found'})"
        for tool in record.system_tools) or " (none declared)"))


@env_app.command("remove")
def remove(name: str = typer.Argument(..., help="Environment name.")) -> None:
    """Forget an environment; its venv is deleted unless another name uses it."""
    from harnessgrid.sandboxing.environments import remove_environment

    record = remove_environment(name)
    typer.echo(f"removed {record.name} ({record.kind} {record.digest})")
