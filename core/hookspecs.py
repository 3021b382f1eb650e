"""The hooks a harnessgrid plugin can implement.

A plugin is a module (or object) with functions decorated by :data:`hookimpl`. Built-in plugins
and third-party ones are registered the same way; a third-party package points the entry-point
group ``harnessgrid`` at its module::

    # pyproject.toml of the plugin package
    [project.entry-points.harnessgrid]
    my_levels = "my_package.harnessgrid_plugin"

Every hook is a *registration* hook: it takes no arguments and returns an iterable of the things
it contributes. The plugin manager calls each plugin separately, validates what it returned,
rejects duplicate names (naming both plugins) and sorts the result by name.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from harnessgrid import hookimpl  # noqa: F401 - re-exported for plugin authors
from harnessgrid.levels import FactorLevel
from harnessgrid.registrations import AdapterSpec, PolicyBackend, TaskSuiteSpec

PROJECT = "harnessgrid"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def harnessgrid_factor_levels() -> Iterable[type[FactorLevel]]:  # type: ignore[empty-body]
    """Register factor levels: classes derived from one of the five factor bases.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.levels import ObservationLevel

        class Diffstat(ObservationLevel):
            name = "diffstat"
            description = "Show only a diffstat of what a command changed."
            ...

        @hookimpl
        def harnessgrid_factor_levels():
            yield Diffstat
    """


@hookspec
def harnessgrid_adapters() -> Iterable[AdapterSpec]:  # type: ignore[empty-body]
    """Register black-box shell emulations, used as ``--harness adapter:<name>``.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.registrations import AdapterSpec

        @hookimpl
        def harnessgrid_adapters():
            yield AdapterSpec(
                name="mini-bash",
                description="One bash tool, mini-swe-agent style.",
                create=lambda **options: MiniBashHarness(**options),
            )
    """


@hookspec
def harnessgrid_task_suites() -> Iterable[TaskSuiteSpec]:  # type: ignore[empty-body]
    """Register task suites, addressed as ``<name>`` or ``<name>:<argument>``.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.registrations import TaskSuiteSpec

        @hookimpl
        def harnessgrid_task_suites():
            yield TaskSuiteSpec(
                name="mysuite",
                description="Our in-house workspace tasks.",
                load=lambda argument=None, **options: load_my_suite(),
            )
    """


@hookspec
def harnessgrid_policies() -> Iterable[PolicyBackend]:  # type: ignore[empty-body]
    """Register policy backends, addressed by scheme (``<scheme>:<rest>``).

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.registrations import PolicyBackend

        @hookimpl
        def harnessgrid_policies():
            yield PolicyBackend(
                scheme="echo",
                description="Repeats the last user message (for demos).",
                create=lambda rest, options: EchoPolicy(),
            )
    """
