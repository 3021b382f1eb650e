"""The micro harness space and task suite: harness scaling at CPU scale (issue 17).

A plugin shipped exactly as a third party's would be: registered through the ``harnessgrid``
entry-point group in pyproject.toml (not the built-in list), with level names prefixed
``micro_``. It provides

- five factors x three compact levels (:data:`MICRO_LEVELS`), short enough that a
  sub-million-parameter model reads a whole prompt in a few hundred tokens, yet differing
  between levels in tool names, call syntax, observation layout and prompts;
- :data:`MICRO_SPACE`, the 3^5 space over them, registered as the named space ``micro``
  (``harnessgrid_spaces``): a micro configuration is written ``micro:S0-T1-O2-C0-W1``
  wherever a harness is (``--harness``, :func:`harnessgrid.resolve_harness`, ``eval
  --harnesses``), and :func:`micro_address` writes it so. The paper's space is unchanged by
  the plugin: its levels are registered (a level list or ``O=micro_lines`` may name them), but
  ``S0-T0-O0-C0-W0`` stays the paper's built-in harness;
- the ``micro`` task suite (splits ``train``, ``eval``, ``validation`` and ``test``) of one- to four-step file tasks;
- :data:`UNSEEN_SPACE` (the named space ``micro4``): the micro space plus a fourth system
  prompt and a fourth tool interface that the demo never trains through, its out-of-space
  column at micro scale (:mod:`harnessgrid.plugins.micro.unseen`);
- :func:`micro_corpus`, texts for training the demo model's tokenizer.

Example::

    import harnessgrid as hg
    from harnessgrid.plugins.micro import MICRO_SPACE, micro_harness

    design = hg.orthogonal_design(MICRO_SPACE)          # 18 micro configurations
    harness = micro_harness(design.configs[0])          # a runnable ComposedHarness
    tasks = hg.load_suite("micro").tasks("train")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid import hookimpl
from harnessgrid.errors import ConfigError
from harnessgrid.levels import FactorLevel
from harnessgrid.registrations import SpaceSpec, TaskSuiteSpec
from harnessgrid.space import FACTORS, FactorSpace, HarnessConfig

from . import contexts, interfaces, observations, prompts, unseen, workflows

if TYPE_CHECKING:
    from harnessgrid.plugin_system.composed_harness import ComposedHarness

__all__ = ["MICRO_LEVELS", "MICRO_SPACE", "SUITE_VERSION", "UNSEEN_SPACE", "build_micro_model",
           "micro_address", "micro_base", "micro_config", "micro_corpus", "micro_harness"]

_CLASSES: dict[str, tuple[type[FactorLevel], ...]] = {
    "system_prompt": prompts.LEVELS,
    "tool_interface": interfaces.LEVELS,
    "observation": observations.LEVELS,
    "context": contexts.LEVELS,
    "workflow": workflows.LEVELS,
}
assert tuple(_CLASSES) == FACTORS

#: Level names per factor, in code order (``S0`` is ``micro_terse``, ``T1`` is ``micro_tags``...).
MICRO_LEVELS: dict[str, tuple[str, ...]] = {
    factor: tuple(cls.name for cls in classes) for factor, classes in _CLASSES.items()}

#: The 3^5 space of micro levels, the named space ``micro``: its codes name micro harnesses.
MICRO_SPACE: FactorSpace = FactorSpace.from_levels(MICRO_LEVELS)
SPACE_NAME = "micro"

#: The micro space plus the fourth levels no demo model trains through
#: (:mod:`harnessgrid.plugins.micro.unseen`: ``S3`` micro_brief, ``T3`` micro_calls), the named
#: space ``micro4``; its codes with only levels 0-2 are the micro space's configurations.
UNSEEN_SPACE: FactorSpace = FactorSpace.from_levels({
    factor: (*levels, *((unseen.UNSEEN_LEVELS[factor].name,)
                        if factor in unseen.UNSEEN_LEVELS else ()))
    for factor, levels in MICRO_LEVELS.items()})
UNSEEN_SPACE_NAME = "micro4"

#: The micro suite's version (:mod:`harnessgrid.plugins.micro.tasks`): a change of its tasks
#: changes it, and with it every cache key built on the suite (the demo's warm start).
SUITE_VERSION = "1"


def micro_config(code: str | HarnessConfig) -> HarnessConfig:
    """A micro configuration from its code in :data:`MICRO_SPACE` (``"S0-T1-O2-C0-W1"``, or
    ``"micro:S0-T1-O2-C0-W1"`` as written elsewhere)."""
    if isinstance(code, HarnessConfig):
        if code.space != MICRO_SPACE:
            raise ConfigError(f"configuration {code.code} is not in the micro space",
                              hint="build it with micro_config(CODE) or MICRO_SPACE.parse")
        return code
    return MICRO_SPACE.parse(code.strip().removeprefix(f"{SPACE_NAME}:"))


def micro_address(code: str | HarnessConfig) -> str:
    """The harness address of a micro configuration, ``micro:S0-T1-O2-C0-W1``, which
    ``--harness``, ``eval --harnesses``, :func:`harnessgrid.resolve_harness` and Ray episode
    jobs accept on every machine with this plugin."""
    return f"{SPACE_NAME}:{micro_config(code).code}"


def micro_harness(code: str | HarnessConfig) -> ComposedHarness:
    """The runnable harness of a micro configuration (through the plugin registry)."""
    from harnessgrid.plugin_system.composition import compose

    return compose(micro_config(code))


def micro_corpus() -> list[str]:
    """Tokenizer training texts covering everything the micro demo's model sees (see
    :mod:`harnessgrid.plugins.micro.corpus`)."""
    from harnessgrid.plugins.micro.corpus import micro_corpus as build

    return build()


def micro_base(copy_to: str | Path | None = None) -> Path:
    """The shipped micro model pretrained to copy (``tiny:micro-base``), verified against its
    checksums, copied to ``copy_to`` when given (see
    :mod:`harnessgrid.plugins.micro.pretraining`)."""
    from harnessgrid.plugins.micro.pretraining import micro_base as shipped

    return shipped(None if copy_to is None else Path(copy_to))


def build_micro_model(path: str | Path, seed: int = 0,
                      on_step: Callable[[str], None] | None = None) -> Path:
    """The micro model (cached in ``path``; ``harnessgrid model tiny DIR --size micro``): a
    tokenizer trained on :func:`micro_corpus`, whose ``words`` pre-tokenizer keeps each name
    one token wherever it stands (see :data:`harnessgrid.policies.tiny_model.PRETOKENIZERS`)."""
    from harnessgrid.policies.tiny_model import build_tiny_model

    return build_tiny_model(path, size="micro", seed=seed, corpus=micro_corpus(),
                            pretokenizer="words", on_step=on_step)


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    for classes in _CLASSES.values():
        yield from classes
    yield from unseen.UNSEEN_LEVELS.values()


@hookimpl
def harnessgrid_spaces() -> Iterator[SpaceSpec]:
    yield SpaceSpec(name=SPACE_NAME, space=MICRO_SPACE,
                    description="The micro plugin's 3^5 grid of compact levels (the CPU demo's "
                                "space).")
    yield SpaceSpec(name=UNSEEN_SPACE_NAME, space=UNSEEN_SPACE,
                    description="The micro space plus fourth levels the demo never trains "
                                "through (S3 micro_brief, T3 micro_calls): its out-of-space "
                                "(unseen levels) column.")


def _load_suite(argument: str | None = None, **options: Any) -> Any:
    if options:
        raise ConfigError(f"unknown option(s) for the micro suite: {', '.join(sorted(options))}",
                          hint="the micro suite takes no options")
    from harnessgrid.plugins.micro.tasks import micro_suite

    return micro_suite()


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(
        name="micro", load=_load_suite,
        description="Tiny file tasks for the micro harness space (create, copy, append, "
                    "rename, delete, replace, join; 1-4 actions); splits train (2,400), "
                    "eval (144), and validation and test (22 each) that no text the demo's "
                    "model trains on contains.")
