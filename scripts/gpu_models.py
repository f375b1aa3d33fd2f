"""Export the bundled and zoo models with MLX on a device stream, check each, write JSON.

    python -m scripts.gpu_models --device gpu --out gpu-check/models.json
    python -m scripts.gpu_models --device cpu --only mlp      # the same run on this CPU

Run by ``scripts/gpu_check.sh`` on a machine with an NVIDIA GPU and ``mlx[cuda13]``
(or a Mac: Metal). For every model of the zoo matrix (``tests/support/zoo.py``: the bundled
models, mlx-lm architectures, vision, audio, 4-bit and bfloat16 models), with MLX's
default device set to ``--device``: trace and export, run the check (onnxruntime against
MLX on that device, fresh random inputs; the report says whether MLX computed float32
products in TF32 and compares at that tolerance), and count the fused records the trace
held (RMSNorm, RoPE, ScaledDotProductAttention, QuantizedMatmul, ...): on a GPU stream
these are the single records this CPU never emits. Exit status 0 when every model passed,
1 otherwise; the JSON has one entry per model either way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

import mlx.core as mx

HERE = os.path.dirname(os.path.abspath(__file__))

# records that exist only on a GPU stream (the CPU decomposes them before export)
FUSED = ("RMSNorm", "LayerNorm", "RoPE", "ScaledDotProductAttention", "RMSNormVJP", "LayerNormVJP", "Quantize")


def device_facts(device: str) -> dict:
    """What MLX reports about the device the run uses."""
    facts = {
        "requested": device,
        "default_device": str(mx.default_device()),
        "mlx": mx.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    try:
        facts["device_info"] = {
            k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in mx.device_info().items()
        }
    except Exception as exc:  # older MLX: mx.metal.device_info only
        facts["device_info"] = {"error": str(exc)}
    facts["cuda"] = bool(getattr(mx, "cuda", None) and mx.cuda.is_available())
    facts["metal"] = bool(mx.metal.is_available())
    return facts


def check_one(name: str, build) -> dict:
    import mlx2onnx

    start = time.perf_counter()
    entry: dict = {"model": name}
    try:
        model, args, kwargs = build()
        trace = mlx2onnx.capture(model, args, kwargs)
        counts = trace.primitive_counts()
        entry["fused_records"] = {k: counts[k] for k in sorted(counts) if k in FUSED or "QMM" in k or "Quantized" in k}
        entry["records"] = sum(counts.values())
        proto = mlx2onnx.Exporter().export_trace(trace)
        report = mlx2onnx.Verifier().verify(proto, model, *args, **kwargs)
        entry["status"] = "pass" if report.passed else "fail"
        entry["report"] = report.to_dict()
        if not report.passed:
            entry["text"] = str(report)
    except Exception as exc:  # a crash is a result too: recorded, and the run goes on
        entry["status"] = "error"
        entry["error"] = f"{type(exc).__name__}: {exc}"
        entry["traceback"] = traceback.format_exc(limit=8)
    entry["seconds"] = round(time.perf_counter() - start, 2)
    return entry


def run_models(only: list[str]) -> list[dict]:
    from tests.support import zoo

    results = []
    for name in [n for n in zoo.MATRIX if not only or any(o in n for o in only)]:
        entry = check_one(name, zoo.MATRIX[name])
        fused = ", ".join(f"{k} {v}" for k, v in entry.get("fused_records", {}).items()) or "none"
        print(f"{entry['status'].upper():5} {name} ({entry['seconds']} s; fused records: {fused})", flush=True)
        if entry["status"] != "pass":
            print("      " + entry.get("error", entry.get("text", "")).replace("\n", "\n      "), flush=True)
        results.append(entry)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--out", default="gpu-check/models.json")
    parser.add_argument("--only", action="append", default=[], help="models whose name contains this (repeatable)")
    args = parser.parse_args(argv)
    if args.device == "gpu" and not mx.is_available(mx.gpu):
        print("MLX has no GPU here (mx.is_available(mx.gpu) is False): install mlx[cuda13] on an NVIDIA machine")
        return 2
    before = mx.default_device()
    mx.set_default_device(mx.gpu if args.device == "gpu" else mx.cpu)
    try:
        facts = device_facts(args.device)
        results = run_models(args.only)
    finally:
        mx.set_default_device(before)  # (the test suite calls main in its own process)
    tally = {s: sum(e["status"] == s for e in results) for s in ("pass", "fail", "error")}
    summary = {"device": facts, "tally": tally, "models": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print(f"{len(results)} models on {facts['default_device']}: {tally}; wrote {args.out}")
    return 0 if tally["pass"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
