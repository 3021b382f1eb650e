"""The hooks a harnessgrid plugin can implement.

A plugin is a module (or object) with functions decorated by :data:`hookimpl`. Built-in plugins
and third-party ones are registered the same way; a third-party package points the entry-point
group ``harnessgrid`` at its module (one entry point per plugin module) and declares its
dependency on harnessgrid below the next minor version::

    # pyproject.toml of the plugin package
    [project]
    name = "my-package"
    version = "0.1.0"
    dependencies = ["harnessgrid>=0.2,<0.3"]

    [project.entry-points.harnessgrid]
    my_levels = "my_package.harnessgrid_plugin"

Every hook is a *registration* hook: it takes no arguments and returns an iterable of the things
it contributes. The plugin manager calls each hook of each plugin separately, validates every
item it returned, keeps the first registration of a name (built-ins first) and reports a later
one as skipped with both owners — naming that name is then an error naming both — and sorts the
result by name.

Each hook's ``Example::`` is a complete plugin module: ``tests/test_contributing.py`` installs
each one through an entry point and drives what it registers (with hostile tool results for
levels and adapters), so the examples run as written. CONTRIBUTING.md walks through each kind
of plugin, with a test template each.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from harnessgrid import hookimpl  # noqa: F401 - re-exported for plugin authors
from harnessgrid.levels import FactorLevel
from harnessgrid.registrations import AdapterSpec, PolicyBackend, SpaceSpec, TaskSuiteSpec

PROJECT = "harnessgrid"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def harnessgrid_factor_levels() -> Iterable[type[FactorLevel]]:  # type: ignore[empty-body]
    """Register factor levels: classes derived from one of the five factor bases in
    :mod:`harnessgrid.levels`. An observation level must be total (any ``ToolResult`` formats,
    see :mod:`harnessgrid.observations`), deterministic and bounded.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.levels import Action, FormatError, ObservationLevel, ToolResult
        from harnessgrid.observations import clean, exit_code

        class LastLines(ObservationLevel):
            name = "last_lines"
            description = "The call's status and the last 20 lines it printed."

            def format(self, action: Action, result: ToolResult) -> str:
                code = exit_code(result.exit_code)  # None for a code no process returns
                status = ("ok" if result.ok else "timed out" if result.timed_out
                          else f"error: {result.error[:300]}" if result.error is not None
                          else f"exit {'?' if code is None else code}")
                lines = (result.output[-20_000:] + result.stderr[-20_000:]).splitlines()
                return clean("\\n".join([f"[{status}]", *(ln[:300] for ln in lines[-20:])]))

            def format_error(self, error: FormatError) -> str:
                return clean(f"[rejected] {error.message[:1_000]}")

        @hookimpl
        def harnessgrid_factor_levels():
            yield LastLines
    """


@hookspec
def harnessgrid_spaces() -> Iterable[SpaceSpec]:  # type: ignore[empty-body]
    """Register named factor spaces: a space of registered levels (a plugin's own, built-in
    ones or both) under a name, whose codes are written ``<name>:<code>`` and numbered as the
    space orders its levels. The paper's space never changes when a plugin is installed; a
    plugin that brings a whole grid of its own (the micro plugin's ``micro``) names it here,
    so ``micro:S0-T1-O2-C0-W1`` means the same harness on every machine with the plugin.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.registrations import SpaceSpec
        from harnessgrid.space import FactorSpace

        TEXT_TOOLS = FactorSpace.from_levels({
            "system_prompt": ["minimal", "stepwise"],
            "tool_interface": ["xml_tags", "bash_only"],
            "observation": ["raw", "annotated"],
            "context": ["full", "compact"],
            "workflow": ["react", "verify_recover"],
        })

        @hookimpl
        def harnessgrid_spaces():
            # text-tools:S1-T0-O1-C0-W1 is stepwise, xml_tags, annotated, full, verify_recover
            yield SpaceSpec(name="text-tools", space=TEXT_TOOLS,
                            description="2^5 built-in levels whose tool calls are plain text.")
    """


@hookspec
def harnessgrid_adapters() -> Iterable[AdapterSpec]:  # type: ignore[empty-body]
    """Register black-box shell emulations, used as ``--harness adapter:<name>``.

    ``create(**options)`` returns an object implementing :class:`harnessgrid.harness.Harness`
    and rejects unknown options with a ``ConfigError``. The command line calls it with no
    options; Python callers may pass some and use the harness object directly. ``version`` is
    the version of the shell emulated. CONTRIBUTING.md has a complete adapter; this one reuses
    ``mini-bash`` under its own name.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.errors import ConfigError
        from harnessgrid.plugins.adapters.mini_bash import MiniBashHarness
        from harnessgrid.registrations import AdapterSpec

        class PlainBash(MiniBashHarness):  # any class implementing the Harness protocol
            name = "adapter:plain-bash"

        def create(**options):
            if options:
                raise ConfigError(f"adapter:plain-bash takes no options, got {sorted(options)}")
            return PlainBash()

        @hookimpl
        def harnessgrid_adapters():
            yield AdapterSpec(name="plain-bash", version="1", create=create,
                              description="One bash block per turn, mini-swe-agent style.")
    """


@hookspec
def harnessgrid_task_suites() -> Iterable[TaskSuiteSpec]:  # type: ignore[empty-body]
    """Register task suites, addressed as ``<name>`` or, with ``takes_argument=True``,
    ``<name>:<argument>`` (see :mod:`harnessgrid.suites` for suites loaded from a path).

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.models import Action
        from harnessgrid.registrations import TaskSuiteSpec
        from harnessgrid.tasks import FunctionGrader, Task, TaskSuite

        def greeted(workspace, transcript):
            path = workspace / "hello.txt"
            return {"greeting": float(path.is_file() and path.read_text() == "hello\\n")}

        def load_my_suite(argument=None, **options):
            task = Task(id="hello", suite="hello-suite", instruction="Write hello to hello.txt.",
                        grader=FunctionGrader(greeted),
                        plan=(Action.of("write", path="hello.txt", content="hello\\n"),))
            return TaskSuite(name="hello-suite", splits={"eval": (task,)})

        @hookimpl
        def harnessgrid_task_suites():
            yield TaskSuiteSpec(name="hello-suite", description="One greeting task.",
                                load=load_my_suite)
    """


@hookspec
def harnessgrid_policies() -> Iterable[PolicyBackend]:  # type: ignore[empty-body]
    """Register policy backends, addressed by scheme (``<scheme>:<rest>``).

    ``create(rest, options)`` returns an object with a ``spec`` string and an
    ``async act(request: PolicyRequest) -> ModelTurn`` method.

    Example::

        from harnessgrid import hookimpl
        from harnessgrid.models import ModelTurn
        from harnessgrid.registrations import PolicyBackend

        class EchoPolicy:
            spec = "echo"

            async def act(self, request):
                said = [m.content for m in request.messages if m.role == "user"]
                return ModelTurn(content=said[-1] if said else "")

        @hookimpl
        def harnessgrid_policies():
            yield PolicyBackend(
                scheme="echo",
                description="Repeats the last user message (for demos).",
                create=lambda rest, options: EchoPolicy(),
            )
    """
