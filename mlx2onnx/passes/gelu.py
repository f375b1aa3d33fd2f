"""``nn.gelu`` and ``nn.gelu_approx`` (MLX computes both from plain ops on every device)
become ``Gelu`` (opset 20)::

    erf:  x * (1 + Erf(x / sqrt(2))) / 2       (or 0.5 * x * (...), x * 0.7071...)
    tanh: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Where MLX multiplies x by (1 + erf) before halving, the product overflows to +inf for
x > FLT_MAX / 2 and ``Gelu`` would not: a Greater/Where guard keeps MLX's +inf there.

The chains are matched by hand rather than as onnxscript pattern rules: MLX's ``0.5``,
``1/sqrt(2)`` and the products appear in several association orders (``x * 0.5 * (1 +
erf)``, ``(x * (1 + erf)) / 2``, ...) whose constants are checked by value, and only some
orders overflow; one walk from the ``Erf``/``Tanh`` outwards covers them all.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .cleanup import prune
from .graph import initializer, other_input, producer, replace_value, scalar

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
        return a if _close(scalar(b), factor) else b if _close(scalar(a), factor) else None
    if node.op_type == "Div" and _close(scalar(b), 1.0 / factor):
        return a
    return None


def _one_plus(value: ir.Value) -> ir.Node | None:
    """The Add(value, 1) (either order) that alone reads ``value``."""
    add = _sole_use(value, "Add")
    return add if add is not None and _close(scalar(other_input(add, value)), 1.0) else None


def _gelu_tail(x: ir.Value, one_plus: ir.Value) -> tuple[ir.Value, bool] | None:
    """(out, overflows) when ``one_plus`` = 1 + f(x) goes on to 0.5 * x * one_plus:
    ``overflows`` when x * one_plus is formed before the halving (MLX's nn.gelu)."""
    mul = _sole_use(one_plus, "Mul")
    if mul is None:
        return None
    other = other_input(mul, one_plus)
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
    if pow_ is not None and scalar(pow_.inputs[1]) == 3.0:
        return pow_.inputs[0]
    return None


def _tanh_gelu(tanh: ir.Node) -> tuple[ir.Value, ir.Value, str, bool] | None:
    inner = producer(_scaled(tanh.inputs[0], _SQRT_2_OVER_PI), "Add")
    if inner is None:
        return None
    for x in inner.inputs:
        cubed = _scaled(other_input(inner, x), 0.044715)
        if cubed is not None and _cube_of(cubed) is x:
            add = _one_plus(tanh.outputs[0])
            tail = _gelu_tail(x, add.outputs[0]) if add is not None else None
            return (x, tail[0], "tanh", tail[1]) if tail is not None else None
    return None


def fuse_gelu(model: ir.Model) -> int:
    """x * (1 + erf(x / sqrt 2)) / 2 and its tanh approximation -> Gelu(x, approximate)."""
    graph = model.graph
    fused = 0
    for node in list(graph):
        if node.graph is None or node.domain != "" or node.op_type not in ("Erf", "Tanh"):
            continue
        found = _erf_gelu(node) if node.op_type == "Erf" else _tanh_gelu(node)
        if found is None:
            continue
        x, out, approximate, overflows = found
        if x.dtype != ir.DataType.FLOAT:
            continue
        anchor = out.producer()
        gelu = ir.Node(
            "", "Gelu", [x], attributes=[ir.AttrString("approximate", approximate)], name=f"{node.name}/fused_Gelu"
        )
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
    if fused:
        prune(model)  # the chains the fused ops replaced
    return fused
