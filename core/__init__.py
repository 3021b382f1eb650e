"""harnessgrid: Harness Scaling for agentic RL.

``import harnessgrid as hg`` is cheap: the public names below are imported on first use, so
a script that only builds a design never loads the runtime, and nothing here imports torch,
transformers or litellm.

Example::

    import harnessgrid as hg

    space = hg.FactorSpace.default()
    design = hg.orthogonal_design(space)          # 18 of the 243 configurations
    print([c.code for c in design.configs])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pluggy

from harnessgrid._lazy import lazy_exports

__version__ = "0.2.5"

#: Decorator for plugin hook implementations (``@hg.hookimpl``). Typed: a decorated function
#: keeps its signature for type checkers (pluggy's marker returns what it is given).
hookimpl: Final[pluggy.HookimplMarker] = pluggy.HookimplMarker("harnessgrid")

# public name → module that defines it
_LAZY: dict[str, str] = {
    "HarnessgridError": "harnessgrid.errors",
    "ConfigError": "harnessgrid.errors",
    "FactorSpace": "harnessgrid.space",
    "HarnessConfig": "harnessgrid.space",
    "FACTORS": "harnessgrid.space",
    "Design": "harnessgrid.designs",
    "full_design": "harnessgrid.designs",
    "single_design": "harnessgrid.designs",
    "first_order_design": "harnessgrid.designs",
    "random_design": "harnessgrid.designs",
    "orthogonal_design": "harnessgrid.designs",
    "nearly_orthogonal_design": "harnessgrid.designs",
    "holdout": "harnessgrid.designs",
    "Schedule": "harnessgrid.designs.schedule",
    "get_registry": "harnessgrid.plugin_system.registry",
    "PluginManager": "harnessgrid.plugin_system.registry",
    "registry_space": "harnessgrid.plugin_system.composition",
    "harness_space": "harnessgrid.plugin_system.composition",
    "resolve_config": "harnessgrid.plugin_system.composition",
    "compose": "harnessgrid.plugin_system.composition",
    "run_agent": "harnessgrid.engine.api",
    "arun_agent": "harnessgrid.engine.api",
    "resolve_harness": "harnessgrid.engine.api",
    "resolve_policy": "harnessgrid.engine.api",
    "run_episode": "harnessgrid.engine.runtime",
    "run_episodes": "harnessgrid.engine.executor",
    "EpisodeLimits": "harnessgrid.engine.limits",
    "EpisodeJob": "harnessgrid.engine.executor",
    "LocalExecutor": "harnessgrid.engine.executor",
    "ProcessExecutor": "harnessgrid.engine.executor",
    "RayExecutor": "harnessgrid.engine.executor",
    "collect": "harnessgrid.engine.executor",
    "Task": "harnessgrid.tasks",
    "TaskSuite": "harnessgrid.tasks",
    "load_suite": "harnessgrid.plugin_system.registry",
    "Trajectory": "harnessgrid.trajectory",
    "TrajectoryStore": "harnessgrid.trajectory",
    "Action": "harnessgrid.models",
    "make_policy": "harnessgrid.policies",
    "Workspace": "harnessgrid.sandboxing.workspace",
    "Session": "harnessgrid.engine.session",
    "AsyncSession": "harnessgrid.engine.session",
    "Reply": "harnessgrid.engine.session",
    "ProductTool": "harnessgrid.product_tools",
    "product_tool": "harnessgrid.product_tools",
    "ToolCallRequest": "harnessgrid.sandboxing.tool_hooks",
    "Approval": "harnessgrid.sandboxing.tool_hooks",
    "allow": "harnessgrid.sandboxing.tool_hooks",
    "deny": "harnessgrid.sandboxing.tool_hooks",
    "modify": "harnessgrid.sandboxing.tool_hooks",
    "ToolCall": "harnessgrid.models",
}

__all__ = ["__version__", "hookimpl", *_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    # `NAME as NAME`: an explicit re-export, so `hg.NAME` type-checks in packages that
    # use harnessgrid under mypy --strict (no implicit re-export).
    from harnessgrid.designs import Design as Design
    from harnessgrid.designs import first_order_design as first_order_design
    from harnessgrid.designs import full_design as full_design
    from harnessgrid.designs import holdout as holdout
    from harnessgrid.designs import nearly_orthogonal_design as nearly_orthogonal_design
    from harnessgrid.designs import orthogonal_design as orthogonal_design
    from harnessgrid.designs import random_design as random_design
    from harnessgrid.designs import single_design as single_design
    from harnessgrid.designs.schedule import Schedule as Schedule
    from harnessgrid.engine.api import arun_agent as arun_agent
    from harnessgrid.engine.api import resolve_harness as resolve_harness
    from harnessgrid.engine.api import resolve_policy as resolve_policy
    from harnessgrid.engine.api import run_agent as run_agent
    from harnessgrid.engine.executor import EpisodeJob as EpisodeJob
    from harnessgrid.engine.executor import LocalExecutor as LocalExecutor
    from harnessgrid.engine.executor import ProcessExecutor as ProcessExecutor
    from harnessgrid.engine.executor import RayExecutor as RayExecutor
    from harnessgrid.engine.executor import collect as collect
    from harnessgrid.engine.executor import run_episodes as run_episodes
    from harnessgrid.engine.limits import EpisodeLimits as EpisodeLimits
    from harnessgrid.engine.runtime import run_episode as run_episode
    from harnessgrid.engine.session import AsyncSession as AsyncSession
    from harnessgrid.engine.session import Reply as Reply
    from harnessgrid.engine.session import Session as Session
    from harnessgrid.errors import ConfigError as ConfigError
    from harnessgrid.errors import HarnessgridError as HarnessgridError
    from harnessgrid.models import Action as Action
    from harnessgrid.models import ToolCall as ToolCall
    from harnessgrid.plugin_system.composition import compose as compose
    from harnessgrid.plugin_system.composition import harness_space as harness_space
    from harnessgrid.plugin_system.composition import registry_space as registry_space
    from harnessgrid.plugin_system.composition import resolve_config as resolve_config
    from harnessgrid.plugin_system.registry import PluginManager as PluginManager
    from harnessgrid.plugin_system.registry import get_registry as get_registry
    from harnessgrid.plugin_system.registry import load_suite as load_suite
    from harnessgrid.policies import make_policy as make_policy
    from harnessgrid.product_tools import ProductTool as ProductTool
    from harnessgrid.product_tools import product_tool as product_tool
    from harnessgrid.sandboxing.tool_hooks import Approval as Approval
    from harnessgrid.sandboxing.tool_hooks import ToolCallRequest as ToolCallRequest
    from harnessgrid.sandboxing.tool_hooks import allow as allow
    from harnessgrid.sandboxing.tool_hooks import deny as deny
    from harnessgrid.sandboxing.tool_hooks import modify as modify
    from harnessgrid.sandboxing.workspace import Workspace as Workspace
    from harnessgrid.space import FACTORS as FACTORS
    from harnessgrid.space import FactorSpace as FactorSpace
    from harnessgrid.space import HarnessConfig as HarnessConfig
    from harnessgrid.tasks import Task as Task
    from harnessgrid.tasks import TaskSuite as TaskSuite
    from harnessgrid.trajectory import Trajectory as Trajectory
    from harnessgrid.trajectory import TrajectoryStore as TrajectoryStore
