"""Sizes of a dynamic model as polynomials in its symbols, for passes that must prove a
rewrite exact at every size the model admits.

A dynamic export's plan (:class:`~mlx2onnx.capture.symbolic.Plan`) holds its symbols
(``batch``, ``h``, ...) with their steps and ranges, and the closed form of every dynamic
dimension it named (``h``, ``h/2+2``, ``2*seq``, ``batch*seq``: :attr:`Plan.forms`).
:class:`Sizes` reads a value's dimensions as those closed forms (static ones as
constants) and evaluates the small int64 graphs built from ``Shape`` (Shape, Squeeze,
Concat, Add, Mul, Div, Gather, ReduceProd, ...) to arrays of them. Two sizes are proven equal only
when their polynomials are identical; an integer ``Div`` only when it is exact for every
admitted size (each term a multiple of the divisor, given the symbols' steps).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnx_ir as ir

from ..capture.poly import Poly
from ..capture.symbolic import Plan
from .graph import const_eval


class Sizes:
    """The symbols of a dynamic model (step and range of each) and its sizes as :class:`Poly`."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.multiple_of = {s: plan.multiple_of.get(s, 1) for s in plan.sizes}
        self.low = {s: plan.lowest(s) for s in plan.sizes}
        self._memo: dict[int, tuple[ir.Value, np.ndarray | None]] = {}

    def dims(self, value: ir.Value | None) -> list[Poly] | None:
        """The dimensions of ``value`` as polynomials, or None where one is unknown."""
        if value is None or value.shape is None:
            return None
        out = []
        for d in value.shape:
            if isinstance(d, int):
                out.append(Poly.of(d))
                continue
            poly = self.plan.form(d.value) if isinstance(d.value, str) else None
            if poly is None:
                return None
            out.append(poly)
        return out

    # -- what holds for every admitted size ---------------------------------------------
    def is_integer(self, p: Poly, divisor: int = 1) -> bool:
        """Whether ``p / divisor`` is an integer at every admitted size (each term alone)."""
        for m, c in p.terms.items():
            scale = c / divisor
            for s in m:
                scale *= self.multiple_of[s]
            if scale.denominator != 1:
                return False
        return True

    def floor_div(self, p: Poly, divisor: int) -> Poly | None:
        """``floor(p / divisor)`` as a polynomial, when the symbolic part divides exactly."""
        const = p.terms.get((), Fraction(0))
        rest = p - const
        if divisor <= 0 or const.denominator != 1 or not self.is_integer(rest, divisor):
            return None
        return rest * Fraction(1, divisor) + (const.numerator // divisor)

    def positive(self, p: Poly) -> bool:
        """Whether ``p >= 1`` at every admitted size: non-negative coefficients, >= 1 at the
        smallest sizes."""
        return all(c >= 0 for m, c in p.terms.items() if m) and p.at(self.low) >= 1

    # -- int64 shape graphs -> arrays of Poly -------------------------------------------
    def value_of(self, value: ir.Value | None, depth: int = 24) -> np.ndarray | None:
        """``value`` as an object array of :class:`Poly` when it is computed from constants
        and ``Shape`` of values whose dimensions :meth:`dims` knows; else None."""
        if value is None:
            return None
        entry = self._memo.get(id(value))
        if entry is None or entry[0] is not value:  # (the value held: its id is not reused)
            entry = self._memo[id(value)] = (value, self._eval(value, depth))
        return entry[1]

    def _eval(self, value: ir.Value, depth: int) -> np.ndarray | None:
        const = const_eval(value, limit=1 << 16)
        if const is not None:
            if const.dtype.kind not in "iub" and not np.all(np.isfinite(const)):
                return None
            return _polys(const)
        node = value.producer()
        if node is None or node.domain != "" or depth == 0:
            return None
        op = node.op_type
        if op == "Shape":
            dims = self.dims(node.inputs[0])
            if dims is None:
                return None
            rank = len(dims)
            start = node.attributes["start"].as_int() if "start" in node.attributes else 0
            end = node.attributes["end"].as_int() if "end" in node.attributes else rank
            return _array(dims[slice(start, end)])
        args = [self.value_of(v, depth - 1) if v is not None else None for v in node.inputs]
        x = args[0] if args else None
        if x is None:
            return None
        try:
            out = self._apply(node, op, x, args)
        except (ValueError, IndexError, TypeError, ZeroDivisionError):
            return None
        if isinstance(out, Poly):  # NumPy gives 0-d object results as the object itself
            out = _array([out]).reshape(())
        return out

    def _apply(self, node: ir.Node, op: str, x: np.ndarray, args: list) -> np.ndarray | None:
        if op in ("Identity",):
            return x
        if op == "Cast":
            to = ir.DataType(node.attributes["to"].as_int())
            integral = all(p.constant is None or p.constant.denominator == 1 for p in x.flat)
            if to in (ir.DataType.INT64, ir.DataType.INT32) and integral:
                return x
            rounding = {ir.DataType.FLOAT: np.float32, ir.DataType.DOUBLE: np.float64}.get(to)
            if rounding is not None and all(p.constant is not None for p in x.flat):
                return _array([Fraction(float(rounding(float(p.constant)))) for p in x.flat]).reshape(x.shape)
            return None
        if op == "Reciprocal":
            if any(p.constant in (None, 0) for p in x.flat):
                return None
            return _array([Poly.of(1 / p.constant) for p in x.flat]).reshape(x.shape)
        if op in ("Add", "Sub", "Mul"):
            y = args[1]
            if y is None:
                return None
            return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](x, y)
        if op == "Div":
            y = args[1]
            if y is None:
                return None
            a, b = np.broadcast_arrays(x, y)
            out = []
            for p, q in zip(a.flat, b.flat):
                d = q.constant
                if d is None or d.denominator != 1 or d <= 0 or not self.is_integer(p, int(d)):
                    return None  # integer Div truncates: only an exact one is proven
                out.append(p * Fraction(1, int(d)))
            return _array(out).reshape(a.shape)
        if op in ("Squeeze", "Unsqueeze", "Reshape"):
            shape = self._shape_arg(node, x, op, args)
            return None if shape is None else x.reshape(shape)
        if op == "Concat":
            if any(a is None for a in args):
                return None
            return np.concatenate(args, axis=node.attributes["axis"].as_int())
        if op == "Gather":
            index = const_eval(node.inputs[1])
            axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
            return None if index is None else np.take(x, index.astype(np.int64), axis=axis)
        if op == "ReduceProd":
            axes = _axes(node)
            keep = node.attributes["keepdims"].as_int() if "keepdims" in node.attributes else 1
            if "noop_with_empty_axes" in node.attributes and node.attributes["noop_with_empty_axes"].as_int():
                return None
            axis = tuple(int(a) for a in axes) if axes.size else tuple(range(x.ndim))
            return np.multiply.reduce(x, axis=axis, keepdims=bool(keep), initial=Poly.of(1))
        return None

    @staticmethod
    def _shape_arg(node, x, op, args) -> tuple[int, ...] | None:
        """The static output shape of a Squeeze / Unsqueeze / Reshape of ``x``."""
        if op == "Reshape":
            arg = const_eval(node.inputs[1])
            return None if arg is None or 0 in arg else tuple(int(n) for n in arg.reshape(-1))
        axes = [int(a) for a in _axes(node)]
        if op == "Squeeze":
            axes = [a % x.ndim for a in axes] or [k for k, n in enumerate(x.shape) if n == 1]
            return tuple(n for k, n in enumerate(x.shape) if k not in axes)
        out = list(x.shape)
        rank = x.ndim + len(axes)
        for a in sorted(a % rank for a in axes):
            out.insert(a, 1)
        return tuple(out)


def _axes(node: ir.Node) -> np.ndarray | None:
    """A Squeeze / Unsqueeze / ReduceProd's axes, an input or (older opsets) an attribute;
    empty when none are given; :class:`ValueError` when they are not constant."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = const_eval(node.inputs[1])
        if axes is None:
            raise ValueError("axes computed at run time")
        return axes.reshape(-1)
    if "axes" in node.attributes:
        return np.asarray(node.attributes["axes"].as_ints(), np.int64)
    return np.zeros(0, np.int64)


def _array(items) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for k, p in enumerate(items):
        out[k] = Poly.of(p)
    return out


def _polys(array: np.ndarray) -> np.ndarray | None:
    flat = array.reshape(-1)
    if array.dtype.kind in "iub":
        items = [int(v) for v in flat]
    else:
        items = [Fraction(float(v)) for v in flat]
    return _array(items).reshape(array.shape)
