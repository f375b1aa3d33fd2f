"""What ``localize`` found: each record checked, and the report that names the first record
whose ONNX translation diverges from MLX (:mod:`mlx2onnx.verify.localize`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .compare import OutputReport


@dataclass(frozen=True)
class RecordCheck:
    """One record's ONNX output compared with MLX evaluated on the ONNX side's inputs."""

    index: int
    name: str
    arguments: str
    inputs: tuple[str, ...]
    output: str  # the ONNX value name
    local: OutputReport  # ONNX vs MLX on the same (ONNX-side) inputs
    chained: OutputReport | None  # ONNX vs the all-MLX reference value (accumulated error)
    reconstructed: tuple[str, ...] = ()  # inputs the model does not expose, recomputed in MLX

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "primitive": self.name,
            "arguments": self.arguments,
            "inputs": list(self.inputs),
            "onnx_value": self.output,
            "max_abs_error": self.local.max_abs_error,
            "max_rel_error": self.local.max_rel_error,
            "atol": self.local.atol,
            "rtol": self.local.rtol,
            "mismatches": self.local.mismatches,
            "passed": self.local.passed,
            "chained_max_abs_error": None if self.chained is None else self.chained.max_abs_error,
            "reconstructed_inputs": list(self.reconstructed),
        }


@dataclass
class LocalizeReport:
    first: RecordCheck | None = None
    divergent: list[RecordCheck] = field(default_factory=list)
    checked: int = 0
    records: int = 0
    skipped: list[tuple[int, str, str]] = field(default_factory=list)  # (index, name, reason)
    unexposed: list[tuple[int, str]] = field(default_factory=list)
    problem: str = ""

    def to_dict(self) -> dict:
        return {
            "first_divergent": None if self.first is None else self.first.to_dict(),
            "divergent": [c.to_dict() for c in self.divergent],
            "records": self.records,
            "checked": self.checked,
            "skipped": [{"index": i, "primitive": n, "reason": r} for i, n, r in self.skipped],
            "unexposed": [{"index": i, "primitive": n} for i, n in self.unexposed],
            "problem": self.problem,
        }

    def __str__(self) -> str:
        lines = ["localize:"]
        if self.problem:
            lines.append(f"  {self.problem}")
        lines.append(
            f"  {self.checked} of {self.records} records checked locally (each evaluated in MLX on the "
            f"ONNX side's inputs); {len(self.skipped)} skipped, {len(self.unexposed)} without an ONNX value"
        )
        if self.first is None:
            if not self.problem:
                lines.append(
                    "  no single primitive diverges beyond its tolerance: the mismatch builds up "
                    "gradually, or lies in records that could not be checked"
                )
        else:
            c = self.first
            lines.append(
                f"  first divergent primitive: {c.name} (record {c.index})" + (f" {c.arguments}" if c.arguments else "")
            )
            lines.append(f"    inputs:  {', '.join(c.inputs)}")
            lines.append(
                f"    ONNX value {c.output}: max abs error {c.local.max_abs_error:.3g}, max rel error "
                f"{c.local.max_rel_error:.3g} (atol {c.local.atol:g}, rtol {c.local.rtol:g}), "
                f"{c.local.mismatches} of {int(np.prod(c.local.shape))} elements differ"
            )
            if c.local.problem:
                lines.append(f"    {c.local.problem}")
            if c.chained is not None:
                lines.append(f"    error against the all-MLX value at that point: {c.chained.max_abs_error:.3g}")
            if c.reconstructed:
                lines.append(
                    f"    note: the model does not expose input(s) {', '.join(c.reconstructed)} (optimised away); "
                    "they were recomputed in MLX, so the cause may lie in the records that produced them. "
                    "Export with --no-optimize to expose every intermediate."
                )
            later = [d for d in self.divergent[1:]]
            if later:
                shown = ", ".join(f"{d.name}:{d.index}" for d in later[:8])
                lines.append(f"    also diverging locally: {shown}" + (" ..." if len(later) > 8 else ""))
        reasons: dict[str, list[str]] = {}
        for index, name, reason in self.skipped:
            reasons.setdefault(f"{name}: {reason}", []).append(str(index))
        for text, indices in sorted(reasons.items()):
            lines.append(f"  skipped {text} (records {', '.join(indices[:6])}{' ...' if len(indices) > 6 else ''})")
        return "\n".join(lines)
