"""Comparing one output: a runtime's array against MLX's, under a tolerance.

Pass when ``|got - want| <= atol + rtol * |want|`` element-wise, NaN where MLX has NaN,
the same infinities, the same shape and the dtype the model promises. The report keeps
the worst element (where it is, both values) so a failure can be read without rerunning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

# (atol, rtol) per output dtype name, and per arithmetic a runtime may choose:
# "int8-activations" (activations quantized to int8 per block before a low-bit product:
# 7 bits of mantissa, as bfloat16's 8); "tf32" (MLX's reference computed float32 matrix
# products from inputs rounded to 10 bits of mantissa: unit-normal [64, K] @ [K, 64]
# products so rounded are off float64 by at most 0.007 at K = 16 and 0.06 at K = 4096, no
# element outside (0.1, 0.02); mlx2onnx/verify/reference.py)
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-4),
    "float16": (2e-2, 1e-2),
    "bfloat16": (1e-1, 5e-2),
    "int8-activations": (1e-1, 5e-2),
    "tf32": (1e-1, 2e-2),
}
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
EXACT = (0.0, 0.0)

# Bin edges of the error histograms: each element's error over its allowance
# (atol + rtol * |MLX|), so 1 is the tolerance; a mismatch lands at or above 1.
HISTOGRAM_EDGES = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, float("inf"))


def uniform_tolerances(atol: float | None = None, rtol: float | None = None) -> dict[str, tuple[float, float]] | None:
    """The tolerance table with ``atol`` and/or ``rtol`` set for every float dtype (the
    others keep their defaults); None when neither is given."""
    if atol is None and rtol is None:
        return None
    return {
        dtype: (float(a if atol is None else atol), float(r if rtol is None else rtol))
        for dtype, (a, r) in DEFAULT_TOLERANCES.items()
    }


def check_tolerance(atol: float, rtol: float, what: str = "tolerance") -> tuple[float, float]:
    """``(atol, rtol)`` as floats, or ValueError: a NaN, infinite or negative tolerance
    would make every comparison pass (or none)."""
    pair = []
    for label, value in (("atol", atol), ("rtol", rtol)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: {label}={value!r} is not a number") from None
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{what}: {label}={value!r} must be a finite number >= 0 (NaN or inf would pass anything)")
        pair.append(number)
    return pair[0], pair[1]


@dataclass(frozen=True)
class OutputReport:
    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    mismatches: int
    passed: bool
    problem: str = ""
    nan_in_reference: int = 0  # NaN count in MLX's output (a comparison of all-NaN proves little)
    at: str = ""  # the dynamic sizes of this run ("batch=3 seq=7"), empty for a static model
    worst: str = ""  # the worst element: "[2, 5]: got 1.5, MLX 1.25"
    order_free_axis: int | None = None  # compared as a set along this axis (partition, topk)
    error_histogram: tuple[int, ...] = ()  # element counts per HISTOGRAM_EDGES bin

    def line(self, at_width: int = 0) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        text = (
            (f"[{self.at}] ".ljust(at_width) if self.at else "")
            + f"{self.name:<24} {self.dtype:<9} {str(list(self.shape)):<18} "
            f"abs {self.max_abs_error:<10.3g} rel {self.max_rel_error:<10.3g} "
            f"(atol {self.atol:g}, rtol {self.rtol:g})  {verdict}"
        )
        if not self.passed and self.worst:
            text += f"  worst at {self.worst}"
        return text + (f"  {self.problem}" if self.problem else "")

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "atol": self.atol,
            "rtol": self.rtol,
            "mismatches": self.mismatches,
            "passed": self.passed,
            "problem": self.problem,
            "at": self.at,
            "worst": self.worst,
            "order_free_axis": self.order_free_axis,
            "error_histogram": list(self.error_histogram),
        }


def failed(name: str, dtype: str, shape, tolerance: tuple[float, float], problem: str, at: str = "") -> OutputReport:
    """A report for an output that could not be compared at all (missing, wrong dtype...)."""
    shape = tuple(shape)
    return OutputReport(
        name, dtype, shape, math.inf, math.inf, *tolerance, int(np.prod(shape, dtype=np.int64)), False, problem, at=at
    )


def _to_float64(value: np.ndarray) -> np.ndarray:
    if value.dtype == ml_dtypes.bfloat16:
        return value.astype(np.float32).astype(np.float64)
    return value.astype(np.float64)


def _scalar(value) -> str:
    value = np.asarray(value)
    if value.dtype.kind in "biu":
        return str(value.item())
    if value.dtype.kind not in "fc":  # bfloat16: float32 holds it exactly
        value = value.astype(np.float32)
    return str(value[()])  # the shortest text that reads back as this value: two values print apart


def compare(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    dtype: str,
    tolerance: tuple[float, float],
    order_free_axis: int | None = None,
    expected_dtype: np.dtype | None = None,
) -> OutputReport:
    """Compare ``got`` (a runtime's) with ``want`` (MLX's). ``expected_dtype`` is the
    dtype the model must produce (MLX's, or the one the float policy carries it in);
    ``order_free_axis`` compares both sorted along that axis (an unordered set there)."""
    atol, rtol = tolerance
    if expected_dtype is not None and np.dtype(got.dtype) != np.dtype(expected_dtype):
        return failed(
            name,
            dtype,
            want.shape,
            tolerance,
            f"dtype {np.dtype(got.dtype).name} from the runtime, {np.dtype(expected_dtype).name} expected "
            f"(MLX returns {dtype})",
        )
    if tuple(got.shape) != tuple(want.shape):
        return failed(
            name, dtype, want.shape, tolerance, f"shape {list(got.shape)} from the runtime, {list(want.shape)} from MLX"
        )
    if order_free_axis is not None and got.ndim:
        got, want = np.sort(got, axis=order_free_axis), np.sort(want, axis=order_free_axis)
    a, b = _to_float64(got), _to_float64(want)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    same_special = (nan_a & nan_b) | (np.isinf(a) & np.isinf(b) & (a == b))
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(np.where(finite, a, 0.0) - np.where(finite, b, 0.0)), 0.0)
        bad = ~same_special & (~finite | (diff > atol + rtol * np.abs(b)))  # 0 * inf: not finite anyway
    if got.dtype == want.dtype and got.dtype.kind in "iu" and (atol, rtol) == EXACT:
        bad = got != want  # float64 cannot tell apart 64-bit integers above 2**53
    max_abs = float(diff.max()) if diff.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(finite & (b != 0), diff / np.abs(b), 0.0)
    max_rel = float(rel.max()) if rel.size else 0.0
    if np.any(~same_special & ~finite):
        max_abs = max_rel = float("inf")
    mismatches = int(bad.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(same_special, 0.0, np.where(finite, diff / (atol + rtol * np.abs(b)), np.inf))
    ratio = np.where(np.isnan(ratio), 0.0, ratio)  # 0 / 0: an exact match under an exact tolerance
    ratio = np.where(bad, np.maximum(ratio, 1.0), np.minimum(ratio, 1.0))  # what the verdict says, not float noise
    histogram = tuple(
        int(c) for c in np.histogram(np.minimum(ratio, 1e300), bins=np.array(HISTOGRAM_EDGES[:-1] + (1e301,)))[0]
    )
    worst = ""
    if mismatches:
        with np.errstate(invalid="ignore", over="ignore"):
            excess = np.where(bad, np.where(finite, diff - (atol + rtol * np.abs(b)), np.inf), -np.inf)
        index = np.unravel_index(int(np.argmax(excess)), bad.shape) if bad.ndim else ()
        worst = f"{[int(i) for i in index]}: got {_scalar(got[index])}, MLX {_scalar(want[index])}"
    return OutputReport(
        name,
        dtype,
        tuple(want.shape),
        max_abs,
        max_rel,
        atol,
        rtol,
        mismatches,
        mismatches == 0,
        nan_in_reference=int(nan_b.sum()),
        worst=worst,
        order_free_axis=order_free_axis,
        error_histogram=histogram,
    )
