"""Issue 11 items 6-8: agent-caused failures are the agent's, backend failures are the
policy's (also a backend asking to wait past the wall limit, or a stray cancellation in a
batch), and the model cannot lift the per-command time limit."""

from __future__ import annotations

from typing import Any

import pytest
from episode_stubs import Bound, EpisodeStub

from harnessgrid.sandboxing.sandbox import Sandbox, sandbox_available
from harnessgrid.sandboxing.workspace import Workspace

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

    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.runtime import run_episode

    reg = registry.__wrapped__()  # type: ignore[attr-defined]
    traj = asyncio.run(run_episode(harness(reg), UPPER_TASK, _Raising(exc),  # type: ignore[arg-type]
                                   EpisodeLimits(wall_s=1.0)))
    assert traj.termination == "policy_error", traj.error
    assert traj.score is None


def _probe_harness():  # type: ignore[no-untyped-def]
    from test_runtime import harness, registry

    return harness(registry.__wrapped__())  # type: ignore[attr-defined]


def test_retry_after_beyond_the_wall_limit_is_a_policy_error_at_once() -> None:
    """A rate-limited backend asking for 60 s when the episode has 20: the episode ends now as
    a policy error naming the wait (excluded from scores, retried by the evaluator), not after
    sleeping into the wall limit; the server sees one request."""
    import asyncio

    from probe_suite import UPPER_TASK
    from servers import OpenAICompatServer, http_error, openai_text

    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.policies import make_policy

    pytest.importorskip("openai")
    limited = http_error(429, retry_after_ms=None, headers={"retry-after": "60"})
    with OpenAICompatServer([limited, openai_text("unused")]) as server:
        policy = make_policy("openai:test-model", {"base_url": server.base_url + "/v1"})
        traj = asyncio.run(run_episode(_probe_harness(), UPPER_TASK, policy,
                                       EpisodeLimits(wall_s=20.0)))
    assert traj.termination == "policy_error"
    assert traj.infra_failure
    assert "asked to wait 60 s" in (traj.error or "")
    assert traj.score is None
    assert len(server.requests) == 1


class _CancelsOnce(EpisodeStub):
    """The oracle, except that its first call raises CancelledError from inside the backend
    (as a client library cancelled by its own machinery does)."""

    spec = "cancels-once"

    def __init__(self) -> None:
        self.calls = 0

    async def play(self, request: Any, episode: Bound) -> Any:
        import asyncio

        self.calls += 1
        if self.calls == 1:
            raise asyncio.CancelledError("stray cancellation inside the client")
        return await episode.oracle.act(request)


def test_a_stray_cancellation_fails_one_episode_not_the_batch(tmp_path: object) -> None:
    import asyncio
    from pathlib import Path

    from probe_suite import UPPER_TASK

    from harnessgrid.engine.executor import run_episodes
    from harnessgrid.trajectory import TrajectoryStore

    store = TrajectoryStore(Path(str(tmp_path)) / "trajectories.jsonl")
    jobs = [(_probe_harness(), UPPER_TASK) for _ in range(3)]
    policy: Any = _CancelsOnce()
    returned = asyncio.run(run_episodes(jobs, policy, concurrency=3, on_done=store.append))
    stored = store.load()
    assert sorted(t.termination for t in stored) == ["finished", "finished", "policy_error"]
    assert sorted(t.episode_id for t in stored) == sorted(t.episode_id for t in returned)
    assert [t.score for t in stored if t.termination == "finished"] == [1.0, 1.0]
    (failed,) = [t for t in stored if t.termination == "policy_error"]
    assert "cancelled" in (failed.error or "")


def test_docstrings_name_only_public_names() -> None:
    """Every ``hg.NAME`` a module docstring points readers to exists (evaluation/store.py named
    an ``hg.load_trajectories`` that never did)."""
    import re
    from pathlib import Path

    import harnessgrid as hg

    root = Path(__file__).resolve().parents[1]
    named = {(path.relative_to(root).as_posix(), name)
             for folder in ("core", "plugins", "trainer", "evaluation")
             for path in (root / folder).rglob("*.py")
             for name in re.findall(r"``hg\.([A-Za-z_]\w*)", path.read_text())}
    assert named, "the pattern finds nothing: the check would pass vacuously"
    assert [(path, name) for path, name in sorted(named) if not hasattr(hg, name)] == []
