"""Test policies that answer from the episode (its harness, its task), as the scripted oracle
does. A policy no longer finds the harness or the task in its request: an
:class:`~harnessgrid.policies.EpisodePolicy` is bound to them once, before the first turn.
:class:`EpisodeStub` does that binding for a test's policy; the test writes
``play(request, episode)`` instead of ``act(request)``, and counters or records it keeps on
itself stay on the instance the test holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from harnessgrid.episode import EpisodeState
from harnessgrid.harness import Harness
from harnessgrid.models import ModelTurn
from harnessgrid.policies import Policy, PolicyRequest, bind_to_episode
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task


@dataclass
class Bound:
    """What a stub sees of its episode, and the oracle and null policies bound to it."""

    harness: Harness
    task: Task
    state: EpisodeState
    _policies: dict[str, Policy] = field(default_factory=dict)

    @property
    def oracle(self) -> Policy:
        """The scripted oracle, playing this episode's task through its harness."""
        return self._bound("oracle", ScriptedPolicy())

    @property
    def null(self) -> Policy:
        return self._bound("null", ScriptedPolicy(empty=True))

    def _bound(self, name: str, policy: Policy) -> Policy:
        if name not in self._policies:
            self._policies[name] = bind_to_episode(policy, self.harness, self.task, self.state)
        return self._policies[name]


class EpisodeStub(ABC):
    """Base of a test policy that plays from its episode; subclasses define :meth:`play`."""

    spec = "stub"

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy:
        return _ForEpisode(self, Bound(harness, task, state))

    @abstractmethod
    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        """The turn answering ``request`` in ``episode``."""

    async def act(self, request: PolicyRequest) -> ModelTurn:
        raise AssertionError(f"{type(self).__name__} answers from its episode: it must be "
                             "bound first (bind_to_episode), as every episode does")


class _ForEpisode:
    def __init__(self, stub: EpisodeStub, episode: Bound) -> None:
        self.stub, self.episode, self.spec = stub, episode, stub.spec

    async def act(self, request: PolicyRequest) -> Any:
        return await self.stub.play(request, self.episode)
