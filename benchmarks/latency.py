"""onnxruntime CPU latency of mlx2onnx exports vs MLX's own CPU latency, and node counts.

    python benchmarks/latency.py [--models llama,resnet18,mlp] [--repeats 20] [--threads N] [--only-openblas] [--opset N]

MLX is timed twice, each in a fresh process: as installed (the mlx[cpu] wheel's reference
BLAS) and with Debian's OpenBLAS preloaded (LD_PRELOAD, the fair reference). mlx-onnx is
measured too when its separate venv exists (see README.md). ``--threads N`` gives both
runtimes N threads (onnxruntime's intra-op pool, OpenBLAS's); ``--only-openblas`` skips the
slow reference-BLAS MLX column.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import MLX_ONNX_VENV, alternate, fmt, median_time, openblas, run_worker  # noqa: E402


def mlx_worker(name: str, repeats: int, onnx_path: str | None, threads: int = 0) -> None:
    """Time MLX and (when ``onnx_path``) onnxruntime in the same process, alternating in
    small blocks, so that the load of a shared machine affects both alike."""
    import mlx.core as mx
    import numpy as np

    import models

    _, fn, args = models.MODELS[name]()
    calls = {"mlx_s": lambda: mx.eval(fn(*args))}
    if onnx_path:
        session = ort_session(onnx_path, threads)
        feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), args)}
        calls["ort_s"] = lambda: session.run(None, feeds)
    print(json.dumps(alternate(calls, repeats)))


def ort_session(path_or_bytes, threads: int = 0):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime's default (one per core)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path_or_bytes, options, providers=["CPUExecutionProvider"])


def ort_seconds(session, feeds: dict, repeats: int) -> float:
    return median_time(lambda: session.run(None, feeds), repeats)


def ours(name: str, folder: str, opset: int | None = None) -> dict:
    import numpy as np

    import mlx2onnx
    import models

    _, fn, args = models.MODELS[name]()
    trace = mlx2onnx.capture(fn, args, {})
    raw = mlx2onnx.Exporter(optimize=False, check=False, opset=opset).to_ir(fn, *args)
    path = os.path.join(folder, f"{name}.onnx")
    start = time.perf_counter()
    proto = mlx2onnx.Exporter(path=path, opset=opset).export(fn, *args)
    export_s = time.perf_counter() - start
    session = ort_session(path)
    feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), args)}
    got = session.run(None, feeds)[0]
    want = np.asarray(fn(*args))
    error = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12))
    return {
        "path": path,
        "primitives": len(trace.primitives),
        "nodes_before": len(raw.graph),
        "nodes_after": len(proto.graph.node),
        "export_s": export_s,
        "max_rel_error": error,
    }


def mlx_onnx_worker(name: str, repeats: int) -> None:
    """Runs inside the mlx-onnx venv: export with mlx-onnx, time it in onnxruntime."""
    import mlx_onnx  # type: ignore
    import numpy as np

    import models

    _, fn, args = models.MODELS[name]()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        mlx_onnx.export_onnx(path, fn, *args)
        import onnx

        nodes = len(onnx.load(path, load_external_data=False).graph.node)
        session = ort_session(path)
        feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), args)}
        print(json.dumps({"ort_s": ort_seconds(session, feeds, repeats), "nodes": nodes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama,resnet18,mlp")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--worker", choices=["mlx", "mlx-onnx"])
    parser.add_argument("--model")
    parser.add_argument("--onnx")
    parser.add_argument("--threads", type=int, default=0, help="threads for both runtimes (0: their defaults)")
    parser.add_argument("--only-openblas", action="store_true", help="skip the reference-BLAS MLX column")
    parser.add_argument("--opset", type=int, help="export at this opset (default: mlx2onnx's default)")
    opts = parser.parse_args()
    if opts.worker == "mlx":
        return mlx_worker(opts.model, opts.repeats, opts.onnx, opts.threads)
    if opts.worker == "mlx-onnx":
        return mlx_onnx_worker(opts.model, opts.repeats)

    blas = openblas()
    if blas is None:
        print("OpenBLAS not found (apt-get install -y libopenblas0-pthread): skipping the MLX+OpenBLAS column")
    mlx_onnx_python = MLX_ONNX_VENV / "bin" / "python"
    if not mlx_onnx_python.exists():
        print(f"no mlx-onnx venv at {MLX_ONNX_VENV}: skipping the mlx-onnx column")
    elif subprocess.run([str(mlx_onnx_python), "-c", "import mlx_onnx, mlx.core"], capture_output=True).returncode:
        print(f"mlx-onnx is not importable in {MLX_ONNX_VENV}: skipping the mlx-onnx column")
        mlx_onnx_python = MLX_ONNX_VENV / "missing"
    rows = []
    folder = tempfile.mkdtemp()
    for name in opts.models.split(","):
        ours_row = ours(name, folder, opts.opset)
        worker = [
            "--worker",
            "mlx",
            "--model",
            name,
            "--repeats",
            str(opts.repeats),
            "--onnx",
            ours_row["path"],
            "--threads",
            str(opts.threads),
        ]
        env = {"OPENBLAS_NUM_THREADS": str(opts.threads), "OMP_NUM_THREADS": str(opts.threads)} if opts.threads else {}
        mlx_ref = {} if opts.only_openblas else run_worker("latency.py", worker, env=env)
        mlx_blas = run_worker("latency.py", worker, env={"LD_PRELOAD": blas, **env}) if blas else {}
        other = {}
        if mlx_onnx_python.exists():
            other = run_worker(
                "latency.py",
                ["--worker", "mlx-onnx", "--model", name, "--repeats", str(opts.repeats)],
                python=str(mlx_onnx_python),
            )
        os.remove(ours_row["path"])
        rows.append((name, ours_row, mlx_ref, mlx_blas, other))
        print(
            json.dumps({"model": name, "ours": ours_row, "mlx": mlx_ref, "mlx_openblas": mlx_blas, "mlx_onnx": other}),
            flush=True,
        )

    print()
    print(
        "| model | MLX prims | ONNX nodes before -> after (ratio to prims) | ORT ms (beside MLX / beside MLX+OpenBLAS) | MLX ms | "
        "MLX+OpenBLAS ms | ORT / MLX | ORT / MLX+OpenBLAS | mlx-onnx ORT / MLX+OpenBLAS |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, o, ref, fast, other in rows:
        mlx_ms = ref.get("mlx_s", float("nan")) * 1e3
        blas_ms = fast.get("mlx_s", float("nan")) * 1e3
        ort_ref = ref.get("ort_s", float("nan")) * 1e3  # timed beside plain MLX
        ort_blas = fast.get("ort_s", float("nan")) * 1e3  # timed beside MLX+OpenBLAS
        other_ratio = (other["ort_s"] * 1e3 / blas_ms) if "ort_s" in other else None
        other_text = fmt(other_ratio) if other_ratio else ("; ".join(other.get("error", ["-"]))[:60] or "-")
        print(
            f"| {name} | {o['primitives']} | {o['nodes_before']} -> {o['nodes_after']} "
            f"({o['nodes_after'] / o['primitives']:.2f}) | {fmt(ort_ref)} / {fmt(ort_blas)} | {fmt(mlx_ms)} | "
            f"{fmt(blas_ms)} | {fmt(ort_ref / mlx_ms)} | {fmt(ort_blas / blas_ms)} | {other_text} |"
        )


if __name__ == "__main__":
    main()
