"""From a point of the factor space to a runnable harness, through the plugin registry, and
from what a user writes to a point of the space.

Wherever a harness is named (``run --harness``, ``eval --harnesses``/``--original``, ``harness
show``/``diff``, ``tasks validate --harness``, ``design``/``schedule --config``, a training
config's ``harness``), :func:`resolve_config` reads it, and a name means the same harness on
every machine, whatever plugins are installed:

- a code's numbers name the paper's built-in levels (``S1-T0-O2-C1-W0``), never a plugin's;
- a plugin level is written by name inside a code (``S1-T0-O=diffstat-C1-W0``);
- a space a plugin registers under a name is written ``NAME:CODE`` (``micro:S0-T1-O2-C0-W1``);
- a level list (``system_prompt=minimal,...``) names all five levels.

:func:`harness_address` writes a configuration back in one of these forms; results,
trajectories and listings record that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from harnessgrid.errors import ConfigError
from harnessgrid.levels import FactorLevel
from harnessgrid.plugin_system.registry import Registry, get_registry
from harnessgrid.space import (
    DEFAULT_LEVELS,
    FACTOR_LETTERS,
    FACTORS,
    FactorSpace,
    HarnessConfig,
    code_parts,
    stable_code,
)

if TYPE_CHECKING:
    from harnessgrid.plugin_system.composed_harness import ComposedHarness


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
    name, so the same levels always make the same space (and design) whatever order they were
    installed or named in. Codes do not depend on it: a plugin level is written by name."""
    builtin = DEFAULT_LEVELS.get(factor, ())
    if name in builtin:
        return (0, builtin.index(name), "")
    return (1, 0, name)


def registry_space(with_levels: Iterable[str] = (), *, all_levels: bool = False,
                   registry: Registry | None = None) -> FactorSpace:
    """The default 3^5 space extended with registered levels.

    ``with_levels`` holds ``"factor:level"`` strings (e.g. ``"observation:diffstat"``);
    ``all_levels=True`` adds every registered level of every factor. Added levels follow the
    built-ins in :func:`level_order` (sorted by name), whatever order they were named in. The
    space keeps the paper's levels first, so its configurations' codes are stable codes
    (``S0-T0-O=diffstat-C0-W0``).
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
    """The space plain codes are read in: the paper's 3^5 grid of built-in levels, whatever
    plugins are installed (``registry`` is accepted for older callers and not needed).

    ``S0-T0-O0-C0-W0`` is the same built-in harness on every machine; a plugin level is named
    in a code (``S0-T0-O=diffstat-C0-W0``) and a plugin's named space by its name
    (``micro:S0-T1-O2-C0-W1``). Every command that takes a harness reads it through
    :func:`resolve_config`; ``harnessgrid plugins list`` shows the codes.
    """
    return FactorSpace.default()


def resolve_config(spec: str, space: FactorSpace | None = None, *,
                   registry: Registry | None = None) -> HarnessConfig:
    """A configuration from how a user names it; the one place codes and level lists are read.

    - ``"S1-T0-O2-C1-W0"``: a code. A number names a built-in level by its position in the
      paper's grid; a plugin level is named (``S1-T0-O=diffstat-C1-W0``). A number beyond the
      built-ins (``O3``) is refused, naming the registered plugin levels of that factor: such
      a code would mean different harnesses on machines with different plugins.
    - ``"micro:S0-T1-O2-C0-W1"``: a code of a space a plugin registered under a name
      (``harnessgrid_spaces``), numbered as that space orders its levels.
    - ``"system_prompt=minimal,tool_interface=xml_tags,observation=raw,context=full,
      workflow=react"``: the level of each of the five factors by name, any registered level.

    A plugin level lies in the paper's grid extended by the plugin levels named
    (:func:`registry_space`), so the configuration's ``code`` is its stable code. With an
    explicit ``space`` (a design's), codes are read in that space (numbers by position there)
    and level lists land there when it holds them.

    ``adapter:NAME`` is not a configuration (see :func:`harnessgrid.engine.api.resolve_harness`).
    """
    text = spec.strip()
    if text.startswith("adapter:"):
        raise ConfigError(f"{text!r} is an adapter, not a configuration of the factor space",
                          hint="name a configuration by its code (S0-T0-O0-C0-W0) or by a "
                               "level list (system_prompt=minimal,tool_interface=...)")
    reg = registry or get_registry()
    if _is_level_list(text):
        levels = parse_level_list(text)
        if space is not None and _holds(space, levels):
            for factor, name in levels.items():
                reg.level(factor, name)
            return space.from_mapping(levels)
        return config_of_levels(levels, reg)
    space_name, colon, code = text.partition(":")
    if colon:
        return reg.space(space_name.strip()).space.parse(code)
    parts = code_parts(text)
    if space is not None and (not space.extends_paper or _holds_names(space, parts)):
        return space.parse(text)
    return config_of_levels(_paper_levels(text, parts, reg), reg)


#: A level list starts with a factor's name and ``=``; a code's first part is one letter
#: (``S1-...``, ``S=name-...``) and a named space's code has ``:`` first (``micro:S0-...``).
LEVEL_LIST_START = re.compile(r"^\s*[A-Za-z_]{2,}\s*=")


def _is_level_list(text: str) -> bool:
    return LEVEL_LIST_START.match(text) is not None


def _holds(space: FactorSpace, levels: dict[str, str]) -> bool:
    return all(name in space.factor(f).levels for f, name in levels.items())


def _holds_names(space: FactorSpace, parts: tuple[int | str, ...]) -> bool:
    return all(isinstance(p, int) or p in f.levels
               for p, f in zip(parts, space.factors, strict=True))


def _paper_levels(code: str, parts: tuple[int | str, ...], reg: Registry) -> dict[str, str]:
    """The level names a code gives in the paper's grid; a number beyond the built-ins is an
    error naming how to write the plugin levels of that factor."""
    levels = {}
    for factor, part in zip(FACTORS, parts, strict=True):
        builtin = DEFAULT_LEVELS[factor]
        if isinstance(part, int) and part >= len(builtin):
            raise _beyond_the_paper(code, factor, part, reg)
        levels[factor] = builtin[part] if isinstance(part, int) else part
    return levels


def _beyond_the_paper(code: str, factor: str, index: int, reg: Registry) -> ConfigError:
    letter = FACTOR_LETTERS[factor]
    builtin = DEFAULT_LEVELS[factor]
    plugin = [n for n in reg.levels(factor) if n not in builtin]
    written = ", ".join(f"{letter}={n}" for n in plugin) or "none"
    parts = code.strip().split("-")
    parts[FACTORS.index(factor)] = f"{letter}={plugin[0] if plugin else 'NAME'}"
    spaces = ", ".join(f"{n}:CODE" for n in reg.spaces) or "none registered"
    return ConfigError(
        f"bad harness code {code!r}: {letter}{index} is not a level of {factor}; a number "
        f"names one of the paper's built-in levels ({letter}0..{letter}{len(builtin) - 1}: "
        f"{', '.join(builtin)}), the same on every machine",
        hint=f"write a plugin level by name, e.g. {'-'.join(parts)}; registered plugin "
             f"{factor} levels: {written}; a named space's codes are written SPACE:CODE "
             f"({spaces}); `harnessgrid plugins list` shows every code")


def config_of_levels(levels: dict[str, str], registry: Registry | None = None) -> HarnessConfig:
    """The configuration of five level names, each registered: in the paper's grid extended
    by exactly the non-built-in levels named, so its ``code`` is the stable code."""
    reg = registry or get_registry()
    for factor, name in levels.items():
        reg.level(factor, name)  # an unregistered name fails here, naming what is registered
    added = [f"{f}:{n}" for f, n in levels.items() if n not in DEFAULT_LEVELS[f]]
    return registry_space(added, registry=reg).from_mapping(levels)


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
    """The same levels as a configuration of ``space`` (e.g. a design's space): a harness is
    named on its own (:func:`resolve_config`), and a design's space may hold other levels."""
    if config.space == space:
        return config
    missing = [f"{f}:{n}" for f, n in config.levels.items() if n not in space.factor(f).levels]
    if missing:
        raise ConfigError(f"configuration {config.code} uses {', '.join(missing)}, which this "
                          "space does not hold",
                          hint=f"add {' and '.join(missing)} to the space (--with "
                               f"{missing[0]}; with_levels in a training config)")
    return space.from_mapping(config.levels)


def harness_address(config: HarnessConfig, registry: Registry | None = None) -> str:
    """How ``config`` is written wherever it is recorded or shown (results, trajectories,
    ``run --json``, reports, design listings): the same harness on every machine.

    Its stable code when its space keeps the paper's levels first (``S1-T0-O=diffstat-C1-W0``);
    ``NAME:CODE`` when its space is one a plugin registered as ``NAME``
    (``micro:S0-T1-O2-C0-W1``); else the stable code of its levels. :func:`resolve_config`
    reads each back to the same levels."""
    if config.space.extends_paper:
        return config.code
    reg = registry or get_registry()
    for name, spec in reg.spaces.items():
        if spec.space == config.space:
            return f"{name}:{config.code}"
    return stable_code(config.levels)


def address_levels(address: str, registry: Registry | None = None) -> dict[str, str] | None:
    """The level names a recorded harness address means today, without composing it; ``None``
    for an adapter, a name that is no address at all, or a named space no installed plugin
    registers (nothing to compare). A number beyond the paper's built-ins raises: it was
    written by an older harnessgrid that numbered plugin levels by position, so it names no
    level on its own."""
    text = address.strip()
    if text.startswith("adapter:"):
        return None
    try:
        if _is_level_list(text):
            return parse_level_list(text)
        space_name, colon, code = text.partition(":")
        if colon:
            spec = (registry or get_registry()).spaces.get(space_name.strip())
            return None if spec is None else spec.space.parse(code).levels
        parts = code_parts(text)
    except ConfigError:
        return None
    for factor, part in zip(FACTORS, parts, strict=True):
        if isinstance(part, int) and part >= len(DEFAULT_LEVELS[factor]):
            raise ConfigError(f"harness {text!r} numbers a level beyond the paper's built-ins "
                              f"({FACTOR_LETTERS[factor]}{part})")
    return {f: DEFAULT_LEVELS[f][p] if isinstance(p, int) else p
            for f, p in zip(FACTORS, parts, strict=True)}


def compose(config: HarnessConfig, registry: Registry | None = None) -> ComposedHarness:
    """Build the runnable harness of ``config`` from its five registered levels."""
    from harnessgrid.plugin_system.composed_harness import ComposedHarness

    reg = registry or get_registry()
    levels = resolve_levels(config, reg)
    return ComposedHarness(config, {f: cls() for f, cls in levels.items()},
                           name=harness_address(config, reg))
