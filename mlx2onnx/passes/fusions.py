"""Re-fuse the normalisation chains MLX decomposes on the CPU into the fused ONNX ops.

On Metal and CUDA, ``mx.fast.rms_norm`` and ``layer_norm`` reach the exporter as single
primitives; on the CPU they arrive decomposed (docs/records.md). After the
exporter's own translation these chains read::

    RMSNorm:   y = x * (1 / sqrt(ReduceSum(x * x, [-1]) * (1/N) + eps))  [* w]
    LayerNorm: d = x - ReduceSum(x, [-1]) * (1/N)
               y = d * (1 / sqrt(ReduceSum(d * d, [-1]) * (1/N) + eps))  [* w] [+ b]

and become ``RMSNormalization`` (opset 23) and ``LayerNormalization`` (opset 17).
``nn.gelu`` and ``nn.gelu_approx`` (MLX computes them from plain ops everywhere) read::

    erf:  x * (1 + Erf(x / sqrt(2))) / 2       (or 0.5 * x * (...), x * 0.7071...)
    tanh: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

and become ``Gelu`` (opset 20). Where MLX multiplies x by (1 + erf) before halving, the
product overflows to +inf for x > FLT_MAX / 2 and ``Gelu`` would not: a Greater/Where
guard keeps MLX's +inf there. Attention chains are re-fused in :mod:`mlx2onnx.attention`.
Matching is structural and strict (constants, axes and shapes are checked), so a chain
that only looks similar is left alone.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from .graph import const_eval, initializer, producer, replace_value


def _scalar(value: ir.Value | None) -> float | None:
    array = const_eval(value, depth=0)
    if array is None or array.size != 1:
        return None
    return float(array.reshape(()))


def _other(node: ir.Node, value: ir.Value) -> ir.Value | None:
    a, b = node.inputs
    return b if a is value else a if b is value else None


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
        factor = _scalar(_other(mul, candidate))
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
        if _scalar(div.inputs[0]) != 1.0:
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
        eps = _scalar(_other(add, candidate))
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
        if node.op_type == "Mul" and node.domain == "" and node.graph is not None and (out.uses() or out.is_graph_output()):
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
    p = _other(node, y)
    if p is None or p.shape is None or tuple(p.shape) != (n,) or p.dtype != y.dtype:
        return None, y
    return p, node.outputs[0]


def _ones(graph: ir.Graph, n: int, like: ir.Value, name: str) -> ir.Value:
    dtype = like.dtype.numpy()
    value = ir.Value(name=name, shape=ir.Shape([n]), type=ir.TensorType(like.dtype),
                     const_value=ir.Tensor(np.ones(n, dtype=dtype), name=name))
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
    fused = ir.Node("", op_type, inputs, attributes=[ir.AttrFloat32("epsilon", eps), ir.AttrInt64("axis", -1)],
                    name=f"{node.name}/fused_{op_type}")
    fused.metadata_props.update(node.metadata_props)
    _replace(graph, out, fused, anchor)


def fuse_rms_norm(model: ir.Model) -> int:
    """x * rsqrt(mean(x^2) + eps) [* w] -> RMSNormalization(x, w, axis=-1, epsilon)."""
    graph = model.graph
    fused = 0
    for node in _live_muls(graph):
        for x in node.inputs:
            r = _other(node, x)
            n = _last_dim(x)
            if r is None or n is None or x is r or x.dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16):
                continue
            found = _rsqrt_of(r)
            if found is None:
                continue
            mean_sq, eps = found
            squared = _mean_of(mean_sq, n)
            if squared is None or _square_of(squared) is not x:
                continue
            _fuse_norm(graph, node, "RMSNormalization", x, n, eps, bias=False)
            fused += 1
            break
    return fused


def fuse_layer_norm(model: ir.Model) -> int:
    """(x - mean) * rsqrt(var + eps) [* w] [+ b] -> LayerNormalization(x, w, b, axis=-1)."""
    graph = model.graph
    fused = 0
    for node in _live_muls(graph):
        for d in node.inputs:
            r = _other(node, d)
            sub = producer(d, "Sub")
            if r is None or sub is None or d is r:
                continue
            x, mean = sub.inputs
            n = _last_dim(x)
            if n is None or x.dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16) or _mean_of(mean, n) is not x:
                continue
            found = _rsqrt_of(r)
            if found is None:
                continue
            var, eps = found
            squared = _mean_of(var, n)
            if squared is None or _square_of(squared) is not d:
                continue
            _fuse_norm(graph, node, "LayerNormalization", x, n, eps, bias=True)
            fused += 1
            break
    return fused


_SQRT2, _SQRT_2_OVER_PI = float(np.sqrt(2.0)), float(np.sqrt(2.0 / np.pi))


def _close(value: float | None, want: float) -> bool:
    return value is not None and bool(np.isclose(value, want, rtol=1e-6, atol=0))


def _sole_use(value: ir.Value, op_type: str) -> ir.Node | None:
    """The single standard-domain ``op_type`` consumer of ``value`` (not a graph output)."""
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    node = uses[0].node
    return node if node.op_type == op_type and node.domain == "" else None


def _scaled(value: ir.Value, factor: float) -> ir.Value | None:
    """x when ``value`` is x * factor (Mul, either order) or x / (1 / factor) (Div)."""
    node = value.producer()
    if node is None or node.domain != "" or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if node.op_type == "Mul":
        return a if _close(_scalar(b), factor) else b if _close(_scalar(a), factor) else None
    if node.op_type == "Div" and _close(_scalar(b), 1.0 / factor):
        return a
    return None


def _one_plus(value: ir.Value) -> ir.Node | None:
    """The Add(value, 1) (either order) that alone reads ``value``."""
    add = _sole_use(value, "Add")
    return add if add is not None and _close(_scalar(_other(add, value)), 1.0) else None


def _gelu_tail(x: ir.Value, one_plus: ir.Value) -> tuple[ir.Value, bool] | None:
    """(out, overflows) when ``one_plus`` = 1 + f(x) goes on to 0.5 * x * one_plus:
    ``overflows`` when x * one_plus is formed before the halving (MLX's nn.gelu)."""
    mul = _sole_use(one_plus, "Mul")
    if mul is None:
        return None
    other = _other(mul, one_plus)
    if other is x:  # x * (1 + f), then / 2 or * 0.5
        halving = mul.outputs[0].uses()
        if len(halving) == 1 and not mul.outputs[0].is_graph_output():
            out = halving[0].node.outputs[0]
            if _scaled(out, 0.5) is mul.outputs[0]:
                return out, True
        return None
    if other is not None and _scaled(other, 0.5) is x:  # (0.5 * x) * (1 + f)
        return mul.outputs[0], False
    return None


def _erf_gelu(erf: ir.Node) -> tuple[ir.Value, ir.Value, str, bool] | None:
    x = _scaled(erf.inputs[0], 1.0 / _SQRT2)
    add = _one_plus(erf.outputs[0]) if x is not None else None
    tail = _gelu_tail(x, add.outputs[0]) if add is not None else None
    return (x, tail[0], "none", tail[1]) if tail is not None else None


def _cube_of(value: ir.Value) -> ir.Value | None:
    pow_ = producer(value, "Pow")
    if pow_ is not None and _scalar(pow_.inputs[1]) == 3.0:
        return pow_.inputs[0]
    return None


def _tanh_gelu(tanh: ir.Node) -> tuple[ir.Value, ir.Value, str, bool] | None:
    inner = producer(_scaled(tanh.inputs[0], _SQRT_2_OVER_PI), "Add")
    if inner is None:
        return None
    for x in inner.inputs:
        cubed = _scaled(_other(inner, x), 0.044715)
        if cubed is not None and _cube_of(cubed) is x:
            add = _one_plus(tanh.outputs[0])
            tail = _gelu_tail(x, add.outputs[0]) if add is not None else None
            return (x, tail[0], "tanh", tail[1]) if tail is not None else None
    return None


def fuse_gelu(model: ir.Model, opset: int) -> int:
    """x * (1 + erf(x / sqrt 2)) / 2 and its tanh approximation -> Gelu(x, approximate)."""
    from ..translate import kernels

    graph = model.graph
    fused = 0
    for node in list(graph):
        if node.graph is None or node.domain != "" or node.op_type not in ("Erf", "Tanh"):
            continue
        found = _erf_gelu(node) if node.op_type == "Erf" else _tanh_gelu(node)
        if found is None:
            continue
        x, out, approximate, overflows = found
        if x.dtype != ir.DataType.FLOAT or not kernels.has_kernel("Gelu", mx.float32, opset):
            continue
        anchor = out.producer()
        gelu = ir.Node("", "Gelu", [x], attributes=[ir.AttrString("approximate", approximate)],
                       name=f"{node.name}/fused_Gelu")
        gelu.metadata_props.update(node.metadata_props)
        graph.insert_before(anchor, gelu)
        result = gelu.outputs[0]
        result.shape, result.type = out.shape, out.type
        if overflows:  # MLX's x * (1 + erf) is +inf above FLT_MAX / 2
            big = initializer(graph, np.array(np.finfo(np.float32).max / 2, np.float32), "gelu_overflow")
            inf = initializer(graph, np.array(np.inf, np.float32), "inf")
            above = ir.Node("", "Greater", [x, big], name=f"{node.name}/overflow")
            guard = ir.Node("", "Where", [above.outputs[0], inf, result], name=f"{node.name}/overflow_inf")
            graph.insert_before(anchor, above)
            graph.insert_before(anchor, guard)
            result = guard.outputs[0]
            result.shape, result.type = out.shape, out.type
        replace_value(graph, out, result)
        fused += 1
    return fused


def fuse_all(model: ir.Model, opset: int) -> dict[str, int]:
    from onnx_ir.passes import common as common_passes

    report = {"fuse_layer_norm": fuse_layer_norm(model) if opset >= 17 else 0}
    report["fuse_rms_norm"] = fuse_rms_norm(model) if opset >= 23 else 0
    report["fuse_gelu"] = fuse_gelu(model, opset) if opset >= 20 else 0
    common_passes.RemoveUnusedNodesPass()(model)
    return report
