"""Re-fuse MLX's CPU decomposition of ``mx.fast.rope`` (half-split pairs, the
``traditional=False`` layout every mlx-lm model uses) into ``RotaryEmbedding`` (opset 23).

MLX's fallback (``mlx/fast.cpp``) rotates ``x [B, H, T, D]`` by angles ``theta [.., T, d/2]``::

    x1, x2 = x[..., :d/2], x[..., d/2:d]        # a Split of halves when d == D, else Slices
    out = Concat(x1 * cos - x2 * sin, x1 * sin + x2 * cos [, x[..., d:]], axis=-1)

The op reads ``cos``/``sin`` as [B, T, d/2] or, given position ids [B, T], as a [P, d/2]
cache. Angle tables that do not depend on the batch ([T, d/2] up to leading 1s, constant
or computed at run time) become a cache read at positions ``0..T-1`` (a constant table of
one row, broadcast over T, becomes that row T times); tables with a batch dim become
[B, T, d/2]. Tables that vary by head, the interleaved (``traditional=True``)
and inverse (``forward=False``) layouts are left alone. onnxruntime computes each output
as one expression (it may contract it into a fused multiply-add) where MLX rounds each
product: results differ by at most a couple of float32 ulps.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .graph import const_eval, initializer, producer, replace_value, slice_bounds
from .graph import dims as _dims
from .graph import same_dim as _same


def _slice_range(node: ir.Node, width: int) -> tuple[int, int] | None:
    bounds = slice_bounds(node, 4)
    if bounds is None:
        return None
    start, end = bounds
    return start, min(end, width)


def _halves(x1: ir.Value, x2: ir.Value) -> tuple[ir.Value, int] | None:
    """(x, d) when x1, x2 are x[..., :d/2] and x[..., d/2:d] of one 4-D x with a static
    last dim: the two outputs of a Split of halves, or two Slices."""
    split = x1.producer()
    if split is not None and split is x2.producer() and split.op_type == "Split" and split.domain == "":
        x = split.inputs[0]
        dims = _dims(x)
        if dims is None or len(dims) != 4 or not isinstance(dims[3], int) or len(split.outputs) != 2:
            return None
        if split.outputs[0] is not x1 or _dims(x1)[-1] * 2 != dims[3] or _dims(x2)[-1] * 2 != dims[3]:
            return None
        axis = split.attributes.get("axis")
        return (x, dims[3]) if axis is not None and axis.as_int() in (-1, 3) else None
    a, b = producer(x1, "Slice"), producer(x2, "Slice")
    if a is None or b is None or a.inputs[0] is not b.inputs[0]:
        return None
    x = a.inputs[0]
    dims = _dims(x)
    if dims is None or len(dims) != 4 or not isinstance(dims[3], int):
        return None
    first, second = _slice_range(a, dims[3]), _slice_range(b, dims[3])
    if first is None or second is None or first[0] != 0 or second[0] != first[1]:
        return None
    half = first[1]
    return (x, 2 * half) if half > 0 and second[1] == 2 * half else None


def _product(value: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    node = producer(value, "Mul")
    return (node.inputs[0], node.inputs[1]) if node is not None else None


def _rotation(concat: ir.Node):
    """(x, d, cos, sin) when ``concat`` is the rotation of x's first d features, else None."""
    parts = list(concat.inputs)
    if len(parts) not in (2, 3) or any(p is None for p in parts):
        return None
    sub, add = producer(parts[0], "Sub"), producer(parts[1], "Add")
    if sub is None or add is None:
        return None
    first, second = _product(sub.inputs[0]), _product(sub.inputs[1])
    added = [_product(v) for v in add.inputs]
    if first is None or second is None or None in added:
        return None
    for x1, cos in (first, first[::-1]):
        for x2, sin in (second, second[::-1]):
            if x1 is x2 or cos is sin:
                continue
            if {frozenset(map(id, p)) for p in added} != {frozenset(map(id, (x1, sin))), frozenset(map(id, (x2, cos)))}:
                continue
            found = _halves(x1, x2)
            if found is None:
                continue
            x, d = found
            width = _dims(x)[3]
            if len(parts) == 3:
                rest = producer(parts[2], "Slice")
                if rest is None or rest.inputs[0] is not x or _slice_range(rest, width) != (d, width):
                    continue
            elif d != width:
                continue
            return x, d, cos, sin
    return None


def _table_batch(table: ir.Value, x: ir.Value, half: int) -> str | None:
    """How the angle table broadcasts against x1 [B, H, T, d/2] (leading 1s added):
    "shared" ([1, 1, T, d/2]), "one_row" ([1, 1, 1, d/2] with T > 1: the same angles at
    every position), "batched" ([B, 1, T, d/2]), or None (per head, or not provably so)."""
    dims, xd = _dims(table), _dims(x)
    if dims is None or not 1 <= len(dims) <= 4:
        return None
    dims = [1] * (4 - len(dims)) + dims
    if not _same(dims[3], half) or dims[1] != 1:
        return None
    if _same(dims[2], xd[2]):
        return "shared" if dims[0] == 1 else "batched" if _same(dims[0], xd[0]) else None
    return "one_row" if dims[2] == 1 and dims[0] == 1 else None


class _Builder:
    """Nodes the fused ops need, inserted before ``anchor``; the tables and position ids
    made for one source value are made once (every layer reads the same ones)."""

    def __init__(self, graph: ir.Graph):
        self.graph, self.anchor, self.made = graph, None, {}

    def node(self, op_type: str, inputs, **attributes) -> ir.Value:
        attrs = [ir.AttrInt64(k, v) for k, v in attributes.items()]
        node = ir.Node(
            "", op_type, inputs, attributes=attrs, name=f"{self.anchor.name}/rope_{op_type}_{len(self.graph)}"
        )
        self.graph.insert_before(self.anchor, node)
        return node.outputs[0]

    def ints(self, values, name: str) -> ir.Value:
        return initializer(self.graph, np.asarray(values, np.int64), name)

    def once(self, key, make) -> ir.Value:
        if key not in self.made:
            self.made[key] = make()
        return self.made[key]

    def cache(self, table: ir.Value, kind: str, half: int) -> ir.Value:
        """The table as the op reads it: [T, d/2] (read at position ids) or [B, T, d/2]
        ("batched")."""
        steps = _dims(self.anchor.outputs[0])[2] if kind == "one_row" else None
        return self.once((id(table), kind, steps), lambda: self._cache(table, kind, half))

    def _cache(self, table: ir.Value, kind: str, half: int) -> ir.Value:
        array = const_eval(table, depth=0)
        if array is not None:
            if kind == "one_row":  # onnxruntime wants a cache row per position
                array = np.broadcast_to(array.reshape(1, half), (_dims(self.anchor.outputs[0])[2], half))
            shape = (array.shape[0], -1, half) if kind == "batched" else (-1, half)
            return initializer(self.graph, array.reshape(shape), "rope_cache")
        if kind != "batched":
            return self.node("Reshape", [table, self.ints([-1, half], "rope_cache_shape")])
        return self.node("Squeeze", [table, self.ints([1], "rope_head_axis")])

    def positions(self, x: ir.Value) -> ir.Value:
        """Position ids 0..T-1 for every batch row of x [B, H, T, D], [B, T] int64."""
        dims = _dims(x)
        if isinstance(dims[0], int) and isinstance(dims[2], int):
            grid = np.broadcast_to(np.arange(dims[2]), (dims[0], dims[2]))
            return self.once(("positions", dims[0], dims[2]), lambda: self.ints(grid, "rope_positions"))
        # dims of one name are one size: the first x of those dims serves every layer
        return self.once(("positions", str(dims[0]), str(dims[2])), lambda: self._runtime_positions(x))

    def _runtime_positions(self, x: ir.Value) -> ir.Value:
        shape = self.node("Shape", [x])
        batch = self.node("Gather", [shape, self.ints([0], "rope_batch_axis")], axis=0)
        steps = self.node("Gather", [shape, self.ints(2, "rope_steps_axis")], axis=0)
        span = self.node("Range", [self.ints(0, "rope_zero"), steps, self.ints(1, "rope_one")])
        grid = self.node("Concat", [batch, self.node("Unsqueeze", [steps, self.ints([0], "rope_axis0")])], axis=0)
        return self.node("Expand", [span, grid])


def fuse_rotary_embedding(model: ir.Model) -> int:
    """MLX's CPU rotary embedding (half-split layout) -> RotaryEmbedding, float32, opset 23."""
    graph = model.graph
    b = _Builder(graph)
    fused = 0
    for node in list(graph):
        if node.graph is None or node.op_type != "Concat" or node.domain != "":
            continue
        out = node.outputs[0]
        axis = node.attributes.get("axis")
        if out.dtype != ir.DataType.FLOAT or axis is None or axis.as_int() not in (-1, 3) or len(_dims(out) or []) != 4:
            continue
        found = _rotation(node)
        if found is None:
            continue
        x, d, cos, sin = found
        kinds = {_table_batch(cos, x, d // 2), _table_batch(sin, x, d // 2)}
        if len(kinds) != 1 or None in kinds:
            continue
        (kind,) = kinds
        if kind == "one_row" and not (
            isinstance(_dims(x)[2], int) and all(const_eval(t, depth=0) is not None for t in (cos, sin))
        ):
            continue  # a row broadcast at run time would need a cache row per position
        b.anchor = node
        inputs = [x, b.cache(cos, kind, d // 2), b.cache(sin, kind, d // 2)]
        if kind != "batched":
            inputs.append(b.positions(x))
        width = _dims(x)[3]
        result = b.node("RotaryEmbedding", inputs, interleaved=0, **({"rotary_embedding_dim": d} if d != width else {}))
        result.shape, result.type = out.shape, out.type
        replace_value(graph, out, result)
        fused += 1
    return fused
