"""The pairing schedule: K successive steps per task, Hamming neighbours, ablations, resume."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.designs import orthogonal_design
from harnessgrid.designs.schedule import Schedule, ScheduleItem, _Permutation
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

SPACE = FactorSpace.default()
OA = orthogonal_design(SPACE)
LOCAL = orthogonal_design(SPACE, variant="local")
TASKS = [f"t{i:03d}" for i in range(40)]


@pytest.mark.parametrize("k", [1, 2, 4])
def test_each_task_gets_k_configs_on_k_successive_steps(k: int) -> None:
    per_step = 5
    s = Schedule(OA, TASKS, k=k, tasks_per_step=per_step, seed=0)
    by_position: dict[int, list[ScheduleItem]] = defaultdict(list)
    for i in range(6 * k):
        items = s.step(i)
        assert len(items) == per_step
        assert len({it.position for it in items}) == per_step
        assert {it.slot for it in items} == {i % k}
        for it in items:
            by_position[it.position].append(it)
    assert sorted(by_position) == list(range(6 * per_step))
    for q, items in by_position.items():
        # The layout: position q is in block q // P, whose steps are block*K ... block*K + K-1.
        assert [it.step for it in items] == [q // per_step * k + j for j in range(k)]
        assert [it.slot for it in items] == list(range(k))
        assert len({it.task_id for it in items}) == 1
        assert items[0].task_id == s.task_at(q)
        configs = [it.config for it in items]
        anchor = configs[0]
        assert anchor == s.anchor_at(q)
        assert all(it.anchor == anchor for it in items)
        assert configs == s.configs_for(q)
        assert len(set(configs)) == k
        # Partners are the nearest other design configurations: distance 3 in this OA.
        assert [anchor.hamming(c) for c in configs] == [0] + [3] * (k - 1)


def test_tie_break_follows_the_documented_seeded_rule() -> None:
    """Among equally near configurations, the one earlier in a permutation of the design
    drawn from (seed, position) comes first."""
    for seed in (0, 7):
        s = Schedule(OA, TASKS, k=4, seed=seed)
        for q in range(50):
            a = s.anchor_index(q)
            others = [i for i in range(len(OA)) if i != a]
            order = random.Random(f"harnessgrid:schedule:{seed}:partners:{q}").sample(
                others, len(others))
            dist = [OA.configs[a].hamming(OA.configs[i]) for i in range(len(OA))]
            expected = sorted(order, key=lambda i: dist[i])[:3]
            assert s.configs_for(q)[1:] == [OA.configs[i] for i in expected]


def test_tied_neighbours_are_all_used() -> None:
    """Every anchor of the min-aberration OA has ten neighbours at distance 3; over many
    positions the partner of each anchor is spread over all ten of them."""
    s = Schedule(OA, TASKS, k=2, seed=1)
    partners: dict[str, Counter[str]] = defaultdict(Counter)
    for q in range(18 * 60):
        anchor, partner = s.configs_for(q)
        partners[anchor.code][partner.code] += 1
    assert len(partners) == 18
    for anchor, counts in partners.items():
        assert len(counts) == 10
        assert sum(counts.values()) == 60
        assert all(SPACE.parse(anchor).hamming(SPACE.parse(c)) == 3 for c in counts)


def test_local_design_has_a_unique_partner() -> None:
    s = Schedule(LOCAL, TASKS, k=2, seed=0)
    pairs = {(s.configs_for(q)[0].code, s.configs_for(q)[1].code) for q in range(200)}
    assert len(pairs) == 18
    assert all(SPACE.parse(a).hamming(SPACE.parse(b)) == 2
                                    for a, b in pairs)


def test_repeat_and_random_ablations() -> None:
    rep = Schedule(OA, TASKS, k=3, pairing="repeat")
    assert all(len(set(rep.configs_for(q))) == 1 for q in range(50))
    assert Schedule(OA, TASKS, k=30, pairing="repeat").configs_for(0)[29] == rep.anchor_at(0)
    rnd = Schedule(OA, TASKS, k=3, pairing="random", seed=1)
    seen: Counter[str] = Counter()
    distances: Counter[int] = Counter()
    for q in range(18 * 40):
        anchor, *partners = rnd.configs_for(q)
        assert anchor not in partners
        assert len(set(partners)) == 2
        distances.update(anchor.hamming(p) for p in partners)
        if anchor == OA.configs[0]:
            seen.update(p.code for p in partners)
    assert set(distances) == {3, 4, 5}  # random partners are not only the nearest ones
    assert len(seen) == 17  # every other configuration is a possible partner


def test_anchors_cycle_through_the_design() -> None:
    s = Schedule(OA, TASKS, k=2, tasks_per_step=16, seed=3)
    counts = Counter(it.anchor.code for i in range(0, 2 * 18, 2) for it in s.step(i))
    assert len(counts) == 18
    assert set(counts.values()) == {16}  # 16 * 18 positions, exact
    for cycle in range(5):
        block = {s.anchor_at(q).code for q in range(18 * cycle, 18 * cycle + 18)}
        assert block == set(OA.codes)


def test_tasks_are_consumed_in_seeded_epochs() -> None:
    s = Schedule(OA, TASKS, k=1, tasks_per_step=8, seed=0)
    epochs = [[s.task_at(q) for q in range(40 * e, 40 * e + 40)] for e in range(3)]
    assert all(sorted(e) == TASKS for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    assert epochs[0] != TASKS
    assert epochs[0] != [Schedule(OA, TASKS, k=1, seed=1).task_at(q) for q in range(40)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5_000), st.integers(1, 4), st.integers(1, 20), st.integers(0, 3),
       st.sampled_from(["hamming", "random", "repeat"]))
def test_random_access_equals_sequential(i: int, k: int, per_step: int, seed: int,
                                         pairing: str) -> None:
    """A resumed run continues exactly: a fresh schedule's step(i) equals what the original
    gives after walking there step by step."""
    walked = Schedule(OA, TASKS, k=k, tasks_per_step=per_step, seed=seed,
                      pairing=pairing)  # type: ignore[arg-type]
    start = max(i - 3, 0)
    sequential = [walked.step(j) for j in range(start, i + 1)]
    fresh = Schedule(OA, TASKS, k=k, tasks_per_step=per_step, seed=seed,
                     pairing=pairing)  # type: ignore[arg-type]
    assert fresh.step(i) == sequential[-1]
    assert fresh.fingerprint() == walked.fingerprint()


def test_same_schedule_in_another_process() -> None:
    script = ("import json\nfrom harnessgrid.designs import orthogonal_design\n"
              "from harnessgrid.designs.schedule import Schedule\n"
              "from harnessgrid.space import FactorSpace\n"
              "oa = orthogonal_design(FactorSpace.default())\n"
              f"s = Schedule(oa, {TASKS!r}, k=2, tasks_per_step=4, seed=5)\n"
              "print(json.dumps(s.preview(6, start=1000)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    here = Schedule(OA, TASKS, k=2, tasks_per_step=4, seed=5).preview(6, start=1000)
    assert json.loads(out) == here
    assert len(here) == 24


def test_preview_rows() -> None:
    rows = Schedule(OA, TASKS, k=2, tasks_per_step=3).preview(2)
    assert [r["step"] for r in rows] == [0, 0, 0, 1, 1, 1]
    assert [r["distance"] for r in rows] == [0, 0, 0, 3, 3, 3]
    assert set(rows[0]) == {"step", "slot", "position", "task", "config", "anchor", "distance"}


def test_bad_arguments_say_what_to_do() -> None:
    with pytest.raises(ConfigError, match="unknown pairing 'nearest'"):
        Schedule(OA, TASKS, pairing="nearest")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"k=19 .* design has 18") as exc:
        Schedule(OA, TASKS, k=19)
    assert "pairing='repeat'" in (exc.value.hint or "")
    with pytest.raises(ConfigError, match="k=0"):
        Schedule(OA, TASKS, k=0)
    with pytest.raises(ConfigError, match="at least one task"):
        Schedule(OA, [])
    with pytest.raises(ConfigError, match=r"\['t001'\] occur more than once"):
        Schedule(OA, ["t001", "t002", "t001"])
    with pytest.raises(ConfigError, match="tasks_per_step=0"):
        Schedule(OA, TASKS, tasks_per_step=0)
    with pytest.raises(ConfigError, match="step -1"):
        Schedule(OA, TASKS).step(-1)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.text(max_size=8))
def test_pointwise_permutation_is_a_bijection(n: int, key: str) -> None:
    perm = _Permutation(n, key)
    assert sorted(perm(i) for i in range(n)) == list(range(n))
