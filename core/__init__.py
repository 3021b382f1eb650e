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

from typing import TYPE_CHECKING

import pluggy

from harnessgrid._lazy import lazy_exports

__version__ = "0.2.0"

#: Decorator for plugin hook implementations (``@hg.hookimpl``).
hookimpl = pluggy.HookimplMarker("harnessgrid")

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
    "run_episodes": "harnessgrid.engine.runtime",
    "EpisodeLimits": "harnessgrid.engine.runtime",
    "EpisodeJob": "harnessgrid.engine.executor",
    "LocalExecutor": "harnessgrid.engine.executor",
    "ProcessExecutor": "harnessgrid.engine.executor",
    "RayExecutor": "harnessgrid.engine.executor",
    "collect": "harnessgrid.engine.executor",
    "Task": "harnessgrid.tasks",
    "TaskSuite": "harnessgrid.tasks",
    "load_suite": "harnessgrid.plugin_system.registry",
    "Trajectory": "harnessgrid.engine.trajectory",
    "TrajectoryStore": "harnessgrid.engine.trajectory",
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
    from harnessgrid.designs import (
        Design,
        first_order_design,
        full_design,
        holdout,
        nearly_orthogonal_design,
        orthogonal_design,
        random_design,
        single_design,
    )
    from harnessgrid.designs.schedule import Schedule
    from harnessgrid.engine.api import arun_agent, resolve_harness, resolve_policy, run_agent
    from harnessgrid.engine.executor import (
        EpisodeJob,
        LocalExecutor,
        ProcessExecutor,
        RayExecutor,
        collect,
    )
    from harnessgrid.engine.runtime import EpisodeLimits, run_episode, run_episodes
    from harnessgrid.engine.session import AsyncSession, Reply, Session
    from harnessgrid.engine.trajectory import Trajectory, TrajectoryStore
    from harnessgrid.errors import ConfigError, HarnessgridError
    from harnessgrid.models import Action, ToolCall
    from harnessgrid.plugin_system.composition import (
        compose,
        harness_space,
        registry_space,
        resolve_config,
    )
    from harnessgrid.plugin_system.registry import PluginManager, get_registry, load_suite
    from harnessgrid.policies import make_policy
    from harnessgrid.product_tools import ProductTool, product_tool
    from harnessgrid.sandboxing.tool_hooks import Approval, ToolCallRequest, allow, deny, modify
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.space import FACTORS, FactorSpace, HarnessConfig
    from harnessgrid.tasks import Task, TaskSuite
