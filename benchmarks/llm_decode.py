"""4-bit LLM decode and prefill: onnxruntime (our default export) against MLX, side by side.

One run builds an mlx-lm llama with random weights, quantizes it (``nn.quantize``,
group 64, 4 bits), exports it with ``mlx2onnx.llm.export_decoder`` (default options),
and measures, each runtime in a fresh process:

- onnxruntime: session memory (RSS growth while the decode session opens) over the packed
  weight bytes, one decode step (the first after a ``--prompt``-token prefill), the
  prefill of ``--prompt`` tokens, and the decode step of an export with ``--long``
  max_length (the step should not grow with the buffer);
- MLX on the CPU (mlx-lm's own KV cache): the same decode step and prefill, with the wheel's
  BLAS and, when the system OpenBLAS is there, with it preloaded;
- the read-bandwidth floor: the time to read the packed weight bytes once from memory
  (a float64 sum over a buffer of that size, on 1 and 2 threads; the faster counts).

    python benchmarks/llm_decode.py                 # TinyLlama width, 4 layers (the issue's model)
    python benchmarks/llm_decode.py --layers 20     # 1.0B parameters
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import answered, current_rss_mb, measured, median_time, openblas  # noqa: E402


def build(layers: int, seed: int = 0):
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.models import llama

    mx.random.seed(seed)
    args = llama.ModelArgs(model_type="llama", hidden_size=2048, num_hidden_layers=layers, intermediate_size=5632,
                           num_attention_heads=32, num_key_value_heads=4, rms_norm_eps=1e-5, vocab_size=32000,
                           tie_word_embeddings=False)
    model = llama.Model(args)
    nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    return model


def packed_bytes(model) -> int:
    from mlx.utils import tree_flatten

    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


def ort_worker(folder: str, prompt: int, repeats: int) -> dict:
    import numpy as np
    import onnxruntime as ort

    from mlx2onnx.verify.session import exact_options

    before = current_rss_mb()
    decode = ort.InferenceSession(str(Path(folder) / "model.decode.onnx"), exact_options(),
                                  providers=["CPUExecutionProvider"])
    memory = (current_rss_mb() - before) * 2**20
    prefill = ort.InferenceSession(str(Path(folder) / "model.prefill.onnx"), exact_options(),
                                   providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, 32000, size=(1, prompt)).astype(np.int32)
    outs = prefill.run(None, {"input_ids": ids})
    names = [i.name for i in decode.get_inputs()][2:]
    feeds = {"input_ids": ids[:, :1], "position": np.array(prompt, np.int32), **dict(zip(names, outs[1:]))}
    step = median_time(lambda: decode.run(None, feeds), repeats)
    fill = median_time(lambda: prefill.run(None, {"input_ids": ids}), max(2, repeats // 4))
    return {"memory": memory, "step": step, "prefill": fill}


def ort_step_only(folder: str, prompt: int, repeats: int) -> dict:
    import numpy as np
    import onnxruntime as ort

    from mlx2onnx.verify.session import exact_options

    decode = ort.InferenceSession(str(Path(folder) / "model.decode.onnx"), exact_options(),
                                  providers=["CPUExecutionProvider"])
    feeds = {}
    for i in decode.get_inputs():  # a past of `prompt` tokens (the only dynamic dimension)
        shape = [d if isinstance(d, int) else prompt for d in i.shape]
        feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32) \
            if i.type == "tensor(float)" else np.ones(shape, np.int32)
    feeds["position"] = np.array(prompt, np.int32)
    return {"step": median_time(lambda: decode.run(None, feeds), repeats)}


def mlx_worker(layers: int, prompt: int, repeats: int) -> dict:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    model = build(layers)
    ids = mx.array(__import__("numpy").random.default_rng(0).integers(0, 32000, size=(1, prompt)).astype("int32"))

    def fill():
        cache = make_prompt_cache(model)
        mx.eval(model(ids, cache=cache))
        return cache

    cache = fill()
    token = ids[:, :1]
    steps = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        mx.eval(model(token, cache=cache))
        steps.append(time.perf_counter() - start)
    steps = sorted(steps[1:])
    return {"step": steps[len(steps) // 2], "prefill": median_time(fill, max(2, repeats // 4))}


def read_floor(nbytes: int) -> float:
    """Seconds to read ``nbytes`` once: a float64 sum over that many bytes, 1 or 2 threads."""
    import numpy as np

    data = np.ones(nbytes // 8)
    halves = np.array_split(data, 2)
    one = min(_timed(lambda: data.sum()) for _ in range(5))
    with ThreadPoolExecutor(2) as pool:
        two = min(_timed(lambda: list(pool.map(np.sum, halves))) for _ in range(5))
    return min(one, two)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def worker(kind: str, args, folder: str = "", env: dict | None = None) -> dict:
    """One measurement in a fresh process (common.measured)."""
    return measured(Path(__file__).name, kind, ["--layers", str(args.layers), "--prompt", str(args.prompt),
                                                "--repeats", str(args.repeats), "--folder", folder], env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--long", type=int, default=4096, help="max_length of the second export (0: skip)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--worker", choices=["ort", "ort-step", "mlx"])
    parser.add_argument("--folder", default="")
    args = parser.parse_args()
    if answered(args.worker, {"ort": lambda: ort_worker(args.folder, args.prompt, args.repeats),
                              "ort-step": lambda: ort_step_only(args.folder, args.prompt, args.repeats),
                              "mlx": lambda: mlx_worker(args.layers, args.prompt, args.repeats)}):
        return

    from mlx2onnx.llm import export_decoder

    model = build(args.layers)
    size = packed_bytes(model)
    print(f"llama 4-bit, hidden 2048, {args.layers} layers, ffn 5632, 32/4 heads, vocab 32000: "
          f"{size / 2**20:.1f} MiB packed; prompt {args.prompt}, max_length {args.max_length}", flush=True)
    with tempfile.TemporaryDirectory() as short, tempfile.TemporaryDirectory() as long:
        start = time.perf_counter()
        export_decoder(model, short, prompt_length=args.prompt, max_length=args.max_length)
        print(f"exported in {time.perf_counter() - start:.1f} s", flush=True)
        if args.long:
            export_decoder(model, long, prompt_length=1, max_length=args.long)
        del model
        ort = worker("ort", args, short)
        ort_long = worker("ort-step", args, long) if args.long else None
        ort_short = worker("ort-step", args, short) if args.long else None
    mlx_stock = worker("mlx", args)
    library = openblas()
    mlx_blas = worker("mlx", args, env={"LD_PRELOAD": library}) if library else None
    floor = read_floor(size)

    def ms(seconds):
        return f"{seconds * 1e3:.1f} ms"

    print(f"read-bandwidth floor: {ms(floor)} ({size / floor / 2**30:.1f} GiB/s)")
    print(f"onnxruntime session memory: {ort['memory'] / 2**20:.0f} MiB = {ort['memory'] / size:.2f}x packed bytes")
    print("| | onnxruntime | MLX CPU | MLX+OpenBLAS | ORT / MLX | ORT / MLX+OpenBLAS | ORT / floor |")
    print("|---|---|---|---|---|---|---|")
    blas_step = ms(mlx_blas["step"]) if mlx_blas else "-"
    blas_ratio = f"{ort['step'] / mlx_blas['step']:.3f}" if mlx_blas else "-"
    print(f"| decode step | {ms(ort['step'])} | {ms(mlx_stock['step'])} | {blas_step} | "
          f"{ort['step'] / mlx_stock['step']:.3f} | {blas_ratio} | {ort['step'] / floor:.2f} |")
    blas_fill = ms(mlx_blas["prefill"]) if mlx_blas else "-"
    blas_fill_ratio = f"{ort['prefill'] / mlx_blas['prefill']:.3f}" if mlx_blas else "-"
    print(f"| prefill {args.prompt} tokens | {ms(ort['prefill'])} | {ms(mlx_stock['prefill'])} | {blas_fill} | "
          f"{ort['prefill'] / mlx_stock['prefill']:.3f} | {blas_fill_ratio} | - |")
    print(f"decode tokens/s: onnxruntime {1 / ort['step']:.1f}, MLX {1 / mlx_stock['step']:.1f}"
          + (f", MLX+OpenBLAS {1 / mlx_blas['step']:.1f}" if mlx_blas else ""))
    print(f"prefill tokens/s: onnxruntime {args.prompt / ort['prefill']:.0f}, MLX {args.prompt / mlx_stock['prefill']:.0f}"
          + (f", MLX+OpenBLAS {args.prompt / mlx_blas['prefill']:.0f}" if mlx_blas else ""))
    if args.long:
        print(f"decode step at max_length {args.max_length}: {ms(ort_short['step'])}, at {args.long}: "
              f"{ms(ort_long['step'])} (ratio {ort_long['step'] / ort_short['step']:.2f})")


if __name__ == "__main__":
    main()
