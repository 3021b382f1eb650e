"""The micro suite's held-out splits and unseen levels: what the demo scores a model on was never
in what it trained on.

- ``validation`` and ``test`` hold at least 12 tasks across the families, and no corpus the
  demo's model reads before it is scored (tokenizer corpus, both pretraining stages, SFT and RL
  tasks) contains one of them after normalisation, even as part of a longer task; the check
  itself catches the leaks the ``eval`` split has;
- the fourth levels (``micro4``: S3, T3) round-trip, compose into harnesses the oracle solves
  through, and no design the demo trains through can draw them.
"""

from __future__ import annotations

import asyncio

import pytest

from harnessgrid.models import Action, ModelTurn
from harnessgrid.plugins.micro import MICRO_LEVELS, MICRO_SPACE, UNSEEN_SPACE, leaks
from harnessgrid.plugins.micro.pretraining import STAGES, pretraining_tasks
from harnessgrid.plugins.micro.tasks import FAMILIES, generate, micro_suite
from harnessgrid.plugins.micro.unseen import UNSEEN_LEVELS, MicroCalls


@pytest.fixture(scope="module")
def corpus() -> leaks.Corpus:
    return leaks.training_corpus()


def test_held_out_splits_are_big_enough_and_spread_over_the_families() -> None:
    suite = micro_suite()
    for split in ("validation", "test"):
        tasks = suite.tasks(split)
        assert len(tasks) >= 12
        families = [t.metadata["family"] for t in tasks]
        assert len(set(families)) >= 11
        # dealt round-robin: the first eleven are one per family, so a limit stays balanced
        assert len(set(families[:11])) == 11
    ids = {split: {t.id for t in suite.tasks(split)} for split in ("validation", "test")}
    assert not ids["validation"] & ids["test"]


def test_no_corpus_the_model_trains_on_contains_a_held_out_task(corpus: leaks.Corpus) -> None:
    """The whole corpora: the train and eval splits and both pretraining stages' tasks."""
    suite = micro_suite()
    held_out = [*suite.tasks("validation"), *suite.tasks("test")]
    assert corpus.tasks > 40_000  # the pretraining stages are in it, not only the splits
    assert leaks.leaks(held_out, corpus) == {}
    # nor does one held-out task contain another (a test task inside a validation one)
    for task in held_out:
        others = leaks.corpus_of(t for t in held_out if t.id != task.id)
        assert others.contains(task) is None, task.id


def test_the_check_finds_a_task_inside_a_longer_one() -> None:
    """What the eval split's equality check missed: a create task is the first half of a
    create_two task, a rename the first step of a rename_replace."""
    create = generate("create", 0)
    two = generate("create_two", 0)
    inside = two.model_copy(update={
        "instruction": f"{create.instruction}\n{two.instruction.splitlines()[1]}",
        "plan": (create.plan[0], two.plan[1])})
    corpus = leaks.corpus_of([inside])
    assert corpus.contains(create) == "instruction"
    assert corpus.contains(create.model_copy(update={"instruction": "Make it so."})) == "plan"
    assert corpus.contains(generate("create", 1)) is None
    # normalisation: case, punctuation and spacing do not hide a task
    shouted = create.model_copy(update={"instruction": "  " + create.instruction.upper() + "!"})
    assert corpus.contains(shouted) == "instruction"


def test_the_eval_split_leaks_into_pretraining_as_the_review_found() -> None:
    """The first stage's tasks contain ``micro/create-100000`` (inside a create_two
    document): the reason the demo no longer reports on ``eval``."""
    stage_1 = leaks.corpus_of(pretraining_tasks(**STAGES[0]))
    found = leaks.leaks(micro_suite().tasks("eval")[:12], stage_1)
    assert found.get("micro/create-100000") == "instruction"


def test_pretraining_tasks_are_the_documents_tasks() -> None:
    """The leak check reads the tasks of the documents the base was pretrained on, so both
    must come from one stream: same count, and each task's document in order."""
    from harnessgrid.plugins.micro.pretraining import documents, task_document

    for chat in (False, True):
        docs = documents(300, drills=0.25, seed=3, chat=chat)
        tasks = pretraining_tasks(300, 0.25, 3, chat)
        task_docs = [d for d in docs if not d.startswith("Words:")]
        assert len(task_docs) == len(tasks)
        if not chat:
            assert task_docs == [task_document(t) for t in tasks]
        else:
            assert all(t.instruction in d for t, d in zip(tasks, task_docs, strict=True))


# -- unseen levels ------------------------------------------------------------------------------

def test_unseen_levels_are_outside_the_trained_space() -> None:
    from harnessgrid.trainer.demo import (
        CONDITIONS,
        WARM_STARTS,
        design_codes,
        warm_start_codes,
    )

    for factor, level in UNSEEN_LEVELS.items():
        assert level.name not in MICRO_LEVELS[factor]
        assert UNSEEN_SPACE.factor(factor).levels[-1] == level.name
    trained = {code for rule in WARM_STARTS for code in warm_start_codes(3, rule)}
    for condition in CONDITIONS.values():
        for seed in range(3):
            trained |= set(design_codes(condition, seed))
    assert all(MICRO_SPACE.parse(code) for code in trained)  # all in the 3^5 space


@pytest.mark.parametrize("action", [
    Action.of("read", path="a.txt"),
    Action.of("write", path="two words.md", content='say "hi"\nand\\more\n'),
    Action.of("edit", path="a.txt", old="x, y", new=")"),
    Action.of("list", path="."),
    Action.of("shell", command="mv a.txt b.txt"),
    Action.of("finish", message=""),
])
def test_micro_calls_round_trips(action: Action) -> None:
    level = MicroCalls()
    (call,) = level.parse(level.render(action, "c0"))
    assert level.to_action(call) == action


def test_micro_calls_rejects_what_it_cannot_read() -> None:
    from harnessgrid.models import FormatError

    level = MicroCalls()
    assert level.parse(ModelTurn(content="I will read the file now.")) == []
    # a plan that mentions calls mid-line is prose, not calls
    assert level.parse(ModelTurn(content="Plan:\n1. write(path='a.txt')\n2. Finish.")) == []
    for bad in ('read(a.txt)', 'write("a", 3)', 'write("a" "b")', 'change("a", "b", "c", "d")'):
        with pytest.raises(FormatError):
            level.to_action(level.parse(ModelTurn(content=bad))[0])


@pytest.mark.parametrize("code", ["S3-T0-O1-C2-W0", "S0-T3-O2-C1-W2", "S3-T3-O0-C0-W1"])
def test_the_oracle_solves_tasks_through_unseen_levels(code: str) -> None:
    """Real episodes in the sandbox through a composed micro4 harness, one per family."""
    from harnessgrid import run_episode
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.policies.scripted import ScriptedPolicy

    tasks = {t.metadata["family"]: t for t in reversed(micro_suite().tasks("test"))}
    assert len(tasks) == len(FAMILIES) - 1  # every family but delete

    async def play() -> list[bool]:
        out = []
        for task in tasks.values():
            trajectory = await run_episode(resolve_harness(f"micro4:{code}"), task,
                                           ScriptedPolicy())
            out.append(bool(trajectory.passed))
        return out

    assert all(asyncio.run(play()))
