"""The ``harnessgrid`` command line.

Sub-commands live in their own modules and import heavy things (numpy, torch, litellm) only
inside the command bodies, so ``harnessgrid --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from harnessgrid.errors import HarnessgridError

app = typer.Typer(
    name="harnessgrid",
    help="Harness Scaling for agentic RL: designs over harness factors, tasks, sandboxed "
    "episodes through any harness with any policy, and evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _add_subcommands() -> None:
    from harnessgrid.cli.demo_cmd import demo_command
    from harnessgrid.cli.design_cmd import design_app, schedule_app
    from harnessgrid.cli.env_cmd import env_app
    from harnessgrid.cli.eval_cmd import eval_command, report_command
    from harnessgrid.cli.harness_cmd import harness_app
    from harnessgrid.cli.model_cmd import model_app
    from harnessgrid.cli.plugins_cmd import plugins_app
    from harnessgrid.cli.run_cmd import run
    from harnessgrid.cli.tasks_cmd import tasks_app
    from harnessgrid.cli.train_cmd import train_command

    app.add_typer(design_app, name="design")
    app.add_typer(schedule_app, name="schedule")
    app.add_typer(plugins_app, name="plugins")
    app.add_typer(model_app, name="model")
    app.add_typer(harness_app, name="harness")
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(env_app, name="env")
    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.command("run")(run)
    app.command("train")(train_command)
    app.command("demo")(demo_command)


_add_subcommands()


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: object = None, line: str | None = None) -> None:
    """Warnings on the command line are one line for the user, not a source listing."""
    print(f"warning: {message}", file=sys.stderr)


def main() -> None:
    """Entry point: user mistakes print a message and a hint, never a traceback."""
    import warnings

    warnings.showwarning = _show_warning
    try:
        # Outside standalone mode click returns typer.Exit's code instead of raising it.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except HarnessgridError as exc:
        from rich.console import Console
        from rich.markup import escape

        err = Console(stderr=True, soft_wrap=True)  # never break a path across lines
        # escape: messages quote user values and hints like pip install 'harnessgrid[ray]'
        err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.hint:
            err.print(f"[yellow]hint:[/] {escape(exc.hint)}", highlight=False)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        if isinstance(exc, _click_exceptions()):
            usage: Any = exc  # a ClickException of whichever click is in use
            usage.show()  # "Usage: ... Error: No such option: --bogus" (the help, bare)
            sys.exit(usage.exit_code)
        raise


def _click_exceptions() -> tuple[type[Exception], ...]:
    """The ClickException classes in use: typer >= 0.25 bundles its own click
    (``typer._click``), whose exceptions are not the ``click`` package's; older typer uses the
    package. Either may be absent."""
    import importlib

    found: list[type[Exception]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(module).ClickException)
        except (ImportError, AttributeError):
            continue
    return tuple(found)
