"""Training rows from an episode's token records (never re-tokenise history).

A token policy records, per turn, the exact prompt ids the model saw, the ids it sampled and
their log-probabilities (:class:`~harnessgrid.models.TokenRecord`). Within one *segment* every
prompt starts with the previous prompt + completion, so a whole segment is one sequence::

    prompt of the segment's first turn | model turn 1 | harness text | model turn 2 | ...
    \\_____ prompt_ids _____________/   \\_______________ completion_ids _______________/
                                          mask 1         mask 0         mask 1

The mask is 1 exactly on tokens the model generated and 0 on everything the harness inserted
between turns (observations, reminders, re-prompts, the end-of-turn text a truncated turn did
not produce). A context level or adapter that rewrites history starts a new segment, hence a
new row. Rows are built from the recorded ids only; re-rendering the messages would not give
them back (sampled ids do not survive decode → encode).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.trajectory import Trajectory, TurnRecord

__all__ = ["TokenRow", "token_rows"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One append-only segment of one episode, ready for a policy-gradient loss.

    ``spans`` gives, for each turn of the segment (``turns``), the ``[start, end)`` offsets of
    its sampled tokens in ``completion_ids``; ``truncated`` holds the turn indices whose
    generation was cut by the per-turn token limit (``finish_reason == "length"``).
    """

    episode_id: str
    segment: int
    turns: tuple[int, ...]
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    mask: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    truncated: tuple[int, ...] = ()

    @property
    def model_tokens(self) -> int:
        """How many tokens of this row the model generated (the tokens that carry loss)."""
        return sum(self.mask)

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


class _RowBuilder:
    def __init__(self, episode_id: str, turn: TurnRecord) -> None:
        assert turn.tokens is not None
        self.episode_id = episode_id
        self.segment = turn.tokens.segment
        self.prompt = list(turn.tokens.prompt_ids)
        self.completion: list[int] = []
        self.logprobs: list[float] = []
        self.mask: list[int] = []
        self.turns: list[int] = []
        self.spans: list[tuple[int, int]] = []
        self.truncated: list[int] = []
        self._add_turn(turn)

    def extends(self, turn: TurnRecord) -> bool:
        """Whether ``turn``'s prompt is this row so far plus inserted harness tokens."""
        record = turn.tokens
        assert record is not None
        if record.segment != self.segment:
            return False
        n_prompt, n_completion = len(self.prompt), len(self.completion)
        ids = record.prompt_ids
        if len(ids) < n_prompt + n_completion:
            return False
        return (list(ids[:n_prompt]) == self.prompt
                and list(ids[n_prompt:n_prompt + n_completion]) == self.completion)

    def append(self, turn: TurnRecord) -> None:
        assert turn.tokens is not None
        inserted = turn.tokens.prompt_ids[len(self.prompt) + len(self.completion):]
        self.completion.extend(inserted)
        self.logprobs.extend([0.0] * len(inserted))
        self.mask.extend([0] * len(inserted))
        self._add_turn(turn)

    def _add_turn(self, turn: TurnRecord) -> None:
        record = turn.tokens
        assert record is not None
        start = len(self.completion)
        self.completion.extend(record.completion_ids)
        self.logprobs.extend(record.logprobs)
        self.mask.extend([1] * len(record.completion_ids))
        self.turns.append(turn.index)
        self.spans.append((start, len(self.completion)))
        if turn.finish_reason == "length":
            self.truncated.append(turn.index)

    def build(self) -> TokenRow:
        return TokenRow(episode_id=self.episode_id, segment=self.segment,
                        turns=tuple(self.turns), prompt_ids=tuple(self.prompt),
                        completion_ids=tuple(self.completion), logprobs=tuple(self.logprobs),
                        mask=tuple(self.mask), spans=tuple(self.spans),
                        truncated=tuple(self.truncated))


def token_rows(trajectory: Trajectory) -> list[TokenRow]:
    """One :class:`TokenRow` per append-only segment of ``trajectory``, in turn order.

    Turns without token records (API policies, the scripted oracle) contribute nothing. A turn
    that claims to continue a segment but whose prompt does not extend it (which a correct
    token policy never produces) starts a new row rather than guessing ids, with a warning.
    """
    return rows_of_turns(trajectory.episode_id, trajectory.turns)


def rows_of_turns(episode_id: str, turns: Sequence[TurnRecord]) -> list[TokenRow]:
    rows: list[TokenRow] = []
    current: _RowBuilder | None = None
    for turn in turns:
        if turn.tokens is None:
            continue
        if current is not None and current.extends(turn):
            current.append(turn)
            continue
        if current is not None:
            if turn.tokens.segment == current.segment:
                logger.warning("episode %s turn %d: prompt ids do not extend segment %d; "
                               "starting a new row", episode_id, turn.index, current.segment)
            rows.append(current.build())
        current = _RowBuilder(episode_id, turn)
    if current is not None:
        rows.append(current.build())
    return rows
