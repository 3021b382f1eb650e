"""A policy that plays fixed shell commands through the mini-bash adapter, then finishes: the
attacker of the sandbox and grader attack tests."""

from __future__ import annotations

from harnessgrid.models import ModelTurn
from harnessgrid.plugins.adapters.mini_bash import SENTINEL
from harnessgrid.policies import PolicyRequest


class ShellAgent:
    """Runs ``commands`` one per turn, then ``finish`` (mini-bash ends the episode on a command
    that prints its sentinel)."""

    spec = "attacker"

    def __init__(self, *commands: str, finish: str = f"echo {SENTINEL}") -> None:
        self.turns = [*commands, finish]

    async def act(self, request: PolicyRequest) -> ModelTurn:
        command = self.turns.pop(0) if self.turns else f"echo {SENTINEL}"
        return ModelTurn(content=f"Next.\n```bash\n{command}\n```")
