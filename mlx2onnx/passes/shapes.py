"""Shapes in dynamic exports: static dims read at run time become constants, and a Reshape
target keeps a copied dynamic dim as 0 (so shape inference can name it)."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from .graph import (
    const_eval,
    initializer,
    int_attr,
    named_shape,
    producer,
    remove_dead,
    replace_value,
)


def _has_dynamic_inputs(model: ir.Model) -> bool:
    return any(v.shape is not None and not all(isinstance(d, int) for d in v.shape) for v in model.graph.inputs)


def keep_named_reshape_dims(model: ir.Model) -> int:
    """Turn a Reshape target's -1 back into 0 (copy) where it copies a dynamic dim of the
    input at the same axis: the optimizer writes -1 for both, and ONNX shape inference can
    name a copied dim but not an inferred one."""
    from onnx_ir.passes.common import ShapeInferencePass

    ShapeInferencePass(strict_mode=False)(model)  # internal values get (symbolic) shapes
    changed = 0
    targets: dict[tuple, ir.Value] = {}  # one initializer per rewritten target
    for node in model.graph:
        if node.op_type != "Reshape" or node.domain != "" or len(node.inputs) < 2:
            continue
        target = node.inputs[1]
        source = named_shape(node.inputs[0])
        if target is None or target.const_value is None or source is None:
            continue
        dims = target.const_value.numpy().tolist()
        if dims.count(-1) != 1 or 0 in dims:
            continue
        axis = dims.index(-1)
        if axis >= len(source) or not isinstance(source[axis], str):
            continue  # -1 = size / rest = that dim exactly when the other dims multiply alike
        rest_in = [d for k, d in enumerate(source) if k != axis]
        rest_out = [d for k, d in enumerate(dims) if k != axis]
        if all(isinstance(d, int) for d in rest_in) and math.prod(rest_in) == math.prod(rest_out):
            dims[axis] = 0
            node.attributes["allowzero"] = ir.AttrInt64("allowzero", 0)  # 0 copies (no other 0s)
            if tuple(dims) not in targets:
                targets[tuple(dims)] = initializer(model.graph, np.asarray(dims, np.int64), f"{target.name}_named")
            node.replace_input_with(1, targets[tuple(dims)])
            changed += 1
    return changed


def _static_dims(node: ir.Node) -> list[int | None] | None:
    """The dims a Shape node reads (its start/end slice of the input's shape), each an
    int where the input's dim is static, else None; None when the input's rank is unknown."""
    shape = named_shape(node.inputs[0])
    if shape is None:
        return None
    r = len(shape)
    start, end = int_attr(node, "start", 0), int_attr(node, "end", r)
    start, end = (min(max(i + r if i < 0 else i, 0), r) for i in (start, end))
    return [d if isinstance(d, int) else None for d in shape[start:end]]


def fold_static_shape_reads(model: ir.Model) -> int:
    """Constants for the static dims a dynamic export reads from ``Shape`` (a mean over a
    fixed hidden size counts its elements at run time): ``Shape`` of static dims, and
    ``Gather`` of static entries of a ``Shape``. The optimizer then folds what follows."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.domain != "" or node.graph is None:
            continue
        if node.op_type == "Shape":
            dims = _static_dims(node)
        elif node.op_type == "Gather" and producer(node.inputs[0], "Shape") is not None:
            read, indices = _static_dims(node.inputs[0].producer()), const_eval(node.inputs[1], depth=0)
            if read is None or indices is None or indices.ndim > 1 or not -len(read) <= indices.min(initial=0):
                continue
            if indices.size and indices.max() >= len(read):
                continue
            dims = [read[int(i)] for i in indices.reshape(-1)]
            if indices.ndim == 0 and None not in dims:
                dims = dims[0]
        else:
            continue
        if dims is None or (isinstance(dims, list) and None in dims):
            continue
        out = node.outputs[0]
        if out.is_graph_output():
            continue
        replace_value(graph, out, initializer(graph, np.asarray(dims, np.int64), f"{out.name}_static"))
        changed += 1
    remove_dead(graph, [n for n in graph if n.op_type in ("Shape", "Gather")])
    return changed
