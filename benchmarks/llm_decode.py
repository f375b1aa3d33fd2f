"""4-bit LLM decode and prefill: onnxruntime (our default export) against MLX, side by side.

One run builds an mlx-lm llama with random weights, quantizes it (``nn.quantize``,
group 64, 4 bits), exports it with ``mlx2onnx.llm.export_decoder`` (default options),
and measures, each runtime in a fresh process:

- onnxruntime, for each export form of :data:`FORMS` (the default in a plain session, as a
  user opens the file; ``int8_activations=True``, the opt-in int8 arithmetic; the standard
  DequantizeLinear blocks in a plain session, which fuses them with int8 activations, and
  with the session's accuracy level 0, the previous default's exact setting): session
  memory (RSS growth while the decode session opens) over the packed weight bytes, one
  decode step (the first after a ``--prompt``-token prefill) and the prefill of
  ``--prompt`` tokens; and the default's decode step in an export with ``--long``
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
import json
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
    args = llama.ModelArgs(
        model_type="llama",
        hidden_size=2048,
        num_hidden_layers=layers,
        intermediate_size=5632,
        num_attention_heads=32,
        num_key_value_heads=4,
        rms_norm_eps=1e-5,
        vocab_size=32000,
        tie_word_embeddings=False,
    )
    model = llama.Model(args)
    nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    return model


def packed_bytes(model) -> int:
    from mlx.utils import tree_flatten

    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


# the export forms timed, each (export options, session config entries); the default export
# in a plain session first
DEFAULT = "default (4-bit blocks, float32 in the file), plain session"
FORMS = {
    DEFAULT: ({}, {}),
    "int8_activations=True, plain session": ({"int8_activations": True}, {}),
    "quantized_weights='dequantizelinear', plain session": ({"quantized_weights": "dequantizelinear"}, {}),
    "quantized_weights='dequantizelinear', session accuracy level 0": (
        {"quantized_weights": "dequantizelinear"},
        {"session.qdq_matmulnbits_accuracy_level": "0"},
    ),
}
ARITHMETIC = dict(
    zip(FORMS, ("float32, MLX's numbers", "int8 activations", "int8 activations (fused)", "float32, MLX's numbers"))
)


def session(path: Path, config: dict):
    import onnxruntime as ort

    options = ort.SessionOptions()
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_worker(folder: str, prompt: int, repeats: int, config: dict) -> dict:
    import numpy as np

    before = current_rss_mb()
    decode = session(Path(folder) / "model.decode.onnx", config)
    memory = (current_rss_mb() - before) * 2**20
    prefill = session(Path(folder) / "model.prefill.onnx", config)
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

    decode = ort.InferenceSession(str(Path(folder) / "model.decode.onnx"), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in decode.get_inputs():  # a past of `prompt` tokens (the only dynamic dimension)
        shape = [d if isinstance(d, int) else prompt for d in i.shape]
        feeds[i.name] = (
            np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            if i.type == "tensor(float)"
            else np.ones(shape, np.int32)
        )
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


def worker(kind: str, args, folder: str = "", env: dict | None = None, config: dict | None = None) -> dict:
    """One measurement in a fresh process (common.measured)."""
    return measured(
        Path(__file__).name,
        kind,
        [
            "--layers",
            str(args.layers),
            "--prompt",
            str(args.prompt),
            "--repeats",
            str(args.repeats),
            "--folder",
            folder,
            "--config",
            json.dumps(config or {}),
        ],
        env=env,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--long", type=int, default=4096, help="max_length of the second export (0: skip)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--worker", choices=["ort", "ort-step", "mlx"])
    parser.add_argument("--folder", default="")
    parser.add_argument("--config", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if answered(
        args.worker,
        {
            "ort": lambda: ort_worker(args.folder, args.prompt, args.repeats, json.loads(args.config)),
            "ort-step": lambda: ort_step_only(args.folder, args.prompt, args.repeats),
            "mlx": lambda: mlx_worker(args.layers, args.prompt, args.repeats),
        },
    ):
        return

    from mlx2onnx import Exporter
    from mlx2onnx.llm import export_decoder

    model = build(args.layers)
    size = packed_bytes(model)
    print(
        f"llama 4-bit, hidden 2048, {args.layers} layers, ffn 5632, 32/4 heads, vocab 32000: "
        f"{size / 2**20:.1f} MiB packed; prompt {args.prompt}, max_length {args.max_length}",
        flush=True,
    )
    results = {}
    with tempfile.TemporaryDirectory() as work:
        folders = {}
        for name, (options, _) in FORMS.items():
            folders[name] = folder = str(Path(work) / str(len(folders)))
            start = time.perf_counter()
            export_decoder(
                model, folder, prompt_length=args.prompt, max_length=args.max_length, exporter=Exporter(**options)
            )
            print(f"exported {name} in {time.perf_counter() - start:.1f} s", flush=True)
        if args.long:
            long = str(Path(work) / "long")
            export_decoder(model, long, prompt_length=1, max_length=args.long)
        del model
        for name, (_, config) in FORMS.items():
            results[name] = worker("ort", args, folders[name], config=config)
        ort_long = worker("ort-step", args, long) if args.long else None
        ort_short = worker("ort-step", args, folders[DEFAULT]) if args.long else None
    mlx_stock = worker("mlx", args)
    library = openblas()
    mlx_blas = worker("mlx", args, env={"LD_PRELOAD": library}) if library else None
    floor = read_floor(size)

    def ms(seconds):
        return f"{seconds * 1e3:.1f} ms"

    print(f"read-bandwidth floor: {ms(floor)} ({size / floor / 2**30:.1f} GiB/s)")
    blas = f", MLX+OpenBLAS {ms(mlx_blas['step'])} / {ms(mlx_blas['prefill'])}" if mlx_blas else ""
    print(f"MLX decode step / prefill {args.prompt}: {ms(mlx_stock['step'])} / {ms(mlx_stock['prefill'])}{blas}")
    reference = mlx_blas or mlx_stock
    print(
        "| onnxruntime: export, session | arithmetic | session memory / packed | decode step | step / MLX"
        f"{'+OpenBLAS' if mlx_blas else ''} | step / floor | prefill {args.prompt} | prefill / MLX |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, ort in results.items():
        print(
            f"| {name} | {ARITHMETIC[name]} | "
            f"{ort['memory'] / 2**20:.0f} MiB = {ort['memory'] / size:.2f}x | {ms(ort['step'])} | "
            f"{ort['step'] / reference['step']:.3f} | {ort['step'] / floor:.2f} | {ms(ort['prefill'])} | "
            f"{ort['prefill'] / reference['prefill']:.4f} |"
        )
    if args.long:
        print(
            f"default export, decode step at max_length {args.max_length}: {ms(ort_short['step'])}, at "
            f"{args.long}: {ms(ort_long['step'])} (ratio {ort_long['step'] / ort_short['step']:.2f})"
        )


if __name__ == "__main__":
    main()
