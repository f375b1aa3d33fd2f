"""The sliding windows of MLX's pooling decomposition, found and proven exactly (the matching
half of :mod:`.pooling`).

A window tensor [N, *O, *K, C] of a (padded) channels-last input is either ``AsStrided``
(a ``Gather`` of the flattened input with an index grid, compared element by element with
the sliding-window grid it claims to be) or, for non-overlapping windows, ``Reshape``
[N, O1, K1, O2, K2, .., C] + ``Transpose``. With dynamic image sizes the index grid is a
sum of ``Range(0, n) * step`` terms and the Reshape's target a Concat of ``Shape``-derived
sizes, read as polynomials in the model's symbols (:class:`.sizes.Sizes`) and proven for
every admitted size. :func:`find_windows` gives the :class:`Windows`, or None where the
match is not proven.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from ..capture.poly import Poly
from .graph import const_eval, int_attr, producer, rank, static_shape
from .sizes import Sizes


class Windows:
    """A sliding-window view [N, *O, *K, C] of the channels-last ``source`` [N, *S, C]."""

    def __init__(self, source, kernel, strides, dilations, pads_lo, pads_hi, pad_value, nodes):
        self.source, self.kernel, self.strides, self.dilations = source, kernel, strides, dilations
        self.pads_lo, self.pads_hi, self.pad_value, self.nodes = pads_lo, pads_hi, pad_value, nodes


class _Grid:
    """An array of :class:`Poly` held as one coefficient array per monomial (int64 where
    the coefficients are integers, else Fractions), so that the large broadcast sums of an
    index grid are NumPy additions of small terms instead of millions of Poly objects (a
    ResNet stem's pooling index at a dynamic batch: 1.8M entries, 41 s as Poly objects,
    benchmarks/dynamic_export.py)."""

    def __init__(self, coefficients: dict, shape: tuple):
        self.coefficients, self.shape = coefficients, shape

    @staticmethod
    def of(array: np.ndarray) -> "_Grid":
        monomials = {m for p in array.flat for m in Poly.of(p).terms}

        def coefficient(m: tuple) -> np.ndarray:
            values = np.asarray(np.frompyfunc(lambda p: Poly.of(p).terms.get(m, 0), 1, 1)(array), dtype=object)
            if all(getattr(v, "denominator", 1) == 1 for v in values.flat):  # integers: int64 sums
                return values.astype(np.int64)
            return values

        return _Grid({m: coefficient(m) for m in monomials}, array.shape)

    def __add__(self, other: "_Grid") -> "_Grid":
        shape = np.broadcast_shapes(self.shape, other.shape)
        out = {m: np.broadcast_to(c, shape) for m, c in self.coefficients.items()}
        for m, c in other.coefficients.items():
            out[m] = out[m] + c if m in out else np.broadcast_to(c, shape)
        return _Grid(out, shape)

    def at(self, index: tuple) -> Poly:
        return Poly({m: c[index] for m, c in self.coefficients.items()})

    def same(self, other: "_Grid") -> bool:
        """Equal at every entry (after broadcasting both to one shape)."""
        try:
            shape = np.broadcast_shapes(self.shape, other.shape)
        except ValueError:
            return False
        zero = np.zeros(shape, dtype=object)
        for m in set(self.coefficients) | set(other.coefficients):
            a, b = self.coefficients.get(m, zero), other.coefficients.get(m, zero)
            if not np.array_equal(np.broadcast_to(a, shape), np.broadcast_to(b, shape)):
                return False
        return True


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
    natural = [math.prod(src[k + 1 :]) for k in range(len(src))]
    out, kernel = shape[1 : 1 + d], shape[1 + d : 1 + 2 * d]

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
    total = _Grid({}, (1,) * r)
    try:
        for term in dense:
            total = total + _Grid.of(term)
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
    natural = [math.prod(src[k + 1 :], start=Poly.of(1)) for k in range(d + 2)]
    units = [natural[0], *natural[1 : 1 + d], *natural[1 : 1 + d], natural[-1]]
    factors, expected = [], _Grid({}, (1,) * r)
    for a in range(r):
        if a in ranged:
            step = ranged[a][1]
        elif dense.shape[a] > 1:
            unit = tuple(1 if j == a else 0 for j in range(r))
            step = dense.at(unit) - dense.at((0,) * r)
        else:
            step = units[a]
        factor = step.ratio(units[a])
        if factor is None or factor.denominator != 1 or factor < 1:
            return None
        factors.append(int(factor))
        if a not in ranged:
            grid = np.array([Poly.of(k) * step for k in range(dense.shape[a])] or [Poly.of(0)], dtype=object)
            expected = expected + _Grid.of(grid.reshape([dense.shape[a] if j == a else 1 for j in range(r)]))
    if factors[0] != 1 or factors[-1] != 1 or dims[0] != src[0] or dims[-1] != src[-1]:
        return None
    if not dense.same(expected):
        return None
    kernel = [dims[1 + d + i].constant for i in range(d)]
    strides, dilations = factors[1 : 1 + d], factors[1 + d : 1 + 2 * d]
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
    if (
        blocked[0] != src[0]
        or blocked[-1] != src[-1]
        or any(blocked[1 + 2 * i] * kernel[i] != src[1 + i] for i in range(d))
    ):
        return None
    return _blocked(padded, d, kernel, nodes)


def find_windows(value: ir.Value, sizes: Sizes | None) -> Windows | None:
    found = _strided_windows(value) or _blocked_windows(value)
    if found is None and sizes is not None:
        found = _dynamic_strided_windows(sizes, value) or _dynamic_blocked_windows(sizes, value)
    return found
