"""Re-fuse the normalisation chains MLX decomposes on the CPU into the fused ONNX ops.

On Metal and CUDA, ``mx.fast.rms_norm`` and ``layer_norm`` reach the exporter as single
primitives; on the CPU they arrive decomposed (docs/records.md). After the
exporter's own translation these chains read::

    RMSNorm:   y = x * (1 / sqrt(ReduceSum(x * x, [-1]) * (1/N) + eps))  [* w]
    LayerNorm: d = x - ReduceSum(x, [-1]) * (1/N)
               y = d * (1 / sqrt(ReduceSum(d * d, [-1]) * (1/N) + eps))  [* w] [+ b]

and become ``RMSNormalization`` (opset 23) and ``LayerNormalization`` (opset 17).
GELU is re-fused in :mod:`.gelu`, attention chains are re-fused in :mod:`.attention`.
Matching is structural and strict (constants, axes and shapes are checked), so a chain
that only looks similar is left alone.

Why by hand, not as onnxscript pattern rules: written as ``RewriteRule`` patterns (tried
on 2026-12-04 with onnxscript 0.7.2), each chain needs every commuted order of its
Mul/Add operands (2^7 for a LayerNorm with weight and bias), times Reciprocal/Div, times
the weight/bias variants; the rewriter tries every variant at every Mul and Add, and
the first 1,600 tests took 227 s (the whole suite of 7,000 takes 88 s). It also fires the weightless pattern at the inner Mul
before it reaches the weight Mul after it, so the weights stayed outside (llama 89 -> 94
nodes, encoder 80 -> 90). One walk back from each Mul finds all orders at once.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .cleanup import prune
from .graph import const_eval, other_input, producer, replace_value, scalar

_NORMED = (ir.DataType.FLOAT, ir.DataType.FLOAT16)  # the dtypes the fused norms run in


def _rank(value: ir.Value | None) -> int | None:
    if value is None or value.shape is None:
        return None
    return len(value.shape)


def _last_dim(value: ir.Value | None) -> int | None:
    if value is None or value.shape is None or not len(value.shape):
        return None
    dim = value.shape[-1]
    return dim if isinstance(dim, int) else None


def _reduces_last_axis(node: ir.Node, x: ir.Value) -> bool:
    if node.attributes.get("keepdims") is not None and node.attributes["keepdims"].as_int() != 1:
        return False
    axes = const_eval(node.inputs[1], depth=0) if len(node.inputs) > 1 else None
    if axes is None and "axes" in node.attributes:
        axes = np.asarray(node.attributes["axes"].as_ints())
    rank = _rank(x)
    if axes is None or rank is None or axes.size != 1:
        return False
    return int(axes.reshape(())) % rank == rank - 1


def _mean_of(value: ir.Value, n: int) -> ir.Value | None:
    """x when ``value`` = ReduceSum(x, [-1], keepdims) * (1/n); else None."""
    mul = producer(value, "Mul")
    if mul is None:
        return None
    for candidate in mul.inputs:
        factor = scalar(other_input(mul, candidate))
        reduce = producer(candidate, "ReduceSum")
        if reduce is not None and factor is not None and np.isclose(factor, 1.0 / n, rtol=1e-6):
            x = reduce.inputs[0]
            if _reduces_last_axis(reduce, x):
                return x
    return None


def _rsqrt_of(value: ir.Value) -> tuple[ir.Value, float] | None:
    """(v, eps) when ``value`` = 1 / sqrt(v + eps) (Div(1, Sqrt) or Reciprocal(Sqrt))."""
    div = producer(value, "Div")
    if div is not None:
        if scalar(div.inputs[0]) != 1.0:
            return None
        root = producer(div.inputs[1], "Sqrt")
    else:
        recip = producer(value, "Reciprocal")
        root = producer(recip.inputs[0], "Sqrt") if recip is not None else None
    if root is None:
        return None
    add = producer(root.inputs[0], "Add")
    if add is None:
        return None
    for candidate in add.inputs:
        eps = scalar(other_input(add, candidate))
        if eps is not None and eps >= 0:
            return candidate, eps
    return None


def _square_of(value: ir.Value) -> ir.Value | None:
    mul = producer(value, "Mul")
    if mul is not None and mul.inputs[0] is mul.inputs[1]:
        return mul.inputs[0]
    return None


def _live_muls(graph: ir.Graph):
    """The standard-domain Mul nodes still in the graph whose result is used: where every
    normalisation chain ends (a fusion may remove nodes while the caller iterates)."""
    for node in list(graph):
        out = node.outputs[0]
        if (
            node.op_type == "Mul"
            and node.domain == ""
            and node.graph is not None
            and (out.uses() or out.is_graph_output())
        ):
            yield node


def _then(y: ir.Value, op_type: str, n: int) -> tuple[ir.Value | None, ir.Value]:
    """(p, out) when the only consumer of ``y`` is ``op_type(y, p)`` with a 1-D [n] ``p``
    of y's type (the weight of a Mul, the bias of an Add); else (None, y)."""
    uses = y.uses()
    if len(uses) != 1 or y.is_graph_output():
        return None, y
    node = uses[0].node
    if node.op_type != op_type or node.domain != "":
        return None, y
    p = other_input(node, y)
    if p is None or p.shape is None or tuple(p.shape) != (n,) or p.dtype != y.dtype:
        return None, y
    return p, node.outputs[0]


def _ones(graph: ir.Graph, n: int, like: ir.Value, name: str) -> ir.Value:
    dtype = like.dtype.numpy()
    value = ir.Value(
        name=name,
        shape=ir.Shape([n]),
        type=ir.TensorType(like.dtype),
        const_value=ir.Tensor(np.ones(n, dtype=dtype), name=name),
    )
    graph.register_initializer(value)
    return value


def _replace(graph: ir.Graph, old_out: ir.Value, node: ir.Node, anchor: ir.Node) -> None:
    graph.insert_before(anchor, node)
    new_out = node.outputs[0]
    new_out.shape, new_out.type = old_out.shape, old_out.type
    replace_value(graph, old_out, new_out)


def _fuse_norm(graph: ir.Graph, node: ir.Node, op_type: str, x: ir.Value, n: int, eps: float, bias: bool) -> None:
    """Replace the chain ending at ``node`` (and its weight Mul / bias Add, when they
    follow) by one ``op_type`` node over the last axis."""
    y = node.outputs[0]
    w, out = _then(y, "Mul", n)
    b, out = _then(out, "Add", n) if bias and w is not None else (None, out)
    scale = w if w is not None else _ones(graph, n, x, f"{y.name}/ones")
    anchor = out.producer() or node
    inputs = [x, scale] + ([b] if b is not None else [])
    fused = ir.Node(
        "",
        op_type,
        inputs,
        attributes=[ir.AttrFloat32("epsilon", eps), ir.AttrInt64("axis", -1)],
        name=f"{node.name}/fused_{op_type}",
    )
    fused.metadata_props.update(node.metadata_props)
    _replace(graph, out, fused, anchor)


def _scaled_by_rsqrt_mean_square(r: ir.Value, of: ir.Value, n: int) -> float | None:
    """eps when ``r`` is rsqrt(mean(of * of over the last n) + eps), else None."""
    found = _rsqrt_of(r)
    if found is None:
        return None
    mean_sq, eps = found
    squared = _mean_of(mean_sq, n)
    return eps if squared is not None and _square_of(squared) is of else None


def fuse_rms_norm(model: ir.Model) -> int:
    """x * rsqrt(mean(x^2) + eps) [* w] -> RMSNormalization(x, w, axis=-1, epsilon)."""

    def match(x, r):
        n = _last_dim(x)
        if n is None or x.dtype not in _NORMED:
            return None
        eps = _scaled_by_rsqrt_mean_square(r, x, n)
        return None if eps is None else (x, n, eps)

    return _fuse_each(model, match, "RMSNormalization", bias=False)


def fuse_layer_norm(model: ir.Model) -> int:
    """(x - mean) * rsqrt(var + eps) [* w] [+ b] -> LayerNormalization(x, w, b, axis=-1)."""

    def match(d, r):
        sub = producer(d, "Sub")
        if sub is None:
            return None
        x, mean = sub.inputs
        n = _last_dim(x)
        if n is None or x.dtype not in _NORMED or _mean_of(mean, n) is not x:
            return None
        eps = _scaled_by_rsqrt_mean_square(r, d, n)
        return None if eps is None else (x, n, eps)

    return _fuse_each(model, match, "LayerNormalization", bias=True)


def _fuse_each(model: ir.Model, match, op_type: str, bias: bool) -> int:
    """Fuse every live Mul whose inputs ``(d, r)`` (either order) ``match`` as the
    normalised value and its scale, giving ``(x, n, eps)``, into ``op_type``."""
    graph = model.graph
    fused = 0
    for node in _live_muls(graph):
        for d in node.inputs:
            r = other_input(node, d)
            found = None if r is None or d is r else match(d, r)
            if found is not None:
                _fuse_norm(graph, node, op_type, *found, bias=bias)
                fused += 1
                break
    if fused:
        prune(model)  # the chains the fused ops replaced
    return fused
