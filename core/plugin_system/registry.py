"""The plugin manager: one place that loads, validates and sorts everything plugins register.

Built-in plugins (``harnessgrid.plugins.BUILTIN_PLUGINS``) are registered through the same hooks
as third-party ones, which arrive through the entry-point group ``harnessgrid``. A plugin's
mistakes are contained and named, one contribution at a time:

- a plugin that fails to import is skipped as a whole;
- a hook that raises contributes nothing, but the plugin's other hooks still register;
- each item a hook returns is validated on its own (a level class must implement every abstract
  method of its factor's base and take no constructor arguments; an adapter's ``create`` must
  give a harness): an invalid one is skipped, the others register;
- a name registered twice keeps the *first* registration (built-ins first, then entry points
  sorted by name, distribution and module), skips the other and lists both owners. Naming a
  contested name (a harness code or level list resolving to that level, ``--policy
  scheme:...``, a suite, ``adapter:NAME``) is an error naming both plugins and how to disable
  one, because silently using one of the two would make results depend on which one was meant.

Each problem is in :attr:`Registry.problems` (and a :class:`PluginWarning`), each contribution
with its fate in :attr:`Registry.contributions`; ``harnessgrid plugins list`` shows both, and
every other command keeps working. A built-in plugin's mistake is harnessgrid's bug: it raises.

Set ``HARNESSGRID_DISABLE_PLUGINS=1`` to load built-ins only, or to a comma-separated list of
entry-point names to skip just those.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import os
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

import pluggy

from harnessgrid import hookspecs
from harnessgrid.errors import ConfigError, HarnessgridError, PluginError
from harnessgrid.levels import FACTOR_BASES, FactorLevel
from harnessgrid.registrations import AdapterSpec, PolicyBackend, SpaceSpec, TaskSuiteSpec
from harnessgrid.space import FACTORS, FactorSpace
from harnessgrid.tasks import TaskSuite

ENTRY_POINT_GROUP = "harnessgrid"
DISABLE_ENV = "HARNESSGRID_DISABLE_PLUGINS"

_LEVEL_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DASHED_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")


T = TypeVar("T")


class PluginWarning(UserWarning):
    """A third-party plugin's contribution (or the whole plugin) was skipped."""


class PluginConflictError(PluginError, ConfigError):
    """A name the user asked for is registered by more than one plugin."""


class PluginContributionError(PluginError, ConfigError):
    """What the user asked for was contributed by a plugin, but it is broken."""


@dataclass(frozen=True)
class PluginInfo:
    """A registered plugin: its name and where it came from."""

    name: str
    source: str  # "builtin" or "<distribution> <version>"
    entry_point: str = ""  # what HARNESSGRID_DISABLE_PLUGINS takes; "" for a built-in
    #: The distribution (package) that declares the entry point, and its version: what a
    #: result records of the plugin (:func:`provenance`); harnessgrid's own for a built-in.
    distribution: str = ""
    version: str = ""


@dataclass(frozen=True)
class PluginProblem:
    """Something a plugin contributed that is not used, and why.

    ``contribution`` says what: ``""`` for the whole plugin (it failed to load),
    ``"harnessgrid_adapters()"`` for everything one hook returned (it raised), or one item
    (``"factor level observation:raw"``). ``kind`` is ``load``, ``hook``, ``invalid``,
    ``clash`` (``kept`` names the plugin whose registration is used) or ``broken`` (found
    when it was used, e.g. an adapter whose ``create()`` gave no harness).
    """

    plugin: str
    error: str
    contribution: str = ""
    kind: str = "load"
    kept: str = ""


@dataclass(frozen=True)
class Contribution:
    """One item a plugin's hook returned, and whether it was registered."""

    plugin: str
    hook: str
    kind: str  # "factor level", "space", "adapter", "task suite", "policy backend"
    name: str  # as origin keys it: "observation:raw", "sh", "examples", "litellm"
    registered: bool
    reason: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass
class Registry:
    """Everything the plugins registered, validated, de-duplicated and sorted by name."""

    factor_levels: dict[tuple[str, str], type[FactorLevel]] = field(default_factory=dict)
    #: Named spaces (``harnessgrid_spaces``), whose codes are written ``NAME:CODE``.
    spaces: dict[str, SpaceSpec] = field(default_factory=dict)
    adapters: dict[str, AdapterSpec] = field(default_factory=dict)
    task_suites: dict[str, TaskSuiteSpec] = field(default_factory=dict)
    policies: dict[str, PolicyBackend] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) → plugin
    plugins: list[PluginInfo] = field(default_factory=list)
    problems: list[PluginProblem] = field(default_factory=list)
    contributions: list[Contribution] = field(default_factory=list)
    #: (kind, name) → every plugin registering it, the one used first.
    clashes: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    #: (kind, name) → why a plugin's contribution of that name was not registered.
    skipped: dict[tuple[str, str], PluginProblem] = field(default_factory=dict)
    #: Entry-point name → the object that plugin registered (its module), for
    #: :meth:`plugin_object`.
    loaded: dict[str, object] = field(default_factory=dict)

    def levels(self, factor: str) -> list[str]:
        """Registered level names of ``factor``, sorted."""
        return sorted(name for (f, name) in self.factor_levels if f == factor)

    def level(self, factor: str, name: str) -> type[FactorLevel]:
        if factor not in FACTORS:
            raise ConfigError(f"unknown factor {factor!r}", hint=f"factors are {', '.join(FACTORS)}")
        self.check_usable("factor level", f"{factor}:{name}")
        try:
            return self.factor_levels[(factor, name)]
        except KeyError:
            raise ConfigError(
                f"no plugin provides level {name!r} of factor {factor!r}",
                hint=f"registered {factor} levels: {', '.join(self.levels(factor)) or 'none'}; "
                "install the plugin that provides it (see `harnessgrid plugins list`)",
            ) from None

    def space(self, name: str) -> SpaceSpec:
        """The space a plugin registered as ``name`` (``micro`` in ``micro:S0-T1-O2-C0-W1``)."""
        self.check_usable("space", name)
        if name not in self.spaces:
            known = ", ".join(f"{n}:CODE" for n in self.spaces) or "none"
            raise ConfigError(f"no plugin registers a space named {name!r}",
                              hint=f"named spaces: {known}; install the plugin that provides "
                                   "it, or write a code without NAME: (the paper's space)")
        return self.spaces[name]

    def adapter(self, name: str) -> AdapterSpec:
        """The adapter addressed as ``adapter:NAME`` or ``adapter:NAME@VERSION``.

        ``NAME@VERSION`` is the adapter registered under that name, or else ``NAME`` itself
        when its :attr:`AdapterSpec.version` is VERSION (an adapter never registers its pinned
        name itself); its harness is then named ``adapter:NAME@VERSION``, which is how
        trajectories and results record it. Any other VERSION is an error listing the
        versions that are emulated."""
        base, at, version = name.partition("@")
        if at and name not in self.adapters and base in self.adapters:  # NAME@VERSION
            self.check_usable("adapter", base)
            spec = self.adapters[base]
            if version and spec.version == version:
                return _pinned(spec, name)
            known = self.emulated_versions(base)
            raise ConfigError(f"adapter {base!r} does not emulate version {version!r}",
                              hint=f"emulated versions: {', '.join(known) or 'none'} "
                                   + (f"(adapter:{base} is {spec.version})" if spec.version
                                      else f"(adapter:{base} declares no version)"))
        return self._lookup(self.adapters, name, "adapter", "adapter:")

    def emulated_versions(self, base: str) -> list[str]:
        """Every version of adapter ``base`` that ``adapter:BASE@VERSION`` names: its own
        :attr:`AdapterSpec.version` and those registered as ``BASE@VERSION``."""
        spec = self.adapters.get(base)
        found = [spec.version] if spec is not None and spec.version else []
        found += [n.partition("@")[2] for n in self.adapters if n.startswith(base + "@")]
        return list(dict.fromkeys(found))

    def task_suite(self, name: str) -> TaskSuiteSpec:
        return self._lookup(self.task_suites, name, "task suite", "")

    def policy(self, scheme: str) -> PolicyBackend:
        return self._lookup(self.policies, scheme, "policy backend", "", suffix=":")

    def info(self, plugin: str) -> PluginInfo:
        found = [p for p in self.plugins if p.name == plugin]
        return found[0] if found else PluginInfo(plugin, "")

    def plugin_object(self, entry_point: str) -> Any:
        """What the plugin installed as entry point ``entry_point`` registered (its module),
        as this registry loaded it. Code that needs more of a plugin than its registrations
        (the trainer's use of the micro plugin's models) reaches it here rather than importing
        it, so that a plugin the user disabled, or one that failed to load, is an error that
        says so instead of being used anyway."""
        if entry_point in self.loaded:
            return self.loaded[entry_point]
        skip = disabled_entry_points()
        if skip is None or entry_point in skip:
            raise ConfigError(f"plugin {entry_point!r} is disabled ({DISABLE_ENV}="
                              f"{os.environ.get(DISABLE_ENV, '')})",
                              hint=f"leave {entry_point} out of {DISABLE_ENV} to use it")
        failed = [p for p in self.problems
                  if not p.contribution and p.plugin.split(" (")[0] == entry_point]
        if failed:
            raise ConfigError(f"plugin {entry_point!r} failed to load: {failed[0].error}",
                              hint="`harnessgrid plugins list` shows every plugin problem")
        raise ConfigError(f"no plugin is installed as entry point {entry_point!r} "
                          f"(group {ENTRY_POINT_GROUP!r})",
                          hint="install the package that provides it; `harnessgrid plugins "
                               "list` shows what is installed")

    def disable_hint(self, *plugins: str) -> str:
        """How to disable these plugins (a built-in among them cannot be)."""
        infos = [self.info(p) for p in dict.fromkeys(plugins)]
        ways = [f"{DISABLE_ENV}={i.entry_point} (or uninstall {i.source.split(' ')[0]})"
                for i in infos if i.entry_point]
        if not ways:
            return "harnessgrid's built-in plugins cannot be disabled"
        return f"disable {'it' if len(ways) == 1 else 'one'}: {' or '.join(ways)}"

    def check_usable(self, kind: str, name: str) -> None:
        """Raise when the user names something two plugins register, or one whose plugin
        contribution was skipped as broken; ``kind`` and ``name`` as :attr:`origin` keys it."""
        owners = self.clashes.get((kind, name))
        if owners:
            raise PluginConflictError(
                f"{kind} {name!r} is registered by {len(owners)} plugins: "
                f"{' and '.join(_owner(self, p) for p in owners)}; which one is meant is "
                "ambiguous",
                hint=f"{self.disable_hint(*owners)}; `harnessgrid plugins list` shows every "
                "clash")
        problem = self.skipped.get((kind, name))
        if problem is not None and (kind, name) not in self.origin:
            raise PluginContributionError(
                f"{kind} {name!r} of plugin {problem.plugin} was not registered: {problem.error}",
                hint=f"fix the plugin (or ask its authors to), or {self.disable_hint(problem.plugin)}"
                "; `harnessgrid plugins list` lists every plugin problem")

    def _lookup(self, table: dict[str, T], name: str, what: str, prefix: str,
                suffix: str = "") -> T:
        self.check_usable(what, name)
        try:
            return table[name]
        except KeyError:
            known = ", ".join(f"{prefix}{n}{suffix}" for n in table) or "none"
            raise ConfigError(f"unknown {what} {name!r}", hint=f"registered: {known}") from None

    def record(self, problem: PluginProblem) -> None:
        """Add a problem found after registration (once)."""
        if problem not in self.problems:
            self.problems.append(problem)


def _pinned(spec: AdapterSpec, name: str) -> AdapterSpec:
    """``spec`` addressed by its pinned name ``NAME@VERSION``: its harnesses are named
    ``adapter:NAME@VERSION`` (as the built-in adapters name their pinned releases), so results
    say which release ran."""
    original, plain = spec.create, f"adapter:{spec.name}"

    @functools.wraps(original)
    def create(**options: Any) -> Any:
        harness = original(**options)
        if getattr(harness, "name", None) == plain:
            with contextlib.suppress(AttributeError):  # a read-only name keeps the plain one
                harness.name = f"adapter:{name}"
        return harness

    return replace(spec, name=name, create=create)


def provenance(adapters: Iterable[str] = (), reg: Registry | None = None) -> dict[str, Any]:
    """What produced a result, beyond its harness address: harnessgrid's version, every plugin
    loaded through an entry point (its entry point, distribution and version: a plugin
    package's release changes what its levels, suites and policies do), and for each adapter
    named in ``adapters`` (``NAME`` or ``adapter:NAME[@VERSION]``) the version of the shell it
    emulates and the distribution it came from. ``eval`` writes it into ``manifest.json``
    and the report, ``run --json`` prints it."""
    from harnessgrid import __version__

    reg = reg if reg is not None else get_registry()
    plugins = [{"entry_point": p.entry_point, "distribution": p.distribution,
                "version": p.version} for p in reg.plugins if p.source != "builtin"]
    out: dict[str, dict[str, str]] = {}
    for address in dict.fromkeys(adapters):
        name = address.removeprefix("adapter:")
        spec = reg.adapter(name)
        base = name if name in reg.adapters else name.partition("@")[0]
        info = reg.info(reg.origin.get(("adapter", base), ""))
        builtin = info.source == "builtin"
        out[name] = {"version": spec.version, "plugin": info.entry_point or info.name,
                     "distribution": "harnessgrid" if builtin else info.distribution,
                     "distribution_version": __version__ if builtin else info.version}
    return {"harnessgrid_version": __version__, "plugins": plugins, "adapters": out}


def _owner(reg: Registry, plugin: str) -> str:
    return f"built-in {plugin}" if reg.info(plugin).source == "builtin" else plugin


# -- validation of what a hook returned ------------------------------------------------------
# A check returns (table key, name as origin keys it), or raises TypeError saying what is wrong.

def _check_level(item: Any) -> tuple[Any, str]:
    if not (isinstance(item, type) and issubclass(item, FactorLevel)):
        raise TypeError(f"expected a FactorLevel subclass, got {item!r}")
    base = FACTOR_BASES.get(item.factor)
    if base is None or not issubclass(item, base):
        raise TypeError(f"{item.__name__}: factor {item.factor!r} is not one of {FACTORS} "
                        "(derive from SystemPromptLevel, ToolInterfaceLevel, ...)")
    if not _LEVEL_NAME.match(item.name or ""):  # so no '-' or '=': codes write O=NAME
        raise TypeError(f"{item.__name__}: level name {item.name!r} must be lower_snake_case")
    if not item.description:
        raise TypeError(f"{item.__name__}: a level needs a one-line description")
    missing = sorted(getattr(item, "__abstractmethods__", ()))
    if missing:
        raise TypeError(f"{item.__name__} does not implement {', '.join(m + '()' for m in missing)}"
                        f" of {base.__name__} (every abstract method of the base is required)")
    protocol = getattr(item, "protocol", None)
    if item.factor == "workflow" and not callable(getattr(protocol, "expected_turn", None)):
        raise TypeError(f"{item.__name__}.protocol is {protocol!r}, not a WorkflowProtocol "
                        "(the scripted oracle asks it which turn the workflow expects)")
    try:
        inspect.signature(item).bind()
    except TypeError:
        raise TypeError(f"{item.__name__}() needs constructor arguments; the composer creates "
                        "every level with none (take settings as class attributes)") from None
    except ValueError:  # no signature to inspect (a C-level __init__): nothing to check
        pass
    return (item.factor, item.name), f"{item.factor}:{item.name}"


def _named(cls: type, attr: str) -> Callable[[Any], tuple[Any, str]]:
    def check(item: Any) -> tuple[Any, str]:
        if not isinstance(item, cls):
            raise TypeError(f"expected {cls.__name__}, got {item!r}")
        name = getattr(item, attr)
        if not _DASHED_NAME.match(name or ""):
            raise TypeError(f"{cls.__name__} {attr} {name!r} must be lower-case, [a-z0-9_.-]")
        if not getattr(item, "description", ""):
            raise TypeError(f"{cls.__name__} {name!r} needs a description")
        return name, name
    return check


def _check_space(item: Any, registered: Mapping[tuple[str, str], Any]) -> tuple[Any, str]:
    """A named space: a valid name (not ``adapter``, which names adapters) and a
    :class:`FactorSpace` whose every level is registered (``registered``: the factor levels)."""
    key = _named(SpaceSpec, "name")(item)
    if item.name == "adapter":
        raise TypeError("space name 'adapter' is reserved: adapter:NAME names an adapter")
    if not isinstance(item.space, FactorSpace):
        raise TypeError(f"SpaceSpec {item.name!r}: space is {item.space!r}, not a FactorSpace")
    missing = [f"{f.name}:{n}" for f in item.space.factors for n in f.levels
               if (f.name, n) not in registered]
    if missing:
        raise TypeError(f"SpaceSpec {item.name!r} names levels no plugin registers: "
                        f"{', '.join(missing)}")
    return key


def _check_adapter(item: Any) -> tuple[Any, str]:
    # An adapter may also be registered per emulated release, as NAME@VERSION.
    name = item.name if isinstance(item, AdapterSpec) and isinstance(item.name, str) else ""
    base, at, version = name.partition("@")
    if at and not re.match(r"^[a-z0-9][a-z0-9_.-]*$", version):
        raise TypeError(f"AdapterSpec name {name!r}: the version after '@' must be [a-z0-9_.-]")
    _named(AdapterSpec, "name")(replace(item, name=base) if at else item)
    key = (name, name)
    if not callable(item.create):
        raise TypeError(f"AdapterSpec {item.name!r}: create is {item.create!r}, not callable")
    cls = _declared_harness_class(item.create)
    wrong = _harness_class_problems(cls) if cls is not None else []
    if cls is not None and wrong:
        raise TypeError(f"adapter:{item.name}'s create() gives {cls.__name__}, "
                        f"which is not a harness: {'; '.join(wrong)}")
    return key


def _declared_harness_class(create: Callable[..., Any]) -> type | None:
    """The class ``create`` makes, when it says so without being called: ``create`` is the
    class itself, or a function whose return annotation is a class."""
    if isinstance(create, type):
        return create
    try:
        returned = typing.get_type_hints(create).get("return")
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve proves nothing
        return None
    # ``-> Any`` says nothing (and typing.Any is a class since Python 3.11)
    if isinstance(returned, type) and returned not in (object, typing.Any) and \
            not getattr(returned, "_is_protocol", False):
        return returned
    return None


@functools.cache
def harness_contract() -> tuple[tuple[str, ...], frozenset[str], dict[str, type]]:
    """What a harness must have, read from :class:`harnessgrid.harness.Harness` itself, so
    the checks follow the protocol: its methods, those of them the runtime awaits, and its
    attributes with their types."""
    from harnessgrid.harness import Harness

    members = {n: v for n, v in vars(Harness).items() if not n.startswith("_")}
    methods = tuple(n for n, v in members.items() if callable(v))
    awaited = frozenset(n for n in methods if inspect.iscoroutinefunction(members[n]))
    return methods, awaited, typing.get_type_hints(Harness)


def _harness_class_problems(cls: type) -> list[str]:
    methods, awaited, _ = harness_contract()
    wrong = [f"no {m}() method" for m in methods if not callable(getattr(cls, m, None))]
    for name in sorted(awaited):
        method = getattr(cls, name, None)
        if callable(method) and not inspect.iscoroutinefunction(method):
            wrong.append(f"{name}() is not async (the runtime awaits it)")
    return wrong


def harness_problems(obj: Any) -> list[str]:
    """What ``obj`` lacks to be a :class:`harnessgrid.harness.Harness` ([] when nothing)."""
    methods, _, attributes = harness_contract()
    wrong = _harness_class_problems(type(obj))
    for attr in methods:  # instance attributes count too
        if callable(getattr(obj, attr, None)) and f"no {attr}() method" in wrong:
            wrong.remove(f"no {attr}() method")
    for attr, kind in attributes.items():
        value = getattr(obj, attr, None)
        # a protocol-typed attribute may be any object with the protocol's methods
        duck = [m for m, v in vars(kind).items() if callable(v) and not m.startswith("_")]
        if not (isinstance(value, kind) or (duck and all(callable(getattr(value, m, None))
                                                         for m in duck))):
            wrong.append(f"no {attr} (a {kind.__module__}.{kind.__qualname__})"
                         if kind.__module__ != "builtins" else f"no {attr} (a {kind.__name__})")
    return wrong


def _describe(kind: str, item: Any) -> str:
    """A name for an item a check rejected, as origin would key it where there is one."""
    if kind == "factor level" and isinstance(item, type):
        factor, name = getattr(item, "factor", None), getattr(item, "name", None)
        if isinstance(factor, str) and isinstance(name, str) and factor and name:
            return f"{factor}:{name}"
        return item.__name__
    name = getattr(item, "scheme" if kind == "policy backend" else "name", None)
    if isinstance(name, str) and name and not isinstance(item, type):
        return name
    text = repr(item)
    return text if len(text) <= 60 else text[:57] + "..."


def disabled_entry_points() -> set[str] | None:
    """The entry-point plugins ``HARNESSGRID_DISABLE_PLUGINS`` names (``a,b``); None when it
    disables them all (``1``, ``true``, ``yes``, ``all``)."""
    disabled = os.environ.get(DISABLE_ENV, "").strip()
    if disabled.lower() in {"1", "true", "yes", "all"}:
        return None
    return {n.strip() for n in disabled.split(",") if n.strip()}


# -- the manager -----------------------------------------------------------------------------

#: hook, kind, check (``None``: checked against the registry built so far), Registry table.
_TABLES: tuple[tuple[str, str, Callable[[Any], tuple[Any, str]] | None, str], ...] = (
    ("harnessgrid_factor_levels", "factor level", _check_level, "factor_levels"),
    # after the levels: a named space's levels are checked against the registered ones
    ("harnessgrid_spaces", "space", None, "spaces"),
    ("harnessgrid_adapters", "adapter", _check_adapter, "adapters"),
    ("harnessgrid_task_suites", "task suite", _named(TaskSuiteSpec, "name"), "task_suites"),
    ("harnessgrid_policies", "policy backend", _named(PolicyBackend, "scheme"), "policies"),
)


class PluginManager:
    """Loads built-in and entry-point plugins and collects their registrations."""

    def __init__(self, *, builtins: Iterable[str] | None = None,
                 load_external: bool | None = None) -> None:
        from harnessgrid.plugins import BUILTIN_PLUGINS

        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}  # in registration order: first wins a clash
        self.problems: list[PluginProblem] = []  # found while loading
        # dict.fromkeys: naming a module twice registers it once, in first-seen order.
        for module_name in dict.fromkeys(BUILTIN_PLUGINS if builtins is None else builtins):
            # A broken built-in is our bug, not the user's: let it raise.
            self._register(importlib.import_module(module_name), module_name, "builtin")
        skip = disabled_entry_points()
        if load_external is None:
            load_external = skip is not None
        if load_external:
            self._load_entry_points(skip or set())

    def _register(self, plugin: object, name: str, source: str, entry_point: str = "",
                  distribution: str = "", version: str = "") -> None:
        self.pm.register(plugin, name=name)
        self.info[name] = PluginInfo(name=name, source=source, entry_point=entry_point,
                                     distribution=distribution, version=version)

    def _builtin(self, plugin: str) -> bool:
        return self.info.get(plugin, PluginInfo(plugin, "")).source == "builtin"

    def _load_entry_points(self, skip: set[str]) -> None:
        seen: set[tuple[str, str]] = set()
        # Sorted so that which of two clashing plugins wins never depends on install order.
        eps: list[EntryPoint] = sorted(
            entry_points(group=ENTRY_POINT_GROUP),
            key=lambda e: (e.name, e.dist.name if e.dist else "", e.value))
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
                self._register(plugin, label, dist, ep.name,
                               ep.dist.name if ep.dist else "", ep.dist.version if ep.dist else "")
            except Exception as exc:  # noqa: BLE001 - any failure of foreign code is reported
                if self.pm.has_plugin(label):
                    self.pm.unregister(name=label)
                self.info.pop(label, None)
                self.problems.append(PluginProblem(
                    label, f"failed to load {ep.value!r}: {type(exc).__name__}: {exc}; nothing "
                    "of it is registered"))
                continue
            self.problems.extend(self._hook_name_problems(plugin, label))

    def _hook_name_problems(self, plugin: object, label: str) -> list[PluginProblem]:
        """A hook pluggy accepts but never calls (a misspelt name), or no hook at all."""
        specs = [n for n in dir(hookspecs) if n.startswith("harnessgrid_")]
        found = self.pm.get_hookcallers(plugin) or []
        out = []
        for caller in found:
            if caller.spec is None:
                close = difflib.get_close_matches(caller.name, specs, n=1)
                out.append(PluginProblem(
                    label, f"{caller.name}() is not a harnessgrid hook, so it is never called" +
                    (f"; did you mean {close[0]}()?" if close else
                     f"; the hooks are {', '.join(specs)}"),
                    contribution=f"{caller.name}()", kind="hook"))
        if not found:
            out.append(PluginProblem(
                label, f"{label.split(' ')[0]} points at {type(plugin).__name__} "
                f"{getattr(plugin, '__name__', plugin)!r}, which has no @hookimpl functions "
                "(decorate them with harnessgrid.hookimpl)"))
        return out

    def _impls(self, hook_name: str) -> list[Any]:
        """The hook's implementations in registration order (pluggy orders them for calls,
        and tryfirst/trylast would let a plugin jump ahead)."""
        order = {name: i for i, name in enumerate(self.info)}
        impls = getattr(self.pm.hook, hook_name).get_hookimpls()
        return sorted(impls, key=lambda impl: order.get(impl.plugin_name, len(order)))

    def _collect(self, hook_name: str, kind: str, check: Callable[[Any], tuple[Any, str]],
                 problems: list[PluginProblem], contributions: list[Contribution],
                 skipped: dict[tuple[str, str], PluginProblem]) -> list[
                     tuple[Any, str, Any, str]]:
        """Call every implementation of one hook separately and check each item it returns
        separately, so a failure is attributable and skips only what failed."""
        out: list[tuple[Any, str, Any, str]] = []
        for impl in self._impls(hook_name):
            plugin = impl.plugin_name
            builtin = self._builtin(plugin)
            try:
                if impl.hookwrapper or impl.wrapper:
                    raise TypeError("a registration hook cannot be a (hook)wrapper")
                returned = impl.function()
                if isinstance(returned, (str, bytes, type)) or not (
                        returned is None or isinstance(returned, Iterable)):
                    raise TypeError(f"it must return an iterable of what it registers (or "
                                    f"yield each), got {returned!r}")
                items = list(returned or ())
            except Exception as exc:
                if builtin:
                    raise
                problems.append(PluginProblem(
                    plugin, f"{hook_name}() raised {type(exc).__name__}: {exc}; nothing it "
                    "returned is registered (the plugin's other hooks are unaffected)",
                    contribution=f"{hook_name}()", kind="hook"))
                continue
            for item in items:
                try:
                    key, name = check(item)
                except Exception as exc:
                    if builtin:
                        raise
                    name = _describe(kind, item)
                    problem = PluginProblem(plugin, f"{exc}", contribution=f"{kind} {name}",
                                            kind="invalid")
                    problems.append(problem)
                    skipped.setdefault((kind, name), problem)
                    contributions.append(Contribution(plugin, hook_name, kind, name, False,
                                                      problem.error))
                    continue
                out.append((key, name, item, plugin))
        return out

    def registry(self) -> Registry:
        reg = Registry(plugins=list(self.info.values()),
                       loaded={info.entry_point: self.pm.get_plugin(label)
                               for label, info in self.info.items() if info.entry_point})
        problems = list(self.problems)
        for hook_name, kind, table_check, attr in _TABLES:
            check = table_check or functools.partial(_check_space, registered=reg.factor_levels)
            table: dict[Any, Any] = getattr(reg, attr)
            found: dict[Any, tuple[str, Any, str]] = {}
            for key, name, item, plugin in self._collect(hook_name, kind, check, problems,
                                                         reg.contributions, reg.skipped):
                if key in found:
                    first = found[key][2]
                    if self._builtin(first) and self._builtin(plugin):
                        raise PluginError(f"{kind} {name!r} is registered by two built-in "
                                          f"plugins: {first!r} and {plugin!r}",
                                          hint="this is a bug in harnessgrid; please report it")
                    if first == plugin:
                        reason = "registered twice by this plugin; the first is used"
                    else:
                        reg.clashes.setdefault((kind, name), [first]).append(plugin)
                        reason = (f"already registered by {_owner(reg, first)}, which is "
                                  f"used; naming {name!r} is an error until you "
                                  f"{reg.disable_hint(plugin)}")
                    problems.append(PluginProblem(plugin, reason, contribution=f"{kind} {name}",
                                                  kind="clash", kept=first))
                    reg.contributions.append(Contribution(plugin, hook_name, kind, name, False,
                                                          reason))
                    continue
                found[key] = (name, item, plugin)
                reg.contributions.append(Contribution(plugin, hook_name, kind, name, True))
            for key in sorted(found):
                name, item, plugin = found[key]
                if kind == "adapter":
                    item = _validating_adapter(item, plugin, reg)
                table[key] = item
                reg.origin[(kind, name)] = plugin
        reg.plugins.sort(key=lambda p: (p.source != "builtin", p.name))
        for problem in problems:
            reg.problems.append(problem)
            what = problem.contribution or "the whole plugin"
            warnings.warn(f"harnessgrid plugin {problem.plugin!r}: {what} skipped: "
                          f"{problem.error}", PluginWarning, stacklevel=2)
        return reg


def _validating_adapter(spec: AdapterSpec, plugin: str, reg: Registry) -> AdapterSpec:
    """``spec`` whose ``create`` checks what it made: creating a harness may be expensive, so
    it is checked when first used (``harnessgrid plugins list --check`` creates each one)."""
    original = spec.create
    builtin = reg.info(plugin).source == "builtin"

    def fail(what: str) -> PluginContributionError:
        reg.record(PluginProblem(plugin, what, contribution=f"adapter {spec.name}",
                                 kind="broken"))
        return PluginContributionError(
            f"adapter:{spec.name} of plugin {plugin} {what}",
            hint="an adapter's create(**options) returns an object implementing "
            "harnessgrid.harness.Harness (CONTRIBUTING.md, Writing an adapter); fix the plugin, "
            f"or {reg.disable_hint(plugin)}")

    @functools.wraps(original)
    def create(**options: Any) -> Any:
        try:
            harness = original(**options)
        except HarnessgridError:
            raise  # the adapter's own, actionable error (e.g. an unknown option)
        except Exception as exc:
            if builtin:
                raise
            raise fail(f"failed to create its harness: {type(exc).__name__}: {exc}") from exc
        wrong = harness_problems(harness)
        if wrong:
            raise fail(f"is broken: create() returned {type(harness).__name__}, which is not a "
                       f"harness: {'; '.join(wrong)}")
        return harness

    return replace(spec, create=create)


@lru_cache(maxsize=1)
def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    return PluginManager().registry()


def reset_registry() -> None:
    """Forget the cached registry (after installing a plugin at run time, or in tests)."""
    get_registry.cache_clear()


def load_suite(spec: str, **options: Any) -> TaskSuite:
    """Load a suite by its address: ``grid-bench``, ``clawgym:/path``, ``pinchbench:/path``."""
    name, _, argument = spec.partition(":")
    entry = get_registry().task_suite(name)
    if entry.takes_argument and not argument:
        raise ConfigError(f"task suite {name!r} needs an argument", hint=f"write {name}:PATH")
    if argument and not entry.takes_argument:
        raise ConfigError(f"task suite {name!r} takes no argument, got {spec!r}",
                          hint=f"write just {name}")
    suite = entry.load(argument or None, **options)
    if not isinstance(suite, TaskSuite):
        raise ConfigError(f"task suite plugin {name!r} returned {type(suite).__name__}, "
                          "not a TaskSuite")
    return suite
