"""The options ``run`` and ``eval`` share, declared once: the policy, the suite loaders' options
and the episode limits, and how ``KEY=VALUE`` options are read (``tasks`` and ``train`` too).

The limits' defaults are :class:`~harnessgrid.engine.limits.EpisodeLimits`'; they are written
here as numbers because building the model would import pydantic into ``harnessgrid --help``,
and ``tests/test_cli_usage.py`` fails when the two disagree.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits



def policy_option() -> Any:
    """``--policy SPEC``, required: a default after options that have one (an Annotated
    alias cannot say "required" there)."""
    return typer.Option(..., "--policy", help="scripted, null, openai:MODEL, anthropic:MODEL, "
                        "litellm:MODEL, hf:PATH, vllm:NAME (a plugin's too: `harnessgrid "
                        "plugins list`).")


PolicyOpt = Annotated[list[str], typer.Option(
    "--policy-opt", help="KEY=VALUE for the policy backend, e.g. temperature=0.7 or "
    "api_base=http://127.0.0.1:8000/v1.")]
SuiteOption = Annotated[list[str], typer.Option(
    "--option", "-o", help="KEY=VALUE for every suite's loader, e.g. assets=DIR, "
    "judge_api_base=URL (as `tasks list` takes them).")]
Judge = Annotated[str | None, typer.Option(
    "--judge", help="litellm model that grades LLM-judge rubrics (PinchBench llm_judge / "
    "hybrid tasks), e.g. openai/gpt-4o-mini; its key is checked before the first episode.")]
MaxTurns = Annotated[int, typer.Option("--max-turns", min=1, help="Turns per episode.")]
WallS = Annotated[float, typer.Option("--wall-s", min=1, help="Seconds per episode.")]
UnsafeNoSandbox = Annotated[bool, typer.Option(
    "--unsafe-no-sandbox", help="Run commands without bubblewrap (no isolation!).")]
Env = Annotated[str | None, typer.Option(
    "--env", help="Environment every episode mounts (see `harnessgrid env list`) instead of "
    "each task's own; `none` for none.")]
ShowDurations = Annotated[bool, typer.Option(
    "--show-durations", help="Let harnesses show how long each command took (the annotated "
    "observation's header). Off by default: a wall-clock time in the prompt depends on the "
    "machine's load, and the run would not repeat.")]

def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["api_base=http://x", "temperature=0.7"]`` → dict; values parsed as JSON when they
    are JSON (numbers, booleans), else kept as strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad option {pair!r}", hint="write KEY=VALUE, e.g. temperature=0.7")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def loader_options(options: list[str], judge: str | None = None) -> dict[str, Any]:
    """``--option KEY=VALUE`` pairs and ``--judge MODEL`` as one dict of suite-loader options
    (what ``tasks``, ``run`` and ``eval`` all pass to every loader)."""
    parsed = parse_options(options)
    if judge:
        if parsed.get("judge") not in (None, judge):
            raise ConfigError(f"two judges given: --judge {judge} and judge={parsed['judge']}",
                              hint="give the judge once")
        parsed["judge"] = judge
    return parsed


#: EpisodeLimits' defaults (see the module docstring).
MAX_TURNS = 30
WALL_S = 600.0


def episode_limits(max_turns: int, wall_s: float, unsafe_no_sandbox: bool,
                   env: str | None, show_durations: bool = False) -> EpisodeLimits:
    """The limits the options give; a named environment that is not built is a usage error
    now, not one failed episode per task later."""
    from harnessgrid.engine.limits import EpisodeLimits

    if env is not None and env.lower() != "none":
        from harnessgrid.sandboxing.environments import get_environment

        get_environment(env)
    return EpisodeLimits(max_turns=max_turns, wall_s=wall_s,
                         unsafe_no_sandbox=unsafe_no_sandbox, environment=env,
                         durations="measured" if show_durations else "hidden")
