"""The registrations of a shell emulated in several releases: ``NAME`` for the newest and
``NAME@VERSION`` for each, every one made by the same harness class with its ``version``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.registrations import AdapterSpec


def release_specs(base: str, versions: Sequence[str], make: Callable[..., Any],
                  describe: Callable[[str], str]) -> Iterator[AdapterSpec]:
    """``AdapterSpec``s of ``adapter:base`` (``versions[0]``, the newest) and of every
    ``adapter:base@VERSION``; ``make(version=..., **options)`` builds the harness."""
    for name, version in [(base, versions[0]), *((f"{base}@{v}", v) for v in versions)]:
        yield AdapterSpec(name=name, version=version, description=describe(version),
                          create=_factory(base, name, version, make))


def _factory(base: str, name: str, version: str,
             make: Callable[..., Any]) -> Callable[..., Any]:
    accepted = sorted(inspect.signature(make).parameters)

    def create(**options: Any) -> Any:
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ConfigError(f"unknown option(s) for adapter:{name}: {', '.join(unknown)}",
                              hint=f"options are {', '.join(accepted)}")
        chosen = options.get("version", version)
        if name != base and chosen != version:
            raise ConfigError(f"adapter:{name} cannot take version {chosen!r}",
                              hint=f"use adapter:{base}@{chosen} instead")
        harness = make(**{**options, "version": chosen})
        # Results are grouped by this name: it says which release ran.
        harness.name = f"adapter:{name}" if chosen == version else f"adapter:{base}@{chosen}"
        return harness

    if isinstance(make, type):  # says what it makes, so the registry checks that class
        create.__annotations__ = {**create.__annotations__, "return": make}
    return create
