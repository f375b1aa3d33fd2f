"""A package's model in a plain onnxruntime session, as the runtimes' pipelines open it,
with the tolerance that session's arithmetic and MLX's device call for."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import dtypes
from . import reference as references
from .parity import Verifier
from .runtimes import arithmetic
from .session import open_session


@dataclass
class PlainSession:
    """``session``: onnxruntime with its default options; ``trades``: what it computes
    other than exactly (int8 activations where the model asks for them); ``reference``:
    MLX's device (TF32 products on a GPU); ``atol``/``rtol``: the caller's tolerances,
    None for those of the outputs' row."""

    session: object
    trades: list
    reference: references.Reference
    atol: float | None = None
    rtol: float | None = None

    def bound(self, want: np.ndarray, held: str | None = None) -> float:
        """The largest error allowed against the float32 reference values ``want``, which
        MLX computed in ``held`` where that is narrower (bfloat16 logits of a bfloat16
        model: the summation order of a long product moves them by a bfloat16 step)."""
        verifier = Verifier()
        row = verifier.compared_as("float32", held, [*self.trades, *self.reference.arithmetic()])
        atol, rtol = verifier.tolerance(row)
        atol, rtol = atol if self.atol is None else self.atol, rtol if self.rtol is None else self.rtol
        return atol + rtol * float(np.abs(want).max()) if want.size else atol

    def compare(self, got: np.ndarray, want: np.ndarray, held: str | None = None) -> tuple[float, float]:
        """(largest absolute error of ``got`` against ``want``, the bound allowed)."""
        return float(np.abs(got - want).max()), self.bound(want, held)

    def half_compare(self, got: np.ndarray, want: np.ndarray, float32_want: np.ndarray, held: str | None) -> dict:
        """``got`` against MLX's half-precision (``held``) values ``want`` and MLX's float32
        values of the same weights ``float32_want``. MLX's own spread, how far ``want`` is
        from ``float32_want``, is the size of what half precision changes on this device:
        ``got`` is close when it is within the half-precision tolerance of ``want``, or no
        farther from float32 than the spread (or the float32 tolerance)."""
        error, bound = self.compare(got, want, held)
        spread = float(np.abs(want - float32_want).max())
        error32, bound32 = float(np.abs(got.astype(np.float64) - float32_want).max()), self.bound(float32_want)
        return {
            "max_abs_error_vs_float32": error32,
            "mlx_half_vs_float32": spread,
            "tolerance_vs_float32": max(spread, bound32),
            "close": error <= bound or error32 <= max(spread, bound32),
        }

    def describe(self) -> dict:
        return {"arithmetic": [str(t) for t in self.trades], "reference": self.reference.to_dict()}

    def result(self, task: str, package, folder, rows: list[dict], **extra) -> dict:
        """A package check's result: its rows, passed when every row is."""
        return {
            "task": task,
            "package": str(package),
            "folder": str(folder),
            **extra,
            **self.describe(),
            "rows": rows,
            "passed": all(r["passed"] for r in rows),
        }

    def tokens_row(
        self, what: str, got: list[int], want: list[int], logits: np.ndarray, want_logits, eos: int | None = None
    ) -> dict:
        """A check row of greedy tokens (the package's, without a final ``eos``, against
        MLX's) and the first step's logits (``want_logits``: MLX's array)."""
        want_logits, held = reference(want_logits)
        got = got[:-1] if eos is not None and got and got[-1] == eos else got
        error, bound = self.compare(logits, want_logits, held)
        return {
            "input": what,
            "detail": f"tokens {got} (MLX {want}), first logits",
            "tokens": got,
            "mlx_tokens": want,
            "max_abs_error": error,
            "tolerance": bound,
            "passed": got == want and error <= bound,
        }


def plain_session(model_file: Path, atol: float | None = None, rtol: float | None = None) -> PlainSession:
    import onnx

    session = open_session(str(model_file))
    trades = arithmetic.onnxruntime(onnx.load(str(model_file), load_external_data=False), {}, "all")
    return PlainSession(session, trades, references.current(), atol, rtol)


def held_dtype(array) -> str | None:
    """ "bfloat16" or "float16" for an MLX array of that dtype (what a check passes as
    ``held``), else None."""
    import mlx.core as mx

    return dtypes.name(array.dtype) if array.dtype in (mx.bfloat16, mx.float16) else None


def reference(array) -> tuple[np.ndarray, str | None]:
    """An MLX reference array as float32 NumPy, and the narrower dtype MLX computed it in."""
    import mlx.core as mx

    return np.array(array.astype(mx.float32)), held_dtype(array)


def half_precision(model) -> str | None:
    """``"float16"`` or ``"bfloat16"`` where the MLX model holds floating parameters in it
    (a half-precision folder; its quantized weights' scales included), else None."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    held = {v.dtype for _, v in tree_flatten(model.parameters()) if mx.issubdtype(v.dtype, mx.floating)}
    return next((dtypes.name(d) for d in (mx.float16, mx.bfloat16) if d in held), None)


@contextlib.contextmanager
def in_float32(model):
    """The MLX model's floating parameters in float32 inside (restored after): the float32
    function of a half-precision folder's weights, and MLX's CPU computes float16 4-bit
    products ~35x slower than float32 (1.8 s against 49 ms for one 14336 x 4096 layer)."""
    import mlx.core as mx

    saved = model.parameters()
    model.set_dtype(mx.float32)
    try:
        yield model
    finally:
        model.update(saved)
