"""Rewrite rules (onnxscript's pattern rewriter) for three simplifications onnxscript's own
rules make without checking everything exactness needs; ours check it.

- :class:`CastThroughFloat32`: ``Cast(Cast(x, float32), float16|bfloat16)`` is
  ``Cast(x, float16|bfloat16)`` only when x converts to float32 exactly. onnxscript's
  ``cast_cast_rule`` also fires for float64 and integer x, where the double rounding
  MLX does differs from the single one.
- :class:`MinMaxToClip`: ``Min(Max(x, lo), hi)`` and ``Max(Min(x, hi), lo)`` with
  one-element constant bounds, ``lo <= hi``, are ``Clip(x, lo, hi)``. onnxscript's
  ``min_max_rule``/``max_min_rule`` also take a bound of higher rank than x, which
  broadcasts x where Clip does not (the model lost an axis and failed the checker).
- :class:`ReshapeMatMulReshape`: ``Reshape(MatMul(Reshape(a), [Reshape](b)))`` is
  ``MatMul(a, b)`` only when the reshapes pair the same axes. onnxscript's
  ``*_reshape_matmul_reshape_rule`` checks only the final *shape*: in
  ``einsum("bhwc,hkc->bhwk")`` with b == h, MLX reshapes one operand so that its batch
  axis meets the other's h axis, and the collapsed MatMul met b instead.

Regression cases for each are in ``tests/support/cases/regressions.py``; ``tests/passes/test_pass_contracts.py``
holds onnxscript's versions to their known failures, so that a release which fixes
them shows up.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import MatchResult, RewriteRuleClassBase

# x -> float32 -> y equals x -> y for these x
_EXACT_IN_FLOAT32 = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
_NARROW = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


class CastThroughFloat32(RewriteRuleClassBase):
    """Cast(Cast(x, float32), float16|bfloat16) -> Cast(x, ...) for x of at most 32 float bits."""

    def pattern(self, op, x, to, middle):
        return op.Cast(op.Cast(x, to=middle), to=to)

    def check(self, context, x, to, middle, **_) -> MatchResult:
        result = MatchResult()
        if middle.as_int() != ir.DataType.FLOAT or ir.DataType(to.as_int()) not in _NARROW:
            return result.fail("not a cast through float32 to a narrower float")
        if x.dtype not in _EXACT_IN_FLOAT32:
            return result.fail("x does not convert to float32 exactly")
        return result

    def rewrite(self, op, x, to, middle, **_):
        return op.Cast(x, to=to)


def _bound(value: ir.Value | None, x: ir.Value) -> np.ndarray | None:
    """The one-element constant ``value`` as a NumPy scalar, when it does not outrank x."""
    tensor = ir.convenience.get_const_tensor(value) if value is not None else None
    if tensor is None or x.shape is None or value.shape is None or len(value.shape) > len(x.shape):
        return None
    array = tensor.numpy()
    return array.reshape(()) if array.size == 1 else None


class MinMaxToClip(RewriteRuleClassBase):
    """Min(Max(x, lo), hi) (or Max(Min(x, hi), lo)) -> Clip(x, lo, hi), scalar bounds, lo <= hi."""

    def __init__(self, inner: str):
        super().__init__(f"{inner}Then{'Min' if inner == 'Max' else 'Max'}ToClip")
        self.inner, self.outer = inner, "Min" if inner == "Max" else "Max"

    def pattern(self, op, x, first, second):
        return getattr(op, self.outer)(getattr(op, self.inner)(x, first), second)

    def _bounds(self, x, first, second):
        a, b = _bound(first, x), _bound(second, x)
        if a is None or b is None:
            return None
        lo, hi = (a, b) if self.inner == "Max" else (b, a)
        return (lo, hi) if lo <= hi else None

    def check(self, context, x, first, second, **_) -> MatchResult:
        result = MatchResult()
        if self._bounds(x, first, second) is None:
            return result.fail("bounds are not scalar constants within x's rank with lo <= hi")
        return result

    def rewrite(self, op, x, first, second, **_):
        lo, hi = self._bounds(x, first, second)
        # named after x as onnxscript names them; constants.register_dangling_constants
        # renames a second Clip's bounds of the same x
        return op.Clip(
            x, op.initializer(ir.tensor(lo), name=f"{x.name}_min"), op.initializer(ir.tensor(hi), name=f"{x.name}_max")
        )


def _reshape_dims(value: ir.Value, target: ir.Value | None) -> tuple[list[int], list[int]] | None:
    """(input dims, output dims) of ``Reshape(value, target)`` when both are static (the
    target's 0 and -1 resolved), else None."""
    if target is None or value.shape is None or not value.shape.is_static() or target.const_value is None:
        return None
    source = [int(d) for d in value.shape]
    wanted = [int(d) for d in target.const_value.numpy().reshape(-1)]
    wanted = [source[i] if d == 0 and i < len(source) else d for i, d in enumerate(wanted)]
    if wanted.count(-1) == 1:
        known = int(np.prod([d for d in wanted if d != -1], dtype=np.int64))
        wanted[wanted.index(-1)] = int(np.prod(source, dtype=np.int64)) // known if known else 0
    return source, wanted


def _keeps_rows(value: ir.Value, target: ir.Value | None) -> bool:
    """Whether ``Reshape(value, target)`` only regroups whole rows (the last axis stays)."""
    dims = _reshape_dims(value, target)
    return dims is not None and len(dims[0]) >= 1 and len(dims[1]) >= 2 and dims[0][-1] == dims[1][-1]


def _batch(dims: list[int]) -> list[int]:
    dims = list(dims[:-2])
    while dims and dims[0] == 1:
        dims.pop(0)
    return dims


def _only_leading_ones_change(value: ir.Value, target: ir.Value) -> bool:
    """Whether ``Reshape(value, target)`` keeps the last two axes and changes the batch
    axes only by leading 1s."""
    dims = _reshape_dims(value, target)
    if dims is None:
        return False
    source, wanted = dims
    return len(source) >= 2 and len(wanted) >= 2 and source[-2:] == wanted[-2:] and _batch(source) == _batch(wanted)


def _matmul_shape(a: list[int], b: list[int]) -> list[int] | None:
    """The shape of MatMul of operands of these (rank >= 2) shapes, or None when invalid."""
    if a[-1] != b[-2]:
        return None
    try:
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    except ValueError:
        return None
    return [*batch, a[-2], b[-1]]


class ReshapeMatMulReshape(RewriteRuleClassBase):
    """Reshape(MatMul(Reshape(a, sa), [Reshape(b, sb)]), sc) -> MatMul(a, b), where exact:
    each reshape only adds or removes leading 1s (right-aligned broadcasting then pairs
    the same axes), or a alone is reshaped, keeping its last axis, against a 2-D b (a
    Linear layer over flattened rows); and MatMul(a, b) has the shape sc asks for."""

    def __init__(self, both: bool):
        super().__init__("TwoReshapesMatMulReshape" if both else "OneReshapeMatMulReshape")
        self.both = both

    def pattern(self, op, a, b, shape_a, shape_b, shape_c):
        right = op.Reshape(b, shape_b) if self.both else b
        return op.Reshape(op.MatMul(op.Reshape(a, shape_a), right), shape_c)

    def check(self, context, a, b, shape_a, shape_c, shape_b=None, **_) -> MatchResult:
        result = MatchResult()
        shapes = [v.shape for v in (a, b)]
        if any(s is None or not s.is_static() or len(s) < 2 for s in shapes):
            return result.fail("operands of unknown shape or rank below 2")
        rows = not self.both and len(b.shape) == 2 and _keeps_rows(a, shape_a)
        aligned = _only_leading_ones_change(a, shape_a) and (not self.both or _only_leading_ones_change(b, shape_b))
        if not (rows or aligned):
            return result.fail("the reshapes do not keep the matrix axes paired")
        out = _matmul_shape([int(d) for d in a.shape], [int(d) for d in b.shape])
        if shape_c.const_value is None or out is None:
            return result.fail("final shape unknown or operands not multipliable")
        if [int(d) for d in shape_c.const_value.numpy().reshape(-1)] != out:
            return result.fail("the plain MatMul has another shape")
        return result

    def rewrite(self, op, a, b, **_):
        return op.MatMul(a, b)


def exact_rules() -> dict[str, object]:
    """Our exact version of each onnxscript rule named here, by that rule's public name."""
    return {
        "two_reshapes_matmul_reshape_rule": ReshapeMatMulReshape.rule(True),
        "one_reshape_matmul_reshape_rule": ReshapeMatMulReshape.rule(False),
        "min_max_rule": MinMaxToClip.rule("Max"),
        "max_min_rule": MinMaxToClip.rule("Min"),
        "cast_cast_rule": CastThroughFloat32.rule(),
    }
