"""``harnessgrid train CONFIG``: harness-scaled GRPO / PPO (and SFT) with TRL.

The command imports torch, transformers and TRL only when it runs, so ``--help`` stays fast.
Progress is one live line per step on a terminal (step, reward, pass rate, tokens/s,
segments per episode) and one printed line per step otherwise; ``--quiet`` prints only the
result.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any, Self

import typer

ConfigPath = Annotated[Path, typer.Argument(help="Experiment config (YAML), e.g. "
                                                "examples/tiny-grpo.yaml.")]
SetOption = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE",
    help="Override a config field (repeatable; dotted keys for ppo./sft./trl.).")]
Resume = Annotated[bool, typer.Option(
    "--resume", help="Continue the run in the config's output_dir from its newest complete "
                     "checkpoint.")]
PolicyOpt = Annotated[list[str] | None, typer.Option(
    "--policy-opt", metavar="KEY=VALUE",
    help="Option of the hf: generation policy, e.g. max_batch_size=32.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No per-step progress.")]


def train_command(config: ConfigPath, set_: SetOption = None, resume: Resume = False,
                  policy_opt: PolicyOpt = None, quiet: Quiet = False) -> None:
    """Train a policy through harness-scaled rollouts (see docs/training.md)."""
    from harnessgrid.cli.episode_options import parse_options
    from harnessgrid.paths import require_output_dir
    from harnessgrid.trainer.config import load_config
    from harnessgrid.trainer.run import (
        interrupted_message,
        is_main_launch_process,
        require_training_extras,
        train,
    )

    # a config's renamed keys warn in the library; a command-line user must see it too
    warnings.filterwarnings("always", message="the training config key",
                            category=DeprecationWarning)
    cfg = load_config(config, set_ or [])
    # Before torch and TRL are imported (a minute on a slow disk): a bad path fails at once.
    require_output_dir(cfg.output_dir, "output_dir")
    require_training_extras()
    _quiet_library_progress()
    display = _StepDisplay(cfg.steps, quiet)
    try:
        with display:
            result = train(cfg, resume=resume, on_step=display.update,
                           policy_options=parse_options(policy_opt or []))
    except KeyboardInterrupt:
        if is_main_launch_process():
            typer.secho(interrupted_message(cfg.output_dir), fg="yellow", err=True)
        # SystemExit, not typer.Exit: outside standalone mode click would swallow its code.
        raise SystemExit(130) from None
    if not is_main_launch_process():
        return
    if result.no_signal:
        typer.secho(f"warning: {result.no_signal}", err=True, fg="yellow", bold=True)
    typer.echo(f"trained {result.steps} steps; model in {result.final_model} "
               f"(use it as hf:{result.final_model}); step log in "
               f"{result.output_dir / 'steps.jsonl'}")


def _quiet_library_progress() -> None:
    """The step lines are the progress; transformers' and datasets' bars (a "Writing model
    shards" bar at every checkpoint, one per dataset map) would interleave with them."""
    import datasets
    from transformers.utils import logging

    hf_logging: Any = logging  # partially typed upstream
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()


class _StepDisplay:
    """A live progress bar on a terminal; plain lines in logs."""

    def __init__(self, total: int, quiet: bool) -> None:
        from rich.console import Console

        self.total, self.quiet = total, quiet
        self.console = Console(stderr=True)
        self.progress: Any = None

    def __enter__(self) -> Self:
        if not self.quiet and self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(TextColumn("step"), MofNCompleteColumn(), BarColumn(),
                                     TextColumn("{task.description}"), console=self.console)
            self.progress.start()
            self.task = self.progress.add_task("rolling out...", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, report: dict[str, Any]) -> None:
        if self.quiet:
            return
        line = describe(report)
        if self.progress is not None:
            self.progress.update(self.task, completed=report["step"] + 1, description=line)
        else:
            self.console.print(f"step {report['step'] + 1}/{self.total}  {line}",
                               highlight=False)


def describe(report: dict[str, Any]) -> str:
    """One line: reward, pass rate, throughput, segments per episode, failures."""
    def num(key: str, fmt: str) -> str:
        value = report.get(key)
        return "-" if value is None else format(value, fmt)

    parts = [f"reward {num('reward', '.3f')}", f"pass {num('pass_rate', '.0%')}",
             f"well-formed {num('well_formed', '.0%')}",
             f"{num('model_tokens_per_s', ',.0f')} tok/s",
             f"{num('segments_per_episode', '.2f')} seg/ep",
             f"{report.get('rollout_s', 0):.1f}s rollout + {report.get('train_s', 0):.1f}s train"]
    parts.insert(1, signal_part(report))
    if report.get("infra_failures"):
        parts.append(f"{report['infra_failures']} infra failures (excluded)")
    return " · ".join(parts)


def signal_part(report: dict[str, Any]) -> str:
    """The step's learning signal: the share of trained tokens with a non-zero advantage and
    the GRPO groups without reward spread -- or, loudly, that there was none."""
    tokens, total = report.get("signal_tokens"), report.get("trained_tokens")
    if tokens is None:
        return "signal -"
    if not total:
        return "NO LEARNING SIGNAL (no trained tokens)"
    groups = report.get("groups")
    flat = (f" ({report['flat_groups']}/{groups} groups flat)"
            if report.get("flat_groups") is not None and groups else "")
    if tokens == 0:
        return f"NO LEARNING SIGNAL{flat}"
    return f"signal {tokens / total:.0%} of {total:,} tok{flat}"
