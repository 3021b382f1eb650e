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

__version__ = "0.1.0"

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
    "Schedule": "harnessgrid.schedule",
    "get_registry": "harnessgrid.registry",
    "PluginManager": "harnessgrid.registry",
    "registry_space": "harnessgrid.composition",
    "harness_space": "harnessgrid.composition",
    "resolve_config": "harnessgrid.composition",
    "compose": "harnessgrid.composition",
    "run_agent": "harnessgrid.api",
    "arun_agent": "harnessgrid.api",
    "resolve_harness": "harnessgrid.api",
    "resolve_policy": "harnessgrid.api",
    "run_episode": "harnessgrid.runtime",
    "run_episodes": "harnessgrid.runtime",
    "EpisodeLimits": "harnessgrid.runtime",
    "Task": "harnessgrid.tasks",
    "TaskSuite": "harnessgrid.tasks",
    "load_suite": "harnessgrid.registry",
    "Trajectory": "harnessgrid.trajectory",
    "TrajectoryStore": "harnessgrid.trajectory",
    "Action": "harnessgrid.models",
    "make_policy": "harnessgrid.policies",
    "Workspace": "harnessgrid.workspace",
    "Session": "harnessgrid.session",
    "AsyncSession": "harnessgrid.session",
    "Reply": "harnessgrid.session",
    "ProductTool": "harnessgrid.product_tools",
    "product_tool": "harnessgrid.product_tools",
    "ToolCallRequest": "harnessgrid.tool_hooks",
    "Approval": "harnessgrid.tool_hooks",
    "allow": "harnessgrid.tool_hooks",
    "deny": "harnessgrid.tool_hooks",
    "modify": "harnessgrid.tool_hooks",
    "ToolCall": "harnessgrid.models",
}

__all__ = ["__version__", "hookimpl", *_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from harnessgrid.api import arun_agent, resolve_harness, resolve_policy, run_agent
    from harnessgrid.composition import compose, harness_space, registry_space, resolve_config
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
    from harnessgrid.errors import ConfigError, HarnessgridError
    from harnessgrid.models import Action, ToolCall
    from harnessgrid.policies import make_policy
    from harnessgrid.product_tools import ProductTool, product_tool
    from harnessgrid.registry import PluginManager, get_registry, load_suite
    from harnessgrid.runtime import EpisodeLimits, run_episode, run_episodes
    from harnessgrid.schedule import Schedule
    from harnessgrid.session import AsyncSession, Reply, Session
    from harnessgrid.space import FACTORS, FactorSpace, HarnessConfig
    from harnessgrid.tasks import Task, TaskSuite
    from harnessgrid.tool_hooks import Approval, ToolCallRequest, allow, deny, modify
    from harnessgrid.trajectory import Trajectory, TrajectoryStore
    from harnessgrid.workspace import Workspace
