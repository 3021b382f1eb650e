"""The factor space: five harness factors, each with ordered levels, and its points.

A :class:`FactorSpace` only holds *names*; composing a :class:`HarnessConfig` into a runnable
harness resolves each name through the plugin registry (see
:mod:`harnessgrid.plugin_system.composition`), so a space can name a third party's level as easily
as a built-in one.

A code writes one part per factor: a built-in level by its position in the paper's grid
(``O2``), any other level by name (``O=diffstat``). The paper's positions never change, and a
name means the same level on every machine that has its plugin, so such a *stable code* names
the same harness everywhere (:func:`stable_code`). Spaces that keep the paper's levels first
(the paper's grid, extended by plugin levels) write their codes this way; other spaces (the
micro plugin's) number their own levels, and their codes are read in that space.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import product
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from harnessgrid.errors import ConfigError

#: The five factors, in the order codes are written (``S1-T0-O2-C1-W0``).
FACTORS: tuple[str, ...] = ("system_prompt", "tool_interface", "observation", "context", "workflow")
FACTOR_LETTERS: dict[str, str] = {
    "system_prompt": "S",
    "tool_interface": "T",
    "observation": "O",
    "context": "C",
    "workflow": "W",
}

#: The paper's grid: three built-in levels per factor. Names are public API.
DEFAULT_LEVELS: dict[str, tuple[str, ...]] = {
    "system_prompt": ("minimal", "guidelines", "stepwise"),
    "tool_interface": ("function_calling", "xml_tags", "bash_only"),
    "observation": ("raw", "structured", "annotated"),
    "context": ("full", "window", "compact"),
    "workflow": ("react", "plan_execute", "verify_recover"),
}

#: One part of a code: a factor letter, then a level index (``O2``) or ``=`` and a level name
#: (``O=diffstat``). Level names hold none of ``-=:,`` or spaces, so a code splits unambiguously.
_CODE_PART = re.compile(r"^([A-Za-z])(?:(\d+)|=(.+))$")
_NAME_FORBIDDEN = re.compile(r"[-=:,\s]")


def _check_level_name(name: str) -> None:
    if not name or _NAME_FORBIDDEN.search(name):
        raise ValueError(f"level name {name!r} must be non-empty without '-', '=', ':', ',' or "
                         "spaces (codes write a level by name, as in O=diffstat)")


def stable_code(levels: Mapping[str, str]) -> str:
    """The code that names ``levels`` the same way on every machine: a built-in level by its
    position in the paper's grid (``S1``), any other by name (``O=diffstat``), e.g.
    ``S1-T0-O=diffstat-C1-W0``."""
    return "-".join(_stable_part(f, levels[f]) for f in FACTORS)


def _stable_part(factor: str, name: str) -> str:
    builtin = DEFAULT_LEVELS[factor]
    letter = FACTOR_LETTERS[factor]
    return f"{letter}{builtin.index(name)}" if name in builtin else f"{letter}={name}"


def code_parts(code: str) -> tuple[int | str, ...]:
    """The five parts of a code, each a level index (``O2`` → 2) or a level name
    (``O=diffstat`` → ``"diffstat"``); letters are case-insensitive, names are kept as
    written. A :class:`ConfigError` says what is malformed."""
    parts = code.strip().split("-")
    example = "-".join(f"{FACTOR_LETTERS[f]}0" for f in FACTORS)
    if len(parts) != len(FACTORS):
        raise ConfigError(f"bad harness code {code!r}: expected {len(FACTORS)} parts",
                          hint=f"write it like {example} (a plugin level by name: O=NAME)")
    out: list[int | str] = []
    for part, factor in zip(parts, FACTORS, strict=True):
        letter = FACTOR_LETTERS[factor]
        m = _CODE_PART.match(part.strip())
        if not m or m.group(1).upper() != letter:
            raise ConfigError(f"bad harness code {code!r}: part {part!r} should be "
                              f"{letter}<level> or {letter}=<level name>",
                              hint=f"write it like {example} (a plugin level by name: O=NAME)")
        out.append(int(m.group(2)) if m.group(2) is not None else m.group(3))
    return tuple(out)


class Factor(BaseModel):
    """One factor of a space and its ordered level names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    levels: tuple[str, ...]

    @property
    def letter(self) -> str:
        return FACTOR_LETTERS[self.name]

    @field_validator("name")
    @classmethod
    def _known_factor(cls, name: str) -> str:
        if name not in FACTORS:
            raise ValueError(f"unknown factor {name!r}; factors are {', '.join(FACTORS)}")
        return name

    @field_validator("levels")
    @classmethod
    def _distinct_levels(cls, levels: tuple[str, ...]) -> tuple[str, ...]:
        if not levels:
            raise ValueError("a factor needs at least one level")
        dupes = sorted({lv for lv in levels if levels.count(lv) > 1})
        if dupes:
            raise ValueError(f"duplicate level names {dupes}")
        for name in levels:
            _check_level_name(name)
        return levels


class FactorSpace(BaseModel):
    """Ordered factors, each with ordered level names.

    Example::

        space = FactorSpace.default()            # 3^5 = 243 configurations
        space = space.extend("observation", "diffstat")   # a plugin's 4th level
        config = space.parse("S1-T0-O=diffstat-C1-W0")    # or "S1-T0-O3-C1-W0" in this space
        config.code                                       # "S1-T0-O=diffstat-C1-W0"
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    factors: tuple[Factor, ...]

    @model_validator(mode="after")
    def _all_five_in_order(self) -> FactorSpace:
        names = tuple(f.name for f in self.factors)
        if names != FACTORS:
            raise ValueError(f"a space has the factors {FACTORS} in that order, got {names}")
        return self

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def default(cls) -> FactorSpace:
        """The paper's 3^5 grid of built-in levels."""
        return cls.from_levels(DEFAULT_LEVELS)

    @classmethod
    def from_levels(cls, levels: Mapping[str, Sequence[str]]) -> FactorSpace:
        """Build a space from ``{factor: [level, ...]}``; every factor must be present."""
        missing = [f for f in FACTORS if f not in levels]
        unknown = [f for f in levels if f not in FACTORS]
        if missing or unknown:
            raise ConfigError(
                f"space definition: missing factors {missing}, unknown factors {unknown}",
                hint=f"give levels for exactly these factors: {', '.join(FACTORS)}",
            )
        try:
            return cls(factors=tuple(Factor(name=f, levels=tuple(levels[f])) for f in FACTORS))
        except ValueError as exc:
            raise ConfigError(f"invalid space definition: {exc}") from None

    def extend(self, factor: str, level: str) -> FactorSpace:
        """A new space with ``level`` appended to ``factor`` (e.g. a third party's level)."""
        self.factor(factor)
        if level in self.factor(factor).levels:
            raise ConfigError(f"level {level!r} is already in factor {factor!r}")
        levels = {f.name: f.levels + ((level,) if f.name == factor else ()) for f in self.factors}
        return FactorSpace.from_levels(levels)

    # -- queries ------------------------------------------------------------------------------
    @property
    def extends_paper(self) -> bool:
        """Whether every factor starts with the paper's built-in levels in the paper's order
        (the paper's grid, maybe extended): then its codes are stable codes."""
        return all(f.levels[:len(DEFAULT_LEVELS[f.name])] == DEFAULT_LEVELS[f.name]
                   for f in self.factors)

    def factor(self, name: str) -> Factor:
        for f in self.factors:
            if f.name == name:
                return f
        raise ConfigError(f"unknown factor {name!r}", hint=f"factors are: {', '.join(FACTORS)}")

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of levels per factor, in factor order."""
        return tuple(len(f.levels) for f in self.factors)

    @property
    def size(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def __iter__(self) -> Iterator[HarnessConfig]:  # type: ignore[override]
        """All configurations in lexicographic order of level indices."""
        for idx in product(*(range(s) for s in self.sizes)):
            yield HarnessConfig(space=self, indices=idx)

    def config(self, indices: Sequence[int]) -> HarnessConfig:
        return HarnessConfig(space=self, indices=tuple(indices))

    def from_mapping(self, levels: Mapping[str, str]) -> HarnessConfig:
        """``{factor: level_name}`` → config; every factor must be given."""
        idx = []
        for f in self.factors:
            if f.name not in levels:
                raise ConfigError(f"configuration lacks factor {f.name!r}",
                                  hint=f"give one of {list(f.levels)}")
            name = levels[f.name]
            if name not in f.levels:
                raise ConfigError(f"level {name!r} is not in factor {f.name!r} of this space",
                                  hint=f"levels are {list(f.levels)}")
            idx.append(f.levels.index(name))
        return self.config(idx)

    def parse(self, code: str) -> HarnessConfig:
        """Parse a code of this space (letters case-insensitive): ``S1-T0-O2-C1-W0`` names
        each factor's level by its position in this space, ``O=diffstat`` by name."""
        idx = []
        for part, f in zip(code_parts(code), self.factors, strict=True):
            if isinstance(part, str):
                if part not in f.levels:
                    raise ConfigError(f"bad harness code {code!r}: level {part!r} is not in "
                                      f"factor {f.name} of this space",
                                      hint=f"levels are {list(f.levels)}")
                idx.append(f.levels.index(part))
                continue
            if part >= len(f.levels):
                numbered = ", ".join(f"{i} = {name}" for i, name in enumerate(f.levels))
                raise ConfigError(f"bad harness code {code!r}: factor {f.name} has levels "
                                  f"0..{len(f.levels) - 1}, got {part}",
                                  hint=f"levels are {numbered}")
            idx.append(part)
        return self.config(idx)


class HarnessConfig(BaseModel):
    """One point of a space: a level index per factor. A value object.

    ``code`` is compact (``S1-T0-O2-C1-W0``); ``levels`` maps factor → level name. In a space
    that keeps the paper's levels first (:attr:`FactorSpace.extends_paper`) it is the
    :func:`stable_code`, a plugin level written by name (``S1-T0-O=diffstat-C1-W0``); in any
    other space it numbers that space's levels (read it back with that space's ``parse``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    space: FactorSpace
    indices: tuple[int, ...]

    @model_validator(mode="after")
    def _in_range(self) -> HarnessConfig:
        if len(self.indices) != len(self.space.factors):
            raise ValueError(f"need {len(self.space.factors)} indices, got {len(self.indices)}")
        for i, f in zip(self.indices, self.space.factors, strict=True):
            if not 0 <= i < len(f.levels):
                raise ValueError(f"index {i} out of range for factor {f.name}")
        return self

    @property
    def code(self) -> str:
        if self.space.extends_paper:
            return stable_code(self.levels)
        return "-".join(f"{f.letter}{i}"
                        for i, f in zip(self.indices, self.space.factors, strict=True))

    @property
    def levels(self) -> dict[str, str]:
        return {f.name: f.levels[i] for i, f in zip(self.indices, self.space.factors, strict=True)}

    def level(self, factor: str) -> str:
        return self.levels[factor]

    def hamming(self, other: HarnessConfig) -> int:
        """Number of factors on which two configurations differ."""
        if len(other.indices) != len(self.indices):
            raise ConfigError("cannot compare configurations of different spaces")
        return sum(a != b for a, b in zip(self.indices, other.indices, strict=True))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.levels)

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"HarnessConfig({self.code})"
