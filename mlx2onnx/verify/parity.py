"""Parity harness: run the ONNX model in a runtime (onnxruntime by default) and the function in MLX, compare.

The inputs are fresh seeded random arrays with the shapes and dtypes of the example
inputs (or the caller's own arrays), fed to both sides. Each output gets its max
absolute and relative error and a pass/fail under per-dtype tolerances.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import mlx.core as mx
import numpy as np
import onnx
import onnx_ir as ir

from .. import dtypes
from ..capture.inputs import (
    flatten_outputs,
    normalize_inputs,
    resolve_callable,
)
from ..errors import CheckOptionError, UserFunctionError, VerificationError
from ..io import metadata
from ..translate.markers import PRIMITIVE_TAG
from . import reference as references
from .compare import (
    DEFAULT_TOLERANCES,
    EXACT,
    FLOAT_DTYPES,
    OutputReport,
    check_tolerance,
    compare,
    failed,
)
from .inputs import random_like
from .report import VerifyReport
from .runtimes import RUNTIMES, declared_feeds, open_runtime
from .runtimes.arithmetic import Arithmetic
from .runtimes.registry import unknown as unknown_runtime
from .session import LEVELS
from .weights import weight_problems

__all__ = ["DEFAULT_TOLERANCES", "EXACT", "OutputReport", "VerifyReport", "Verifier", "compare", "verify"]


@dataclass(frozen=True)
class Verifier:
    """Options of the parity check.

    Attributes:
        seed: seed of the random inputs (an integer >= 0).
        random_inputs: draw fresh random inputs shaped like the example inputs (default);
            ``False`` feeds the example inputs themselves.
        tolerances: ``{"float32": (atol, rtol), ...}`` overriding :data:`DEFAULT_TOLERANCES`
            (finite, >= 0).
        runtime: the runtime that runs the model, one of :data:`mlx2onnx.verify.runtimes.RUNTIMES`
            (``"onnxruntime"``, ``"onnxruntime-web"``, ``"onnxruntime-node"``, ``"openvino"``,
            ``"tract"``); it must be installed.
        runtime_options: the options the runtime runs with, as the user's deployment sets
            them: onnxruntime's session config entries (``{"session.qdq_matmulnbits_accuracy_level":
            "0"}``, also for onnxruntime-web and -node), OpenVINO's compile properties
            (``{"INFERENCE_PRECISION_HINT": "f32"}``). Default none: the runtime's own
            defaults, as a plain session has them. The report lists them, and where the
            runtime then computes with less precision than MLX (int8 activations, bfloat16
            inference) it says so and compares float outputs at that arithmetic's tolerance.
        providers: onnxruntime execution providers (onnxruntime only).
        graph_optimization_level: onnxruntime's level (``"all"``, ``"extended"``, ``"basic"``,
            ``"disabled"``; onnxruntime only).
        sizes: for a model with dynamic dimensions, the sizes to check it at: a list of
            ``{symbol: size}``, or ``{symbol: [sizes]}`` for every combination. Default:
            the example sizes, every symbol at 1, and every symbol at a size no trace used.
        compare_weights: before the outputs, compare the model's parameter initializers
            with the callable's parameters (a factory that makes new random weights each
            call would otherwise look like an exporter bug).
        reference: what MLX computes the reference on: ``"device"`` (default) MLX's default
            device as it is, which on a CUDA GPU or an M5-class Metal GPU computes float32
            matrix products in TF32 unless ``MLX_ENABLE_TF32=0``: the report then says so and
            compares float outputs at TF32's tolerance; ``"float32"`` a full float32
            reference: where the device would use TF32, MLX runs on its CPU stream instead
            (:mod:`mlx2onnx.verify.reference`).
    """

    seed: int = 0
    random_inputs: bool = True
    tolerances: Mapping[str, tuple[float, float]] | None = None
    providers: Sequence[str] = ("CPUExecutionProvider",)
    graph_optimization_level: str = "all"
    sizes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, int]] | None = None
    compare_weights: bool = True
    runtime: str = "onnxruntime"
    runtime_options: Mapping[str, str] | None = None
    reference: str = "device"

    def __post_init__(self) -> None:
        if self.reference not in references.REFERENCES:
            raise CheckOptionError(
                f"reference={self.reference!r}: use 'device' (MLX's default device as it computes) "
                "or 'float32' (a full float32 reference)"
            )
        if self.runtime not in RUNTIMES:
            raise CheckOptionError(unknown_runtime(self.runtime))
        options = self.runtime_options or {}
        if not isinstance(options, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, (str, int, float)) and not isinstance(v, bool)
            for k, v in options.items()
        ):
            raise CheckOptionError(
                f"runtime_options={self.runtime_options!r}: give a mapping of option names to "
                "string (or number) values, e.g. {'INFERENCE_PRECISION_HINT': 'f32'}"
            )
        if options and self.runtime == "tract":
            raise CheckOptionError(f"runtime_options: tract takes no options (given {sorted(options)})")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool) or self.seed < 0:
            raise CheckOptionError(f"seed={self.seed!r}: the seed must be an integer >= 0")
        for dtype, pair in (self.tolerances or {}).items():
            try:
                atol, rtol = pair
                check_tolerance(atol, rtol, f"tolerance for {dtype}")
            except (TypeError, ValueError) as exc:
                raise CheckOptionError(
                    str(exc)
                    if isinstance(exc, ValueError) and "tolerance" in str(exc)
                    else f"tolerances[{dtype!r}] = {pair!r} is not an (atol, rtol) pair"
                ) from None
        if self.graph_optimization_level not in LEVELS:
            raise CheckOptionError(
                f"graph_optimization_level={self.graph_optimization_level!r}: use one of {', '.join(LEVELS)}"
            )
        flat = []
        if isinstance(self.sizes, Mapping):
            for v in self.sizes.values():
                flat += list(v) if isinstance(v, (list, tuple)) else [v]
        else:
            for row in self.sizes or ():
                flat += list(row.values())
        bad = [v for v in flat if not isinstance(v, (int, np.integer)) or not 0 <= v <= metadata.MAX_CHECK_SIZE]
        if bad:
            raise CheckOptionError(f"sizes: {bad[0]!r} is not a size from 0 to {metadata.MAX_CHECK_SIZE}")

    def tolerance(self, dtype: str) -> tuple[float, float]:
        table = dict(DEFAULT_TOLERANCES)
        table.update(self.tolerances or {})
        return table.get(dtype, EXACT)

    def compared_as(self, dtype: str, held: str | None, trades: Sequence[Arithmetic]) -> str:
        """The tolerance row an output of ``dtype`` is compared at: its dtype's, the
        narrower dtype it was computed through (``held``), or the arithmetic the runtime
        (or the MLX reference: TF32) chose for float outputs, whichever allows the most."""
        rows = [held or dtype]
        if dtype in FLOAT_DTYPES:
            rows += [t.precision for t in trades]
        return max(rows, key=lambda row: self.tolerance(row))

    def verify(self, model: Any, fun: Any, /, *args: Any, **kwargs: Any) -> VerifyReport:
        """Run ``model`` and ``fun`` on the same inputs and compare every output (at
        every size of :attr:`sizes` when the model has dynamic dimensions)."""
        proto, path = _as_proto(model)
        meta = metadata.read(proto)
        call, module, _ = resolve_callable(fun)
        signature = normalize_inputs(args, kwargs)
        problems = []
        if self.compare_weights:
            problems += weight_problems(proto, None if path is None else str(Path(path).parent), call, module)
        listed = set(meta.output_names())
        unlisted = [o.name for o in proto.graph.output if o.name not in listed]
        if unlisted:
            problems.append(f"the model has outputs {unlisted} that its mlx2onnx metadata does not list")
        runs = self.size_assignments(meta.dynamic) if meta.dynamic and self.random_inputs else [None]
        reports: list[OutputReport] = []
        first_inputs: dict = {}
        reference, on_cpu = references.chosen(self.reference)
        with open_runtime(
            self.runtime,
            path if path is not None else proto.SerializeToString(),
            self.graph_optimization_level,
            self.providers,
            self.options(),
        ) as runner:
            trades = runner.arithmetic(proto)
            widened = [*trades, *reference.arithmetic()]
            for k, sizes in enumerate(runs):
                rng = np.random.default_rng(self.seed + k)
                with mx.stream(mx.cpu) if on_cpu else contextlib.nullcontext():
                    outputs, feeds = self._run_once(runner, proto, meta, call, signature, rng, sizes, widened)
                reports.extend(outputs)
                first_inputs = first_inputs or {n: (tuple(v.shape), str(v.dtype)) for n, v in feeds.items()}
        return VerifyReport(
            outputs=tuple(reports),
            device=reference.device,
            runtime_version=runner.version,
            mlx_version=mx.__version__,
            seed=self.seed if self.random_inputs else None,
            inputs=first_inputs,
            problems=tuple(problems),
            runtime=self.runtime,
            runtime_options=self.options(),
            arithmetic=tuple(str(t) for t in trades),
            reference=reference.to_dict(),
            hints=() if all(r.passed for r in reports) else failure_hints(proto),
        )

    def options(self) -> dict[str, str]:
        """The runtime options as the runtime takes them (strings)."""
        return {k: str(v) for k, v in (self.runtime_options or {}).items()}

    def size_assignments(self, dynamic: metadata.DynamicSizes) -> list[dict[str, int]]:
        """The ``{symbol: size}`` runs of a multi-size check (see :attr:`sizes`)."""
        symbols = dict(dynamic.symbols)
        if self.sizes is None:  # the example, the smallest, and one no trace used (in range)
            beyond = {s: _untraced_size(v, dynamic.step(s), *dynamic.bounds(s)) for s, v in symbols.items()}
            return [symbols, {s: dynamic.bounds(s)[0] for s in symbols}, beyond]
        if isinstance(self.sizes, Mapping):
            unknown = set(self.sizes) - set(symbols)
            if unknown:
                raise CheckOptionError(
                    f"sizes names {sorted(unknown)}, but the model's dynamic symbols are {sorted(symbols)}"
                )
            grid = [[(s, int(v)) for v in self.sizes.get(s, [symbols[s]])] for s in symbols]
            return [dict(row) for row in itertools.product(*grid)]
        rows = []
        for row in self.sizes:
            unknown = set(row) - set(symbols)
            if unknown:
                raise CheckOptionError(
                    f"sizes names {sorted(unknown)}, but the model's dynamic symbols are {sorted(symbols)}"
                )
            rows.append({**symbols, **{s: int(v) for s, v in row.items()}})
        return rows

    def _run_once(self, runner, proto, meta, call, signature, rng, sizes, trades=()):
        axes_of = {} if meta.dynamic is None else meta.dynamic.axes
        by_slot = {b.slot: b.name for b in meta.inputs}

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
        for binding in meta.inputs:
            problem = binding.missing(positional, call_kwargs)
            if problem:
                raise VerificationError(problem)
            feeds[binding.name] = dtypes.array_to_numpy(binding.pick(positional, call_kwargs))
        where = f" at {_sizes_text(sizes)}" if sizes is not None else ""
        names = meta.output_names()
        try:  # first: the runtime checks indices, so inputs MLX would read out of bounds never reach MLX
            got = runner.run(declared_feeds(proto, feeds), names)
        except Exception as exc:
            raise VerificationError(
                f"{self.runtime} could not run the model{where}: {exc} (MLX was not run on these inputs: if an "
                "input indexes something, give example inputs that span its valid range, or use the example inputs)"
            ) from exc
        try:
            want, _ = flatten_outputs(call(*call_args, **call_kwargs))
            mx.eval(want)
        except VerificationError:
            raise
        except Exception as exc:
            if sizes is None:
                raise UserFunctionError("the function (during the check)", exc) from exc
            raise VerificationError(f"MLX could not run the function{where}: {exc}") from exc
        at = _sizes_text(sizes) if sizes is not None else ""
        reports = []
        for k in range(max(len(names), len(want))):
            if k >= len(want):
                reports.append(
                    failed(
                        names[k],
                        "?",
                        np.shape(got[k]),
                        EXACT,
                        f"the model has this output; the function returns only {len(want)} output(s)",
                        at,
                    )
                )
                continue
            dname = dtypes.name(want[k].dtype)
            if k >= len(names):
                reports.append(
                    failed(
                        f"output_{k}",
                        dname,
                        want[k].shape,
                        self.tolerance(dname),
                        f"the function returns this output; the model has only {len(names)} output(s)",
                        at,
                    )
                )
                continue
            expected = dtypes.to_numpy(meta.carried(want[k].dtype))
            held = meta.outputs[k].precision  # computed through bfloat16: bfloat16's tolerance
            row = self.compared_as(dname, held, trades)
            shown = f"{dname}({row})" if row != dname else dname
            report = compare(
                names[k],
                np.asarray(got[k]),
                dtypes.array_to_numpy(want[k]),
                shown,
                self.tolerance(row),
                order_free_axis=meta.outputs[k].order_free_axis,
                expected_dtype=expected,
            )
            reports.append(replace(report, at=at) if at else report)
        return reports, feeds


def _untraced_size(example: int, step: int, low: int, high: int | None) -> int:
    """Three steps past the example (no trace uses it), or the middle of a range too short for that."""
    if high is None or example + 3 * step <= high:
        return example + 3 * step
    return (low + high) // 2 // step * step


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return " ".join(f"{s}={v}" for s, v in sizes.items())


def _as_proto(model: Any) -> tuple[onnx.ModelProto, str | None]:
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if path.is_dir():
            raise VerificationError(f"{str(path)!r} is a directory; give the path of the .onnx file")
        if not path.is_file():
            raise VerificationError(f"no such model file: {str(path)!r}")
        try:
            return onnx.load(str(path), load_external_data=False), str(path)
        except Exception as exc:
            raise VerificationError(f"{str(path)!r} is not a readable ONNX model: {exc}") from None
    if isinstance(model, ir.Model):
        model = ir.serde.serialize_model(model)
    if isinstance(model, onnx.ModelProto):
        external = sorted(
            {
                e.value
                for t in model.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL
                for e in t.external_data
                if e.key == "location"
            }
        )
        if external:
            raise VerificationError(
                f"this in-memory model keeps its weights in external data ({', '.join(external)}), which is found "
                "relative to the model's own file, and an in-memory model has none: verify the file instead "
                "(mlx2onnx.verify('path/to/model.onnx', ...))"
            )
        return model, None
    raise VerificationError(f"expected an onnx.ModelProto or a path to a .onnx file, got {type(model).__name__}")


def verify(model: Any, fun: Any, /, *args: Any, **kwargs: Any) -> VerifyReport:
    """Check ``model`` against ``fun`` on seeded random inputs shaped like the example inputs.

    ``args`` and ``kwargs`` are the example inputs, with the same convention as
    :func:`mlx2onnx.export`. Use :class:`Verifier` for options (seed, the caller's own
    inputs, tolerances).
    """
    return Verifier().verify(model, fun, *args, **kwargs)


def failure_hints(proto: onnx.ModelProto) -> tuple[str, ...]:
    """What in ``proto`` may explain a failed comparison: random draws from the key the
    function was traced with (a model left in training mode: Dropout)."""
    tags = [p.value for node in proto.graph.node for p in node.metadata_props if p.key == PRIMITIVE_TAG]
    draws = sorted({t for t in tags if t.startswith("RandomBits:")})
    if not draws:
        return ()
    return (
        f"the model draws random numbers ({len(draws)} MLX RandomBits record(s)) from the key it was traced "
        "with, while MLX draws new ones at every call, so the two cannot agree. A model left in training mode "
        "does this (Dropout): call model.eval() before exporting; or pass the random key as an input",
    )
