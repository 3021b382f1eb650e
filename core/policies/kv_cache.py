"""The KV caches the ``hf:`` policy decodes with: built to grow in place, and moved row by row.

Why a cache of our own making: transformers' dynamic cache appends each decode step's keys and
values with ``torch.cat``, which copies the whole cache every step - with a harness's
thousand-token prompts, a fifth of a CPU decode step on the tiny model. :class:`GrowingLayer`
keeps the layer's keys and values as views into a buffer allocated once per batch with room for
the batch's longest possible completion, and writes each step's column in place. The values
attention reads are the same, so the logits are bit for bit those of the dynamic cache (checked
on CPU, grouped-query and plain multi-head attention alike: ``tests/test_prefix_cache.py``), and
the peak memory is lower (``cat`` holds the old and the new cache at once).

Only models whose own cache would be all plain dynamic layers get one
(:func:`growing_cache_fits`; sliding-window, hybrid and linear-attention models keep
transformers' cache); the prefix cache (:mod:`~harnessgrid.policies.prefix_cache`) copies rows
in and out of exactly these caches (:func:`row_layers`, :func:`stack_turns`,
:func:`merge_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessgrid.policies.prefix_cache import StoredTurn

__all__ = ["growing_cache_fits", "is_plain", "merge_rows", "new_cache", "row_layers",
           "stack_turns"]

#: Columns a layer adds when a write finds its buffer full (only a caller that reserved too
#: little meets this: the policy reserves the batch's whole completion).
_SLACK = 64


def _growing_layer_class() -> type:
    from transformers import cache_utils

    base: Any = cache_utils.DynamicLayer  # partially typed upstream; used at this boundary

    class GrowingLayer(base):  # type: ignore[misc]
        """A dynamic layer whose keys and values are views into a buffer with room for
        ``reserve`` more columns than its first update brought (module docstring)."""

        keys: Any
        values: Any

        def __init__(self, reserve: int = 0) -> None:
            super().__init__()
            self.reserve = int(reserve)
            self.room: tuple[Any, Any] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any,
                   ) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            used = self.get_seq_length()
            new = key_states.shape[-2]
            # Anything that replaced the views (reordering, repeating rows) or a full buffer
            # means a new buffer, the cached columns copied over.
            if self.room is None or self.room[0].shape[-2] < used + new or (
                    used and self.keys.data_ptr() != self.room[0].data_ptr()):
                self._reallocate(key_states, value_states, used, used + new + (
                    self.reserve if self.room is None else _SLACK))
            assert self.room is not None
            self.room[0][..., used:used + new, :] = key_states
            self.room[1][..., used:used + new, :] = value_states
            self.keys = self.room[0][..., :used + new, :]
            self.values = self.room[1][..., :used + new, :]
            return self.keys, self.values

        def _reallocate(self, key_states: Any, value_states: Any, used: int,
                        columns: int) -> None:
            import torch

            shape = (*key_states.shape[:-2], columns, key_states.shape[-1])
            keys = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
            values = torch.empty(shape, dtype=value_states.dtype, device=value_states.device)
            if used:
                keys[..., :used, :] = self.keys
                values[..., :used, :] = self.values
            self.room = (keys, values)

        def batch_select_indices(self, indices: Any) -> None:
            if self.get_seq_length() > 0 and self.room is not None:
                used = self.get_seq_length()
                self.room = (self.room[0][indices], self.room[1][indices])
                self.keys = self.room[0][..., :used, :]
                self.values = self.room[1][..., :used, :]

    return GrowingLayer


_GROWING: list[type] = []


def growing_layer() -> type:
    """:class:`GrowingLayer` (built on first use: transformers is imported lazily)."""
    if not _GROWING:
        _GROWING.append(_growing_layer_class())
    return _GROWING[0]


def growing_cache_fits(model: Any) -> bool:
    """Whether ``model``'s own cache would be plain dynamic layers only (no sliding window,
    no linear attention), so that a growing cache computes the same thing."""
    try:
        from transformers import cache_utils

        utils: Any = cache_utils
        probe = utils.DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - another transformers, an unusual model: keep its cache
        return False
    layers = getattr(probe, "layers", None) or []
    return bool(layers) and all(type(layer) is utils.DynamicLayer for layer in layers)


def new_cache(reserve: int, layers: Sequence[tuple[Any, Any]] = ()) -> Any:
    """An empty dynamic cache of growing layers with room for ``reserve`` columns after the
    first update, or holding ``layers`` (per layer ``(keys, values)``) with that room after
    them."""
    from transformers import cache_utils

    utils: Any = cache_utils
    cache = utils.DynamicCache()
    cache.layer_class_to_replicate = lambda: growing_layer()(reserve)
    for index, (keys, values) in enumerate(layers):
        cache.update(keys, values, index)
    return cache


def is_plain(past: Any) -> bool:
    """Whether ``past`` is a dynamic cache of plain or growing full-attention layers (no
    sliding window, quantisation or offloading), whose rows can be copied out and back."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    kinds = (DynamicLayer, growing_layer())
    return type(past) is DynamicCache and all(type(x) in kinds for x in past.layers)


def row_layers(past: Any, mask: Any, row: int) -> list[tuple[Any, Any]]:
    """Row ``row``'s keys and values at the positions its attention mask keeps (the padding
    left out), per layer ``[kv_heads, kept, head_dim]``, as copies."""
    columns = mask[row].nonzero().squeeze(-1)
    return [(layer.keys[row].index_select(1, columns), layer.values[row].index_select(1, columns))
            for layer in past.layers]


def stack_turns(torch: Any, turns: Sequence[StoredTurn], width: int, device: Any,
                ) -> list[tuple[Any, Any]]:
    """The turns' keys and values as one batch, per layer ``[len(turns), kv_heads, width,
    head_dim]``, each row right-aligned (zeros on the left, which the mask hides)."""
    layers = []
    for n in range(len(turns[0].layers)):
        keys, values = turns[0].layers[n]
        shape = (len(turns), keys.shape[0], width, keys.shape[2])
        batch_keys = torch.zeros(shape, dtype=keys.dtype, device=device)
        batch_values = torch.zeros(shape, dtype=values.dtype, device=device)
        for row, turn in enumerate(turns):
            k, v = turn.layers[n]
            batch_keys[row, :, width - k.shape[1]:] = k
            batch_values[row, :, width - v.shape[1]:] = v
        layers.append((batch_keys, batch_values))
    return layers


def merge_rows(torch: Any, make_cache: Callable[[list[tuple[Any, Any]]], Any],
               parts: Sequence[tuple[Sequence[int], Any, Any, Any, Any]],
               ) -> tuple[Any, Any, Any, Any]:
    """One batch from several forwards' ``(request indices, logits, cache, mask, positions)``:
    each part left-padded to the widest (masked), rows put back in request order; the logits
    and positions of each row's last position only (all the decode loop reads)."""
    functional = torch.nn.functional
    width = max(part[3].shape[1] for part in parts)
    order = torch.argsort(torch.tensor([i for part in parts for i in part[0]]))
    order = order.to(parts[0][3].device)

    def joined(pieces: list[Any]) -> Any:
        return torch.cat(pieces)[order]

    logits = joined([part[1][:, -1:] for part in parts])
    mask = joined([functional.pad(part[3], (width - part[3].shape[1], 0)) for part in parts])
    positions = joined([part[4][:, -1:] for part in parts])
    layers = []
    for n in range(len(parts[0][2].layers)):
        pads = [(0, 0, width - part[3].shape[1], 0) for part in parts]
        keys = joined([functional.pad(part[2].layers[n].keys, pad)
                       for part, pad in zip(parts, pads, strict=True)])
        values = joined([functional.pad(part[2].layers[n].values, pad)
                         for part, pad in zip(parts, pads, strict=True)])
        layers.append((keys, values))
    return logits, make_cache(layers), mask, positions
