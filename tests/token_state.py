"""The part of ``EpisodeState`` a token policy reads, for tests that call ``act`` directly."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(eq=False)
class State:
    episode_id: str
    finished: bool = False
