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

import onnx_ir as ir

from .graph import producer, remove_dead, static_shape
from .permutes import transpose_perm
from .sink_plan import BROADCASTING, REDUCE, SinkPlan, transposes_after


class _Sink(SinkPlan):
    """Plans (:class:`~.sink_plan.SinkPlan`) and makes the move of one Transpose past its consumers,
    where it pays."""

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
        touched = [
            t
            for node in consumers
            for v in node.inputs
            if (t := producer(v, "Transpose")) is not None and t is not self.node
        ]
        for make in plans:
            make()
        remove_dead(self.graph, [self.node, *consumers, *touched, *transposes_after(consumers)])
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
                    # output in x's layout too (a Shape's is a shape vector: its consumers are not the move's)
                    if node.op_type not in REDUCE | {"Squeeze", "Transpose", "Reshape", "Shape"}:
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
        if out.is_graph_output() or not all(self._cancels(n) and not n.outputs[0].is_graph_output() for n in leaving):
            added += 1
        else:
            gone.update(id(n) for n in leaving)
        for v in node.inputs:
            t = producer(v, "Transpose")
            if (
                t is not None
                and t is not self.node
                and transpose_perm(t, None) == self.perm
                and all(id(use.node) in inside for use in v.uses())
            ):
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
        remove_dead(self.graph, [self.node, *absorbed, *touched, *transposes_after(absorbed)])
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
