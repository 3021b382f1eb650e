"""What plugins register, besides factor levels: named spaces, adapters, task suites and policy
backends.

Each is a small frozen record naming a factory, so listing plugins (``harnessgrid plugins list``)
never imports a heavy backend: the factory runs only when the thing is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessgrid.space import FactorSpace


@dataclass(frozen=True)
class SpaceSpec:
    """A factor space under a name, whose codes are written ``<name>:<code>``
    (``micro:S0-T1-O2-C0-W1``) and numbered as ``space`` orders its levels.

    Every level the space names must be registered (by this plugin or another); a code of a
    named space means the same harness on every machine that has the plugin, whatever else is
    installed. ``adapter`` is reserved.
    """

    name: str
    description: str
    space: FactorSpace


@dataclass(frozen=True)
class AdapterSpec:
    """A black-box shell emulation, addressed as ``adapter:<name>``.

    ``create(**options)`` returns an object implementing the ``Harness`` protocol. The registry
    checks it: at registration when ``create`` is the harness class (or is annotated to return
    one), else when it is first called; a plugin's broken adapter is then an error naming the
    plugin, the adapter and what is missing (``harnessgrid plugins list --check`` creates each).
    """

    name: str
    description: str
    create: Callable[..., Any]
    version: str = ""


@dataclass(frozen=True)
class TaskSuiteSpec:
    """A task suite, addressed as ``<name>`` or, when ``takes_argument``, ``<name>:<arg>``
    (e.g. ``clawgym:/data/clawgym-bench``).

    ``load(argument, **options)`` returns a ``TaskSuite``.
    """

    name: str
    description: str
    load: Callable[..., Any]
    takes_argument: bool = False


@dataclass(frozen=True)
class PolicyBackend:
    """A policy backend addressed by scheme: ``<scheme>:<rest>`` or the bare scheme
    (``scripted``, ``litellm:gpt-4o-mini``, ``hf:Qwen/Qwen3-4B-Instruct-2507``).

    ``create(rest, options)`` returns a policy; ``extra`` names the pip extra it needs.
    """

    scheme: str
    description: str
    create: Callable[[str, Mapping[str, Any]], Any]
    extra: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
