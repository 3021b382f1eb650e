"""A harness or a policy from what a caller names it by (an address, a spec, or the object
itself), and the refusal of a policy that cannot play an ad-hoc instruction. Every entry point
resolves through here: ``run_agent``, sessions, executors' jobs, the CLI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import ConfigError

if TYPE_CHECKING:
    from harnessgrid.harness import Harness
    from harnessgrid.policies import Policy
    from harnessgrid.space import FactorSpace


def resolve_harness(spec: str | Harness, space: FactorSpace | None = None) -> Harness:
    """A harness from its address:

    - ``"S1-T0-O2-C1-W0"``: a code, whose numbers name the paper's built-in levels whatever
      plugins are installed; a plugin level is named in it (``"S1-T0-O=diffstat-C1-W0"``).
      With ``space`` (a design's), numbers are positions in that space;
    - ``"micro:S0-T1-O2-C0-W1"``: a code of a space a plugin registered under a name;
    - ``"system_prompt=minimal,tool_interface=xml_tags,..."``: level names for all five factors,
      any registered level (a third party's too);
    - ``"adapter:NAME"``: a registered adapter.

    Codes and level lists are read by :func:`harnessgrid.plugin_system.composition.resolve_config`.
    """
    from harnessgrid.plugin_system.composition import compose, resolve_config
    from harnessgrid.plugin_system.registry import get_registry

    if not isinstance(spec, str):
        return spec
    if spec.strip().startswith("adapter:"):
        name = spec.strip().removeprefix("adapter:")
        adapter: Harness = get_registry().adapter(name).create()
        return adapter
    return compose(resolve_config(spec, space))


def resolve_policy(spec: str | Policy, options: Mapping[str, Any] | None = None) -> Policy:
    from harnessgrid.policies import make_policy

    return spec if not isinstance(spec, str) else make_policy(spec, options)


def refuse_oracle(policy: Policy) -> None:
    """A policy that plays a task's oracle plan (:class:`~harnessgrid.policies.OraclePolicy`,
    the scripted oracle) refused for an ad-hoc instruction: it has no plan, so the policy
    would finish at once having done nothing."""
    from harnessgrid.policies import plays_oracle_plan

    if plays_oracle_plan(policy):
        raise ConfigError(f"the {policy.spec} policy plays a task's oracle plan, and an ad-hoc "
                          "instruction has none",
                          hint="use a model policy (openai:, litellm:, anthropic:, hf:, vllm:), "
                               "or run a suite task with the oracle: harnessgrid run --task "
                               "SUITE/ID")
