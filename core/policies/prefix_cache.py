"""The ``hf:`` policy's cache of finished turns (the ``prefix_cache_mb`` option).

Why: an episode's next prompt is its last prompt, the completion it sampled and the new
observation (the chat templates we serve are append-only). Without a cache every turn
prefills its whole history again -- with a harness's system prompt and tool schemas, over a
thousand tokens for a few dozen new ones -- and that prefill is most of a multi-turn
rollout's cost. With it, the turn prefills only the new tokens over the stored keys and values.

What is stored: per finished turn, the tokens the model has keys and values for (the prompt
and the completion less its last token, which was sampled but never fed) and one
``(keys, values)`` pair per layer, ``[kv_heads, length, head_dim]``, copied out of the batch.
A request reuses the longest stored entry whose tokens are a strict prefix of its prompt (at
least one new token is needed for the next logits); a prompt that is not an extension (the
context factor dropped or summarised turns) finds none and is prefilled whole, so the cache can
never change *what* a prompt means, only by how much rounding its logits move.

Bounds: the entries' bytes stay under the budget (oldest first out); an entry that served a
turn is dropped once the turn is done (the episode has moved on), and every entry is dropped
when the weights change -- keys computed by the old weights are not the new model's. The
weights' identity is read from the parameters' version counters, which every in-place update
(an optimizer step, ``load_state_dict``) advances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PrefixCache", "StoredTurn", "weights_stamp"]

#: How many of an entry's last tokens index it. A candidate found through them is compared
#: whole, so this only trades index size against false candidates.
_TAIL = 16


@dataclass(eq=False)
class StoredTurn:
    """One finished turn's keys and values: ``tokens`` and, per layer, ``(keys, values)`` of
    shape ``[kv_heads, len(tokens), head_dim]``."""

    tokens: tuple[int, ...]
    layers: list[tuple[Any, Any]]
    nbytes: int


def weights_stamp(model: Any) -> int:
    """A number that changes whenever ``model``'s parameters are replaced or updated in place."""
    return hash(tuple((id(p), p._version) for p in model.parameters()))


class PrefixCache:
    """Finished turns' keys and values under ``budget_bytes`` (module docstring)."""

    def __init__(self, budget_bytes: int, stamp: Callable[[], int]) -> None:
        self.budget_bytes = int(budget_bytes)
        self._stamp = stamp
        self._weights = stamp()
        self._entries: OrderedDict[tuple[int, ...], StoredTurn] = OrderedDict()
        self._by_tail: dict[tuple[int, tuple[int, ...]], StoredTurn] = {}
        self._lengths: dict[int, int] = {}  # entry length -> how many entries have it
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def check_weights(self) -> None:
        """Drop every entry if the weights changed since they were computed."""
        now = self._stamp()
        if now != self._weights:
            self._weights = now
            for entry in list(self._entries.values()):
                self.discard(entry)

    def longest(self, prompt: Sequence[int]) -> StoredTurn | None:
        """The longest entry whose tokens are a strict prefix of ``prompt``."""
        for length in sorted(self._lengths, reverse=True):
            if length >= len(prompt) or length < _TAIL:
                continue
            entry = self._by_tail.get((length, tuple(prompt[length - _TAIL:length])))
            if entry is not None and entry.tokens == tuple(prompt[:length]):
                self._entries.move_to_end(entry.tokens)
                return entry
        return None

    def put(self, tokens: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        """Keep one turn's keys and values (copies, so the batch's cache can be freed); the
        oldest entries leave while the total is over the budget. Turns shorter than the index
        tail are not worth keeping."""
        key = tuple(tokens)
        nbytes = sum(int(k.nbytes) + int(v.nbytes) for k, v in layers)
        if len(key) < _TAIL or nbytes > self.budget_bytes:
            return
        if key in self._entries:
            self.discard(self._entries[key])
        entry = StoredTurn(key, layers, nbytes)
        self._entries[key] = entry
        self._by_tail[(len(key), key[-_TAIL:])] = entry
        self._lengths[len(key)] = self._lengths.get(len(key), 0) + 1
        self.nbytes += nbytes
        while self.nbytes > self.budget_bytes:
            self.discard(next(iter(self._entries.values())))

    def discard(self, entry: StoredTurn) -> None:
        """Forget ``entry`` (no-op if it is already gone)."""
        if self._entries.get(entry.tokens) is not entry:
            return
        del self._entries[entry.tokens]
        tail = (len(entry.tokens), entry.tokens[-_TAIL:])
        if self._by_tail.get(tail) is entry:
            del self._by_tail[tail]
        self._lengths[len(entry.tokens)] -= 1
        if not self._lengths[len(entry.tokens)]:
            del self._lengths[len(entry.tokens)]
        self.nbytes -= entry.nbytes

