"""Old public paths that keep working: the deprecation table and the one mechanism behind it.

A public import path (CONTRIBUTING.md's plugin API table, a module README.md tells readers to
import) that moves or is renamed keeps working for at least one minor release (CONTRIBUTING's
"Stability and deprecation policy"): using it gives the very object the new path gives, with a
``DeprecationWarning`` that names the new path and the release that removes the old one,
attributed to the line that used it.

- A moved module keeps a shim file at its old place whose whole body is
  ``__getattr__ = module_getattr(__name__)`` (``core/tools.py`` is one): every name asked of
  it comes from the new module, with the warning.
- A name that moved out of a module that stays is served by that module's ``__getattr__``, set
  the same way (``core/tasks.py`` ends with it); only the names in :data:`MOVED_NAMES` answer.

Nothing here imports a new place before an old path is used, so the shims cost nothing at
start-up (``harnessgrid --help`` stays light). ``tests/test_api_stability.py`` checks that every
entry imports, warns at the caller's line and gives the same object as its new path, and that
the frozen plugin in ``tests/fixtures/legacy_plugin/`` (written against 0.1.0) still passes.
Removing an entry is a release's decision, listed under "Removed" in CHANGELOG.md.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Moved:
    """Where an old path went: ``new`` is the module to import from now; ``names`` are the
    names the old documentation listed there (the warning names them)."""

    new: str
    names: tuple[str, ...] = ()
    since: str = "0.2.0"
    removed_in: str = "0.3.0"

    def message(self, old: str) -> str:
        fix = (f"import {', '.join(self.names)} from {self.new}" if self.names
               else f"import {self.new} instead")
        return (f"{old} is deprecated since {self.since} and will be removed in "
                f"{self.removed_in}; {fix}")


#: Modules that moved: old module -> new module. The 0.2.0 entries are issue 29's layering
#: (``core/`` split into subpackages), for the modules the 0.1.0 pages named.
MOVED_MODULES: dict[str, Moved] = {
    # CONTRIBUTING's plugin API table: the adapter helpers.
    "harnessgrid.tools": Moved("harnessgrid.sandboxing.tools",
                               ("execute", "as_shell", "Environment")),
    # CONTRIBUTING's adapter contract: approvals and product tools.
    "harnessgrid.tool_hooks": Moved("harnessgrid.sandboxing.tool_hooks",
                                    ("gate", "run_product_tool")),
    # docs/sandbox.md: graders' sandboxes, pools in your own code, in-process graders' reads, Ray.
    "harnessgrid.sandbox": Moved("harnessgrid.sandboxing.sandbox", ("Sandbox", "SandboxLimits")),
    "harnessgrid.sandbox_pool": Moved("harnessgrid.sandboxing.sandbox_pool",
                                      ("SandboxPool", "PoolsByKey")),
    "harnessgrid.grading_io": Moved("harnessgrid.sandboxing.grading_io",
                                    ("read_text", "read_bytes")),
    "harnessgrid.ray_episodes": Moved("harnessgrid.engine.ray_episodes", ("ray_episodes",)),
    # 0.2.3: trajectories are data every layer and plugin reads (issue 42: the contract no
    # longer types against the engine)
    "harnessgrid.engine.trajectory": Moved("harnessgrid.trajectory",
                                           ("Trajectory", "TurnRecord", "CallRecord",
                                            "TrajectoryStore"), since="0.2.3",
                                           removed_in="0.4.0"),
    "harnessgrid.engine.token_rows": Moved("harnessgrid.token_rows", ("TokenRow", "token_rows"),
                                           since="0.2.3", removed_in="0.4.0"),
}

#: Names that moved out of a module that stays: ``"old_module.name"`` -> where to import the
#: name from now (``names`` is the name itself).
MOVED_NAMES: dict[str, Moved] = {
    # CONTRIBUTING's task-suite section (load a suite again by its name); the registry's
    # module holds it now, and the stable path is the top-level one, ``hg.load_suite``.
    "harnessgrid.tasks.load_suite": Moved("harnessgrid", ("load_suite",)),
    # the in-process executor lives with the others (issue 42: no import cycle in the engine)
    "harnessgrid.engine.runtime.run_episodes": Moved("harnessgrid.engine.executor",
                                                     ("run_episodes",), since="0.2.3",
                                                     removed_in="0.4.0"),
    "harnessgrid.engine.task_sessions.run_task_episode": Moved(
        "harnessgrid.engine.runtime", ("run_task_episode",), since="0.2.3", removed_in="0.4.0"),
    # what graders read is the grading contract's format, not the trajectory's (issue 42)
    "harnessgrid.trajectory.openclaw_transcript": Moved(
        "harnessgrid.transcripts", ("openclaw_transcript",), since="0.2.3", removed_in="0.4.0"),
}


def module_getattr(module: str) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``module``: for a moved module's shim, every name
    of the new module; for a module that stays, the names that moved out of it. Either way
    the value is the new path's own object, and each use warns."""

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):  # the import system probes __path__, __all__, ...
            old = module if module in MOVED_MODULES else f"{module}.{name}"
            moved = MOVED_MODULES.get(module) or MOVED_NAMES.get(old)
            if moved is not None:
                new = importlib.import_module(moved.new)
                if hasattr(new, name):
                    # stacklevel 2: the line that imported or used the old path.
                    warnings.warn(moved.message(old), DeprecationWarning, stacklevel=2)
                    return getattr(new, name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def step_kept_the_books(harness: object) -> None:
    """Warn, at its ``step``'s first line, that ``harness`` still counts ``state.turn`` or
    ``state.consecutive_format_errors`` itself, as the 0.1.0 adapter contract asked; the
    runtime counts them since 0.2.0 (:func:`harnessgrid.harness.play_turn` undoes the
    step's change: counted twice, the format-error limit would be halved and ``state.turn``,
    which workflows and call ids read, would run ahead)."""
    step = getattr(type(harness), "step", None)
    code = getattr(step, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code is not None else ("<unknown>", 0)
    name = f"{type(harness).__module__}.{type(harness).__qualname__}.step"
    message = (f"{name} sets state.turn or state.consecutive_format_errors: deprecated since "
               "0.2.0 (the runtime undoes it) and an error from 0.3.0; the runtime keeps these "
               "books (harnessgrid.harness.play_turn), so remove those lines from step")
    registry = getattr(step, "__globals__", {}).setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, DeprecationWarning, where[0], where[1],
                           module=type(harness).__module__, registry=registry)
