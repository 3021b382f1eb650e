"""Errors a user can act on.

Every exception raised for a user mistake is a :class:`HarnessgridError`: its message names the
offending value and its ``hint`` says what to do. The CLI prints these without a traceback.
"""

from __future__ import annotations


class HarnessgridError(Exception):
    """A problem the user can fix; ``str()`` gives the message followed by the hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message}\n  hint: {hint}" if hint else message)


class ConfigError(HarnessgridError):
    """A bad configuration value: an unknown level name, a malformed code, an impossible design."""


class PluginError(HarnessgridError):
    """A plugin is broken or collides with another plugin."""


class SandboxError(HarnessgridError):
    """The sandbox could not be set up or failed underneath a command (infrastructure, not the agent)."""


class PolicyError(HarnessgridError):
    """A policy backend failed: bad spec, unreachable server, exhausted retries."""
