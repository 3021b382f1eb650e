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


def _reflow_help(typer_app: typer.Typer) -> None:
    """Docstrings are wrapped at the source's width, and typer's help keeps those line breaks
    and wraps again at the terminal's, which breaks sentences mid-line at 80 columns. Every
    paragraph of each command's and group's help becomes one line, which the terminal wraps
    (a paragraph starting with ``\\b`` keeps its lines, as click has it)."""
    import inspect

    for command in typer_app.registered_commands:
        text = command.help or (inspect.getdoc(command.callback) if command.callback else None)
        if text:
            command.help = _joined_paragraphs(text)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            info = group.typer_instance.info
            if isinstance(info.help, str):
                info.help = _joined_paragraphs(info.help)
            _reflow_help(group.typer_instance)


def _joined_paragraphs(text: str) -> str:
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n"))
                       for p in text.split("\n\n"))


_reflow_help(app)


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
        _print_error(exc.message, exc.hint)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        if isinstance(exc, _click_exceptions()):
            _show_usage_error(exc)
            sys.exit(getattr(exc, "exit_code", 2))
        raise


def _print_error(message: str, hint: str | None, usage: str | None = None) -> None:
    """``error: MESSAGE`` and ``hint: HINT`` on stderr (after the command's usage line, for a
    usage mistake): how every mistake is reported."""
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, soft_wrap=True)  # never break a path across lines
    if usage:
        err.print(escape(usage), highlight=False)
    # escape: messages quote user values and hints like pip install 'harnessgrid[ray]'
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if hint:
        err.print(f"[yellow]hint:[/] {escape(hint)}", highlight=False)


def _show_usage_error(exc: Exception) -> None:
    """A click usage error (unknown option, missing argument, bad value) in the same words as
    the others; a bare command (click's NoArgsIsHelpError) shows its help."""
    usage: Any = exc  # a ClickException of whichever click is in use
    if type(usage).__name__ == "NoArgsIsHelpError":
        usage.show()
        return
    ctx = getattr(usage, "ctx", None)
    hint = None
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        hint = f"see {ctx.command_path} {ctx.help_option_names[0]}"
    _print_error(usage.format_message(), hint, ctx.get_usage() if ctx is not None else None)


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
