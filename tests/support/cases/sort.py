"""Parity cases: Sort, ArgSort, Partition, ArgPartition (and mx.topk), SearchSorted."""

from __future__ import annotations

import mlx.core as mx

from tests.support.harness import FLOATS, INTS, Case, rand, with_edges

S = (3, 7)
ALL = FLOATS + INTS + (mx.bool_,)


def one(shape=S, lo=-50, hi=50):
    return lambda rng, dt: (rand(rng, shape, dt, lo, hi),)


def ties(shape=S):
    """Few distinct values, so stability shows; floats get +0.0 and -0.0 among them."""
    def make(rng, dt):
        if dt == mx.bool_:
            return (rand(rng, shape, dt),)
        x = rand(rng, shape, dt, 0, 2)
        if dt in FLOATS:
            x = mx.where(x == 0, mx.where(rand(rng, shape, mx.bool_), -0.0, 0.0).astype(dt), x)
        return (x,)
    return make


def take_sorted(fn, kth, axis=-1):
    """x reordered by an arg-function: the values an index permutation selects."""
    return lambda x: mx.take_along_axis(x, fn(x, kth, axis=axis), axis=axis)


CASES = []
for kind, make, edges in (("", one(), False), ("_ties", ties(), False), ("_edges", one(), True)):
    CASES += [
        Case(f"sort.sort{kind}", lambda x: mx.sort(x, axis=-1), make, dtypes=ALL, primitives=("Sort",),
             onnx_ops=("TopK",), edges=edges),
        Case(f"sort.argsort{kind}", lambda x: mx.argsort(x, axis=-1), make, dtypes=ALL, primitives=("ArgSort",),
             edges=edges),
    ]
CASES += [
    Case("sort.sort_axis0", lambda x: mx.sort(x, axis=0), one((5, 3, 2)), dtypes=FLOATS + (mx.int32, mx.uint64),
         primitives=("Sort",)),
    Case("sort.sort_flat", lambda x: mx.sort(x, axis=None), one((2, 3, 4)), dtypes=(mx.float32, mx.uint16),
         primitives=("Sort",)),
    Case("sort.argsort_axis1", lambda x: mx.argsort(x, axis=1), ties((2, 9, 3)), dtypes=FLOATS + (mx.uint32, mx.int8),
         primitives=("ArgSort",)),
    Case("sort.argsort_long", lambda x: mx.argsort(x, axis=-1), ties((2, 300)), dtypes=(mx.float32, mx.float16),
         primitives=("ArgSort",)),
    Case("sort.sort_empty", lambda x: mx.sort(x, axis=0), one((0, 3)), primitives=("Sort",)),
]

# Partition: MLX's order on either side of kth is implementation-defined; the element at
# kth is exact, the sides are compared as sets.
for kth in (0, 3, -1):
    CASES += [
        Case(f"sort.partition_kth{kth}", (lambda k: lambda x: mx.partition(x, k, axis=-1)[..., k])(kth), one(),
             dtypes=ALL, primitives=("Partition",)),
        Case(f"sort.partition_below_kth{kth}",
             (lambda k: lambda x: mx.partition(x, k, axis=-1)[..., : (k % 7) + 1])(kth),
             one(), dtypes=FLOATS + (mx.int32, mx.uint64), primitives=("Partition",), order_insensitive=True,
             edges=True),
        Case(f"sort.argpartition_kth{kth}", (lambda k: lambda x: take_sorted(mx.argpartition, k)(x)[..., k])(kth),
             ties(), dtypes=ALL, primitives=("ArgPartition",)),
        Case(f"sort.argpartition_below_kth{kth}",
             (lambda k: lambda x: take_sorted(mx.argpartition, k)(x)[..., : (k % 7) + 1])(kth),
             one(), dtypes=FLOATS + (mx.int16, mx.uint32), primitives=("ArgPartition",), order_insensitive=True,
             edges=True),
    ]
CASES += [
    Case("sort.partition_axis0", lambda x: mx.partition(x, 2, axis=0)[2], one((5, 4)), dtypes=FLOATS,
         primitives=("Partition",)),
    Case("sort.argpartition_axis0", lambda x: mx.argpartition(x, 1, axis=0)[1], one((5, 4), -500, 500),
         dtypes=(mx.float32, mx.int32), primitives=("ArgPartition",)),
    # mx.topk records Partition + Slice of the last k: not sorted
    Case("sort.topk", lambda x: mx.topk(x, 3, axis=-1), one(), dtypes=ALL, primitives=("Partition",),
         order_insensitive=True),
    Case("sort.topk_edges", lambda x: mx.topk(x, 2, axis=-1), one(), dtypes=FLOATS + INTS, primitives=("Partition",),
         order_insensitive=True, edges=True),
]


# -- SearchSorted ---------------------------------------------------------------------------
def search_inputs(edges, n=9, values=(3, 5)):
    def make(rng, dt):
        seq = rand(rng, (n,), dt, -20, 20)
        v = rand(rng, values, dt, -25, 25)
        # a value drawn from the sequence itself, so left and right differ
        v = mx.where(rand(rng, values, mx.bool_), mx.take(seq, mx.array(rng.integers(0, n, values))), v)
        if edges:
            seq, v = with_edges(rng, seq, 0.3), with_edges(rng, v, 0.3)
        return mx.sort(seq), v
    return make


SEARCH_TYPES = FLOATS + (mx.int32, mx.int16, mx.uint8, mx.uint32, mx.int64)
CASES += [
    Case(f"sort.searchsorted_{side}{kind}", (lambda s: lambda a, v: mx.searchsorted(a, v, side=s))(side),
         search_inputs(edges), dtypes=SEARCH_TYPES, primitives=("SearchSorted",))
    for side in ("left", "right")
    for kind, edges in (("", False), ("_edges", True))
]
CASES += [
    Case("sort.searchsorted_scalar", lambda a, v: mx.searchsorted(a, v, side="right"), search_inputs(False, 5, ()),
         primitives=("SearchSorted",)),
]
