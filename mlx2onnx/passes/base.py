"""What a pass is: a named rewrite of the assembled model with a contract.

A :class:`Pass` says what it requires (a lowest opset, the onnxruntime kernels its fused
ops need, a dynamic export) and what it guarantees. :func:`run` applies a list of passes
in order, skips those whose requirements the export does not meet, holds every pass to
the contract all passes share (graph outputs keep their names, element types and
order; an output a pass replaced keeps the declared shape), and returns the number of rewrites each made (the ``mlx2onnx.passes`` metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mlx.core as mx
import onnx_ir as ir

from ..errors import PassContractError
from ..translate import kernels
from ..translate.opset import FEATURES, has
from ..translate.settings import ExportSettings


@dataclass(frozen=True)
class Kernel:
    """An ONNX op onnxruntime must run in float32 at the export's opset (``constraint``
    names the type parameter the float32 binds to)."""

    op_type: str
    constraint: str | None = "T"

    def available(self, opset: int) -> bool:
        return kernels.has_kernel(self.op_type, mx.float32, opset, self.constraint)


@dataclass(frozen=True)
class Pass:
    """``run(model, **inputs)`` returns the rewrites it made; ``inputs`` names what it reads
    from the export (``opset``, ``plan``). Module parameters are marked on their values
    (:func:`mlx2onnx.translate.markers.is_parameter`)."""

    name: str
    run: Callable[..., int]
    ensures: str
    feature: str = ""  # the opset feature (translate.opset.FEATURES) the rewrite emits, if any
    kernels: tuple[Kernel, ...] = ()
    dynamic_only: bool = False
    portable_only: bool = False
    inputs: tuple[str, ...] = ()

    def requires(self) -> str:
        """The requirements in words ('' when the pass always runs)."""
        parts = [f"opset >= {FEATURES[self.feature]}"] if self.feature else []
        parts += [f"onnxruntime runs {k.op_type} (float32)" for k in self.kernels]
        parts += ["dynamic inputs"] if self.dynamic_only else []
        parts += ["the portable target"] if self.portable_only else []
        return ", ".join(parts)

    def applies(self, settings: ExportSettings, dynamic: bool) -> bool:
        if (self.feature and not has(settings.opset, self.feature)) or (self.dynamic_only and not dynamic):
            return False
        if self.portable_only and not settings.portable:
            return False
        return all(k.available(settings.opset) for k in self.kernels)


def _has_dynamic_inputs(model: ir.Model) -> bool:
    return any(v.shape is not None and not all(isinstance(d, int) for d in v.shape) for v in model.graph.inputs)


def _outputs(model: ir.Model) -> list[tuple[str | None, object]]:
    return [(v.name, v.dtype) for v in model.graph.outputs]


def run(passes: list[Pass], model: ir.Model, settings: ExportSettings) -> dict[str, int]:
    """Apply ``passes`` in order; returns {pass name: rewrites} for the passes that ran."""
    available = {"opset": settings.opset, "plan": settings.plan}
    dynamic = _has_dynamic_inputs(model)
    declared = [(v.shape, v.type) for v in model.graph.outputs]
    report: dict[str, int] = {}
    for step in passes:
        if not step.applies(settings, dynamic):
            continue
        before = _outputs(model)
        report[step.name] = int(step.run(model, **{k: available[k] for k in step.inputs}))
        for value, (shape, type_) in zip(model.graph.outputs, declared):
            # an output a pass re-made has no shape or type yet (a CSE made it a handler-internal
            # value; the optimizer re-made one of two outputs of one value): the declared ones
            value.shape = value.shape if value.shape is not None else shape
            value.type = value.type if value.type is not None else type_
        if _outputs(model) != before:
            raise PassContractError(f"pass {step.name} changed the graph outputs: {before} -> {_outputs(model)}")
    return report
