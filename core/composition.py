"""From a point of the factor space to a runnable harness, through the plugin registry, and
from what a user writes to a point of the space.

Codes name levels by position, so one numbering is used wherever a harness is named (``run
--harness``, ``eval --harnesses``/``--original``, ``harness show``/``diff``, ``tasks validate
--harness``, ``design``/``schedule --config``, a training config's ``harness``): the
:func:`harness_space`, which holds every registered level of every factor, built-in levels
first in their fixed order, then the others sorted by name (:func:`level_order`). A level
list (``system_prompt=minimal,...``) is accepted in the same places. :func:`resolve_config`
reads both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harnessgrid.errors import ConfigError
from harnessgrid.levels import FactorLevel
from harnessgrid.registry import Registry, get_registry
from harnessgrid.space import DEFAULT_LEVELS, FACTORS, FactorSpace, HarnessConfig

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


def level_order(factor: str, name: str) -> tuple[int, int, str]:
    """Where a level sits among its factor's levels in every registry-built space: the built-in
    levels first, in their fixed order (``DEFAULT_LEVELS``), then every other level sorted by
    name. Neither install order nor which other plugins are present changes a built-in's code,
    and two installs with the same plugins number every level alike."""
    builtin = DEFAULT_LEVELS.get(factor, ())
    if name in builtin:
        return (0, builtin.index(name), "")
    return (1, 0, name)


def registry_space(with_levels: Iterable[str] = (), *, all_levels: bool = False,
                   registry: Registry | None = None) -> FactorSpace:
    """The default 3^5 space extended with registered levels.

    ``with_levels`` holds ``"factor:level"`` strings (e.g. ``"observation:diffstat"``);
    ``all_levels=True`` adds every registered level of every factor. Added levels follow the
    built-ins in :func:`level_order` (sorted by name), whatever order they were named in, so
    the same levels always get the same codes.
    """
    reg = registry or get_registry()
    wanted: set[tuple[str, str]] = set()
    for spec in with_levels:
        factor, sep, name = spec.partition(":")
        if not sep or not name:
            raise ConfigError(f"bad level reference {spec!r}",
                              hint="write FACTOR:LEVEL, e.g. observation:diffstat")
        if factor not in FACTORS:
            raise ConfigError(f"unknown factor {factor!r} in {factor}:{name}",
                              hint=f"factors are {', '.join(FACTORS)}")
        reg.level(factor, name)
        wanted.add((factor, name))
    if all_levels:
        wanted.update(reg.factor_levels)
    levels = {f: list(DEFAULT_LEVELS[f]) for f in FACTORS}
    for factor, name in sorted(wanted, key=lambda key: (key[0], level_order(*key))):
        if name not in levels[factor]:
            levels[factor].append(name)
    return FactorSpace.from_levels(levels)


def harness_space(registry: Registry | None = None) -> FactorSpace:
    """The space harness codes are read in: every registered level of every factor
    (``registry_space(all_levels=True)``), in :func:`level_order`.

    ``S0-T0-O0-C0-W0`` is the same built-in harness with or without plugins; a plugin's
    fourth observation level is ``O3`` when it is the only one (with several, they are
    numbered by name: ``harnessgrid plugins list`` shows them). Every command that takes a
    harness reads its code here, through :func:`resolve_config`.
    """
    return registry_space(all_levels=True, registry=registry)


def resolve_config(spec: str, space: FactorSpace | None = None, *,
                   registry: Registry | None = None) -> HarnessConfig:
    """A configuration from how a user names it; the one place codes and level lists are read.

    - ``"S1-T0-O3-C1-W0"``: a code. Level index ``i`` of a factor is its ``i``-th level in
      ``space``, by default the :func:`harness_space` (all registered levels, built-ins first).
    - ``"system_prompt=minimal,tool_interface=xml_tags,observation=raw,context=full,
      workflow=react"``: the level of each of the five factors by name, any registered level.
      The configuration lies in ``space`` when ``space`` holds all five levels, else in the
      harness space, so its code is always one that reads back to the same levels.

    ``adapter:NAME`` is not a configuration (see :func:`harnessgrid.api.resolve_harness`).
    """
    text = spec.strip()
    if text.startswith("adapter:"):
        raise ConfigError(f"{text!r} is an adapter, not a configuration of the factor space",
                          hint="name a configuration by its code (S0-T0-O0-C0-W0) or by a "
                               "level list (system_prompt=minimal,tool_interface=...)")
    if "=" not in text:
        return (space or harness_space(registry)).parse(text)
    levels = parse_level_list(text)
    reg = registry or get_registry()
    for factor, name in levels.items():
        reg.level(factor, name)  # an unregistered name fails here, naming what is registered
    if space is not None and all(n in space.factor(f).levels for f, n in levels.items()):
        return space.from_mapping(levels)
    return harness_space(reg).from_mapping(levels)


def parse_level_list(text: str) -> dict[str, str]:
    """``"system_prompt=minimal,tool_interface=xml_tags,..."`` → ``{factor: level}``; every
    one of the five factors exactly once."""
    example = ",".join(f"{f}={DEFAULT_LEVELS[f][0]}" for f in FACTORS)
    levels: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        factor, sep, name = (p.strip() for p in part.partition("="))
        if not sep or not factor or not name:
            raise ConfigError(f"bad level list {text!r}: {part.strip()!r} is not FACTOR=LEVEL",
                              hint=f"write it like {example}")
        if factor not in FACTORS:
            raise ConfigError(f"bad level list {text!r}: unknown factor {factor!r}",
                              hint=f"factors are {', '.join(FACTORS)}")
        if factor in levels:
            raise ConfigError(f"bad level list {text!r}: factor {factor!r} is given twice",
                              hint=f"write it like {example}")
        levels[factor] = name
    missing = [f for f in FACTORS if f not in levels]
    if missing:
        raise ConfigError(f"bad level list {text!r}: no level for {', '.join(missing)}",
                          hint=f"name a level of all five factors, e.g. {example}")
    return {f: levels[f] for f in FACTORS}


def config_in(config: HarnessConfig, space: FactorSpace) -> HarnessConfig:
    """The same levels as a configuration of ``space`` (e.g. a design's space): codes are
    read in the harness space, designs are built over smaller ones."""
    if config.space == space:
        return config
    missing = [f"{f}:{n}" for f, n in config.levels.items() if n not in space.factor(f).levels]
    if missing:
        raise ConfigError(f"configuration {config.code} uses {', '.join(missing)}, which this "
                          "space does not hold",
                          hint=f"add {' and '.join(missing)} to the space (--with "
                               f"{missing[0]}; with_levels in a training config)")
    return space.from_mapping(config.levels)


def harness_code(config: HarnessConfig, codes: FactorSpace | None = None) -> str:
    """``config``'s code in ``codes`` (default: the :func:`harness_space`), the code every
    command reads back: the same as ``config.code`` unless ``config``'s space leaves out a
    registered level before one it holds. ``config.code`` for levels no plugin registers."""
    if config.space == FactorSpace.default():  # built-ins are numbered alike everywhere
        return config.code
    try:
        return (codes or harness_space()).from_mapping(config.levels).code
    except ConfigError:
        return config.code


def compose(config: HarnessConfig, registry: Registry | None = None) -> ComposedHarness:
    """Build the runnable harness of ``config`` from its five registered levels."""
    from harnessgrid.harness import ComposedHarness

    levels = resolve_levels(config, registry)
    return ComposedHarness(config, {f: cls() for f, cls in levels.items()})
