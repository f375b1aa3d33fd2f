"""Symbolic integers: a number that takes a known value in each of several traces.

:mod:`mlx2onnx.dynamic` traces a function at several sizes and merges the traces; every
number that differs between them (a dimension, a number in a primitive's ``arguments``)
becomes a :class:`SymInt` holding its value in each trace. Handlers see a :class:`SymInt`
where they would see an ``int``: comparisons that come out the same in every trace answer
normally, arithmetic gives another :class:`SymInt` (recording how it was computed), and
:meth:`Context.ints <mlx2onnx.translate.dims.DimBuilder.ints>` turns them into int64 values
computed in the graph from ``Shape``. Code that needs a fixed number (``int(d)``,
``np.zeros(shape)``) raises :class:`NeedsStatic`, which the translator reports as a
:class:`~mlx2onnx.errors.DynamicShapeError` naming the input, the dimension and the
primitive that needs it fixed.

A dynamic dimension's name (its ``dim_param``) is an expression of the symbols when one
fits every trace (``seq+1``, ``h/2``, ``batch*seq``); :attr:`Plan.forms` keeps that
closed form as a :class:`Poly` beside the name, so the passes prove facts about sizes
(equal, exactly divisible, positive) for every size the model admits.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..errors import NeedsStatic
from .poly import Poly


@dataclass
class Plan:
    """The dynamic dimensions and the sizes each trace used.

    ``sizes[s][t]`` is the size of symbol ``s`` in trace ``t``; trace 0 is the example
    sizes, trace ``1 + k`` changes symbol ``k`` alone by one step, the last two change them
    all, by two steps and by :func:`far_offset`.
    ``where[s]`` names the first (input label, axis) that carries symbol ``s``.
    """

    sizes: dict[str, tuple[int, ...]]
    where: dict[str, tuple[str, int]]
    spec: dict[str, dict[int, str]]
    multiple_of: dict[str, int] = field(default_factory=dict)
    names: dict[tuple, str] = field(default_factory=dict)
    bounds: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    forms: dict[str, "Poly | None"] = field(default_factory=dict)

    @property
    def traces(self) -> int:
        return len(next(iter(self.sizes.values())))

    def symbols_of(self, values: tuple) -> list[str]:
        """The symbols whose own trace changes ``values`` (all of them if only the
        all-changed traces do)."""
        found = [s for k, s in enumerate(self.sizes) if values[1 + k] != values[0]]
        if not found and any(v != values[0] for v in values[1 + len(self.sizes) :]):
            found = list(self.sizes)
        return found

    def describe(self, values: tuple) -> str:
        parts = []
        for s in self.symbols_of(values) or list(self.sizes):
            label, axis = self.where[s]
            parts.append(f"dimension {axis} ({s!r}) of input {label!r}")
        return " and ".join(parts)

    def dim_name(self, values: tuple) -> str:
        """A dim_param for a dynamic dimension: the symbol itself, or an expression of one
        or two symbols (``2*seq``, ``seq+1``, ``batch*seq``), else a fresh ``dim_k``. Its
        closed form is kept in :attr:`forms` (None for ``dim_k``)."""
        if values in self.names:
            return self.names[values]
        found = _pretty(values, self.sizes)
        name, form = found if found is not None else (f"dim_{len(self.names)}", None)
        if name in self.names.values():
            name, form = f"{name}_{len(self.names)}", None
        self.names[values] = name
        self.forms[name] = form
        return name

    def form(self, name: str) -> "Poly | None":
        """The closed form of the dimension named ``name`` (a dim_param this plan gave);
        None for any other name (``dim_7``, or ``unk__3`` from ONNX shape inference)."""
        return self.forms.get(name)

    def lowest(self, symbol: str) -> int:
        """The smallest size ``symbol`` may take."""
        return self.bounds[symbol][0] if symbol in self.bounds else self.multiple_of.get(symbol, 1)


def _pretty(values: tuple, sizes: dict[str, tuple[int, ...]]) -> tuple[str, "Poly"] | None:
    """The name and closed form of ``values``: an affine function of one symbol, or an
    integer multiple of a product of two, that gives them in every trace; else None."""
    for s, v in sizes.items():
        fit = affine_fit(values, v)
        if fit is not None:
            a, b = fit
            text = (
                s
                if a == 1
                else (
                    f"{a}*{s}" if a.denominator == 1 else f"{s}/{a.denominator}" if a.numerator == 1 else f"({a})*{s}"
                )
            )
            name = text if b == 0 else f"{text}{'+' if b > 0 else '-'}{abs(b)}"
            return name, Poly({(s,): a, (): b})
    names = list(sizes)
    for i, s in enumerate(names):
        for t in names[i:]:
            prod = tuple(x * y for x, y in zip(sizes[s], sizes[t]))
            fit = affine_fit(values, prod)
            if fit is not None and fit[1] == 0 and fit[0].denominator == 1:
                a = fit[0]
                name = (f"{a}*" if a != 1 else "") + (f"{s}*{t}" if s != t else f"{s}^2")
                return name, Poly({tuple(sorted((s, t))): a})
    return None


def affine_fit(values: tuple, basis: tuple) -> tuple[Fraction, Fraction] | None:
    """``(a, b)`` with ``values == a * basis + b`` in every trace, or None. A basis with
    fewer than three distinct values fits anything that takes two: no fit then (a number
    that floors a size, seen at two sizes only, is not an affine function of it)."""
    if len(set(basis)) < 3:
        return None
    pairs = list(zip(basis, values))
    pivot = next(((p, v) for p, v in pairs if p != pairs[0][0]), None)
    if pivot is None:
        return None
    a = Fraction(pivot[1] - pairs[0][1]) / Fraction(pivot[0] - pairs[0][0])
    if a == 0:
        return None
    b = Fraction(pairs[0][1]) - a * pairs[0][0]
    if all(a * p + b == v for p, v in pairs):
        return a, b
    return None


def _decide(values: list, sym: "SymInt", what: str):
    if all(v == values[0] for v in values):
        return values[0]
    raise NeedsStatic(sym, what)


class SymInt:
    """An integer that takes a known value in each trace (see the module docstring).

    ``expr`` records how it was computed from other :class:`SymInt`: ``None`` for a
    dimension or argument read from the traces, else ``(op, a, b)``.
    """

    __slots__ = ("values", "plan", "expr")

    def __init__(self, values: tuple, plan: Plan, expr: tuple | None = None):
        self.values = tuple(values)
        self.plan = plan
        self.expr = expr

    # -- reading it as a number is what a dynamic size cannot do --------------------
    def __index__(self):
        raise NeedsStatic(self, "needs it as a fixed integer")

    __int__ = __index__

    def __float__(self):
        raise NeedsStatic(self, "needs it as a fixed number")

    def __bool__(self):
        return bool(_decide([v != 0 for v in self.values], self, "branches on whether it is zero"))

    def __repr__(self):
        return self.plan.dim_name(self.values)

    def __hash__(self):
        return hash(self.values)

    @property
    def example(self) -> int:
        return self.values[0]

    # -- comparisons: fine when every trace agrees -----------------------------------
    def _lift(self, other):
        """``other``'s values beside :attr:`values` (None: not a number, or a
        :class:`StepInt`, which lifts this one onto its iterations instead)."""
        if isinstance(other, StepInt):
            return None
        return _values_of(other, len(self.values))

    def _made(self, values: tuple, expr: tuple) -> "SymInt":
        return SymInt(values, self.plan, expr)

    def _compare(self, other, fn, text):
        theirs = self._lift(other)
        if theirs is None:
            return NotImplemented
        return _decide([fn(a, b) for a, b in zip(self.values, theirs)], self, f"compares it ({text})")

    def __eq__(self, other):
        """Equal when equal in every trace: a size that changes is never equal to a fixed
        number, even where one trace happens to hit it (the generic answer)."""
        theirs = self._lift(other)
        if theirs is None:
            return NotImplemented
        return tuple(theirs) == self.values

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __lt__(self, other):
        return self._compare(other, operator.lt, "<")

    def __le__(self, other):
        return self._compare(other, operator.le, "<=")

    def __gt__(self, other):
        return self._compare(other, operator.gt, ">")

    def __ge__(self, other):
        return self._compare(other, operator.ge, ">=")

    # -- arithmetic gives another SymInt ------------------------------------------------
    def _arith(self, other, fn, name, reverse=False):
        theirs = self._lift(other)
        if theirs is None:
            return NotImplemented
        a, b = (theirs, self.values) if reverse else (self.values, theirs)
        values = tuple(fn(x, y) for x, y in zip(a, b))
        if all(v == values[0] for v in values):
            return values[0]
        left, right = (other, self) if reverse else (self, other)
        return self._made(values, (name, left, right))

    def __add__(self, o):
        return self._arith(o, operator.add, "Add")

    def __radd__(self, o):
        return self._arith(o, operator.add, "Add", True)

    def __sub__(self, o):
        return self._arith(o, operator.sub, "Sub")

    def __rsub__(self, o):
        return self._arith(o, operator.sub, "Sub", True)

    def __mul__(self, o):
        return self._arith(o, operator.mul, "Mul")

    def __rmul__(self, o):
        return self._arith(o, operator.mul, "Mul", True)

    def __floordiv__(self, o):
        return self._arith(o, operator.floordiv, "FloorDiv")

    def __rfloordiv__(self, o):
        return self._arith(o, operator.floordiv, "FloorDiv", True)

    def __mod__(self, o):
        return self._arith(o, operator.mod, "Mod")

    def __neg__(self):
        return self._arith(0, operator.sub, "Sub", True)

    def __truediv__(self, o):
        raise NeedsStatic(self, "divides it as a float")

    __rtruediv__ = __truediv__


def _values_of(other, n: int):
    if isinstance(other, SymInt):
        return other.values
    if isinstance(other, bool) or not isinstance(other, (int, float)) and not hasattr(other, "__index__"):
        return None
    try:
        return (other,) * n
    except TypeError:
        return None


def is_dynamic(x: Any) -> bool:
    return isinstance(x, SymInt)


def any_dynamic(values) -> bool:
    return any(isinstance(v, SymInt) for v in values)


def onnx_dim(d) -> int | str:
    """A dimension as onnx-ir takes it: an int, or the dim_param of a :class:`SymInt`."""
    return d.plan.dim_name(d.values) if isinstance(d, SymInt) else int(d)


class SymFloat(SymInt):
    """A float argument that differs between traces (``Arange``'s start and stop, ...)."""

    __slots__ = ()

    def __float__(self):
        raise NeedsStatic(self, "needs it as a fixed number")


class StepInt(SymInt):
    """An integer that changes with the iteration of a loop recovered from an unrolled trace
    (:mod:`mlx2onnx.capture.loops`): ``a * k + b`` at iteration ``k``, ``a`` and ``b``
    numbers or :class:`SymInt`.

    Its :attr:`values` are its values at every (trace, iteration) pair of ``space``, so a
    comparison answers for every iteration of every trace, and arithmetic with a size
    (a :class:`SymInt` with one value per trace) lifts the size onto the same pairs.
    ``expr`` is ``("Step", a, b)`` for the leaf, else how it was computed.
    """

    __slots__ = ("space",)

    def __init__(self, values: tuple, plan: Plan, expr: tuple, space: tuple):
        super().__init__(values, plan, expr)
        self.space = space

    @classmethod
    def of(cls, a, b, space: tuple, plan: Plan) -> "StepInt":
        at = lambda x, t: x.values[t] if isinstance(x, SymInt) else x  # noqa: E731
        return cls(tuple(at(a, t) * k + at(b, t) for t, k in space), plan, ("Step", a, b), space)

    def _lift(self, other):
        if isinstance(other, StepInt):
            return other.values if other.space == self.space else None
        if isinstance(other, SymInt):
            return tuple(other.values[t] for t, _ in self.space)
        return _values_of(other, len(self.values))

    def _made(self, values: tuple, expr: tuple) -> "StepInt":
        return StepInt(values, self.plan, expr, self.space)

    def __repr__(self):
        _, a, b = self.expr if self.expr[0] == "Step" else ("Step", "?", "?")
        return f"{a}*iteration+{b}"


def dims_of(spec) -> list[tuple[int, SymInt]]:
    return [(a, d) for a, d in enumerate(spec.shape) if isinstance(d, SymInt)]
