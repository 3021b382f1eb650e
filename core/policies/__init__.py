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

    ``harness``, ``task`` and ``state`` are the episode's, for policies that key their own
    records by it (token policies keep a token conversation per episode state) and for test
    policies; the scripted oracle does not read them: the episode binds it before the first
    turn (:class:`harnessgrid.engine.episode_run.EpisodePolicy`).

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
    harness: Harness
    task: Task
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
