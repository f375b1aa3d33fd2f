"""What follows a Conv, folded into it or fused by onnxruntime: per-channel affine
constants (an inference BatchNorm, a bias) in its weights, MLX's relu as ``Relu``."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .graph import const_eval, initializer, rank, remove_dead, replace_value
from .zero_sign import never_negative_zero

AFFINE = frozenset({"Add", "Sub", "Mul", "Div"})
_RELU_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE})


def _per_channel(array: np.ndarray, r: int, channels: int) -> np.ndarray | None:
    """``array`` as a [channels] vector when it broadcasts against [N, C, *S] along C only."""
    if array.ndim > r:
        return None
    full = array.reshape((1,) * (r - array.ndim) + array.shape)
    if any(n != 1 for k, n in enumerate(full.shape) if k != 1) or full.shape[1] not in (1, channels):
        return None
    return np.broadcast_to(full.reshape(-1), (channels,)).astype(np.float64)


def fold_conv_affine(model: ir.Model) -> int:
    """Fold the per-channel Add/Sub/Mul/Div by constants after a float32 Conv (an
    inference-mode BatchNorm, a bias) into its weight and bias; returns the ops folded."""
    graph = model.graph
    folded = 0
    for conv in list(graph):
        if conv.graph is not graph or conv.op_type != "Conv" or conv.domain != "":
            continue
        weight = const_eval(conv.inputs[1])
        bias = const_eval(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] is not None else None
        out = conv.outputs[0]
        has_bias = len(conv.inputs) > 2 and conv.inputs[2] is not None
        if weight is None or weight.dtype != np.float32 or (has_bias and bias is None):
            continue
        r = weight.ndim  # the output's rank: [N, C_out, *S]
        channels = weight.shape[0]
        scale = np.ones(channels)
        shift = np.zeros(channels) if bias is None else bias.astype(np.float64)
        count = 0
        while len(out.uses()) == 1 and not out.is_graph_output():
            node, slot = out.uses()[0].node, out.uses()[0].idx
            if node.op_type not in AFFINE or node.domain != "" or len(node.inputs) != 2:
                break
            other = node.inputs[1 - slot]
            if other is out:
                break
            c = const_eval(other)
            vec = _per_channel(c, r, channels) if c is not None and c.dtype == np.float32 else None
            if vec is None:
                break
            if node.op_type == "Add":
                shift = shift + vec
            elif node.op_type == "Sub" and slot == 0:
                shift = shift - vec
            elif node.op_type == "Sub":
                scale, shift = -scale, vec - shift
            elif node.op_type == "Mul":
                scale, shift = scale * vec, shift * vec
            elif slot == 0:  # Div(conv, c)
                scale, shift = scale / vec, shift / vec
            else:
                break
            result = node.outputs[0]
            result.replace_all_uses_with(out, replace_graph_outputs=False)
            if result.is_graph_output():
                replace_value(graph, result, out)
            graph.remove(node, safe=True)
            count += 1
        if not count:
            continue
        base = conv.inputs[1].name or "weight"
        w = (weight.astype(np.float64) * scale.reshape((channels,) + (1,) * (weight.ndim - 1))).astype(np.float32)
        old = [v for v in conv.inputs[1:] if v is not None]
        conv.replace_input_with(1, initializer(graph, w, f"{base}_folded"))
        b = initializer(graph, shift.astype(np.float32), f"{base}_bias")
        if len(conv.inputs) < 3:
            conv.resize_inputs(3)
        conv.replace_input_with(2, b)
        for v in old:
            if not v.uses() and v.is_initializer() and not v.is_graph_output():
                graph.initializers.pop(v.name)
        folded += count
    return folded


def max_zero_to_relu(model: ir.Model) -> int:
    """``Max(x, +0.0)`` (MLX's relu, once :func:`.zero_sign.untie_extrema` has found that x
    can hold no -0.0) as ``Relu(x)``, which onnxruntime fuses into the Conv before it. Both
    propagate NaN, and with no -0.0 about neither has a tie whose sign could differ."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.op_type != "Max" or node.domain != "" or len(node.inputs) != 2:
            continue
        for slot in (0, 1):
            x, zero = node.inputs[slot], node.inputs[1 - slot]
            c = const_eval(zero)
            if c is None or c.size != 1 or float(c.reshape(())) != 0.0 or c.ndim > (rank(x) or 0):
                continue
            out = node.outputs[0]
            if (x.dtype or out.dtype) not in _RELU_TYPES:
                continue
            if np.signbit(c.reshape(())) or not never_negative_zero(x):
                continue
            relu = ir.Node("", "Relu", [x], name=f"{node.name}/relu" if node.name else None)
            graph.insert_before(node, relu)
            relu.outputs[0].shape, relu.outputs[0].type = out.shape, out.type
            replace_value(graph, out, relu.outputs[0])
            remove_dead(graph, [node])
            changed += 1
            break
    return changed
