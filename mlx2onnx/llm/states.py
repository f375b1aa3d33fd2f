"""What a package carries from step to step, for every cache type mlx-lm models make.

``model.make_cache()`` gives one cache per layer (or per shared group of layers):

- ``KVCache`` / ``RotatingKVCache``: attention keys and values that grow by the tokens of
  each step (:class:`~.package.PackageCache`), a :class:`~.caches.KV` entry of the layout;
- ``ArraysCache(n)``: n fixed-size states a recurrent layer replaces at each step (the
  convolution window and the scan state of mamba, lfm2, qwen3_next, rwkv7, ...), a
  :class:`States` entry (:class:`PackageStates` in the graph);
- ``CacheList``: several of these for one layer (falcon_h1's mamba and attention), a
  :class:`Group` entry.

The layout is found by calling the model on one token with probes of each kind. Each
array the package carries is one graph input and one output, named in the conventions the
runtimes read (:func:`slot_names`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from ..errors import UnsupportedModelError
from .caches import KV, ShapeProbe

KV_CACHES = ("KVCache", "RotatingKVCache")


@dataclass(frozen=True)
class States:
    """An ``ArraysCache``: its arrays' shapes after the batch axis, and their dtypes."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[Any, ...]


@dataclass(frozen=True)
class Group:
    """A ``CacheList``: its members' layouts, in order."""

    members: tuple


def is_kv(entry) -> bool:
    return isinstance(entry, KV)


def has_states(layout: list) -> bool:
    """Whether any cache of ``layout`` carries recurrent states (not only keys and values)."""
    return not all(is_kv(leaf) for _, leaf in flat(layout))


# why a cache type cannot be carried, where it is known
WHY_NOT = {
    "ChunkedKVCache": " (llama4 builds its chunked mask from the cache's start and offset as Python numbers, "
    "mx.arange(start, end), one for the whole batch, where each row of a package has its own "
    "positions, and trims the cache in Python)",
    "LayerCache": " (deepseek_v41's own cache of a sliding window and compressed key groups, which closes a group "
    "when a Python count of tokens reaches its size)",
}


def _probe(cache, where: str, model_type: str):
    from mlx_lm.models.cache import ArraysCache, CacheList

    kind = type(cache).__name__
    if kind in KV_CACHES:
        return ShapeProbe(getattr(cache, "max_size", None) if kind == "RotatingKVCache" else None)
    if type(cache) is ArraysCache:
        return ArraysCache(len(cache.cache))
    if type(cache) is CacheList:
        return CacheList(*[_probe(c, f"{where}, member {j}", model_type) for j, c in enumerate(cache.caches)])
    why = WHY_NOT.get(kind, "")
    raise UnsupportedModelError(
        f"model_type {model_type!r} uses an mlx-lm {kind} ({where}), which the package export does not support{why}: "
        f"it exports attention KV caches ({', '.join(KV_CACHES)}), recurrent states (ArraysCache) and CacheLists of "
        "them"
    )


def _layout_of(probe, where: str):
    from mlx_lm.models.cache import ArraysCache, CacheList

    if isinstance(probe, ShapeProbe):
        if probe.layout is None:
            raise UnsupportedModelError(f"{where} never wrote to its cache; the package cannot say what it carries")
        return probe.layout
    if isinstance(probe, ArraysCache):
        if any(a is None for a in probe.cache):
            raise UnsupportedModelError(f"{where} left a state of its ArraysCache unwritten after one token")
        return States(tuple(tuple(a.shape[1:]) for a in probe.cache), tuple(a.dtype for a in probe.cache))
    assert isinstance(probe, CacheList)
    return Group(tuple(_layout_of(p, f"{where}, member {j}") for j, p in enumerate(probe.caches)))


def package_layout(model, model_type: str) -> list:
    """Per cache of ``model.make_cache()``: a :class:`~.caches.KV`, :class:`States` or a
    :class:`Group`, found by calling the model on a token (MLX
    is lazy: nothing is computed), and where it has states on three
    (a state whose size follows the tokens seen, like longcat_flash_ngram's window of
    token ids, is no fixed-size state); a cache the package cannot carry is refused by name."""

    def probed(tokens: int) -> list:
        caches = model.make_cache() if hasattr(model, "make_cache") else [None] * len(model.layers)
        probes = [ShapeProbe() if c is None else _probe(c, f"layer {i}", model_type) for i, c in enumerate(caches)]
        model(mx.zeros((1, tokens), dtype=mx.int32), cache=probes)  # shapes and dtypes only: nothing is evaluated
        return [_layout_of(p, f"layer {i}") for i, p in enumerate(probes)]

    layout = probed(1)
    if not has_states(layout):
        return layout
    for one, three in zip(flat(layout), flat(probed(3))):
        if not is_kv(one[1]) and one[1].shapes != three[1].shapes:
            raise UnsupportedModelError(
                f"model_type {model_type!r}: layer {one[0]}'s ArraysCache holds arrays whose size follows the tokens "
                f"seen ({list(one[1].shapes)} after one token, {list(three[1].shapes)} after three); the package "
                "carries states of a fixed size"
            )
    return layout


def flat(layout: list) -> list[tuple[int, Any]]:
    """(cache index, leaf entry) for each KV or States leaf, in graph order."""
    out = []
    for i, entry in enumerate(layout):
        for leaf in entry.members if isinstance(entry, Group) else (entry,):
            out.append((i, leaf))
    return out


# names of an ArraysCache's arrays by count, as transformers.js names them for its hybrid
# model types (lfm2: one convolution state; granitemoehybrid, nemotron_h, falcon_h1: a
# convolution and an SSM state; olmo_hybrid: three convolutions and a recurrent state)
STATE_NAMES = {
    1: ("conv.{i}",),
    2: ("conv.{i}", "ssm.{i}"),
    4: ("conv.{i}.key", "conv.{i}.value", "conv.{i}.query", "recurrent.{i}"),
}


def slot_names(layout: list) -> list[tuple[str, str]]:
    """(input, output) names of every array the package carries, in graph order: keys and
    values ``past_key_values.<i>.key`` -> ``present.<i>.key`` (``past_key_values_<j>.<i>.key``
    for the j-th more of one layer); states ``past_conv.<i>`` ->
    ``present_conv.<i>`` and the like (:data:`STATE_NAMES`; ``past_state.<i>.<j>`` for
    other counts), ``i`` the cache's index."""
    names, attention = [], {}
    for i, leaf in flat(layout):
        if is_kv(leaf):
            # a second attention cache of one layer (a CacheList of two: an indexer's keys) is past_key_values_1.<i>
            j = attention[i] = attention.get(i, -1) + 1
            past, present = ("past_key_values", "present") if j == 0 else (f"past_key_values_{j}", f"present_{j}")
            names += [(f"{past}.{i}.{kind}", f"{present}.{i}.{kind}") for kind in ("key", "value")]
        else:
            count = len(leaf.shapes)
            patterns = STATE_NAMES.get(count, tuple(f"state.{{i}}.{j}" for j in range(count)))
            names += [(f"past_{p.format(i=i)}", f"present_{p.format(i=i)}") for p in patterns]
    return names


@functools.cache
def package_states_class():
    """The graph's ``ArraysCache``: a subclass, since models test ``isinstance(cache,
    ArraysCache)`` (made once, when a package is made: mlx-lm is a model folder's
    dependency, not the exporter's)."""
    from mlx_lm.models.cache import ArraysCache

    class PackageStates(ArraysCache):
        """An ``ArraysCache`` whose states come from the graph's inputs; its mask is the
        step's slice of ``attention_mask`` (padding), for the layers that read one (None:
        no mask)."""

        def __init__(self, arrays: list, step_mask: mx.array):
            super().__init__(len(arrays))
            self.cache = list(arrays)
            self.step_mask = step_mask

        def make_mask(self, N: int, **_: Any):
            return None if self.step_mask is None else self.step_mask[:, -N:]

        def advance(self, N):
            pass

    return PackageStates
