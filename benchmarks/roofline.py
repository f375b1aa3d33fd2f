"""The lowest onnxruntime / MLX+OpenBLAS latency ratio any exact export can reach here.

    python benchmarks/roofline.py [--models llama,mlp] [--repeats 12] [--threads N]

A float32 export must do the model's matrix products in float32 (anything cheaper changes
the numbers), so its latency is at least ``GEMM FLOPs / the machine's best float32 GEMM
rate``. This script measures the three numbers that bound the ratio, in one process with
OpenBLAS preloaded:

1. the GEMM FLOPs of one forward pass, counted from the export's MatMul/Gemm nodes and
   their inferred shapes (2*M*K*N each, batch dims included);
2. the best float32 GEMM rate of this machine: onnxruntime (MLAS) and MLX+OpenBLAS on
   large square products and on the model's largest product, median of repeated calls;
3. MLX+OpenBLAS's latency on the model, and onnxruntime's on our export, alternately.

It prints the floor (FLOPs / best rate), the ratio floor (floor / MLX+OpenBLAS latency) and
the measured ratio, so a target below the ratio floor is visibly out of reach of any graph.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import alternate, fmt, median_time, openblas, run_worker  # noqa: E402

SQUARE = [1024, 2048]


def gemm_products(path: str) -> list[tuple[int, int, int, int]]:
    """(batch, M, K, N) of every MatMul/Gemm in the exported model at ``path``."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False), strict_mode=True)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*model.graph.value_info, *model.graph.input, *model.graph.output]
    }
    shapes.update({t.name: list(t.dims) for t in model.graph.initializer})
    products = []
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm"):
            continue
        a, out = shapes[node.input[0]], shapes[node.output[0]]
        trans_a = any(x.name == "transA" and x.i for x in node.attribute)
        k = a[-2] if trans_a else a[-1]
        batch = 1
        for d in out[:-2]:
            batch *= d
        products.append((batch, out[-2], k, out[-1]))
    return products


def _ort_matmul(m: int, k: int, n: int, threads: int):
    import numpy as np
    from latency import ort_session
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(k + n).standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = ort_session(model.SerializeToString(), threads)
    x = np.random.default_rng(m).standard_normal((m, k)).astype(np.float32)
    return lambda: session.run(None, {"x": x})


def _mlx_matmul(m: int, k: int, n: int):
    import mlx.core as mx

    x = mx.random.normal((m, k))
    w = mx.random.normal((n, k))  # nn.Linear's layout: x @ w.T
    mx.eval(x, w)
    return lambda: mx.eval(x @ w.T)


def worker(name: str, onnx_path: str, largest: tuple[int, int, int], repeats: int, threads: int) -> None:
    import mlx.core as mx
    import numpy as np
    from latency import ort_session

    import models

    rates = []
    for m, k, n in [(s, s, s) for s in SQUARE] + [largest]:
        flop = 2 * m * k * n
        for runtime, call in (("onnxruntime", _ort_matmul(m, k, n, threads)), ("MLX+OpenBLAS", _mlx_matmul(m, k, n))):
            seconds = median_time(call, max(5, repeats))
            rates.append({"shape": [m, k, n], "runtime": runtime, "gflops": flop / seconds / 1e9})
    _, fn, args = models.MODELS[name]()
    session = ort_session(onnx_path, threads)
    feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), args)}
    calls = {"mlx_s": lambda: mx.eval(fn(*args)), "ort_s": lambda: session.run(None, feeds)}
    times = alternate(calls, repeats)
    print(json.dumps({"rates": rates, **times}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--threads", type=int, default=0, help="threads for both runtimes (0: their defaults)")
    parser.add_argument("--worker", nargs=5, metavar=("MODEL", "ONNX", "M", "K", "N"))
    opts = parser.parse_args()
    if opts.worker:
        name, path, m, k, n = opts.worker
        return worker(name, path, (int(m), int(k), int(n)), opts.repeats, opts.threads)
    blas = openblas()
    if blas is None:
        raise SystemExit("OpenBLAS is not installed (apt-get install -y libopenblas0-pthread): no fair MLX reference")
    import mlx2onnx
    import models

    env = {"LD_PRELOAD": blas}
    if opts.threads:
        env.update(OPENBLAS_NUM_THREADS=str(opts.threads), OMP_NUM_THREADS=str(opts.threads))
    folder = tempfile.mkdtemp()
    print(
        "| model | GEMM GFLOP per pass | best GEMM GFLOP/s (runtime, shape) | floor ms | MLX+OpenBLAS ms | "
        "ORT ms | floor / MLX+OpenBLAS | ORT / MLX+OpenBLAS |\n|---|---|---|---|---|---|---|---|"
    )
    for name in opts.models.split(","):
        _, fn, args = models.MODELS[name]()
        path = os.path.join(folder, f"{name}.onnx")
        mlx2onnx.Exporter(path=path).export(fn, *args)
        products = gemm_products(path)
        flop = sum(2 * b * m * k * n for b, m, k, n in products)
        _, m, k, n = max(products, key=lambda p: p[0] * p[1] * p[2] * p[3])
        result = run_worker(
            "roofline.py",
            [
                "--worker",
                name,
                path,
                str(m),
                str(k),
                str(n),
                "--repeats",
                str(opts.repeats),
                "--threads",
                str(opts.threads),
            ],
            env=env,
        )
        if "error" in result:
            raise SystemExit(f"{name}: worker failed: {result['error']}")
        best = max(result["rates"], key=lambda r: r["gflops"])
        floor_s = flop / (best["gflops"] * 1e9)
        shape = "x".join(map(str, best["shape"]))
        print(
            f"| {name} | {flop / 1e9:.2f} | {best['gflops']:.0f} ({best['runtime']}, {shape}) | "
            f"{1e3 * floor_s:.1f} | {1e3 * result['mlx_s']:.1f} | {1e3 * result['ort_s']:.1f} | "
            f"{fmt(floor_s / result['mlx_s'])} | {fmt(result['ort_s'] / result['mlx_s'])} |"
        )
        print(
            "\n".join(
                f"    {r['runtime']:>13} {'x'.join(map(str, r['shape'])):>16}: {r['gflops']:.0f} GFLOP/s"
                for r in result["rates"]
            ),
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
