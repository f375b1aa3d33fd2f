"""The Python API: ``export``, ``Exporter`` and ``supported_primitives``.

Example inputs follow ``mx.export_function``'s calling convention exactly, so every
keyword argument of :func:`export` is a keyword input of the *function*. Export options
live on an :class:`Exporter` instead and can never collide with them::

    model = mlx2onnx.export(fun, x, mask=m)                 # default options
    model = mlx2onnx.Exporter(opset=18, path="f.onnx").export(fun, x, mask=m)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import mlx.core as mx
import onnx
import onnx_ir as ir

from .capture.dynamic import capture_dynamic
from .capture.symbolic import Plan
from .capture.trace import Trace
from .capture.tracing import capture
from .dtypes import FloatPolicy
from .errors import ExportOptionError
from .io.metadata import describe_export
from .io.saving import (
    check_output_path,
    needs_external_data,
    save_model,
    stream_strided,
)
from .op_mappings import FAMILIES  # noqa: F401  (importing the handlers registers them)
from .passes import optimize
from .translate import registry
from .translate.assemble import build_model
from .translate.context import Context
from .translate.dispatch import translate
from .translate.kernels import runs_bfloat16
from .translate.opset import MIN_OPSET, TARGETS, target_opset
from .translate.settings import QUANTIZED_WEIGHT_CHOICES, ExportSettings


@dataclass(frozen=True)
class Exporter:
    """Export options; call :meth:`export` with the function and its example inputs.

    Attributes:
        target: ``"portable"`` (default) writes a model every major runtime runs
            (onnxruntime, onnxruntime-web and -node, OpenVINO, tract: see
            docs/runtimes.md): opset 24 and only element types all of them compute in;
            ``"onnxruntime"`` targets the installed onnxruntime alone: the newest opset it
            fully runs and every type it has kernels for.
        opset: ONNX opset, honoured exactly (default: the target's, see :mod:`mlx2onnx.translate.opset`).
        input_names: graph input names, a list in MLX input order or a mapping from the
            default name (parameter name or keyword) to the new one.
        output_names: graph output names, in output order (default ``output_N``, or the
            keys when the function returns a dict).
        path: when set, the model is also written there atomically (``.onnx``).
        check: run ``onnx.checker.check_model(full_check=True)`` on the result.
        external_data: ``None`` stores weights beside the model only above 2 GB; ``True``
            always; ``False`` never.
        overwrite: replace an existing model at ``path`` (default False: an existing
            file is refused); only a model mlx2onnx wrote is ever replaced.
        bfloat16: how bfloat16 values are carried in the graph: ``"auto"`` (default:
            ``"float32"`` for the portable target; for target ``"onnxruntime"``, ``"keep"``
            when its CPU provider has bfloat16 kernels for the core ops), ``"keep"``,
            ``"float16"``, ``"float32"`` (computed in float32, rounded where MLX casts) or
            ``"emulate"`` (carried as float32 and rounded after every op, as MLX rounds:
            MLX's bfloat16 numbers bit for bit, at about twice the float32 graph's time).
        float16: ``"keep"`` (default), ``"float32"`` or ``"emulate"``.
        quantized_weights: how quantized weights are stored: ``"packed"`` (the default: a
            constant affine Linear weight in 4-bit blocks the runtime keeps packed and
            multiplies with its low-bit kernel, ``MatMulNBits`` computing in float32 as
            the file says, so default sessions give MLX's numbers; other quantized weights
            as ``"bytes"``), ``"bytes"`` (MLX's packed codes as bytes, unpacked exactly in
            the graph: every runtime reads it, tract included, but onnxruntime folds it to
            float32), ``"dequantize"`` (dequantized by MLX at export time, stored in the
            activation dtype) or ``"dequantizelinear"`` (as ``"packed"``, the blocks in
            standard ONNX, DequantizeLinear + MatMul, opset 21+: onnxruntime then computes
            them at its session's accuracy level, int8 activations by default).
        int8_activations: the 4-bit blocks ask the runtime to quantize their activations
            to int8 per block (``MatMulNBits`` accuracy level 4): faster prefill on CPUs
            with int8 dot products, about 1e-2 relative off MLX. On a trained model's
            activations that changes text: SmolLM2-135M-Instruct keeps MLX's 48 greedy tokens
            on 1 of 12 chat prompts (97% teacher-forced agreement, largest logit gap 1.8;
            docs/runtimes.md). Off by default; the check reports it and compares at the
            tolerance of that arithmetic.
        dynamic: dimensions that may change size, per input (parameter name or keyword):
            ``{"input_ids": {0: "batch", 1: "seq"}}``; equal symbol names are one size. The
            function is traced at several sizes to find which numbers follow them (see
            :mod:`mlx2onnx.dynamic`); a dimension the function fixes raises
            :class:`~mlx2onnx.errors.DynamicShapeError` naming the primitive that fixes it.
        optimize: run the optimisation passes of :mod:`mlx2onnx.passes` (drop redundant
            broadcasts, fold constants and weight transposes, fuse normalisations, CSE).
    """

    opset: int | None = None
    target: str = "portable"
    input_names: Sequence[str] | Mapping[str, str] | None = None
    output_names: Sequence[str] | None = None
    path: str | os.PathLike | None = None
    check: bool = True
    external_data: bool | None = None
    overwrite: bool = False
    bfloat16: str = "auto"
    float16: str = "keep"
    optimize: bool = True
    quantized_weights: str | None = None
    int8_activations: bool = False
    dynamic: Mapping[str, Mapping[int, str]] | None = None

    def with_options(self, **changes: Any) -> "Exporter":
        return replace(self, **changes)

    # -- pipeline stages ----------------------------------------------------------------
    def trace(self, fun: Any, /, *args: Any, **kwargs: Any) -> Trace:
        if self.dynamic:
            return capture_dynamic(fun, args, kwargs, self.dynamic)[0]
        return capture(fun, args, kwargs)

    def to_ir(self, fun: Any, /, *args: Any, **kwargs: Any) -> ir.Model:
        self.validate()
        if not self.dynamic:
            return self.trace_to_ir(capture(fun, args, kwargs))
        return self.trace_to_ir(*capture_dynamic(fun, args, kwargs, self.dynamic))

    def trace_to_ir(self, trace: Trace, plan: Plan | None = None) -> ir.Model:
        """The model of ``trace`` (merged over several sizes, with its ``plan``, when dynamic)."""
        return self._translate(trace, plan)

    def settings(self, plan: Plan | None = None) -> ExportSettings:
        """What the export of a trace knows (with ``plan`` for a dynamic one)."""
        return ExportSettings(
            opset=self.resolved_opset(),
            floats=FloatPolicy.of(self.float_policy(), self.emulated()),
            quantized_weights=self.quantized_weights or "packed",
            int8_activations=self.int8_activations,
            plan=plan,
            target=self.target,
        )

    def _translate(self, trace: Trace, plan: Plan | None = None) -> ir.Model:
        settings = self.settings(plan)
        input_names = self._input_names(trace)
        output_names = self._output_names(trace)
        ctx = Context(trace, settings)
        translate(trace, ctx, input_names)
        model = build_model(ctx, trace, input_names, output_names)
        report = optimize(model, settings) if self.optimize else None
        describe_export(model, trace, input_names, output_names, floats=settings.floats, plan=plan, passes=report)
        return model

    def emulated(self) -> tuple:
        """The narrow dtypes carried as float32 and rounded after every op."""
        return tuple(
            d for d, choice in ((mx.bfloat16, self.bfloat16), (mx.float16, self.float16)) if choice == "emulate"
        )

    def float_policy(self) -> dict:
        """MLX dtype -> the dtype that carries it in the graph, from ``bfloat16``/``float16``."""
        choices = {"keep": None, "float16": mx.float16, "float32": mx.float32, "emulate": mx.float32}
        if self.bfloat16 not in ("auto", *choices):
            raise ExportOptionError(
                f"bfloat16={self.bfloat16!r} is not a policy: use 'auto', 'keep', 'float16', 'float32' or 'emulate'"
            )
        if self.float16 not in ("keep", "float32", "emulate"):
            raise ExportOptionError(f"float16={self.float16!r} is not a policy: use 'keep', 'float32' or 'emulate'")
        policy = {}
        bf16 = self.bfloat16
        if bf16 == "auto":
            native = self.target == "onnxruntime" and runs_bfloat16(self.resolved_opset())
            bf16 = "keep" if native else "float32"  # tract has no bfloat16 type at all
        if choices[bf16] is not None:
            policy[mx.bfloat16] = choices[bf16]
        if self.float16 in ("float32", "emulate"):
            policy[mx.float16] = mx.float32
            if mx.bfloat16 in policy and policy[mx.bfloat16] == mx.float16:
                policy[mx.bfloat16] = mx.float32
        return policy

    def export(self, fun: Any, /, *args: Any, **kwargs: Any) -> onnx.ModelProto:
        """Trace ``fun(*args, **kwargs)`` and return the ONNX model (also saved to ``path``)."""
        return self._finish(self.to_ir(fun, *args, **kwargs))

    def export_trace(self, trace: Trace) -> onnx.ModelProto:
        """The ONNX model of an already captured (static) ``trace``, as :meth:`export` gives it."""
        self.validate()
        return self._finish(self.trace_to_ir(trace))

    def _finish(self, model: ir.Model) -> onnx.ModelProto:
        stream_strided(model)  # folded transposes are copied tile by tile, once
        external = self.external_data if self.external_data is not None else needs_external_data(model)
        if self.path is not None:  # weights stream to the file(s); no message holds them while writing
            save_model(model, self.path, external_data=external, check=self.check, overwrite=self.overwrite)
            if external:
                return onnx.load(str(self.path), load_external_data=False)
            return ir.serde.serialize_model(model)  # not onnx.load: that reads the file into bytes first
        proto = ir.serde.serialize_model(model)
        if self.check:
            onnx.checker.check_model(proto, full_check=True)
        return proto

    __call__ = export

    # -- option handling ----------------------------------------------------------------
    def resolved_opset(self) -> int:
        return target_opset(self.target) if self.opset is None else int(self.opset)

    def validate(self) -> None:
        """Raise ExportOptionError for an option that cannot work, before any work is done."""
        self.float_policy()
        if self.quantized_weights is not None and self.quantized_weights not in QUANTIZED_WEIGHT_CHOICES:
            raise ExportOptionError(
                f"quantized_weights={self.quantized_weights!r} is not a choice: use one of "
                f"{', '.join(repr(c) for c in QUANTIZED_WEIGHT_CHOICES)}"
            )
        if self.int8_activations and (self.quantized_weights or "packed") != "packed":
            raise ExportOptionError(
                f"int8_activations=True applies to the 4-bit blocks of quantized_weights='packed', not to "
                f"{self.quantized_weights!r}: drop one of the two (with 'dequantizelinear' onnxruntime's session "
                "option session.qdq_matmulnbits_accuracy_level decides)"
            )
        if self.target not in TARGETS:
            raise ExportOptionError(
                f"target={self.target!r} is not a target: use 'portable' (every major runtime) "
                "or 'onnxruntime' (the installed onnxruntime's newest opset and kernels)"
            )
        newest = onnx.defs.onnx_opset_version()
        if self.opset is not None and not (MIN_OPSET <= int(self.opset) <= newest):
            raise ExportOptionError(
                f"opset={self.opset} is not supported: choose an opset from {MIN_OPSET} to {newest} "
                f"(default {target_opset(self.target)} for target={self.target!r})"
            )
        if self.path is not None:
            check_output_path(self.path, self.overwrite)

    def _input_names(self, trace: Trace) -> list[str]:
        defaults = [i.label for i in trace.inputs]
        names = self.input_names
        if names is None:
            result = defaults
        elif isinstance(names, Mapping):
            unknown = set(names) - set(defaults)
            if unknown:
                raise ExportOptionError(
                    f"input_names refers to unknown inputs {sorted(unknown)}; the inputs are {defaults}"
                )
            result = [names.get(d, d) for d in defaults]
        else:
            names = list(names)
            if len(names) != len(defaults):
                raise ExportOptionError(
                    f"input_names has {len(names)} names but the function has {len(defaults)} array inputs ({defaults})"
                )
            result = names
        return _unique(result, "input_names")

    def _output_names(self, trace: Trace) -> list[str]:
        defaults = [o.label or f"output_{k}" for k, o in enumerate(trace.outputs)]
        if self.output_names is None:
            result = defaults
        else:
            result = list(self.output_names)
            if len(result) != len(defaults):
                raise ExportOptionError(
                    f"output_names has {len(result)} names but the function returns {len(defaults)} arrays"
                )
        taken = set(self._input_names(trace))
        clash = [n for n in result if n in taken]
        if clash:
            raise ExportOptionError(f"output names {clash} are also input names; ONNX names must be unique")
        return _unique(result, "output_names")


def _unique(names: list[str], what: str) -> list[str]:
    seen = set()
    for n in names:
        if not isinstance(n, str) or not n:
            raise ExportOptionError(f"{what} must be non-empty strings, got {n!r}")
        if n in seen:
            raise ExportOptionError(f"{what} contains {n!r} twice; names must be unique")
        seen.add(n)
    return names


def export(fun: Any, /, *args: Any, **kwargs: Any) -> onnx.ModelProto:
    """Export ``fun`` traced on the example inputs to an ONNX model, with default options.

    ``args`` and ``kwargs`` follow ``mx.export_function``: arrays (positional and keyword),
    or one tuple and/or one dict of arrays. Every keyword argument here is a keyword input
    of ``fun``; use :class:`Exporter` for options.
    """
    return Exporter().export(fun, *args, **kwargs)


def save(model: onnx.ModelProto | ir.Model, path: str | os.PathLike, **options: Any) -> Path:
    """Write a model atomically (external data above 2 GB). See :func:`mlx2onnx.io.saving.save_model`."""
    return save_model(model, path, **options)


def supported_primitives() -> list[str]:
    """The sorted names of every MLX primitive mlx2onnx can translate."""
    return registry.supported_primitives()
