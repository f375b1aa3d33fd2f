"""Export wall time and peak memory vs the time NumPy takes to write the same weights.

    python benchmarks/export_cost.py [--models llama,1b-bf16,1b-f32]

Each measurement runs in a fresh process: build the model (random weights), write its
weights with ``numpy.ndarray.tofile`` into a temporary folder, then export it with
``Exporter(path=...)`` into another (external data beside the model above 2 GB). Peak
memory is the process's VmHWM during the export (reset just before it); it includes the
model's own weights in MLX, the interpreter and the libraries (reported as ``base``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import current_rss_mb, fmt, peak_rss_mb, reset_peak_rss, run_worker, sync_write  # noqa: E402

CONFIGS = {
    # name: (builder, kwargs, bfloat16 policy, external_data)
    "llama": ("make_llama", {}, "auto", None),
    "mlp": ("make_mlp", {}, "auto", None),
    "llama-ext": ("make_llama", {}, "auto", True),
    "1b-bf16": ("make_llama_1b", {"dtype": "bfloat16"}, "keep", True),  # 1.9 GiB: external data asked for
    "1b-bf16-inline": ("make_llama_1b", {"dtype": "bfloat16"}, "keep", None),  # one 1.9 GiB protobuf
    "1b-f32": ("make_llama_1b", {"dtype": "float32"}, "auto", None),  # 3.8 GiB: external data by default
}


def worker(name: str, folder: str) -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    import models

    builder, kwargs, policy, external = CONFIGS[name]
    kwargs = {k: getattr(mx, v) if k == "dtype" else v for k, v in kwargs.items()}
    model, fn, args = getattr(models, builder)(**kwargs)
    import mlx2onnx
    from mlx2onnx.dtypes import array_to_numpy

    weights = [array_to_numpy(v) for _, v in tree_flatten(model.parameters())]
    weight_bytes = sum(w.nbytes for w in weights)
    numpy_dir = tempfile.mkdtemp(dir=folder)
    numpy_s = sync_write(weights, os.path.join(numpy_dir, "weights.bin"))
    shutil.rmtree(numpy_dir)
    del weights
    out_dir = tempfile.mkdtemp(dir=folder)
    path = os.path.join(out_dir, "model.onnx")
    base = current_rss_mb()
    reset_peak_rss()
    start = time.perf_counter()
    exporter = mlx2onnx.Exporter(path=path, bfloat16=policy, external_data=external)
    proto = exporter.export(fn, *args)
    with open(path, "rb+") as f:  # the same durability as the NumPy baseline
        os.fsync(f.fileno())
    if os.path.exists(path + ".data"):
        with open(path + ".data", "rb+") as f:
            os.fsync(f.fileno())
    export_s = time.perf_counter() - start
    peak = peak_rss_mb()
    written = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    external = os.path.exists(path + ".data")
    shutil.rmtree(out_dir)
    print(
        json.dumps(
            {
                "parameters": sum(v.size for _, v in tree_flatten(model.parameters())),
                "weight_mb": weight_bytes / 2**20,
                "written_mb": written / 2**20,
                "external_data": external,
                "numpy_s": numpy_s,
                "export_s": export_s,
                "base_rss_mb": base,
                "peak_rss_mb": peak,
                "nodes": len(proto.graph.node),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama,mlp,llama-ext,1b-bf16,1b-f32")
    parser.add_argument("--dir", default=None, help="where temporary files go (default: the system temp dir)")
    parser.add_argument("--worker")
    opts = parser.parse_args()
    folder = opts.dir or tempfile.gettempdir()
    if opts.worker:
        return worker(opts.worker, folder)
    rows = []
    for name in opts.models.split(","):
        r = run_worker("export_cost.py", ["--worker", name, "--dir", folder])
        print(json.dumps({"model": name, **r}), flush=True)
        rows.append((name, r))
    print()
    print(
        "| model | params | weights MB | written MB | numpy write s | export s | export / numpy | "
        "base RSS MB | peak RSS MB | peak / (1.5 x weights + 300 MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        if "error" in r:
            print(f"| {name} | error: {'; '.join(r['error'])[:80]} |")
            continue
        print(
            f"| {name} | {r['parameters'] / 1e6:.1f}M | {r['weight_mb']:.0f} | {r['written_mb']:.0f} | "
            f"{fmt(r['numpy_s'])} | {fmt(r['export_s'])} | {fmt(r['export_s'] / r['numpy_s'])} | "
            f"{r['base_rss_mb']:.0f} | {r['peak_rss_mb']:.0f} | "
            f"{fmt(r['peak_rss_mb'] / (1.5 * r['weight_mb'] + 300))} |"
        )


if __name__ == "__main__":
    main()
