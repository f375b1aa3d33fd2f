"""Parity harness: run the ONNX model in onnxruntime and the function in MLX, compare.

The inputs are fresh seeded random arrays with the shapes and dtypes of the example
inputs (or the caller's own arrays), fed to both sides. Each output gets its max
absolute and relative error and a pass/fail under per-dtype tolerances.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import ml_dtypes
import mlx.core as mx
import numpy as np
import onnx
import onnx_ir as ir

from . import dtypes
from .build import DYNAMIC_METADATA_KEY, IO_METADATA_KEY
from .capture import flatten_outputs, normalize_inputs, resolve_callable
from .errors import VerificationError

# (atol, rtol) per output dtype name; pass when |onnx - mlx| <= atol + rtol * |mlx|.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-4),
    "float16": (2e-2, 1e-2),
    "bfloat16": (1e-1, 5e-2),
}
EXACT = (0.0, 0.0)


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

    def line(self, at_width: int = 0) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        text = (
            (f"[{self.at}] ".ljust(at_width) if self.at else "")
            + f"{self.name:<24} {self.dtype:<9} {str(list(self.shape)):<18} "
            f"abs {self.max_abs_error:<10.3g} rel {self.max_rel_error:<10.3g} "
            f"(atol {self.atol:g}, rtol {self.rtol:g})  {verdict}"
        )
        return text + (f"  {self.problem}" if self.problem else "")


@dataclass(frozen=True)
class VerifyReport:
    outputs: tuple[OutputReport, ...]
    device: str
    onnxruntime_version: str
    mlx_version: str
    seed: int | None
    inputs: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def __bool__(self) -> bool:  # so `assert mlx2onnx.verify(...)` reads naturally
        return self.passed

    def __str__(self) -> str:
        head = (
            f"parity {'PASSED' if self.passed else 'FAILED'}: onnxruntime {self.onnxruntime_version} vs "
            f"MLX {self.mlx_version} on {self.device}"
            + (f", random inputs seed {self.seed}" if self.seed is not None else ", caller's inputs")
        )
        width = max((len(o.at) + 3 for o in self.outputs if o.at), default=0)
        return "\n".join([head] + ["  " + o.line(width) for o in self.outputs])

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "device": self.device,
            "onnxruntime_version": self.onnxruntime_version,
            "mlx_version": self.mlx_version,
            "seed": self.seed,
            "inputs": {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.inputs.items()},
            "outputs": [
                {
                    "name": o.name,
                    "dtype": o.dtype,
                    "shape": list(o.shape),
                    "max_abs_error": o.max_abs_error,
                    "max_rel_error": o.max_rel_error,
                    "atol": o.atol,
                    "rtol": o.rtol,
                    "mismatches": o.mismatches,
                    "passed": o.passed,
                    "problem": o.problem,
                    "at": o.at,
                }
                for o in self.outputs
            ],
        }


def random_like(example: mx.array, rng: np.random.Generator, shape: tuple[int, ...] | None = None) -> mx.array:
    """A random array with the shape (or ``shape``) and dtype of ``example``.

    Floats are standard normal; integers are uniform over the example's own value range
    (so token ids stay below the vocabulary size); bools are fair coin flips.
    """
    dtype = example.dtype
    shape = tuple(example.shape) if shape is None else tuple(shape)
    if dtype == mx.bool_:
        return mx.array(rng.random(shape) < 0.5)
    if dtypes.is_integer(dtype):
        values = dtypes.array_to_numpy(example)
        lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 1)
        if lo == hi:
            lo, hi = min(lo, 0), max(hi, 10 if not dtypes.is_unsigned(dtype) or lo >= 0 else hi)
        return mx.array(rng.integers(lo, hi, size=shape, endpoint=True).astype(dtypes.to_numpy(dtype)))
    if dtype in (mx.complex64,):
        raise VerificationError("complex inputs cannot be fed to onnxruntime; pass real and imaginary parts")
    sample = rng.standard_normal(shape).astype(np.float32)
    return mx.array(sample).astype(dtype)


def _to_float64(value: np.ndarray) -> np.ndarray:
    if value.dtype == ml_dtypes.bfloat16:
        return value.astype(np.float32).astype(np.float64)
    if value.dtype == np.bool_:
        return value.astype(np.float64)
    return value.astype(np.float64)


def compare(name: str, got: np.ndarray, want: np.ndarray, dtype: str, tolerance: tuple[float, float]) -> OutputReport:
    atol, rtol = tolerance
    if tuple(got.shape) != tuple(want.shape):
        return OutputReport(name, dtype, tuple(want.shape), float("inf"), float("inf"), atol, rtol, want.size, False,
                            f"shape {list(got.shape)} from onnxruntime, {list(want.shape)} from MLX")
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
    return OutputReport(name, dtype, tuple(want.shape), max_abs, max_rel, atol, rtol, mismatches, mismatches == 0,
                        nan_in_reference=int(nan_b.sum()))


@dataclass(frozen=True)
class Verifier:
    """Options of the parity check.

    Attributes:
        seed: seed of the random inputs.
        random_inputs: draw fresh random inputs shaped like the example inputs (default);
            ``False`` feeds the example inputs themselves.
        tolerances: ``{"float32": (atol, rtol), ...}`` overriding :data:`DEFAULT_TOLERANCES`.
        providers: onnxruntime execution providers.
        graph_optimization_level: onnxruntime's level (``"all"``, ``"extended"``, ``"basic"``, ``"disabled"``).
        sizes: for a model with dynamic dimensions, the sizes to check it at: a list of
            ``{symbol: size}``, or ``{symbol: [sizes]}`` for every combination. Default:
            the example sizes, every symbol at 1, and every symbol at a size no trace used.
    """

    seed: int = 0
    random_inputs: bool = True
    tolerances: Mapping[str, tuple[float, float]] | None = None
    providers: Sequence[str] = ("CPUExecutionProvider",)
    graph_optimization_level: str = "all"
    sizes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, int]] | None = None

    def tolerance(self, dtype: str) -> tuple[float, float]:
        table = dict(DEFAULT_TOLERANCES)
        table.update(self.tolerances or {})
        return table.get(dtype, EXACT)

    def verify(self, model: Any, fun: Any, /, *args: Any, **kwargs: Any) -> VerifyReport:
        """Run ``model`` and ``fun`` on the same inputs and compare every output (at
        every size of :attr:`sizes` when the model has dynamic dimensions)."""
        import onnxruntime as ort

        proto, path = _as_proto(model)
        io = _io_metadata(proto)
        dynamic = _dynamic_metadata(proto)
        call, _, _ = resolve_callable(fun)
        signature = normalize_inputs(args, kwargs)
        options = ort.SessionOptions()
        options.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[self.graph_optimization_level]
        try:
            source = path if path is not None else proto.SerializeToString()
            session = ort.InferenceSession(source, options, providers=list(self.providers))
        except Exception as exc:
            raise VerificationError(f"onnxruntime could not run the model: {exc}") from exc
        runs = self.size_assignments(dynamic) if dynamic and self.random_inputs else [None]
        reports: list[OutputReport] = []
        first_inputs: dict = {}
        for k, sizes in enumerate(runs):
            rng = np.random.default_rng(self.seed + k)
            outputs, feeds = self._run_once(session, io, call, signature, rng, dynamic, sizes)
            reports.extend(outputs)
            first_inputs = first_inputs or {n: (tuple(v.shape), str(v.dtype)) for n, v in feeds.items()}
        return VerifyReport(
            outputs=tuple(reports),
            device=str(mx.default_device()),
            onnxruntime_version=ort.__version__,
            mlx_version=mx.__version__,
            seed=self.seed if self.random_inputs else None,
            inputs=first_inputs,
        )

    def size_assignments(self, dynamic: Mapping) -> list[dict[str, int]]:
        """The ``{symbol: size}`` runs of a multi-size check (see :attr:`sizes`)."""
        symbols = dict(dynamic["symbols"])
        steps = {s: int(dynamic.get("multiple_of", {}).get(s, 1)) for s in symbols}
        ranges = {s: dynamic.get("range", {}).get(s, [steps[s], None]) for s in symbols}
        if self.sizes is None:  # the example, the smallest, and one no trace used (in range)
            beyond = {s: _untraced_size(v, steps[s], *ranges[s]) for s, v in symbols.items()}
            return [symbols, {s: ranges[s][0] for s in symbols}, beyond]
        if isinstance(self.sizes, Mapping):
            unknown = set(self.sizes) - set(symbols)
            if unknown:
                raise VerificationError(f"sizes names {sorted(unknown)}, but the model's dynamic symbols are {sorted(symbols)}")
            grid = [[(s, int(v)) for v in self.sizes.get(s, [symbols[s]])] for s in symbols]
            return [dict(row) for row in itertools.product(*grid)]
        rows = []
        for row in self.sizes:
            unknown = set(row) - set(symbols)
            if unknown:
                raise VerificationError(f"sizes names {sorted(unknown)}, but the model's dynamic symbols are {sorted(symbols)}")
            rows.append({**symbols, **{s: int(v) for s, v in row.items()}})
        return rows

    def _run_once(self, session, io, call, signature, rng, dynamic, sizes):
        axes_of = {name: {int(a): s for a, s in axes.items()} for name, axes in (dynamic or {}).get("inputs", {}).items()}
        by_slot = {}
        for entry in io["inputs"]:
            by_slot[entry["position"] if entry["keyword"] is None else entry["keyword"]] = entry["name"]

        def fresh(array, slot):
            if not (self.random_inputs and isinstance(array, mx.array)):
                return array
            shape = tuple(array.shape)
            axes = axes_of.get(by_slot.get(slot), {})
            if sizes is not None and axes:
                shape = tuple(sizes[axes[a]] if a in axes else d for a, d in enumerate(shape))
            return random_like(array, rng, shape)

        call_args, slot = [], 0
        for a in signature.args:
            call_args.append(fresh(a, slot) if isinstance(a, mx.array) else a)
            slot += isinstance(a, mx.array)
        call_kwargs = {k: fresh(v, k) for k, v in sorted(signature.kwargs.items())}
        positional = [a for a in call_args if isinstance(a, mx.array)]
        feeds: dict[str, np.ndarray] = {}
        for entry in io["inputs"]:
            array = positional[entry["position"]] if entry["keyword"] is None else call_kwargs[entry["keyword"]]
            feeds[entry["name"]] = dtypes.array_to_numpy(array)
        try:
            reference = call(*call_args, **call_kwargs)
            want, _ = flatten_outputs(reference)
            mx.eval(want)
        except Exception as exc:
            if sizes is None:
                raise
            raise VerificationError(f"MLX could not run the function at {_sizes_text(sizes)}: {exc}") from exc
        try:
            got = run_session(session, [o["name"] for o in io["outputs"]], _as_declared_types(session, feeds))
        except Exception as exc:
            where = f" at {_sizes_text(sizes)}" if sizes is not None else ""
            raise VerificationError(f"onnxruntime could not run the model{where}: {exc}") from exc
        at = _sizes_text(sizes) if sizes is not None else ""
        reports = []
        for entry, g, w in zip(io["outputs"], got, want):
            dname = dtypes.name(w.dtype)
            report = compare(entry["name"], np.asarray(g), dtypes.array_to_numpy(w), dname, self.tolerance(dname))
            reports.append(replace(report, at=at) if at else report)
        return reports, feeds


def _untraced_size(example: int, step: int, low: int, high: int | None) -> int:
    """Three steps past the example (no trace uses it), or the middle of a range too short for that."""
    if high is None or example + 3 * step <= high:
        return example + 3 * step
    return (low + high) // 2 // step * step


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return " ".join(f"{s}={v}" for s, v in sizes.items())


_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(bfloat16)": ml_dtypes.bfloat16,
}


def _as_declared_types(session, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cast float feeds to the types the model declares (an export's float policy may
    carry bfloat16 inputs as float32, for example)."""
    declared = {i.name: _ORT_TYPES.get(i.type) for i in session.get_inputs()}
    out = {}
    for name, array in feeds.items():
        target = declared.get(name)
        is_float = array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16
        out[name] = array.astype(target) if target is not None and is_float and array.dtype != target else array
    return out


def run_session(session, output_names: list[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """``session.run`` that also takes and returns bfloat16 (as ml_dtypes arrays)."""
    import ctypes

    import onnxruntime as ort

    values = {}
    for key, array in feeds.items():
        array = np.ascontiguousarray(array).reshape(np.shape(array))  # ascontiguousarray makes 0-d arrays 1-d
        if array.dtype == ml_dtypes.bfloat16:
            values[key] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), onnx.TensorProto.BFLOAT16)
        else:
            values[key] = ort.OrtValue.ortvalue_from_numpy(array)
    results = []
    for out in session.run_with_ort_values(output_names, values):
        if out.data_type() == "tensor(bfloat16)":
            shape = tuple(out.shape())
            count = int(np.prod(shape, dtype=np.int64))
            if count:
                raw = (ctypes.c_uint16 * count).from_address(out.data_ptr())
                bits = np.frombuffer(raw, dtype=np.uint16, count=count).copy()
            else:
                bits = np.zeros(0, np.uint16)
            results.append(bits.view(ml_dtypes.bfloat16).reshape(shape))
        else:
            results.append(out.numpy())
    return results


def _as_proto(model: Any) -> tuple[onnx.ModelProto, str | None]:
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(str(model), load_external_data=False), str(model)
    if isinstance(model, ir.Model):
        return ir.serde.serialize_model(model), None
    if isinstance(model, onnx.ModelProto):
        return model, None
    raise VerificationError(f"expected an onnx.ModelProto or a path to a .onnx file, got {type(model).__name__}")


def _dynamic_metadata(proto: onnx.ModelProto) -> dict | None:
    for prop in proto.metadata_props:
        if prop.key == DYNAMIC_METADATA_KEY:
            return json.loads(prop.value)
    return None


def _io_metadata(proto: onnx.ModelProto) -> dict:
    for prop in proto.metadata_props:
        if prop.key == IO_METADATA_KEY:
            return json.loads(prop.value)
    raise VerificationError(
        "the model has no mlx2onnx input/output metadata; verify only models exported by mlx2onnx"
    )


def verify(model: Any, fun: Any, /, *args: Any, **kwargs: Any) -> VerifyReport:
    """Check ``model`` against ``fun`` on seeded random inputs shaped like the example inputs.

    ``args`` and ``kwargs`` are the example inputs, with the same convention as
    :func:`mlx2onnx.export`. Use :class:`Verifier` for options (seed, the caller's own
    inputs, tolerances).
    """
    return Verifier().verify(model, fun, *args, **kwargs)
