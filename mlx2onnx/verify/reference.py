"""The arithmetic of the MLX reference: the device it runs on, and whether that device
computes float32 matrix products in TF32.

MLX 0.32 computes float32 matrix products (matmul, batched and gathered matmul,
convolutions, fused attention, quantized products of float32 activations) with TF32
inputs, float16's 10-bit mantissa, where ``MLX_ENABLE_TF32`` is not 0 (read once, as
``atoi``; default 1) on CUDA GPUs, and on Metal GPUs with neural accelerators ("NAX":
architecture generation 17, 18 for the 'p' variants, on macOS 26.2 or later: M5 class).
MLX's CPU computes them in float32. A float32 reference in TF32 is off by about 1e-3 of a
product's terms, which a float32 tolerance of 1e-4 rejects for reasons that are not the
export's; so the check compares float outputs at the ``"tf32"`` row of
:data:`mlx2onnx.verify.compare.DEFAULT_TOLERANCES` then, and says so. Asked for a full
float32 reference (``Verifier(reference="float32")``), it runs MLX on its CPU stream
instead, where no product is TF32.

Every decision here is a function of data (device type, backend, environment, GPU
architecture, macOS version), so tests/verify/test_reference.py checks it on any machine.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from typing import Mapping

import mlx.core as mx

from .runtimes.arithmetic import Arithmetic

TF32 = "tf32"  # the tolerance row of a reference computed in TF32
TF32_VARIABLE = "MLX_ENABLE_TF32"
REFERENCES = ("device", "float32")  # Verifier(reference=...): MLX on its device as it is, or full float32


@dataclass(frozen=True)
class Reference:
    """Where MLX computed the reference outputs and in what arithmetic."""

    device: str  # "Device(gpu, 0)"
    backend: str  # "cpu", "cuda", "metal"
    tf32: bool  # float32 matrix products in TF32
    setting: str  # "MLX_ENABLE_TF32=1 (MLX's default)"
    why: str  # a sentence: why the products are (not) TF32
    moved: bool = False  # a full float32 reference asked for, run on the CPU stream instead of the device

    def arithmetic(self) -> tuple[Arithmetic, ...]:
        """What the reference trades, in the form a runtime's trades take: float outputs are
        compared at the loosest tolerance among them (``Verifier.compared_as``)."""
        return (Arithmetic("float32 matrix products in TF32", self.why, TF32),) if self.tf32 else ()

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "backend": self.backend,
            "tf32": self.tf32,
            "setting": self.setting,
            "why": self.why,
            "moved": self.moved,
        }


def tf32_setting(environ: Mapping[str, str]) -> tuple[bool, str]:
    """MLX's reading of ``MLX_ENABLE_TF32`` (C ``atoi``: leading digits, else 0; unset: 1)."""
    value = environ.get(TF32_VARIABLE)
    if value is None:
        return True, f"{TF32_VARIABLE} not set: MLX's default, 1"
    match = re.match(r"\s*[+-]?\d+", value)
    return (int(match.group()) != 0 if match else False), f"{TF32_VARIABLE}={value}"


def neural_accelerators(architecture: str, macos: tuple[int, ...]) -> bool:
    """Whether a Metal GPU of ``architecture`` ("applegpu_g17s") has the neural
    accelerators MLX runs TF32 products on: generation >= 17 (>= 18 for 'p'), macOS >= 26.2."""
    match = re.search(r"g(\d+)([a-z])$", architecture or "")
    if not match or tuple(macos) < (26, 2):
        return False
    generation, variant = int(match.group(1)), match.group(2)
    return generation >= (18 if variant == "p" else 17)


def decide(
    device: str, backend: str, environ: Mapping[str, str], architecture: str = "", macos: tuple[int, ...] = ()
) -> Reference:
    """The reference arithmetic of MLX on ``device`` (``str(mx.default_device())``) with
    ``backend`` ("cpu", "cuda" or "metal"): a pure function of its arguments."""
    enabled, setting = tf32_setting(environ)
    if backend == "cpu":
        return Reference(
            device,
            backend,
            False,
            setting,
            f"MLX's CPU computes float32 products in float32 ({TF32_VARIABLE} concerns GPUs only)",
        )
    if backend == "metal" and not neural_accelerators(architecture, macos):
        return Reference(
            device,
            backend,
            False,
            setting,
            f"this Metal GPU ({architecture or 'unknown'}) has no "
            "neural accelerators: MLX computes float32 products in float32",
        )
    where = "on CUDA" if backend == "cuda" else f"on this Metal GPU's neural accelerators ({architecture})"
    if not enabled:
        return Reference(
            device, backend, False, setting, f"{setting}: MLX computes float32 products in float32 {where}"
        )
    return Reference(
        device, backend, True, setting, f"MLX computes float32 matrix products in TF32 {where} ({setting})"
    )


def current(environ: Mapping[str, str] | None = None) -> Reference:
    """The reference arithmetic of MLX's default device in this process."""
    device = mx.default_device()
    if device.type == mx.DeviceType.cpu:
        backend, architecture = "cpu", ""
    elif mx.cuda.is_available():
        backend, architecture = "cuda", ""
    else:
        backend, architecture = "metal", str(mx.metal.device_info().get("architecture", ""))
    macos = tuple(int(p) for p in platform.mac_ver()[0].split(".") if p.isdigit())
    return decide(str(device), backend, os.environ if environ is None else environ, architecture, macos)


def float32_instead(reference: Reference) -> Reference:
    """The reference a full-float32 check uses in place of a TF32 one: MLX's CPU stream."""
    return Reference(
        "Device(cpu, 0)",
        "cpu",
        False,
        reference.setting,
        f"full float32 reference asked for: MLX ran on its CPU stream, since {reference.device} "
        f"would compute float32 matrix products in TF32 ({reference.setting})",
        moved=True,
    )


def chosen(kind: str) -> tuple[Reference, bool]:
    """The reference of ``Verifier(reference=kind)``, and whether MLX must run it on its
    CPU stream (a full float32 reference where the device would use TF32)."""
    reference = current()
    if kind == "float32" and reference.tf32:
        return float32_instead(reference), True
    return reference, False
