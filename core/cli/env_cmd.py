"""``harnessgrid env``: build, list, show and remove sandbox environments (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

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
          ) -> None:
    """Build a Python venv (uv if installed, else pip) outside the sandbox. Content-addressed:
    the same requirements on the same Python and platform are built once."""
    from harnessgrid.environments import build_venv, read_requirements

    text = read_requirements(requirements, name)
    log = None if quiet else (lambda msg: typer.echo(msg, err=True))
    record = build_venv(name, text, force=force, log=log)
    typer.echo(record.path if quiet else f"{record.name}: venv {record.digest} at {record.path}")


@env_app.command("add")
def add(name: str = typer.Argument(..., help="Environment name."),
        rootfs: Path = typer.Option(..., "--rootfs", help="Root file system directory (e.g. an "
                                    "exported OCI image); its /usr, /bin, /lib* and /etc "
                                    "replace the host's in the sandbox.")) -> None:
    """Name an existing root file system as an environment (used in place, not copied)."""
    from harnessgrid.environments import add_rootfs

    record = add_rootfs(name, rootfs)
    typer.echo(f"{record.name}: rootfs {record.digest} at {record.path}")


@env_app.command("list")
def list_(as_json: bool = AS_JSON) -> None:
    """The named environments and where they live."""
    from harnessgrid.environments import env_root, is_built, list_environments

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
    from harnessgrid.environments import get_environment

    record = get_environment(name)
    if as_json:
        typer.echo(json.dumps(record.model_dump(mode="json"), indent=2))
        return
    for key, value in record.model_dump().items():
        if key != "requirements":
            typer.echo(f"{key}: {value}")
    if record.kind == "venv":
        typer.echo("requirements:" + ("".join(f"\n  {line}" for line in
                                              record.requirements.splitlines()) or " (none)"))


@env_app.command("remove")
def remove(name: str = typer.Argument(..., help="Environment name.")) -> None:
    """Forget an environment; its venv is deleted unless another name uses it."""
    from harnessgrid.environments import remove_environment

    record = remove_environment(name)
    typer.echo(f"removed {record.name} ({record.kind} {record.digest})")
