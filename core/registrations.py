"""What plugins register, besides factor levels: adapters, task suites and policy backends.

Each is a small frozen record naming a factory, so listing plugins (``harnessgrid plugins list``)
never imports a heavy backend: the factory runs only when the thing is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


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
