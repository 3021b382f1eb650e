"""``harnessgrid model``: build the tiny offline model used by tests, CI and the demo."""

from __future__ import annotations

from pathlib import Path

import typer

model_app = typer.Typer(help="Models for tests and demos.", no_args_is_help=True)


@model_app.command("tiny")
def tiny(out_dir: Path = typer.Argument(..., help="Where to write the model and tokenizer."),
         size: str = typer.Option("tiny", "--size", help="tiny, small or micro (micro: "
                                  "the demo's model, its tokenizer trained on the micro "
                                  "plugin's harness and task texts)."),
         seed: int = typer.Option(0, "--seed")) -> None:
    """Build a small Qwen3-style model and a tokenizer trained on the spot (no downloads);
    use it anywhere as ``hf:OUT_DIR``."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.paths import require_output_dir
    from harnessgrid.tiny_model import SIZES, build_tiny_model

    if size not in SIZES:
        raise ConfigError(f"unknown tiny-model size {size!r}", hint=f"sizes: {', '.join(SIZES)}")
    require_output_dir(out_dir, "OUT_DIR")
    from rich.console import Console

    # On stderr, so that stdout stays the one line a script reads.
    with Console(stderr=True).status(f"building the {size} model") as status:
        def step(what: str) -> None:
            status.update(f"building the {size} model: {what}")

        if size == "micro":
            from harnessgrid.plugins.micro import build_micro_model

            path = build_micro_model(out_dir, seed=seed, on_step=step)
        else:
            path = build_tiny_model(out_dir, size=size, seed=seed, on_step=step)
    typer.echo(f"built {size} model in {path}; use it as --policy hf:{path}")
