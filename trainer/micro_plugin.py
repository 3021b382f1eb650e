"""The micro plugin as the trainer and the demo use it: through the plugin registry.

The demo's space, suite and models come from the micro plugin, which is installed through an
entry point exactly as a third party's plugin is (pyproject.toml). So the trainer reaches it
as it reaches any plugin: its spaces by name (:meth:`Registry.space`), and the models it
builds through the object the registry loaded (:meth:`Registry.plugin_object`), never by
importing around the registry. A user who disabled it (``HARNESSGRID_DISABLE_PLUGINS=micro``)
then gets an error that says so, not a demo run on a plugin they turned off.
"""

from __future__ import annotations

from typing import Any

from harnessgrid.plugin_system.registry import get_registry
from harnessgrid.space import FactorSpace

__all__ = ["MICRO", "UNSEEN", "micro_levels", "micro_plugin", "micro_space"]

#: The plugin's entry point, and the named space of its 3^5 configurations (``micro:CODE``).
MICRO = "micro"
#: The named space with the fourth levels the demo never trains through (``micro4:CODE``).
UNSEEN = "micro4"


def micro_plugin() -> Any:
    """The micro plugin's module, as the registry loaded it (its models:
    ``build_micro_model``, ``micro_base``; its suite's ``SUITE_VERSION``)."""
    return get_registry().plugin_object(MICRO)


def micro_space(name: str = MICRO) -> FactorSpace:
    """A space the micro plugin registers: ``micro`` or ``micro4`` (:data:`UNSEEN`)."""
    micro_plugin()  # disabled or broken: say that, not "no space named micro"
    return get_registry().space(name).space


def micro_levels() -> dict[str, list[str]]:
    """The micro space's level names per factor, as a config's ``space:`` table takes them."""
    return {factor.name: list(factor.levels) for factor in micro_space().factors}
