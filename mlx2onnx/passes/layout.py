"""Channels-first inside conv nets: layout Transposes sunk and cancelled, per-channel
with :mod:`.conv_fold` folding what follows a Conv into it.

MLX convolutions are channels-last, ONNX Conv channels-first, so the export wraps every
Conv (and every fused pool, :mod:`.pooling`) in ``Transpose`` NHWC->NCHW before
and NCHW->NHWC after. :func:`sink_transposes` moves each Transpose down past the ops that
do not care about the layout (elementwise ops, with per-channel constants re-laid out
and other operands reshaped when only their size-1 axes move, as a gate [N, 1, 1, C];
reductions and Squeeze, with their axes renumbered; Concat; a Reshape of static shapes
that only splits and merges axes the Transpose keeps together and in order, or inserts
and removes size-1 axes, as squeeze-excite blocks reshape before their spatial mean; a
following Transpose, which it composes with, or cancels), so between two convolutions the
pair meets and cancels and a conv net keeps NCHW inside, with Transposes only where it
starts and ends.

A Transpose moves only when every consumer of its output can take it (else it stays
where it is), and only when that removes at least as many Transposes as it adds
(counting the Reshapes it puts on other operands as added), so a graph never gets more
Transposes than the export made.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .graph import (
    const_eval,
    fresh_name,
    initializer,
    int_attr,
    producer,
    rank,
    remove_dead,
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


def _transposes_after(nodes: list[ir.Node]) -> list[ir.Node]:
    """The Transposes reading the nodes' outputs (one added after a node that a later
    move then reads around is left unread)."""
    return [use.node for node in nodes if node.graph is not None for v in node.outputs for use in v.uses()
            if use.node.op_type == "Transpose"]


class _Sink:
    """Plans (and then makes) the move of one Transpose past its consumers."""

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
            if not self._source(node.inputs[0]) or any(v is not None and (self._source(v) or rank(v) != 0)
                                                       for v in node.inputs[1:]):
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
                gather = ir.Node("", "Gather", [out, initializer(self.graph, np.asarray(perm, np.int64), "perm")],
                                 attributes=[ir.AttrInt64("axis", 0)])
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

    def run(self) -> bool:
        if self.perm is None or self.y.is_graph_output() or not self.y.uses():
            return False
        consumers = []
        for use in self.y.uses():
            if use.node not in consumers:
                consumers.append(use.node)
        plans = [self.plan(node) for node in consumers]
        if any(p is None for p in plans) or not self._pays(consumers):
            return self._run_region()
        touched = [t for node in consumers for v in node.inputs
                   if (t := producer(v, "Transpose")) is not None and t is not self.node]
        for make in plans:
            make()
        remove_dead(self.graph, [self.node, *consumers, *touched, *_transposes_after(consumers)])
        return True

    def _pays(self, consumers: list[ir.Node]) -> bool:
        """Moving past every consumer removes at least as many Transposes as it adds
        (:meth:`_effects`), and no two consumers only add (:meth:`_idle`; leaving this
        Transpose to them and moving past the others would be better)."""
        inside = {id(n) for n in consumers}
        added, gone = 0, {id(self.node)}
        for node in consumers:
            more, fewer = self._effects(node, inside)
            added, gone = added + more, gone | fewer
        return added <= len(gone) and sum(self._idle(n, inside) for n in consumers) < 2

    def _drops(self, node: ir.Node) -> bool:
        """A Reshape that the move drops (:meth:`_reshape_move`): no Transpose after it."""
        found = self._reshape_move(node) if node.op_type == "Reshape" and node.domain == "" else None
        return found is not None and found[2]

    def _reshapes(self, node: ir.Node) -> int:
        """How many of the node's inputs the move re-lays out by a Reshape."""
        if node.op_type not in BROADCASTING and node.op_type != "Concat":
            return 0
        planned = self._inputs(node) or []
        return sum(entry[0] == "reshape" and static_shape(entry[1]) != tuple(entry[2]) for entry in planned)

    def _region(self) -> list[ir.Node]:
        """The nodes the Transpose can move past when the ones between are moved first: a
        consumer whose other input comes from the same Transpose through other consumers
        (SiLU's ``x * where(x < -88, 0, sigmoid(x))``, hard-swish) joins once they have.
        Leaves ``available`` set: the values the region's moves put in x's layout."""
        values, absorbed, seen = [self.y], [], set()
        self.available = {id(self.y)}
        changed = True
        while changed:
            changed = False
            for value in list(values):
                for use in value.uses():
                    node = use.node
                    if id(node) in seen or self.plan(node) is None:
                        continue
                    absorbed.append(node)
                    seen.add(id(node))
                    changed = True
                    if node.op_type not in REDUCE | {"Squeeze", "Transpose", "Reshape"}:  # output in x's layout too
                        self.available.add(id(node.outputs[0]))
                        values.append(node.outputs[0])
        return absorbed

    def _cancels(self, node: ir.Node) -> bool:
        q = transpose_perm(node, len(self.perm)) if node.op_type == "Transpose" and node.domain == "" else None
        return q is not None and len(q) == len(self.perm) and [self.perm[i] for i in q] == list(range(len(q)))

    def _effects(self, node: ir.Node, inside: set[int]) -> tuple[int, set[int]]:
        """(Transposes and Reshapes added, ids of the Transposes removed) by the move past
        ``node``, one of the region ``inside``: a Transpose after it unless its output stays
        inside or meets only Transposes undoing the layout (which then cancel with it, next
        sweep); the Transposes on its other inputs that only the region reads."""
        if node.op_type == "Transpose":
            return 0, {id(node)} if self._cancels(node) else set()
        if node.op_type == "Shape" or self._drops(node):  # (Shape: a Gather after it, if any)
            return 0, set()
        out = node.outputs[0]
        added, gone = self._reshapes(node), set()
        leaving = [use.node for use in out.uses() if id(use.node) not in inside]
        if out.is_graph_output() or not all(self._cancels(n) and not n.outputs[0].is_graph_output()
                                            for n in leaving):
            added += 1
        else:
            gone.update(id(n) for n in leaving)
        for v in node.inputs:
            t = producer(v, "Transpose")
            if (t is not None and t is not self.node and transpose_perm(t, None) == self.perm
                    and all(id(use.node) in inside for use in v.uses())):
                gone.add(id(t))
        return added, gone

    def _idle(self, node: ir.Node, inside: set[int]) -> bool:
        """A node of the region ``inside`` whose move only adds: it removes no Transpose
        and no other node of the region reads it."""
        added, gone = self._effects(node, inside)
        return added > 0 and not gone and not any(id(use.node) in inside for v in node.outputs for use in v.uses())

    def _pruned(self, absorbed: list[ir.Node]) -> list[ir.Node]:
        """The region without its idle nodes (:meth:`_idle`) but one reading this Transpose
        that takes it away (as many removed as added: the move goes on towards the outputs)."""
        absorbed = list(absorbed)
        while True:
            inside = {id(n) for n in absorbed}
            stays = not all(id(use.node) in inside for use in self.y.uses())
            idle = [n for n in absorbed if self._idle(n, inside)]
            drop = [n for n in idle if stays or all(v is not self.y for v in n.inputs)]
            if not drop and len(idle) > 1:
                drop = idle
            if not drop:
                return absorbed
            dropped = {id(n) for n in drop}
            absorbed = [n for n in absorbed if id(n) not in dropped]

    def _run_region(self) -> bool:
        """Move past the region of :meth:`_region` (:meth:`_pruned`) when that removes at
        least as many Transposes as it adds Transposes and Reshapes (:meth:`_effects`)."""
        absorbed = self._pruned(self._region())
        inside = {id(n) for n in absorbed}
        gone = {id(self.node)} if all(id(use.node) in inside for use in self.y.uses()) else set()
        added = 0
        for node in absorbed:
            more, fewer = self._effects(node, inside)
            added, gone = added + more, gone | fewer
        self.available = set()
        if not absorbed or not gone or added > len(gone):
            return False
        touched = [t for node in absorbed for v in node.inputs if (t := producer(v, "Transpose")) is not None]
        for node in [n for n in self.graph if id(n) in inside]:  # in graph order: producers first
            make = self.plan(node)
            if make is not None:
                make()
        remove_dead(self.graph, [self.node, *absorbed, *touched, *_transposes_after(absorbed)])
        return True


def sink_transposes(model: ir.Model) -> int:
    """Move Transposes towards the outputs until they cancel; returns the moves made."""
    graph = model.graph
    moves = 0
    limit = 8 * len(graph) + 100
    changed = True
    while changed and moves < limit:
        changed = False
        for node in list(graph):
            if node.graph is not graph or node.op_type != "Transpose" or node.domain != "":
                continue
            if _Sink(graph, node).run():
                moves += 1
                changed = True
    return moves
