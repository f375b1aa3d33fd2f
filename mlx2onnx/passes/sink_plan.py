"""Moving one layout Transpose past one consumer (the planning half of
:func:`.layout.sink_transposes`): which ops may take it (elementwise ops, reductions,
Squeeze, Concat, a following Transpose, a Reshape that keeps the moved axes together),
each input re-laid out or reshaped as the move needs, and the function that makes it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..translate.markers import relaid
from .graph import (
    const_eval,
    fresh_name,
    initializer,
    int_attr,
    producer,
    rank,
    static_shape,
)
from .permutes import inverse_perm, relaid_shape, reshape_before, reshaped_dims, size1_relaid, transpose_perm

UNARY = frozenset(
    "Abs Acos Acosh Asin Asinh Atan Atanh Cast Ceil Celu Clip Cos Cosh Elu Erf Exp Floor Gelu HardSigmoid "
    "HardSwish Identity IsInf IsNaN LeakyRelu Log Mish Neg Not Reciprocal Relu Round Selu Sigmoid Sign Sin "
    "Sinh Softplus Softsign Sqrt Tan Tanh ThresholdedRelu".split()
)
BROADCASTING = frozenset(
    "Add Sub Mul Div Pow Max Min Mod Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Where "
    "BitwiseAnd BitwiseOr BitwiseXor BitShift PRelu Sum Mean".split()
)
REDUCE = frozenset(
    "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp "
    "ReduceSumSquare".split()
)


def _axes(node: ir.Node) -> tuple[list[int], bool] | None:
    """(axes, given as an input) of a Reduce/Squeeze with constant axes, else None."""
    r = rank(node.inputs[0])
    if r is None:
        return None
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = const_eval(node.inputs[1])
        as_input = True
    elif "axes" in node.attributes:
        axes, as_input = np.asarray(node.attributes["axes"].as_ints()), False
    else:
        return None
    if axes is None or axes.size == 0:
        return None
    return sorted(int(a) % r for a in axes.reshape(-1)), as_input


def _set_axes(graph: ir.Graph, node: ir.Node, axes: list[int], as_input: bool) -> None:
    if as_input:
        node.replace_input_with(1, initializer(graph, np.asarray(axes, np.int64), "axes"))
    else:
        node.attributes["axes"] = ir.AttrInt64s("axes", axes)


def _transpose_after(graph: ir.Graph, node: ir.Node, perm: list[int], shape: ir.Shape | None) -> None:
    """Give ``node`` the output layout ``shape`` and re-lay it out for its consumers."""
    out = node.outputs[0]
    uses = list(out.uses())
    if perm == list(range(len(perm))):
        out.shape = shape
        return
    transpose = ir.Node("", "Transpose", [out], attributes=[ir.AttrInt64s("perm", perm)])
    graph.insert_after(node, transpose)
    relaid(node, perm)
    moved = transpose.outputs[0]
    moved.shape, moved.type = out.shape, out.type
    out.shape = shape
    for use in uses:
        use.node.replace_input_with(use.idx, moved)
    if out.is_graph_output():  # the re-laid out value takes the output's place and name
        name = out.name
        for i, value in enumerate(graph.outputs):
            if value is out:
                graph.outputs[i] = moved
        out.name = fresh_name(graph, f"{name}_nchw")
        moved.name = name


def transposes_after(nodes: list[ir.Node]) -> list[ir.Node]:
    """The Transposes reading the nodes' outputs (one added after a node that a later
    move then reads around is left unread)."""
    return [
        use.node
        for node in nodes
        if node.graph is not None
        for v in node.outputs
        for use in v.uses()
        if use.node.op_type == "Transpose"
    ]


class SinkPlan:
    """How one Transpose moves past each of its consumers: :meth:`plan` gives, per consumer, a
    function that makes the move, or None where the consumer cannot take it."""

    def __init__(self, graph: ir.Graph, transpose: ir.Node):
        self.graph = graph
        self.node = transpose
        self.x = transpose.inputs[0]
        self.y = transpose.outputs[0]
        self.perm = transpose_perm(transpose, rank(self.x))
        self.available: set[int] = set()  # while planning ahead: values that will be in x's layout

    def _source(self, v: ir.Value | None) -> bool:
        return v is self.y or id(v) in self.available

    def _inputs(self, node: ir.Node) -> list | None:
        """Each input of ``node`` in the source layout: ("value", v), ("array", a) or
        ("reshape", v, shape) (:func:`_size1_relaid`); None when one cannot be (a tensor of
        another layout, or of unknown rank)."""
        r = len(self.perm)
        planned = []
        for v in node.inputs:
            if v is None:
                planned.append(("value", None))
                continue
            if self._source(v):
                planned.append(("value", self.x))
                continue
            t = producer(v, "Transpose")
            if t is not None and "perm" in t.attributes and transpose_perm(t, r) == self.perm:
                planned.append(("value", t.inputs[0]))
                continue
            vr = rank(v)
            if vr is None or vr > r:
                return None
            if vr == 0:
                planned.append(("value", v))
                continue
            c = const_eval(v, limit=1 << 20)
            if c is None:
                shape = size1_relaid(static_shape(v), r, self.perm)
                if shape is None:
                    return None
                planned.append(("reshape", v, shape))
                continue
            if c.size == 1:
                planned.append(("value", v))
                continue
            full = c.reshape((1,) * (r - c.ndim) + c.shape)
            planned.append(("array", np.transpose(full, inverse_perm(self.perm)), v.name or "constant"))
        return planned

    def _apply_inputs(self, node: ir.Node, planned: list) -> None:
        for slot, entry in enumerate(planned):
            if entry[0] == "reshape":
                value = self._reshaped_input(node, entry[1], entry[2])
            else:
                value = entry[1] if entry[0] == "value" else initializer(self.graph, entry[1], f"{entry[2]}_t")
            if node.inputs[slot] is not value:
                node.replace_input_with(slot, value)

    def _reshaped_input(self, node: ir.Node, value: ir.Value, shape: list[int]) -> ir.Value:
        """``value`` in x's layout, as a Reshape (:func:`_size1_relaid`) before ``node``
        (none when it has that shape: it is then the same array)."""
        if static_shape(value) == tuple(shape):
            return value
        target = initializer(self.graph, np.asarray(shape, np.int64), "shape")
        reshape = ir.Node("", "Reshape", [value, target])
        self.graph.insert_before(node, reshape)
        reshape.outputs[0].shape, reshape.outputs[0].type = ir.Shape(shape), value.type
        return reshape.outputs[0]

    def plan(self, node: ir.Node):
        """A function making the move past ``node``, or None when it cannot move."""
        if node.domain != "" or len(node.outputs) != 1:
            return None
        out = node.outputs[0]
        r, perm = len(self.perm), self.perm
        op = node.op_type
        if op == "Transpose":
            q = transpose_perm(node, r)
            if q is None or len(q) != r or node.inputs[0] is not self.y:
                return None
            composed = [perm[i] for i in q]
            if composed == list(range(r)) and out.is_graph_output():
                return None

            def compose():
                if composed == list(range(r)):
                    out.replace_all_uses_with(self.x)
                else:
                    node.replace_input_with(0, self.x)
                    node.attributes["perm"] = ir.AttrInt64s("perm", composed)

            return compose
        if op in UNARY:
            if not self._source(node.inputs[0]) or any(
                v is not None and (self._source(v) or rank(v) != 0) for v in node.inputs[1:]
            ):
                return None  # extra inputs (Clip's bounds) must be scalars

            def unary():
                node.replace_input_with(0, self.x)
                _transpose_after(self.graph, node, perm, relaid_shape(out.shape, perm))

            return unary
        if op in BROADCASTING or op == "Concat":
            planned = self._inputs(node)
            if planned is None:
                return None
            if op == "Concat":
                axis = int_attr(node, "axis", 0) % r
                if any(rank(v) != r for v in node.inputs):
                    return None

            def broadcasting():
                self._apply_inputs(node, planned)
                if op == "Concat":
                    node.attributes["axis"] = ir.AttrInt64("axis", perm[axis])
                _transpose_after(self.graph, node, perm, relaid_shape(out.shape, perm))

            return broadcasting
        if op == "Reshape":
            return self._plan_reshape(node)
        if op == "Shape":  # dynamic dimensions read off the transposed value: off its source
            return self._plan_shape(node, r, perm)
        if op in REDUCE or op == "Squeeze":
            found = _axes(node)
            if found is None or not self._source(node.inputs[0]):
                return None
            axes, as_input = found
            if op in REDUCE and int_attr(node, "noop_with_empty_axes", 0):
                return None
            keep = op in REDUCE and int_attr(node, "keepdims", 1) == 1
            new_axes = sorted(perm[a] for a in axes)
            if keep:
                after, shape = perm, relaid_shape(out.shape, perm)
            else:
                rest = [perm[i] for i in range(r) if i not in axes]
                order = sorted(rest)
                after = [order.index(a) for a in rest]
                shape = relaid_shape(out.shape, after)

            def reduce():
                node.replace_input_with(0, self.x)
                _set_axes(self.graph, node, new_axes, as_input)
                _transpose_after(self.graph, node, after, shape)

            return reduce
        return None

    def _reshape_move(self, node: ir.Node) -> tuple[list[int], list[int], bool] | None:
        """(target, after, dropped) of a Reshape of static shapes and a constant target
        that :func:`_reshape_before` can express in x's layout: x reshaped to ``target``,
        then transposed by ``after``; ``dropped`` when that is x itself (the Reshape only
        undid the Transpose's moving of size-1 axes)."""
        if not self._source(node.inputs[0]) or len(node.inputs) != 2 or self._source(node.inputs[1]):
            return None
        src, dst = static_shape(node.inputs[0]), static_shape(node.outputs[0])
        if src is None or dst is None or len(src) != len(self.perm):
            return None
        if reshaped_dims(src, const_eval(node.inputs[1]), int_attr(node, "allowzero", 0)) != dst:
            return None
        relaid = [src[i] for i in inverse_perm(self.perm)]
        if node.inputs[0] is self.y and static_shape(self.x) != tuple(relaid):
            return None
        found = reshape_before(src, dst, self.perm)
        if found is None:
            return None
        shape, after = found
        return shape, after, shape == relaid and after == list(range(len(after)))

    def _plan_reshape(self, node: ir.Node):
        found = self._reshape_move(node)
        if found is None:
            return None
        shape, after, dropped = found
        if dropped:
            if node.outputs[0].is_graph_output():
                return None
            return lambda: node.outputs[0].replace_all_uses_with(self.x)

        def reshape():
            node.replace_input_with(0, self.x)
            node.replace_input_with(1, initializer(self.graph, np.asarray(shape, np.int64), "shape"))
            _transpose_after(self.graph, node, after, ir.Shape(shape))

        return reshape

    def _plan_shape(self, node: ir.Node, r: int, perm: list[int]):
        """One dim of Shape(transpose(x)) is a dim of Shape(x); the whole of it, Shape(x)
        gathered by ``perm``."""
        if not self._source(node.inputs[0]):
            return None
        start, end = int_attr(node, "start", 0), node.attributes.get("end")
        if end is None and start == 0:
            if node.outputs[0].is_graph_output():
                return None

            def whole():
                out = node.outputs[0]
                uses = list(out.uses())
                node.replace_input_with(0, self.x)
                gather = ir.Node(
                    "",
                    "Gather",
                    [out, initializer(self.graph, np.asarray(perm, np.int64), "perm")],
                    attributes=[ir.AttrInt64("axis", 0)],
                )
                self.graph.insert_after(node, gather)
                gather.outputs[0].shape, gather.outputs[0].type = out.shape, out.type
                for use in uses:
                    use.node.replace_input_with(use.idx, gather.outputs[0])

            return whole
        if end is None:
            return None
        end = end.as_int()
        start, end = start % r if start < 0 else start, end % r if end < 0 else end
        if not 0 <= start < r or end != start + 1:
            return None

        def one():
            node.replace_input_with(0, self.x)
            node.attributes["start"] = ir.AttrInt64("start", perm[start])
            node.attributes["end"] = ir.AttrInt64("end", perm[start] + 1)

        return one
