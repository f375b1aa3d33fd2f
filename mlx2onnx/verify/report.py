"""A parity check's result: :class:`VerifyReport`, what ``verify`` and ``Verifier`` return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .compare import OutputReport


@dataclass(frozen=True)
class VerifyReport:
    outputs: tuple[OutputReport, ...]
    device: str
    runtime_version: str
    mlx_version: str
    seed: int | None
    inputs: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # what fails the check beyond the outputs (weights, interface)
    runtime: str = "onnxruntime"
    runtime_options: Mapping[str, str] = field(default_factory=dict)  # the user's (none: the runtime's defaults)
    arithmetic: tuple[str, ...] = ()  # where the runtime computed with less precision than MLX, and why
    reference: Mapping[str, Any] = field(default_factory=dict)  # MLX's device and arithmetic (references.Reference)
    hints: tuple[str, ...] = ()  # what a failure may come from, where the model shows it (not a verdict)

    @property
    def passed(self) -> bool:
        return not self.problems and bool(self.outputs) and all(o.passed for o in self.outputs)

    def __bool__(self) -> bool:  # so `assert mlx2onnx.verify(...)` reads naturally
        return self.passed

    @property
    def onnxruntime_version(self) -> str:
        """The runtime's version (kept for callers of the onnxruntime-only report)."""
        return self.runtime_version

    def __str__(self) -> str:
        head = (
            f"parity {'PASSED' if self.passed else 'FAILED'}: {self.runtime} {self.runtime_version} vs "
            f"MLX {self.mlx_version} on {self.device}"
            + (f", random inputs seed {self.seed}" if self.seed is not None else ", caller's inputs")
        )
        width = max((len(o.at) + 3 for o in self.outputs if o.at), default=0)
        options = ", ".join(f"{k}={v}" for k, v in self.runtime_options.items()) or "none: its defaults"
        lines = [head, f"  {self.runtime} options: {options}"]
        lines += [
            f"  {self.runtime} computes with {a}: float outputs compared at that arithmetic's tolerance"
            for a in self.arithmetic
        ]
        if self.reference.get("tf32"):
            lines.append(f"  MLX reference: {self.reference['why']}: float outputs compared at TF32's tolerance")
        elif self.reference.get("moved"):
            lines.append(f"  MLX reference: {self.reference['why']}")
        lines += [f"  problem: {p}" for p in self.problems]
        if self.outputs:
            lines.append(
                "  " + " " * width + f"{'output':<24} {'dtype':<9} {'shape':<18} {'largest error':<30} "
                f"tolerance: an element passes when |{self.runtime} - MLX| <= atol + rtol * |MLX|"
            )
        lines += ["  " + o.line(width) for o in self.outputs]
        return "\n".join(lines + [f"  hint: {h}" for h in self.hints])

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "device": self.device,
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            **({"onnxruntime_version": self.runtime_version} if self.runtime == "onnxruntime" else {}),
            "runtime_options": dict(self.runtime_options),
            "arithmetic": list(self.arithmetic),
            "reference": dict(self.reference),
            "mlx_version": self.mlx_version,
            "seed": self.seed,
            "problems": list(self.problems),
            "hints": list(self.hints),
            "inputs": {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.inputs.items()},
            "outputs": [o.to_dict() for o in self.outputs],
        }
