"""A recurrent LM's prompt through its recovered ONNX Loop, against the unrolled export and MLX.

One run builds mlx-lm's mamba with random weights (hidden 768, intermediate 1536, state
16, ``--layers`` layers, vocab 50280, tied head) and times the forward pass over a
``--prompt``-token prompt, each runtime in a fresh process:

- onnxruntime on the dynamic export (batch and sequence dynamic: each layer's Python loop
  over the tokens is one ONNX ``Loop``);
- onnxruntime on the static export at the prompt's length (the loop unrolled: one copy of
  the step per token), with its node count;
- MLX on the CPU, with the wheel's BLAS and, when the system OpenBLAS is there, with it
  preloaded (mlx-lm runs the same Python loop, one step per token).

    python benchmarks/recurrent.py                  # 4 layers, 128 tokens
    python benchmarks/recurrent.py --prompt 512
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import answered, measured, median_time, openblas  # noqa: E402


def build(layers: int, seed: int = 0):
    import mlx.core as mx
    from mlx_lm.models import mamba

    mx.random.seed(seed)
    args = mamba.ModelArgs(
        model_type="mamba",
        vocab_size=50280,
        hidden_size=768,
        intermediate_size=1536,
        state_size=16,
        num_hidden_layers=layers,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank=48,
        tie_word_embeddings=True,
    )
    model = mamba.Model(args)
    mx.eval(model.parameters())
    return model


def tokens(prompt: int):
    import numpy as np

    return np.random.default_rng(0).integers(0, 50280, (1, prompt)).astype(np.int32)


def ort_worker(path: str, prompt: int, repeats: int) -> dict:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: tokens(prompt)}
    return {"prefill": median_time(lambda: session.run(None, feed), repeats)}


def mlx_worker(layers: int, prompt: int, repeats: int) -> dict:
    import mlx.core as mx

    model = build(layers)
    ids = mx.array(tokens(prompt))
    return {"prefill": median_time(lambda: mx.eval(model(ids)), repeats)}


def worker(kind: str, args, path: str = "", env: dict | None = None) -> dict:
    """One measurement in a fresh process (common.measured)."""
    return measured(
        Path(__file__).name,
        kind,
        ["--layers", str(args.layers), "--prompt", str(args.prompt), "--repeats", str(args.repeats), "--path", path],
        env=env,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--worker", choices=["ort", "mlx"])
    parser.add_argument("--path", default="")
    args = parser.parse_args()
    if answered(
        args.worker,
        {
            "ort": lambda: ort_worker(args.path, args.prompt, args.repeats),
            "mlx": lambda: mlx_worker(args.layers, args.prompt, args.repeats),
        },
    ):
        return

    import mlx.core as mx
    import onnx

    import mlx2onnx

    model = build(args.layers)
    ids = mx.array(tokens(args.prompt))
    print(
        f"mamba, hidden 768, intermediate 1536, state 16, {args.layers} layers, vocab 50280, tied head; "
        f"prompt {args.prompt} tokens, batch 1",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as folder:
        looped, unrolled = str(Path(folder) / "looped.onnx"), str(Path(folder) / "unrolled.onnx")
        start = time.perf_counter()
        mlx2onnx.Exporter(dynamic={"inputs": {0: "batch", 1: "seq"}}, path=looped).export(model, ids)
        print(f"dynamic export (Loop) in {time.perf_counter() - start:.1f} s", flush=True)
        start = time.perf_counter()
        mlx2onnx.Exporter(path=unrolled).export(model, ids)
        print(f"static export (unrolled) in {time.perf_counter() - start:.1f} s", flush=True)
        nodes = {
            name: len(onnx.load(path, load_external_data=False).graph.node)
            for name, path in (("looped", looped), ("unrolled", unrolled))
        }
        ort_loop, ort_unrolled = worker("ort", args, looped), worker("ort", args, unrolled)
    mlx_stock = worker("mlx", args)
    library = openblas()
    mlx_blas = worker("mlx", args, env={"LD_PRELOAD": library}) if library else None

    def ms(seconds):
        return f"{seconds * 1e3:.1f} ms"

    blas = ms(mlx_blas["prefill"]) if mlx_blas else "-"
    print(f"top-level ONNX nodes: looped {nodes['looped']}, unrolled {nodes['unrolled']}")
    print(
        "| | onnxruntime, Loop | onnxruntime, unrolled | MLX CPU | MLX+OpenBLAS | Loop / unrolled | Loop / MLX | "
        "Loop / MLX+OpenBLAS |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ratio = f"{ort_loop['prefill'] / mlx_blas['prefill']:.3f}" if mlx_blas else "-"
    print(
        f"| prefill {args.prompt} tokens | {ms(ort_loop['prefill'])} | {ms(ort_unrolled['prefill'])} | "
        f"{ms(mlx_stock['prefill'])} | {blas} | {ort_loop['prefill'] / ort_unrolled['prefill']:.2f} | "
        f"{ort_loop['prefill'] / mlx_stock['prefill']:.3f} | {ratio} |"
    )


if __name__ == "__main__":
    main()
