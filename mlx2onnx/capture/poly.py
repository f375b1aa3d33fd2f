"""Polynomials in the model's size symbols with rational coefficients: the closed form of a
dynamic size (:class:`~.symbolic.Plan` keeps one beside each name), which the passes use to
prove facts about sizes for every admitted value."""

from __future__ import annotations

import numbers
from fractions import Fraction


class Poly:
    """The closed form of a symbolic integer: a polynomial with rational coefficients in
    the symbols, ``{monomial: coefficient}``, a monomial being the sorted tuple of its
    symbols (``()`` for the constant)."""

    __slots__ = ("terms",)

    def __init__(self, terms=None):
        self.terms = {m: Fraction(c) for m, c in (terms or {}).items() if c != 0}

    @staticmethod
    def of(x) -> "Poly":
        return x if isinstance(x, Poly) else Poly({(): Fraction(x)})

    @property
    def constant(self) -> Fraction | None:
        """Its value when it has no symbol, else None."""
        if any(m for m in self.terms):
            return None
        return self.terms.get((), Fraction(0))

    def __add__(self, other):
        other, terms = Poly.of(other), dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Poly(terms)

    __radd__ = __add__

    def __neg__(self):
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other):
        return self + -Poly.of(other)

    def __rsub__(self, other):
        return Poly.of(other) - self

    def __mul__(self, other):
        other, terms = Poly.of(other), {}
        for m, c in self.terms.items():
            for n, d in other.terms.items():
                key = tuple(sorted(m + n))
                terms[key] = terms.get(key, 0) + c * d
        return Poly(terms)

    __rmul__ = __mul__

    def __eq__(self, other):
        if isinstance(other, numbers.Rational):  # int, Fraction, NumPy integers
            other = Poly.of(Fraction(other))
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return hash(tuple(sorted(self.terms.items())))

    def __repr__(self):
        return " + ".join(f"{c}*{'*'.join(m)}" if m else str(c) for m, c in self.terms.items()) or "0"

    def at(self, sizes: dict[str, int]) -> Fraction:
        """Its value where each symbol takes ``sizes[symbol]``."""
        total = Fraction(0)
        for m, c in self.terms.items():
            for s in m:
                c *= sizes[s]
            total += c
        return total

    def ratio(self, other: "Poly") -> Fraction | None:
        """``r`` with ``self == r * other``, or None."""
        if not other.terms:
            return None
        m, c = next(iter(other.terms.items()))
        r = self.terms.get(m, Fraction(0)) / c
        return r if self == other * r else None
