"""Policies: what produces the next assistant turn.

A policy is addressed by a spec string whose scheme names a backend registered through the
``harnessgrid_policies`` hook: ``scripted``, ``null``, ``litellm:<model>``,
``anthropic:<model>``, ``openai:<model>``, ``hf:<path-or-hub-name>``, ``vllm:<name>``.
Backends import their heavy libraries only when created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, ModelTurn, ToolSpec

if TYPE_CHECKING:
    from harnessgrid.episode import EpisodeState
    from harnessgrid.harness import Harness
    from harnessgrid.tasks import Task


@dataclass
class PolicyRequest:
    """Everything a policy may use to produce one turn.

    ``messages`` is the context view; ``tools`` are given when the harness declares them
    natively (``native_tools``), otherwise the tools are described in the system prompt.
    ``new_segment`` is True when the view is not an extension of the previous turn's view plus
    the policy's own output (a context level rewrote history): token policies then start a new
    token segment instead of extending the previous prompt ids.

    ``deadline`` is the :func:`time.monotonic` time by which the turn must be produced (the
    episode's wall limit), or None for no limit: a policy that waits (for a slow server, a
    ``Retry-After``, a backoff) must give up with a :class:`PolicyError` rather than wait past
    it, because the wall limit would then end the episode mid-call anyway.

    ``state`` is the episode's, for policies that keep their own records per episode (token
    policies keep a token conversation per episode: its id, and whether it has finished); a
    policy reads it, never changes it. A policy that plays from the episode itself - the
    scripted oracle, which renders its plan through the harness - does not find the harness
    and the task here: it declares :class:`EpisodePolicy` and is bound to them once, before
    the first turn (:func:`bind_to_episode`).

    ``on_text``, when set (a streaming session, :mod:`harnessgrid.engine.session`), is called with
    each piece of the reply's text as the backend produces it; a policy that cannot stream
    may ignore it (the whole text then arrives with the turn; ``vllm:`` does). The returned
    turn is the same whether or not it streamed. A backend failure before the first piece is
    retried as usual; once text has been shown it is not (it cannot be taken back): the turn
    fails with a :class:`PolicyError`. ``on_text`` runs on the event loop that awaits ``act``;
    an exception it raises propagates as itself.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    native_tools: bool
    state: EpisodeState
    new_segment: bool
    segment: int = 0
    max_tokens: int | None = None
    deadline: float | None = None
    on_text: Callable[[str], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """Produces the next assistant turn; ``spec`` is how it was addressed."""

    spec: str

    async def act(self, request: PolicyRequest) -> ModelTurn: ...


@runtime_checkable
class EpisodePolicy(Protocol):
    """A policy that plays from the episode itself, not from the model's view alone: the
    scripted oracle renders its plan through the harness (``render_action``) and answers the
    turns its workflow requires (``protocol.expected_turn(state)``). Each episode gives it
    its harness, task and state once, before the first turn (:func:`bind_to_episode`), and the
    policy returned answers every turn of that episode, so one instance serves any number of
    concurrent episodes. A policy that wraps another forwards the binding
    (:class:`~harnessgrid.policies.forced.TeacherForcedPolicy` binds its teacher): a wrapped
    oracle that is never bound refuses every turn."""

    spec: str

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy: ...


def bind_to_episode(policy: Policy, harness: Harness, task: Task,
                    state: EpisodeState) -> Policy:
    """The policy that answers the turns of one episode: what an :class:`EpisodePolicy` gives
    for it, else ``policy`` itself. Every episode binds its policy here (so does code that
    steps a harness itself, such as a corpus writer)."""
    from harnessgrid.harness import provides

    if provides(policy, EpisodePolicy) and isinstance(policy, EpisodePolicy):
        return policy.for_episode(harness, task, state)
    return policy



@runtime_checkable
class OraclePolicy(Protocol):
    """A policy that plays the task's oracle plan (``task.plan``), as the scripted oracle does,
    rather than reading the instruction: ``plays_plan()`` says whether this instance does (the
    null policy shares the oracle's class and plays nothing). The engine asks this, never a
    policy's name, where a plan must exist: an ad-hoc instruction (``run_agent``, a
    ``Session``) has none, and a multi-session task's follow-ups are not in it."""

    def plays_plan(self) -> bool: ...


def plays_oracle_plan(policy: object) -> bool:
    """Whether ``policy`` plays the task's oracle plan (:class:`OraclePolicy`)."""
    from harnessgrid.harness import provides

    return bool(provides(policy, OraclePolicy) and isinstance(policy, OraclePolicy)
                and policy.plays_plan())


@runtime_checkable
class TokenCounter(Protocol):
    """A policy that knows its tokenizer counts context tokens exactly."""

    def count_tokens(self, messages: Sequence[Message]) -> int: ...


def make_policy(spec: str, options: Mapping[str, Any] | None = None) -> Policy:
    """Create a policy from its spec string through the plugin registry."""
    from harnessgrid.plugin_system.registry import get_registry

    scheme, _, rest = spec.partition(":")
    backend = get_registry().policy(scheme)
    policy = backend.create(rest, dict(options or {}))
    if not isinstance(policy, Policy):
        raise ConfigError(f"policy backend {scheme!r} returned {type(policy).__name__}, "
                          "which has no async act(request) method")
    return policy
