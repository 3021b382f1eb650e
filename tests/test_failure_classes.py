"""Issue 11 items 6-8: agent-caused failures are the agent's, backend failures are the
policy's, and the model cannot lift the per-command time limit."""

from __future__ import annotations

import pytest

from harnessgrid.sandbox import Sandbox, sandbox_available
from harnessgrid.workspace import Workspace

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap")


@pytest.fixture
def sandbox():
    ws = Workspace.create({})
    try:
        with Sandbox(ws) as sb:
            yield sb
    finally:
        ws.cleanup()


def test_lone_surrogate_in_command_does_not_kill_the_server(sandbox: Sandbox) -> None:
    result = sandbox.run_sync("echo a\ud800b")
    assert result.exit_code == 0
    assert sandbox.run_sync("echo alive").stdout == "alive\n"


def test_planted_command_path_does_not_break_long_commands(sandbox: Sandbox) -> None:
    sandbox.run_sync("for i in 1 2 3 4 5; do mkdir -p /tmp/.hg-command-$i; done")
    big = "echo start\n: " + "x" * 120_000 + "\necho end\n"
    result = sandbox.run_sync(big)
    assert (result.exit_code, result.stdout) == (0, "start\nend\n")
    assert sandbox.run_sync("echo alive").stdout == "alive\n"


def test_long_command_with_surrogate(sandbox: Sandbox) -> None:
    result = sandbox.run_sync("echo \ud800\n: " + "y" * 120_000)
    assert result.exit_code == 0
    assert sandbox.run_sync("echo alive").stdout == "alive\n"


# --- item 7: backend failures are policy errors -------------------------------------------------

class _Raising:
    spec = "raising"

    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc

    async def act(self, request: object) -> object:
        import asyncio

        if self.exc is None:
            await asyncio.sleep(30)  # a hung backend
        raise self.exc  # type: ignore[misc]


@pytest.mark.parametrize("exc", [None, TimeoutError("read timed out"),
                                 __import__("asyncio").CancelledError()])
def test_backend_failures_are_policy_errors(exc: BaseException | None) -> None:
    import asyncio

    from probe_suite import UPPER_TASK
    from test_runtime import harness, registry

    from harnessgrid.runtime import EpisodeLimits, run_episode

    reg = registry.__wrapped__()  # type: ignore[attr-defined]
    traj = asyncio.run(run_episode(harness(reg), UPPER_TASK, _Raising(exc),  # type: ignore[arg-type]
                                   EpisodeLimits(wall_s=1.0)))
    assert traj.termination == "policy_error", traj.error
    assert traj.score is None
