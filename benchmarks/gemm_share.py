"""How GEMM-bound the llama export is, and how fast each side runs those GEMMs.

    python benchmarks/gemm_share.py [--repeats 12]

1. onnxruntime's profile of the exported llama (ORT_ENABLE_ALL): the sum of per-node
   median kernel times by op type.
2. The llama's projection GEMMs ([128, K] @ [K, N], K/N of q/k/v/o, gate/up/down and the
   head) timed alone: MLX (``x @ w.T``, as ``nn.Linear``) and onnxruntime (a one-MatMul
   model with the constant [K, N] weight, as the export has it), alternately in one
   process. Run in a fresh process with OpenBLAS preloaded when it is installed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import alternate, openblas, run_worker  # noqa: E402

TOKENS = 128
# (K, N, count per forward pass) of the benchmark llama: 4 layers, hidden 512, kv 256, ffn 1408
SHAPES = [(512, 512, 8), (512, 256, 8), (512, 1408, 8), (1408, 512, 4), (512, 32000, 1)]


def profile(repeats: int) -> dict:
    import numpy as np
    import onnxruntime as ort

    import mlx2onnx
    import models

    _, fn, args = models.MODELS["llama"]()
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "llama.onnx")
    mlx2onnx.Exporter(path=path).export(fn, *args)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(folder, "profile")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.asarray(a) for i, a in zip(session.get_inputs(), args)}
    for _ in range(repeats + 2):
        session.run(None, feeds)
    events = json.load(open(session.end_profiling()))
    per_node, op_of = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node[e["name"]].append(e["dur"] / 1e3)
            op_of[e["name"]] = e["args"]["op_name"]
    by_op, count = collections.defaultdict(float), collections.Counter()
    for name, times in per_node.items():
        by_op[op_of[name]] += statistics.median(times[2:])
        count[op_of[name]] += 1
    return {"ms": dict(by_op), "nodes": dict(count)}


def gemm_worker(repeats: int) -> None:
    import mlx.core as mx
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rows = []
    for k, n, per_pass in SHAPES:
        rng = np.random.default_rng(k * n)
        x = rng.standard_normal((TOKENS, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)  # nn.Linear's layout
        xm, wm = mx.array(x), mx.array(w)
        mx.eval(xm, wm)
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            "gemm",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [TOKENS, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [TOKENS, n])],
            [numpy_helper.from_array(np.ascontiguousarray(w.T), "w")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        calls = {"mlx": lambda: mx.eval(xm @ wm.T), "ort": lambda: session.run(None, {"x": x})}
        med = alternate(calls, repeats)
        rows.append({"k": k, "n": n, "per_pass": per_pass, "mlx_s": med["mlx"], "ort_s": med["ort"]})
    print(json.dumps({"rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--worker", action="store_true")
    opts = parser.parse_args()
    if opts.worker:
        return gemm_worker(opts.repeats)
    prof = profile(opts.repeats)
    total = sum(prof["ms"].values())
    print(f"onnxruntime profile of the llama export (sum of per-node medians: {total:.1f} ms)\n")
    print("| op type | nodes | ms | share |\n|---|---|---|---|")
    for op, ms in sorted(prof["ms"].items(), key=lambda kv: -kv[1]):
        print(f"| {op} | {prof['nodes'][op]} | {ms:.2f} | {100 * ms / total:.1f}% |")
    blas = openblas()
    env = {"LD_PRELOAD": blas} if blas else {}
    result = run_worker("gemm_share.py", ["--worker", "--repeats", str(opts.repeats)], env=env)
    if "error" in result:
        raise SystemExit(f"GEMM worker failed: {result['error']}")
    rows = result["rows"]
    print(
        f"\nThe llama's GEMMs alone ({TOKENS} tokens), MLX {'with OpenBLAS' if blas else 'as installed'} "
        "and onnxruntime alternately\n"
    )
    print("| [M, K] @ [K, N] | per pass | MLX ms | ORT ms | MLX GFLOP/s | ORT GFLOP/s |\n|---|---|---|---|---|---|")
    sums = {"mlx_s": 0.0, "ort_s": 0.0}
    for r in rows:
        flop = 2 * TOKENS * r["k"] * r["n"]
        print(
            f"| [{TOKENS}, {r['k']}] @ [{r['k']}, {r['n']}] | {r['per_pass']} | {1e3 * r['mlx_s']:.2f} | "
            f"{1e3 * r['ort_s']:.2f} | {flop / r['mlx_s'] / 1e9:.0f} | {flop / r['ort_s'] / 1e9:.0f} |"
        )
        for key in sums:
            sums[key] += r[key] * r["per_pass"]
    print(
        f"\nper forward pass: MLX {1e3 * sums['mlx_s']:.1f} ms, ORT {1e3 * sums['ort_s']:.1f} ms of GEMMs "
        f"(ORT / MLX {sums['ort_s'] / sums['mlx_s']:.2f})"
    )


if __name__ == "__main__":
    main()
