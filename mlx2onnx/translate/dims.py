"""Dynamic dimensions as graph values: :class:`~mlx2onnx.capture.symbolic.SymInt` -> int64 from ``Shape``.

The :class:`~mlx2onnx.translate.context.Context` offers every dynamic dimension of every value it
binds (graph inputs first, then each primitive's outputs). A :class:`SymInt` a handler
asks for is then, in order of preference:

1. the dimension of a value already in the graph with the same size in every trace
   (``Shape(v, start=axis, end=axis+1)``: exact at any runtime size, whatever floor or
   clamping produced it);
2. what the handler computed it from (``d * 2``, ``d - 1``: :attr:`SymInt.expr`);
3. an integer affine function of one such dimension, or of a product, sum or difference
   of two, that reproduces its value in every trace (a reshape target Python computed
   as ``B * L``, a slice bound ``L - 1``).

Anything else raises :class:`~mlx2onnx.errors.NeedsStatic`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import onnx_ir as ir

from ..capture.symbolic import NeedsStatic, SymInt, affine_fit, dims_of


class DimBuilder:
    """Mixin of :class:`~mlx2onnx.translate.context.Context`: dynamic dimensions as int64 values."""

    def __init__(self):
        self._dim_sources: dict[tuple, tuple[ir.Value, int]] = {}
        self._dim_values: dict[tuple, ir.Value] = {}

    def offer_dims(self, value: ir.Value, spec) -> None:
        for axis, d in dims_of(spec):
            self._dim_sources.setdefault(d.values, (value, axis))

    # -- the public face: ints() and dim() ---------------------------------------------
    def ints(self, values):
        """An int64 constant; with dynamic entries, a value computed from ``Shape``
        (1-D for a sequence, 0-d for a single :class:`SymInt`)."""
        if isinstance(values, SymInt):
            return self.op.Squeeze(self.dim(values), self.const(np.asarray([0], np.int64)))
        if isinstance(values, (list, tuple)) and any(isinstance(v, SymInt) for v in values):
            pieces, run = [], []
            for v in values:
                if isinstance(v, SymInt):
                    if run:
                        pieces.append(self.const(np.asarray(run, np.int64)))
                        run = []
                    pieces.append(self.dim(v))
                else:
                    run.append(int(v))
            if run:
                pieces.append(self.const(np.asarray(run, np.int64)))
            return pieces[0] if len(pieces) == 1 else self.op.Concat(*pieces, axis=0)
        return super().ints(values)

    def dim(self, d: SymInt | int) -> ir.Value:
        """``d`` as a 1-D int64 value of length 1."""
        if not isinstance(d, SymInt):
            return self.const(np.asarray([int(d)], np.int64))
        if any(not float(v).is_integer() for v in d.values):
            raise NeedsStatic(d, "needs a fractional number that changes with the size")
        key = tuple(int(v) for v in d.values)
        if key not in self._dim_values:
            self._dim_values[key] = self._compute_dim(d, key)
        return self._dim_values[key]

    def axis_range(self, length, axis: int, rank: int) -> ir.Value:
        """int64 ``0 .. length-1`` laid along ``axis`` of a rank-``rank`` value (size 1
        elsewhere); ``length`` may be a :class:`SymInt` (the Reshape target names it, so
        shape inference can)."""
        count = self.ints(length) if isinstance(length, SymInt) else self.const(np.asarray(int(length), np.int64))
        steps = self.op.Range(self.const(np.asarray(0, np.int64)), count, self.const(np.asarray(1, np.int64)))
        return self.op.Reshape(steps, self.ints([length if j == axis else 1 for j in range(rank)]))

    # -- how ------------------------------------------------------------------------
    def _compute_dim(self, d: SymInt, key: tuple) -> ir.Value:
        if key in self._dim_sources:
            value, axis = self._dim_sources[key]
            return self.op.Shape(value, start=axis, end=axis + 1)
        if d.expr is not None:
            name, a, b = d.expr
            left, right = self.dim(a), self.dim(b)
            if name == "Step":  # a * iteration + b, in a loop body
                if self.iteration is None:
                    raise NeedsStatic(d, "follows the iteration of a loop outside its body")
                return self.op.Add(self.op.Mul(self.iteration, left), right)
            if name == "FloorDiv":
                return self._floor_div(left, right, _values(a, key), _values(b, key))
            if name == "Mod":
                return self.op.Mod(left, right, fmod=0)
            return getattr(self.op, name)(left, right)
        fitted = self._fit(key)
        if fitted is None:
            raise NeedsStatic(d, "needs a number the graph cannot compute from the input shapes")
        return fitted

    def _fit(self, key: tuple) -> ir.Value | None:
        pool = list(self._dim_sources)
        candidates = [((p,), p) for p in pool]
        for i, p in enumerate(pool):
            for q in pool[i:]:
                candidates.append((("Mul", p, q), tuple(x * y for x, y in zip(p, q))))
        for i, p in enumerate(pool):
            for q in pool:
                if q != p:
                    candidates.append((("Add", p, q), tuple(x + y for x, y in zip(p, q))))
                    candidates.append((("Sub", p, q), tuple(x - y for x, y in zip(p, q))))
        for how, basis in candidates:
            fit = affine_fit(key, basis)
            if fit is None:
                continue
            if len(how) == 1:
                base = self.dim_of(how[0])
            else:
                base = getattr(self.op, how[0])(self.dim_of(how[1]), self.dim_of(how[2]))
            return self._affine(base, basis, *fit)
        return None

    def dim_of(self, key: tuple) -> ir.Value:
        if key not in self._dim_values:
            value, axis = self._dim_sources[key]
            self._dim_values[key] = self.op.Shape(value, start=axis, end=axis + 1)
        return self._dim_values[key]

    def _affine(self, base: ir.Value, basis: tuple, a: Fraction, b: Fraction) -> ir.Value:
        """``a * base + b`` in int64, floor-divided when ``a`` is a fraction."""
        num, den = a.numerator, a.denominator
        offset = b * den  # an integer: b = v - a*p for integer v and p
        out = base if num == 1 else self.op.Mul(base, self._i64(num))
        if offset:
            out = self.op.Add(out, self._i64(int(offset)))
        if den != 1:
            numerators = [num * p + int(offset) for p in basis]
            out = self._floor_div(out, self._i64(den), numerators, [den] * len(basis))
        return out

    def _floor_div(self, a: ir.Value, b: ir.Value, av: Sequence[int], bv: Sequence[int]) -> ir.Value:
        """Python's ``a // b`` on int64 (ONNX ``Div`` truncates: the same when nothing is negative)."""
        q = self.op.Div(a, b)
        if all(x >= 0 for x in av) and all(y > 0 for y in bv):
            return q
        r = self.op.Sub(a, self.op.Mul(q, b))
        zero = self._i64(0)
        wrong = self.op.And(
            self.op.Not(self.op.Equal(r, zero)),
            self.op.Xor(self.op.Less(r, zero), self.op.Less(b, zero)),
        )
        return self.op.Sub(q, self.op.Cast(wrong, to=ir.DataType.INT64))

    def _i64(self, v: int) -> ir.Value:
        return self.const(np.asarray([v], np.int64))


def _values(x, like: tuple) -> tuple:
    return x.values if isinstance(x, SymInt) else (int(x),) * len(like)
