"""The pairing schedule: K successive steps per task, Hamming neighbours, ablations."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harnessgrid as hg
from harnessgrid.errors import ConfigError
from harnessgrid.schedule import Schedule

OA = hg.orthogonal_design(hg.FactorSpace.default())
TASKS = [f"t{i:03d}" for i in range(40)]


@pytest.mark.parametrize("k", [1, 2, 4])
def test_k_rollouts_on_k_successive_steps(k: int) -> None:
    s = Schedule(OA, TASKS, k=k, tasks_per_step=4, seed=0)
    seen: dict[int, list[tuple[int, hg.HarnessConfig]]] = {}
    for i in range(6 * k):
        items = s.step(i)
        assert len(items) == 4
        for it in items:
            seen.setdefault(it.position, []).append((it.step, it.config))
    for position, rollouts in seen.items():
        steps = [st_ for st_, _ in rollouts]
        assert steps == list(range(steps[0], steps[0] + k))
        configs = [c for _, c in rollouts]
        assert configs[0] == s.anchor_at(position)
        assert len(set(c.code for c in configs)) == k  # distinct partners
        others = [c for c in OA.configs if c != configs[0]]
        nearest = min(configs[0].hamming(c) for c in others)
        assert all(configs[0].hamming(c) == nearest for c in configs[1:])  # all at distance 3


def test_tie_break_is_seeded_and_deterministic() -> None:
    a, b = Schedule(OA, TASKS, seed=0), Schedule(OA, TASKS, seed=0)
    assert [x.config.code for x in a.preview(6)] == [x.config.code for x in b.preview(6)]
    partners = {Schedule(OA, TASKS, seed=s).configs_for(0)[1].code for s in range(10)}
    anchors = {Schedule(OA, TASKS, seed=s).configs_for(0)[0].code for s in range(10)}
    assert len(partners) > 1 and len(anchors) > 1


def test_ablations() -> None:
    rep = Schedule(OA, TASKS, k=3, pairing="repeat")
    assert all(len(set(c.code for c in rep.configs_for(p))) == 1 for p in range(20))
    rnd = Schedule(OA, TASKS, k=2, pairing="random", seed=1)
    distances = Counter(c[0].hamming(c[1]) for c in (rnd.configs_for(p) for p in range(200)))
    assert set(distances) > {3}  # random partners are not only nearest neighbours
    with pytest.raises(ConfigError, match="unknown pairing"):
        Schedule(OA, TASKS, pairing="nearest")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="distinct configurations"):
        Schedule(OA, TASKS, k=19)


def test_anchors_cover_the_design_evenly() -> None:
    s = Schedule(OA, TASKS, tasks_per_step=16, seed=3)
    counts = Counter(s.anchor_at(p).code for p in range(18 * 5))
    assert len(counts) == 18 and set(counts.values()) == {5}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.integers(1, 20), st.integers(0, 5))
def test_random_access_equals_sequential(i: int, k: int, per_step: int, seed: int) -> None:
    """A resumed run continues exactly: step(i) from a fresh object equals the original."""
    a = Schedule(OA, TASKS, k=k, tasks_per_step=per_step, seed=seed)
    b = Schedule(OA, TASKS, k=k, tasks_per_step=per_step, seed=seed)
    b.step(max(i - 1, 0))
    assert a.step(i) == b.step(i)


def test_tasks_are_consumed_in_epochs() -> None:
    s = Schedule(OA, TASKS, k=1, tasks_per_step=8)
    first_epoch = [s.task_at(p) for p in range(40)]
    assert sorted(first_epoch) == TASKS
    assert [s.task_at(p) for p in range(40, 80)] != first_epoch
