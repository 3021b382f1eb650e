"""From a point of the factor space to a runnable harness, through the plugin registry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harnessgrid.errors import ConfigError
from harnessgrid.levels import FactorLevel
from harnessgrid.registry import Registry, get_registry
from harnessgrid.space import FACTORS, FactorSpace, HarnessConfig

if TYPE_CHECKING:
    from harnessgrid.harness import ComposedHarness


def resolve_levels(config: HarnessConfig, registry: Registry | None = None) -> dict[
        str, type[FactorLevel]]:
    """Each factor's level class, looked up by name; a clear error for a name no plugin has."""
    reg = registry or get_registry()
    return {factor: reg.level(factor, name) for factor, name in config.levels.items()}


def validate_space(space: FactorSpace, registry: Registry | None = None) -> FactorSpace:
    """Check that a plugin provides every level the space names; return the space."""
    reg = registry or get_registry()
    for f in space.factors:
        for name in f.levels:
            reg.level(f.name, name)
    return space


def registry_space(with_levels: Iterable[str] = (), *, all_levels: bool = False,
                   registry: Registry | None = None) -> FactorSpace:
    """The default 3^5 space extended with registered levels.

    ``with_levels`` holds ``"factor:level"`` strings (e.g. ``"observation:diffstat"``);
    ``all_levels=True`` adds every registered level of every factor (built-ins first, then the
    rest sorted by name).
    """
    reg = registry or get_registry()
    space = FactorSpace.default()
    wanted: list[tuple[str, str]] = []
    for spec in with_levels:
        factor, sep, name = spec.partition(":")
        if not sep or not name:
            raise ConfigError(f"bad level reference {spec!r}",
                              hint="write FACTOR:LEVEL, e.g. observation:diffstat")
        wanted.append((factor, name))
    if all_levels:
        wanted.extend(key for key in reg.factor_levels
                      if key[1] not in space.factor(key[0]).levels)
    for factor, name in wanted:
        if factor not in FACTORS:
            raise ConfigError(f"unknown factor {factor!r} in {factor}:{name}",
                              hint=f"factors are {', '.join(FACTORS)}")
        reg.level(factor, name)
        if name not in space.factor(factor).levels:
            space = space.extend(factor, name)
    return space


def compose(config: HarnessConfig, registry: Registry | None = None) -> ComposedHarness:
    """Build the runnable harness of ``config`` from its five registered levels."""
    from harnessgrid.harness import ComposedHarness

    levels = resolve_levels(config, registry)
    return ComposedHarness(config, {f: cls() for f, cls in levels.items()})
