"""The caches the exports hand an mlx-lm model in place of its own: :class:`GrowingKVCache`
(keys and values appended at a runtime offset, the decoder graphs' and the packages'
attention cache) and :class:`ShapeProbe` (what a layer writes, to size the graph's caches)."""

from __future__ import annotations

from typing import Any, NamedTuple

import mlx.core as mx


class KV(NamedTuple):
    """One attention cache's layout: key/value heads, key and value widths, dtype, and the
    keys an mlx-lm ``RotatingKVCache`` keeps (its ``max_size``; None: every key)."""

    heads: int
    kdim: int
    vdim: int
    dtype: Any
    kept: int | None = None


class GrowingKVCache:
    """A KV cache for export that appends to the given past (``mx.concatenate`` along the
    sequence axis) at a runtime ``offset`` (an int32 array: RoPE reads it) and masks by
    position: causal, and within ``window_size`` for sliding-window layers."""

    def __init__(self, keys: mx.array, values: mx.array, offset: mx.array):
        self.keys, self.values, self._offset = keys, values, offset

    @property
    def offset(self) -> mx.array:
        return self._offset

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        self.keys = mx.concatenate([self.keys, keys.astype(self.keys.dtype)], axis=2)
        self.values = mx.concatenate([self.values, values.astype(self.values.dtype)], axis=2)
        return self.keys, self.values

    def keys_and_values(self):
        """The keys and values so far (layers that share another layer's cache read them)."""
        return self.keys, self.values

    def make_mask(self, N: int, return_array: bool = False, window_size: int | None = None, **_: Any):
        """Bool [N, past + N] (None for one query without a window: it sees every key):
        query i (at position offset + i) sees key j <= its position."""
        if N == 1 and window_size is None:
            return None
        query_pos = mx.arange(N, dtype=mx.int32)[:, None] + self._offset
        key_pos = mx.arange(self.keys.shape[2] + N, dtype=mx.int32)[None]
        mask = key_pos <= query_pos
        if window_size is not None:
            mask = mask & (key_pos > query_pos - window_size)
        return mask

    @property
    def state(self):
        return self.keys, self.values

    def empty(self) -> bool:
        return False

    def size(self):
        return self._offset

    def is_trimmable(self) -> bool:
        return False


class ShapeProbe:
    """Records the shapes of keys and values a layer writes (to size the buffers); like
    mlx-lm's caches it holds them as ``keys`` and ``values`` (deepseek_v32's indexer reads
    and replaces them)."""

    def __init__(self, kept: int | None = None):
        self.offset = 0
        self.kept = kept
        self.layout: KV | None = None  # what the layer wrote: None until it writes
        self.keys = self.values = None

    def update_and_fetch(self, keys, values):
        self.layout = KV(keys.shape[1], keys.shape[3], values.shape[3], keys.dtype, self.kept)
        self.keys, self.values = keys, values
        return keys, values

    def keys_and_values(self):
        return None if self.layout is None else (self.keys, self.values)

    def make_mask(self, N, return_array=False, window_size=None, **_):
        """None for one token, else a bool [N, N] causal mask (some models compute with
        it: an array, not the string "causal")."""
        if N == 1:
            return None
        index = mx.arange(N)
        seen = index[None] <= index[:, None]
        return seen if window_size is None else seen & (index[None] > index[:, None] - window_size)

    def empty(self):
        return True
