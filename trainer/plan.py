"""What a run rolls out, built once from its config: the factor space and design, the tasks,
the schedule, the episode limits, and how to build each harness.

For ``design: adapter:NAME`` (black-box training through one emulated shell) there is no
factor design: every rollout goes through the adapter, and the schedule (over a one-point
design, K = 1) only orders the tasks.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from harnessgrid.errors import ConfigError
from harnessgrid.trainer.rollout import RolloutJob, plan_step

if TYPE_CHECKING:
    from harnessgrid.designs import Design
    from harnessgrid.designs.schedule import Schedule
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.space import FactorSpace, HarnessConfig
    from harnessgrid.tasks import Task
    from harnessgrid.trainer.config import ExperimentConfig

__all__ = ["TrainingPlan", "build_design"]


def build_space(config: ExperimentConfig) -> FactorSpace:
    """The run's space: ``config.space`` (or the default one) plus ``FACTOR:LEVEL`` additions;
    every level must be registered (a typo fails here, naming it)."""
    from harnessgrid.plugin_system.composition import validate_space
    from harnessgrid.space import FactorSpace

    space = (FactorSpace.from_levels({f: list(v) for f, v in config.space.items()})
             if config.space else FactorSpace.default())
    for spec in config.with_levels:
        factor, sep, level = spec.partition(":")
        if not sep or not factor or not level:
            raise ConfigError(f"bad with_levels entry {spec!r}",
                              hint="write FACTOR:LEVEL, e.g. observation:diffstat")
        if level not in space.factor(factor).levels:
            space = space.extend(factor, level)
    return validate_space(space)


def build_design(config: ExperimentConfig, space: FactorSpace) -> Design:
    """The training design named by ``config.design`` (not for adapter designs)."""
    from harnessgrid import designs

    match config.design:
        case "oa":
            return designs.orthogonal_design(space)
        case "full":
            return designs.full_design(space)
        case "first-order":
            return designs.first_order_design(space)
        case "random":
            return designs.random_design(space, config.design_size, config.seed)
        case "nearly-orthogonal":
            return designs.nearly_orthogonal_design(space, config.design_size, config.seed)
        case "single":
            assert config.harness is not None  # checked by the config
            return designs.single_design(single_config(config, space))
        case "list":
            return designs.design_from_configs(
                [single_config(config.model_copy(update={"harness": code}), space)
                 for code in dict.fromkeys(config.harnesses)])
    raise ConfigError(f"unknown design {config.design!r}",
                      hint="single, list, first-order, random, oa, nearly-orthogonal, "
                           "full or adapter:NAME")


def single_config(config: ExperimentConfig, space: FactorSpace) -> HarnessConfig:
    """``harness:`` of ``design: single`` as a configuration of the run's space. With an explicit
    ``space:`` its codes are that space's; otherwise codes are read as every command reads them
    (:func:`harnessgrid.plugin_system.composition.resolve_config`), and level lists work in both."""
    from harnessgrid.plugin_system.composition import config_in, resolve_config

    assert config.harness is not None
    if config.space:
        return config_in(resolve_config(config.harness, space), space)
    return config_in(resolve_config(config.harness), space)


class TrainingPlan:
    """The run's rollouts, step by step (see the module docstring)."""

    def __init__(self, config: ExperimentConfig, tasks: list[Task] | None = None) -> None:
        from harnessgrid.designs import single_design
        from harnessgrid.designs.schedule import Schedule

        self.config = config
        self.space = build_space(config)
        self.adapter: str | None = None
        if config.is_adapter:
            self._check_adapter(config.design)
            self.adapter = config.design
            self.design = single_design(self.space.config([0] * len(self.space.sizes)))
            k, pairing = 1, "repeat"
        else:
            self.design = build_design(config, self.space)
            k, pairing = config.k, config.pairing
        task_list = list(tasks) if tasks is not None else self._load_tasks(config)
        self.tasks: dict[str, Task] = {t.id: t for t in task_list}
        self.schedule: Schedule = Schedule(self.design, [t.id for t in task_list], k=k,
                                           pairing=pairing,  # type: ignore[arg-type]
                                           tasks_per_step=config.tasks, seed=config.seed)
        self.limits: EpisodeLimits = config.limits

    @staticmethod
    def _check_adapter(spec: str) -> None:
        from harnessgrid.plugin_system.registry import get_registry

        get_registry().adapter(spec.removeprefix("adapter:"))  # raises, naming the known ones

    @staticmethod
    def _load_tasks(config: ExperimentConfig) -> list[Task]:
        from harnessgrid.plugin_system.registry import load_suite

        tasks = list(load_suite(config.suite).tasks(config.split))
        if not tasks:
            raise ConfigError(f"suite {config.suite!r} split {config.split!r} has no tasks",
                              hint="choose another split (see `harnessgrid tasks list`)")
        if config.max_tasks and config.max_tasks < len(tasks):
            # Every (len/N)-th task: generated suites are ordered by family, so the first N
            # would all be one family.
            stride = len(tasks) / config.max_tasks
            return [tasks[int(i * stride)] for i in range(config.max_tasks)]
        return tasks

    def jobs(self, step: int) -> list[RolloutJob]:
        return plan_step(self.schedule, step, self.config.group_size, self.config.seed,
                         adapter=self.adapter)

    def make_harness(self, spec: str) -> Harness:
        from harnessgrid.engine.api import resolve_harness

        return resolve_harness(spec, self.space)

    def fingerprint(self) -> str:
        """The schedule's fingerprint, plus the adapter: what decides each step's pairs."""
        key = f"{self.schedule.fingerprint()}:{self.adapter}:{self.config.group_size}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]
