"""The plugin manager: one place that loads, validates and sorts everything plugins register.

Built-in plugins (``harnessgrid.plugins.BUILTIN_PLUGINS``) are registered through the same hooks
as third-party ones, which arrive through the entry-point group ``harnessgrid``. A third-party
plugin that fails to import, or whose hook raises or returns something invalid, is reported by
name in :attr:`Registry.problems` (and as a warning) and skipped; it never takes the host down.
Two plugins registering the same name is an error that names both, because silently picking
one would make results depend on install order.

Set ``HARNESSGRID_DISABLE_PLUGINS=1`` to load built-ins only, or to a comma-separated list of
entry-point names to skip just those.
"""

from __future__ import annotations

import importlib
import os
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

import pluggy

from harnessgrid import hookspecs
from harnessgrid.errors import ConfigError, PluginError
from harnessgrid.levels import FACTOR_BASES, FactorLevel
from harnessgrid.registrations import AdapterSpec, PolicyBackend, TaskSuiteSpec
from harnessgrid.space import FACTORS

ENTRY_POINT_GROUP = "harnessgrid"
DISABLE_ENV = "HARNESSGRID_DISABLE_PLUGINS"

_LEVEL_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DASHED_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")


class PluginWarning(UserWarning):
    """A third-party plugin was skipped because it is broken."""


@dataclass(frozen=True)
class PluginInfo:
    """A registered plugin: its name and where it came from."""

    name: str
    source: str  # "builtin" or "<distribution> <version>"


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that was skipped, and why."""

    plugin: str
    error: str


@dataclass
class Registry:
    """Everything the plugins registered, validated, de-duplicated and sorted by name."""

    factor_levels: dict[tuple[str, str], type[FactorLevel]] = field(default_factory=dict)
    adapters: dict[str, AdapterSpec] = field(default_factory=dict)
    task_suites: dict[str, TaskSuiteSpec] = field(default_factory=dict)
    policies: dict[str, PolicyBackend] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) → plugin
    plugins: list[PluginInfo] = field(default_factory=list)
    problems: list[PluginProblem] = field(default_factory=list)

    def levels(self, factor: str) -> list[str]:
        """Registered level names of ``factor``, sorted."""
        return sorted(name for (f, name) in self.factor_levels if f == factor)

    def level(self, factor: str, name: str) -> type[FactorLevel]:
        if factor not in FACTORS:
            raise ConfigError(f"unknown factor {factor!r}", hint=f"factors are {', '.join(FACTORS)}")
        try:
            return self.factor_levels[(factor, name)]
        except KeyError:
            raise ConfigError(
                f"no plugin provides level {name!r} of factor {factor!r}",
                hint=f"registered {factor} levels: {', '.join(self.levels(factor)) or 'none'}; "
                "install the plugin that provides it (see `harnessgrid plugins list`)",
            ) from None

    def adapter(self, name: str) -> AdapterSpec:
        return _lookup(self.adapters, name, "adapter", "adapter:")

    def task_suite(self, name: str) -> TaskSuiteSpec:
        return _lookup(self.task_suites, name, "task suite", "")

    def policy(self, scheme: str) -> PolicyBackend:
        return _lookup(self.policies, scheme, "policy backend", "", suffix=":")


T = TypeVar("T")


def _lookup(table: dict[str, T], name: str, what: str, prefix: str, suffix: str = "") -> T:
    try:
        return table[name]
    except KeyError:
        known = ", ".join(f"{prefix}{n}{suffix}" for n in table) or "none"
        raise ConfigError(f"unknown {what} {name!r}", hint=f"registered: {known}") from None


# -- validation of what a hook returned ------------------------------------------------------

def _check_level(item: Any) -> tuple[str, str]:
    if not (isinstance(item, type) and issubclass(item, FactorLevel)):
        raise TypeError(f"expected a FactorLevel subclass, got {item!r}")
    base = FACTOR_BASES.get(item.factor)
    if base is None or not issubclass(item, base):
        raise TypeError(f"{item.__name__}: factor {item.factor!r} is not one of {FACTORS} "
                        "(derive from SystemPromptLevel, ToolInterfaceLevel, ...)")
    if not _LEVEL_NAME.match(item.name or ""):
        raise TypeError(f"{item.__name__}: level name {item.name!r} must be lower_snake_case")
    if not item.description:
        raise TypeError(f"{item.__name__}: a level needs a one-line description")
    return (item.factor, item.name)


def _named(cls: type, attr: str) -> Callable[[Any], tuple[str, str]]:
    def check(item: Any) -> tuple[str, str]:
        if not isinstance(item, cls):
            raise TypeError(f"expected {cls.__name__}, got {item!r}")
        name = getattr(item, attr)
        if not _DASHED_NAME.match(name or ""):
            raise TypeError(f"{cls.__name__} {attr} {name!r} must be lower-case, [a-z0-9_.-]")
        if not getattr(item, "description", ""):
            raise TypeError(f"{cls.__name__} {name!r} needs a description")
        return (cls.__name__, name)
    return check


# -- the manager -----------------------------------------------------------------------------

class PluginManager:
    """Loads built-in and entry-point plugins and collects their registrations."""

    def __init__(self, *, builtins: Iterable[str] | None = None,
                 load_external: bool | None = None) -> None:
        from harnessgrid.plugins import BUILTIN_PLUGINS

        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}
        self.problems: list[PluginProblem] = []
        # dict.fromkeys: naming a module twice registers it once, in first-seen order.
        for module_name in dict.fromkeys(BUILTIN_PLUGINS if builtins is None else builtins):
            # A broken built-in is our bug, not the user's: let it raise.
            self._register(importlib.import_module(module_name), module_name, "builtin")
        disabled = os.environ.get(DISABLE_ENV, "").strip()
        if load_external is None:
            load_external = disabled.lower() not in {"1", "true", "yes", "all"}
        if load_external:
            skip = {n.strip() for n in disabled.split(",") if n.strip()}
            self._load_entry_points(skip)

    def _register(self, plugin: object, name: str, source: str) -> None:
        self.pm.register(plugin, name=name)
        self.info[name] = PluginInfo(name=name, source=source)

    def _problem(self, plugin: str, error: str) -> None:
        self.problems.append(PluginProblem(plugin, error))
        warnings.warn(f"harnessgrid plugin {plugin!r} skipped: {error}", PluginWarning,
                      stacklevel=3)

    def _load_entry_points(self, skip: set[str]) -> None:
        seen: set[tuple[str, str]] = set()
        eps: list[EntryPoint] = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        for ep in eps:
            if ep.name in skip or (ep.name, ep.value) in seen:
                continue
            seen.add((ep.name, ep.value))
            dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown distribution"
            label = f"{ep.name} ({dist})"
            if self.pm.has_plugin(label):
                continue
            try:
                plugin = ep.load()
                self._register(plugin, label, dist)
            except Exception as exc:  # noqa: BLE001 - any failure of foreign code is reported
                if self.pm.has_plugin(label):
                    self.pm.unregister(name=label)
                self._problem(label, f"failed to load {ep.value!r}: {type(exc).__name__}: {exc}")

    def _collect(self, hook_name: str, check: Callable[[Any], tuple[str, str]]) -> list[
            tuple[tuple[str, str], Any, str]]:
        """Call every implementation of one hook separately, so a failure is attributable."""
        out: list[tuple[tuple[str, str], Any, str]] = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            plugin = impl.plugin_name
            try:
                items = list(impl.function() or ())
                checked = [(check(item), item) for item in items]
            except Exception as exc:  # noqa: BLE001
                if self.info.get(plugin, PluginInfo(plugin, "")).source == "builtin":
                    raise
                self._problem(plugin, f"{hook_name}() failed: {type(exc).__name__}: {exc}")
                continue
            out.extend((key, item, plugin) for key, item in checked)
        return out

    def registry(self) -> Registry:
        reg = Registry(problems=self.problems)
        tables: list[tuple[str, str, Callable[[Any], tuple[str, str]], dict[Any, Any]]] = [
            ("harnessgrid_factor_levels", "factor level", _check_level, reg.factor_levels),
            ("harnessgrid_adapters", "adapter", _named(AdapterSpec, "name"), reg.adapters),
            ("harnessgrid_task_suites", "task suite", _named(TaskSuiteSpec, "name"),
             reg.task_suites),
            ("harnessgrid_policies", "policy backend", _named(PolicyBackend, "scheme"),
             reg.policies),
        ]
        for hook_name, what, check, table in tables:
            found: dict[Any, tuple[Any, str]] = {}
            for key, item, plugin in self._collect(hook_name, check):
                if key in found:
                    other = found[key][1]
                    shown = ":".join(key) if table is reg.factor_levels else key[1]
                    raise PluginError(
                        f"{what} {shown!r} is registered by two plugins: {other!r} and {plugin!r}",
                        hint="uninstall one of them, or skip one with "
                        f"{DISABLE_ENV}=<entry-point name>",
                    )
                found[key] = (item, plugin)
            for key in sorted(found):
                item, plugin = found[key]
                table_key = key if table is reg.factor_levels else key[1]
                table[table_key] = item
                reg.origin[(what, ":".join(key) if table is reg.factor_levels else key[1])] = plugin
        reg.plugins = sorted(self.info.values(), key=lambda p: (p.source != "builtin", p.name))
        return reg


@lru_cache(maxsize=1)
def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    return PluginManager().registry()


def reset_registry() -> None:
    """Forget the cached registry (after installing a plugin at run time, or in tests)."""
    get_registry.cache_clear()
