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

from ..capture.symbolic import Plan, Poly
from .graph import (
    const_eval,
    initializer,
    int_attr,
    producer,
    rank,
    remove_dead,
    replace_value,
    static_shape,
)
from .sizes import Sizes


class Windows:
    """A sliding-window view [N, *O, *K, C] of the channels-last ``source`` [N, *S, C]."""

    def __init__(self, source, kernel, strides, dilations, pads_lo, pads_hi, pad_value, nodes):
        self.source, self.kernel, self.strides, self.dilations = source, kernel, strides, dilations
        self.pads_lo, self.pads_hi, self.pad_value, self.nodes = pads_lo, pads_hi, pad_value, nodes


def _unpad(value: ir.Value, spatial: int):
    """(x, pads_lo, pads_hi, pad value) for value = Pad(x) over the spatial axes only, or
    (value, 0s, 0s, None) when it is not a Pad; None for any other padding."""
    pad = producer(value, "Pad")
    zeros = [0] * spatial
    if pad is None:
        return value, zeros, zeros, None, []
    mode = pad.attributes.get("mode")
    if mode is not None and mode.as_string() != "constant":
        return None
    if len(pad.inputs) > 3 and pad.inputs[3] is not None:
        return None
    pads = const_eval(pad.inputs[1])
    fill = const_eval(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] is not None else np.zeros(())
    if pads is None or fill is None or fill.size != 1:
        return None
    rank = spatial + 2
    pads = [int(p) for p in pads.reshape(-1)]
    lo, hi = pads[:rank], pads[rank:]
    if lo[0] or hi[0] or lo[-1] or hi[-1] or any(p < 0 for p in pads):
        return None
    return pad.inputs[0], lo[1:-1], hi[1:-1], float(fill.reshape(())), [pad]


def _strided_windows(value: ir.Value) -> Windows | None:
    """Windows of a Gather(Reshape(source, [size]), index) whose index is exactly a
    sliding-window grid."""
    gather = producer(value, "Gather")
    if gather is None or int_attr(gather, "axis", 0) != 0:
        return None
    flat = producer(gather.inputs[0], "Reshape")
    index = const_eval(gather.inputs[1], limit=1 << 26)
    shape = static_shape(value)
    if flat is None or index is None or shape is None or len(shape) < 4 or len(shape) % 2:
        return None
    padded = flat.inputs[0]
    src = static_shape(padded)
    d = (len(shape) - 2) // 2
    if src is None or len(src) != d + 2 or src[0] != shape[0] or src[-1] != shape[-1]:
        return None
    natural = [math.prod(src[k + 1:]) for k in range(len(src))]
    out, kernel = shape[1:1 + d], shape[1 + d:1 + 2 * d]

    def step(axis, size, unit):  # the index step along ``axis`` in units of ``unit``
        if size == 1:
            return 1
        unit_index = [0] * len(shape)
        unit_index[axis] = 1
        diff = int(index[tuple(unit_index)] - index[(0,) * len(shape)])
        return diff // unit if diff > 0 and diff % unit == 0 else None

    strides = [step(1 + i, out[i], natural[1 + i]) for i in range(d)]
    dilations = [step(1 + d + i, kernel[i], natural[1 + i]) for i in range(d)]
    if None in strides or None in dilations:
        return None
    expected = np.zeros(shape, np.int64)
    axis_steps = [natural[0]] + [s * natural[1 + i] for i, s in enumerate(strides)]
    axis_steps += [k * natural[1 + i] for i, k in enumerate(dilations)] + [1]
    for axis, (n, s) in enumerate(zip(shape, axis_steps)):
        expected += (np.arange(n, dtype=np.int64) * s).reshape([n if j == axis else 1 for j in range(len(shape))])
    if index.shape != expected.shape or not np.array_equal(index, expected):
        return None
    found = _unpad(padded, d)
    if found is None:
        return None
    source, lo, hi, fill, pad_nodes = found
    return Windows(source, list(kernel), strides, dilations, lo, hi, fill, [gather, flat] + pad_nodes)


def _blocking(value: ir.Value) -> tuple[ir.Node, list[ir.Node]] | None:
    """(the Reshape, the nodes) of windows Transpose(Reshape(source, [N, O1, K1, .., C]),
    [0, 1, 3, .., 2, 4, .., last]); with one spatial axis that order is the identity, and
    the windows are the Reshape itself."""
    transpose = producer(value, "Transpose")
    if transpose is None:
        reshape = producer(value, "Reshape")
        return (reshape, [reshape]) if reshape is not None and rank(value) == 4 else None
    r = rank(value)
    last = r - 1 if r is not None else None
    perm = list(transpose.attributes["perm"].as_ints()) if "perm" in transpose.attributes else None
    reshape = producer(transpose.inputs[0], "Reshape")
    if reshape is None or r is None or perm != [0, *range(1, last, 2), *range(2, last, 2), last]:
        return None
    return reshape, [transpose, reshape]


def _blocked_windows(value: ir.Value) -> Windows | None:
    """Windows of :func:`_blocking` form, their shapes static."""
    found = _blocking(value)
    if found is None:
        return None
    reshape, nodes = found
    blocked = static_shape(reshape.outputs[0])
    if blocked is None or len(blocked) < 4 or len(blocked) % 2:
        return None
    d = (len(blocked) - 2) // 2
    padded = reshape.inputs[0]
    src = static_shape(padded)
    kernel = [blocked[2 + 2 * i] for i in range(d)]
    if src != (blocked[0], *(blocked[1 + 2 * i] * kernel[i] for i in range(d)), blocked[-1]):
        return None
    return _blocked(padded, d, kernel, nodes)


def _blocked(padded: ir.Value, d: int, kernel: list[int], nodes: list) -> Windows | None:
    """Non-overlapping windows (stride = kernel) of ``padded``, once its padding is read."""
    found = _unpad(padded, d)
    if found is None:
        return None
    source, lo, hi, fill, pad_nodes = found
    return Windows(source, kernel, list(kernel), [1] * d, lo, hi, fill, nodes + pad_nodes)


# -- dynamic image sizes: the same windows, their sizes polynomials in the symbols ------
def _scalar(sizes: Sizes, value: ir.Value, r: int = 1) -> Poly | None:
    """The one number ``value`` holds (of rank at most ``r``, so broadcasting it changes
    no shape of that rank), as a polynomial."""
    found = sizes.value_of(value)
    return found.reshape(-1)[0] if found is not None and found.size == 1 and found.ndim <= r else None


def _axis_range(sizes: Sizes, value: ir.Value, r: int) -> tuple[int, Poly] | None:
    """(axis, n) for Reshape(Range(0, n, 1), [1, .., n, .., 1]): 0..n-1 along ``axis``."""
    reshape = producer(value, "Reshape")
    arange = producer(reshape.inputs[0], "Range") if reshape is not None else None
    if arange is None:
        return None
    start, n, delta = (_scalar(sizes, v) for v in arange.inputs)
    target = sizes.value_of(reshape.inputs[1])
    if start != 0 or delta != 1 or n is None or target is None or target.shape != (r,):
        return None
    axes = [k for k, t in enumerate(target) if t != 1]
    if len(axes) != 1 or target[axes[0]] != n:
        return None
    return axes[0], n


def _index_terms(sizes: Sizes, index: ir.Value, r: int):
    """The index as {axis: (n, step)} for its terms Range(0, n) * step laid along an axis,
    plus the sum of its constant-shaped terms (an array of Poly); None if not that form."""
    ranged, dense, stack = {}, [], [index]
    while stack:
        value = stack.pop()
        node = producer(value, "Add")
        if node is not None and sizes.value_of(value) is None:
            stack.extend(node.inputs)
            continue
        found = sizes.value_of(value)
        if found is not None:
            if found.ndim > r:
                return None
            dense.append(found.reshape((1,) * (r - found.ndim) + found.shape))
            continue
        mul = producer(value, "Mul")
        pairs = [(value, None)] if mul is None else [(mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])]
        for along, by in pairs:
            axis_n = _axis_range(sizes, along, r)
            step = Poly.of(1) if by is None else _scalar(sizes, by, r)
            if axis_n is not None and step is not None:
                break
        else:
            return None
        if axis_n[0] in ranged:
            return None
        ranged[axis_n[0]] = (axis_n[1], step)
    total = np.zeros((1,) * r, dtype=object)
    total.flat[0] = Poly.of(0)
    try:
        for term in dense:
            total = total + term
    except ValueError:  # terms that do not broadcast
        return None
    return ranged, total


def _dynamic_strided_windows(sizes: Sizes, value: ir.Value) -> Windows | None:
    """Windows of Gather(Reshape(padded, [-1]), index) whose index graph (built from
    ``Shape`` at run time) is, at every admitted size, the sliding-window grid of
    ``padded``, its strides constant and its output sizes MLX's floor((S - K) / s) + 1."""
    gather = producer(value, "Gather")
    if gather is None or int_attr(gather, "axis", 0) != 0:
        return None
    flat = producer(gather.inputs[0], "Reshape")
    r = rank(value)
    if flat is None or static_shape(flat.inputs[1]) != (1,) or r is None or r < 4 or r % 2:
        return None
    padded = flat.inputs[0]
    src = sizes.dims(padded)
    d = (r - 2) // 2
    terms = _index_terms(sizes, gather.inputs[1], r)
    if src is None or len(src) != d + 2 or terms is None:
        return None
    ranged, dense = terms
    if any(dense.shape[a] != 1 for a in ranged):
        return None
    dims = [ranged[a][0] if a in ranged else Poly.of(dense.shape[a]) for a in range(r)]
    natural = [math.prod(src[k + 1:], start=Poly.of(1)) for k in range(d + 2)]
    units = [natural[0], *natural[1:1 + d], *natural[1:1 + d], natural[-1]]
    factors, expected = [], np.zeros(dense.shape, dtype=object)
    for a in range(r):
        if a in ranged:
            step = ranged[a][1]
        elif dense.shape[a] > 1:
            unit = tuple(1 if j == a else 0 for j in range(r))
            step = dense[unit] - dense[(0,) * r]
        else:
            step = units[a]
        factor = step.ratio(units[a])
        if factor is None or factor.denominator != 1 or factor < 1:
            return None
        factors.append(int(factor))
        if a not in ranged:
            grid = np.array([Poly.of(k) * step for k in range(dense.shape[a])] or [Poly.of(0)], dtype=object)
            expected = expected + grid.reshape([dense.shape[a] if j == a else 1 for j in range(r)])
    if factors[0] != 1 or factors[-1] != 1 or dims[0] != src[0] or dims[-1] != src[-1]:
        return None
    if not all(p == q for p, q in zip(dense.flat, np.broadcast_to(expected, dense.shape).flat)):
        return None
    kernel = [dims[1 + d + i].constant for i in range(d)]
    strides, dilations = factors[1:1 + d], factors[1 + d:1 + 2 * d]
    if any(k is None or k.denominator != 1 or k < 1 for k in kernel):
        return None
    kernel = [int(k) for k in kernel]
    for i in range(d):  # MLX's output size, floored, at every admitted size
        size = sizes.floor_div(src[1 + i] - dilations[i] * (kernel[i] - 1) - 1, strides[i])
        if size is None or dims[1 + i] != size + 1 or not sizes.positive(dims[1 + i]):
            return None
    found = _unpad(padded, d)
    if found is None:
        return None
    source, lo, hi, fill, pad_nodes = found
    if sizes.dims(source) != [p - a - b for p, a, b in zip(src, [0, *lo, 0], [0, *hi, 0])]:
        return None
    return Windows(source, kernel, strides, dilations, lo, hi, fill, [gather, flat] + pad_nodes)


def _dynamic_blocked_windows(sizes: Sizes, value: ir.Value) -> Windows | None:
    """Windows of :func:`_blocking` form whose Reshape target (built from ``Shape``)
    splits each spatial size S into S/K blocks of a constant K."""
    found = _blocking(value)
    if found is None:
        return None
    reshape, nodes = found
    padded = reshape.inputs[0]
    src, blocked = sizes.dims(padded), sizes.value_of(reshape.inputs[1])
    if src is None or blocked is None or blocked.ndim != 1 or len(blocked) != rank(value) or len(blocked) % 2:
        return None
    d = (len(blocked) - 2) // 2
    if len(src) != d + 2:
        return None
    if int_attr(reshape, "allowzero", 0) == 0:  # a 0 copies the input's dimension
        blocked = [src[k] if k < len(src) and b == 0 else b for k, b in enumerate(blocked)]
    if any(b.constant is not None and b.constant <= 0 for b in blocked):
        return None  # -1 (inferred): not read here
    kernel = [blocked[2 + 2 * i].constant for i in range(d)]
    if any(k is None or k.denominator != 1 for k in kernel):
        return None
    kernel = [int(k) for k in kernel]
    if blocked[0] != src[0] or blocked[-1] != src[-1] or any(
            blocked[1 + 2 * i] * kernel[i] != src[1 + i] for i in range(d)):
        return None
    return _blocked(padded, d, kernel, nodes)


def _windows(value: ir.Value, sizes: Sizes | None) -> Windows | None:
    found = _strided_windows(value) or _blocked_windows(value)
    if found is None and sizes is not None:
        found = _dynamic_strided_windows(sizes, value) or _dynamic_blocked_windows(sizes, value)
    return found


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
    attrs = [ir.AttrInt64s("kernel_shape", w.kernel), ir.AttrInt64s("strides", w.strides),
             ir.AttrInt64s("pads", w.pads_lo + w.pads_hi)]
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
        w = _windows(windows_value, sizes)
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
    if factor is None or factor.size != 1 or not math.isclose(
            float(factor.reshape(())), 1.0 / math.prod(w.kernel), rel_tol=1e-6):
        return None
    return mul.outputs[0]
