"""Small helpers the graph passes share: constants, fresh names, node replacement."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import onnx_ir as ir

# Ops whose value is computed from constants by :func:`const_eval` (small tables, BatchNorm
# scales, AsStrided index grids built at runtime from one constant per axis).
_EVAL = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Sqrt": np.sqrt,
    "Neg": np.negative,
    "Reciprocal": np.reciprocal,
}


def producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    """The standard-domain node of ``op_type`` producing ``value``, or None."""
    if value is None:
        return None
    node = value.producer()
    if node is None or node.op_type != op_type or node.domain != "":
        return None
    return node


def const_eval(value: ir.Value | None, limit: int = 1 << 22, depth: int = 8) -> np.ndarray | None:
    """The value as a NumPy array when it is a constant, or computed only from constants
    by Add/Sub/Mul/Div/Sqrt/Neg/Reciprocal (at most ``limit`` elements); else None."""
    if value is None:
        return None
    tensor = value.const_value
    node = value.producer()
    if tensor is None and node is not None and node.op_type == "Constant" and "value" in node.attributes:
        tensor = node.attributes["value"].as_tensor()
    if tensor is not None:
        try:
            return np.asarray(tensor.numpy())
        except Exception:
            return None
    if node is None or node.domain != "" or node.op_type not in _EVAL or depth == 0:
        return None
    args = [const_eval(v, limit, depth - 1) for v in node.inputs]
    if any(a is None for a in args):
        return None
    try:
        if int(np.prod(np.broadcast_shapes(*(a.shape for a in args)), dtype=np.int64)) > limit:
            return None
    except ValueError:  # shapes that do not broadcast
        return None
    with np.errstate(all="ignore"):
        result = _EVAL[node.op_type](*args)
    return np.asarray(result).astype(args[0].dtype, copy=False)


def named_shape(value: ir.Value | None) -> tuple[int | str, ...] | None:
    """Static dims as ints, named dynamic ones as their dim_param; None if any is unknown."""
    if value is None or value.shape is None:
        return None
    dims = [d if isinstance(d, int) else d.value for d in value.shape]
    if not all(isinstance(d, (int, str)) for d in dims):
        return None
    return tuple(dims)


def broadcast_named(shapes: Iterable[tuple[int | str, ...] | None]) -> tuple[int | str, ...] | None:
    """The broadcast of shapes whose named dims are equal exactly when their names are
    (an unnamed or mismatched pair gives None)."""
    shapes = list(shapes)
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def scalar(value: ir.Value | None) -> float | None:
    array = const_eval(value, depth=0)
    if array is None or array.size != 1:
        return None
    return float(array.reshape(()))


def other_input(node: ir.Node, value: ir.Value) -> ir.Value | None:
    a, b = node.inputs
    return b if a is value else a if b is value else None


def static_shape(value: ir.Value | None) -> tuple[int, ...] | None:
    if value is None or value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(int(d) for d in value.shape)


def dims(value: ir.Value | None) -> list | None:
    """The value's dims (ints and symbolic dims), or None when its shape is unknown."""
    return list(value.shape) if value is not None and value.shape is not None else None


def same_dim(a, b) -> bool:
    """Equal dims: equal ints, or symbolic dims of the same name."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value


def rank(value: ir.Value | None) -> int | None:
    if value is None or value.shape is None:
        return None
    return len(value.shape)


def int_attr(node: ir.Node, name: str, default: int) -> int:
    attr = node.attributes.get(name)
    return default if attr is None else attr.as_int()


def fresh_name(graph: ir.Graph, base: str) -> str:
    """``base``, or ``base_<k>``: a name no value of the graph has."""
    taken = set(graph.initializers) | {v.name for v in graph.inputs} | {v.name for n in graph for v in n.outputs}
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def initializer(graph: ir.Graph, array: np.ndarray, base: str) -> ir.Value:
    """A new initializer holding ``array``, under a name no other value of the graph has."""
    name = fresh_name(graph, base)
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    value = ir.Value(
        name=name,
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
        const_value=ir.Tensor(array, name=name),
    )
    graph.register_initializer(value)
    return value


def replace_value(graph: ir.Graph, old: ir.Value, new: ir.Value) -> None:
    """Every use of ``old`` reads ``new``; a graph output keeps its name, shape and type."""
    if old.is_graph_output():
        name, shape, type_ = old.name, old.shape, old.type
        old.name = None
        new.name = name
        new.shape = new.shape if new.shape is not None else shape
        new.type = new.type if new.type is not None else type_
    old.replace_all_uses_with(new, replace_graph_outputs=True)


def remove_dead(graph: ir.Graph, nodes) -> None:
    """Remove the nodes (and, transitively, their producers) whose outputs nothing uses."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.graph is not graph:
            continue
        if any(v.uses() or v.is_graph_output() for v in node.outputs):
            continue
        inputs = [v for v in node.inputs if v is not None]
        graph.remove(node, safe=True)
        stack.extend(v.producer() for v in inputs if v.producer() is not None)
        for v in inputs:
            if v.is_initializer() and not v.uses() and not v.is_graph_output() and v.name in graph.initializers:
                graph.initializers.pop(v.name)


def slice_bounds(node: ir.Node, rank: int) -> tuple[int, int] | None:
    """(start, end) of a Slice along the last axis only (constant inputs), else None."""
    if len(node.inputs) not in (4, 5) or any(v is None for v in node.inputs[1:4]):
        return None
    starts, ends, axes = (v.const_value for v in node.inputs[1:4])
    if starts is None or ends is None or axes is None:
        return None
    if len(node.inputs) == 5 and node.inputs[4] is not None:
        steps = node.inputs[4].const_value
        if steps is None or steps.numpy().reshape(-1).tolist() != [1]:
            return None
    axes = axes.numpy().reshape(-1).tolist()
    if len(axes) != 1 or axes[0] not in (-1, rank - 1):
        return None
    return int(starts.numpy().reshape(-1)[0]), int(ends.numpy().reshape(-1)[0])
