"""Re-fuse MLX's pooling decomposition into ONNX ``MaxPool`` / ``AveragePool``.

``nn.MaxPool2d`` / ``AvgPool2d`` (and the 1-D/3-D ones) reach the exporter as (MLX's
``mlx/nn/layers/pooling.py``), for channels-last x [N, *S, C]::

    [Pad(x, value)]  ->  windows [N, *O, *K, C]  ->  max / mean over the K axes

with the windows either ``AsStrided`` (a ``Gather`` of the flattened input with an index
grid) or, for non-overlapping windows, ``Reshape`` [N, O1, K1, O2, K2, .., C] +
``Transpose``. The max carries the NaN guard of :mod:`op_mappings.reduce` (MLX's max
propagates NaN, ONNX's skips it).

Each match is checked exactly: the index grid is compared element by element with the
sliding-window grid it claims to be, a max pool's padding must be -inf (ONNX pads are
ignored by MaxPool, the same thing) and an average pool's 0 with the divisor 1/prod(K)
(``count_include_pad=1``). The replacement is channels-first, wrapped in the two layout
Transposes that :func:`.layout.sink_transposes` then cancels across the net::

    Transpose -> MaxPool -> Where(MaxPool(IsNaN -> float) > 0, NaN, .) -> Transpose

(the second, cheap MaxPool over the NaN mask keeps MLX's NaN propagation exactly).

With dynamic image sizes the windows' numbers are computed from ``Shape`` at run time:
the Gather index is a sum of ``Range(0, n) * step`` terms laid along one axis each (and
constant ones), the blocked Reshape's target a Concat of ``Shape``-derived sizes.
:class:`.sizes.Sizes` reads them as polynomials in the model's symbols, and
the match is proven for every admitted size: each step is a constant multiple of the
padded input's natural stride, the kernel constant, and the output size MLX's
``floor((S - dilation*(K-1) - 1) / stride) + 1`` (which is MaxPool's floor mode), its
floor exact given the symbols' ``multiple_of``. Anything not proven stays as it is.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from ..capture.symbolic import Plan
from .graph import (
    const_eval,
    initializer,
    int_attr,
    rank,
    remove_dead,
    replace_value,
    static_shape,
)
from .sizes import Sizes
from .windows import Windows, find_windows


def _reduced_axes(node: ir.Node, rank: int) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = const_eval(node.inputs[1])
    elif "axes" in node.attributes:
        axes = np.asarray(node.attributes["axes"].as_ints())
    else:
        return None
    if axes is None:
        return None
    return sorted(int(a) % rank for a in axes.reshape(-1))


def _squeezed(value: ir.Value, shape: tuple[int, ...] | None, axes: list[int]) -> ir.Value | None:
    """The output of the single Squeeze(value, axes) (or Reshape dropping them) after
    ``value``, of keepdims shape ``shape`` (None when dynamic: a Squeeze only)."""
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    node = uses[0].node
    if node.domain != "":
        return None
    if node.op_type == "Squeeze" and _reduced_axes(node, rank(value)) == axes:
        return node.outputs[0]
    target = const_eval(node.inputs[1]) if node.op_type == "Reshape" and shape is not None else None
    if target is not None and [int(n) for n in target] == [n for k, n in enumerate(shape) if k not in axes]:
        return node.outputs[0]
    return None


def _nan_guarded(result: ir.Value, windows: ir.Value, axes: list[int]) -> ir.Value | None:
    """The Where(any_nan(windows), NaN, result) after ``result``, when it is exactly that."""
    uses = result.uses()
    if len(uses) != 1 or result.is_graph_output():
        return None
    where = uses[0].node
    if where.op_type != "Where" or where.domain != "" or uses[0].idx != 2:
        return None
    nan = const_eval(where.inputs[1])
    if nan is None or nan.size != 1 or not np.isnan(nan).all():
        return None
    value = where.inputs[0]
    while True:  # ReduceMax(IsNaN(windows), axes), possibly through Casts
        node = value.producer() if value is not None else None
        if node is None or node.domain != "":
            return None
        if node.op_type == "IsNaN":
            return where.outputs[0] if node.inputs[0] is windows else None
        if node.op_type == "ReduceMax" and _reduced_axes(node, len(axes) * 2 + 2) != axes:
            return None
        if node.op_type not in ("ReduceMax", "Cast"):
            return None
        value = node.inputs[0]


def _pool_attrs(w: Windows, kind: str) -> list[ir.Attr]:
    attrs = [
        ir.AttrInt64s("kernel_shape", w.kernel),
        ir.AttrInt64s("strides", w.strides),
        ir.AttrInt64s("pads", w.pads_lo + w.pads_hi),
    ]
    if kind == "MaxPool" and any(k != 1 for k in w.dilations):
        attrs.append(ir.AttrInt64s("dilations", w.dilations))
    if kind == "AveragePool":
        attrs.append(ir.AttrInt64("count_include_pad", 1))
    return attrs


def _emit(graph: ir.Graph, anchor: ir.Node, w: Windows, kind: str, old: ir.Value) -> None:
    """Channels-first ``kind`` pooling of w.source replacing ``old`` (channels-last)."""
    d = len(w.kernel)
    nodes = []

    def add(op_type, inputs, attrs=()):
        node = ir.Node("", op_type, inputs, attributes=list(attrs))
        nodes.append(node)
        return node.outputs[0]

    x = add("Transpose", [w.source], [ir.AttrInt64s("perm", [0, d + 1, *range(1, d + 1)])])
    y = add(kind, [x], _pool_attrs(w, kind))
    if kind == "MaxPool":
        float_type = ir.AttrInt64("to", int(w.source.dtype))
        mask = add("MaxPool", [add("Cast", [add("IsNaN", [x])], [float_type])], _pool_attrs(w, kind))
        any_nan = add("Cast", [mask], [ir.AttrInt64("to", int(ir.DataType.BOOL))])
        nan = initializer(graph, np.array(np.nan, w.source.dtype.numpy()), "pool_nan")
        y = add("Where", [any_nan, nan, y])
    out = add("Transpose", [y], [ir.AttrInt64s("perm", [0, *range(2, d + 2), 1])])
    out.shape, out.type = old.shape, old.type
    graph.insert_before(anchor, nodes)
    replace_value(graph, old, out)


def fuse_pooling(model: ir.Model, plan: Plan | None = None) -> int:
    """Replace MLX's max/average pooling decomposition by MaxPool / AveragePool (with
    dynamic image sizes too, given the export's ``plan``, where the windows are the same
    at every admitted size)."""
    graph = model.graph
    sizes = Sizes(plan) if plan is not None else None
    fused = 0
    for node in list(graph):
        if node.graph is not graph or node.domain != "" or node.op_type not in ("ReduceMax", "ReduceSum"):
            continue
        windows_value = node.inputs[0]
        if windows_value is None or windows_value.dtype != ir.DataType.FLOAT:
            continue
        if int_attr(node, "keepdims", 1) != 1:
            continue
        r = rank(windows_value)
        shape = static_shape(windows_value)
        if r is None or r < 4 or r % 2 or shape is None and sizes is None:
            continue
        d = (r - 2) // 2
        axes = _reduced_axes(node, r)
        if axes != list(range(1 + d, 1 + 2 * d)):
            continue
        kept = tuple(1 if k in axes else n for k, n in enumerate(shape)) if shape is not None else None
        w = find_windows(windows_value, sizes)
        if w is None or any(p >= k for p, k in zip(w.pads_lo + w.pads_hi, w.kernel + w.kernel)):
            continue  # onnxruntime refuses pads as large as the kernel
        if node.op_type == "ReduceMax":
            if w.pad_value is not None and w.pad_value != -math.inf:
                continue
            guarded = _nan_guarded(node.outputs[0], windows_value, axes)
            result = _squeezed(guarded, kept, axes) if guarded is not None else None
            kind = "MaxPool"
        else:
            if w.pad_value not in (None, 0.0):
                continue
            result = _averaged(_squeezed(node.outputs[0], kept, axes), w, sizes)
            kind = "AveragePool"
        if result is None:
            continue
        _emit(graph, result.producer(), w, kind, result)
        remove_dead(graph, [result.producer()] if result.producer() is not None else [])
        remove_dead(graph, w.nodes)
        fused += 1
    return fused


def _averaged(summed: ir.Value | None, w: Windows, sizes: Sizes | None) -> ir.Value | None:
    """The Mul(summed, 1/prod(kernel)) after the window sum, when it is exactly that (the
    factor a constant, or computed from ``Shape`` of the windows' constant kernel axes)."""
    mul = summed.uses()[0].node if summed is not None and len(summed.uses()) == 1 else None
    if mul is None or mul.op_type != "Mul" or mul.domain != "" or summed.is_graph_output():
        return None
    other = mul.inputs[1] if mul.inputs[0] is summed else mul.inputs[0]
    factor = const_eval(other)
    if factor is None and sizes is not None:
        found = sizes.value_of(other)
        value = found.reshape(-1)[0].constant if found is not None and found.size == 1 else None
        factor = None if value is None else np.asarray(float(value))
    if (
        factor is None
        or factor.size != 1
        or not math.isclose(float(factor.reshape(())), 1.0 / math.prod(w.kernel), rel_tol=1e-6)
    ):
        return None
    return mul.outputs[0]
