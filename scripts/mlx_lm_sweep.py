"""Every mlx-lm architecture through mlx2onnx, as a user would run it; writes docs/mlx-lm-sweep.md.

For each model module of the installed mlx-lm (tiny configs from ``tests/support/mlx_lm_configs.py``,
random weights, nothing downloaded), in a fresh process with a time limit:

- ``package``: a model folder as mlx-lm writes one, exported as a package, checked with
  ``mlx2onnx check`` and run in onnxruntime-genai and transformers.js (see
  :func:`stage_package`);
- ``4bit``: ``nn.quantize`` (4 bits, group 32), export with default options, and run the
  file in each runtime at its default settings (onnxruntime Python and node, OpenVINO),
  plus OpenVINO with its float32 settings: the check's verdict at the default tolerances
  (the arithmetic the runtime chose named, as the check reports it), the largest logit
  error, and whether the greedy token (the argmax at every position) is MLX's.

    python -m scripts.mlx_lm_sweep                       # every architecture, both stages, writes the page
    python -m scripts.mlx_lm_sweep --only llama,qwen3 --stage package   # some, printed only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

RUNS = {  # column -> (runtime, runtime options)
    "onnxruntime": ("onnxruntime", {}),
    "onnxruntime-node": ("onnxruntime-node", {}),
    "openvino": ("openvino", {}),
    "openvino f32": ("openvino", {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}),
}
GROUP = 32
# what was found behind a cell that is not a pass, measured (the page prints them)
NOTES = {
    "glm_moe_dsa": "OpenVINO (float32 too) orders equal values in TopK by another rule than ONNX's (lower index "
    "first; onnxruntime and tract follow it): measured on one 7-value row, [0.5, 1, 1, 0.2, 1, 0.1, 1] "
    "smallest-first gives [5 3 0 2 4 6 1] against [5 3 0 1 2 4 6]. This model's indexer takes the "
    "top keys of a row whose masked keys are all -inf, so which masked keys it picks, and its "
    "logits, follow that order. Found by walking the graph back from the first differing value.",
    "plamo3": "mlx-lm's plamo3 masks its sliding-window layers with window_size + 1 keys but keeps window_size "
    "of them in its RotatingKVCache, so its prompt sees one key more than its one-token steps do; the "
    "package follows both (a one-token step sees at most the keys mlx-lm's cache keeps).",
    "phi3small": "MLX 0.32.4 itself stops with a segmentation fault running this tiny model on the CPU.",
}


def build(model_type: str, seed: int = 0):
    import importlib

    import mlx.core as mx

    from tests.support.mlx_lm_configs import config_for

    module = importlib.import_module(f"mlx_lm.models.{model_type}")
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config_for(model_type)))
    mx.eval(model.parameters())
    return model


def quantized(model):
    import mlx.core as mx
    import mlx.nn as nn

    nn.quantize(
        model,
        group_size=GROUP,
        bits=4,
        class_predicate=lambda _, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % GROUP == 0,
    )
    mx.eval(model.parameters())
    return model


def stage_4bit(model_type: str, folder: Path) -> dict:
    """One architecture at 4 bits: export, then each run of :data:`RUNS`."""
    import mlx.core as mx
    import numpy as np
    import onnx

    import mlx2onnx
    from mlx2onnx.verify import runtimes
    from tests.support.mlx_lm_configs import UNBUILDABLE

    result = {"model_type": model_type}
    if model_type in UNBUILDABLE:
        return {**result, "status": "skipped", "reason": UNBUILDABLE[model_type]}
    _stage("mlx")
    try:
        model = quantized(build(model_type))
        ids = mx.array(np.random.default_rng(1).integers(0, 384, (1, 7)).astype(np.int32))
        want = model(ids)
        mx.eval(want)
    except BaseException as exc:  # noqa: BLE001 - the model itself does not run here
        return {**result, "status": "mlx", "reason": _reason(exc)}
    path = folder / f"{model_type}.onnx"
    _stage("export")
    try:
        mlx2onnx.Exporter(path=path, overwrite=True).export(model, ids)
    except mlx2onnx.Mlx2OnnxError as exc:
        return {**result, "status": "refused", "reason": _reason(exc)}
    except BaseException as exc:  # noqa: BLE001
        return {**result, "status": "crash", "reason": _reason(exc), "trace": traceback.format_exc()[-1500:]}
    result["status"] = "exported"
    input_name = onnx.load(str(path), load_external_data=False).graph.input[0].name
    for column, (runtime, options) in RUNS.items():
        if not runtimes.available(runtime):
            continue
        _stage(f"run in {column}")
        try:
            verifier = mlx2onnx.Verifier(
                runtime=runtime, runtime_options=options, compare_weights=False, random_inputs=False
            )
            report = verifier.verify(path, model, ids)
            with runtimes.open_runtime(runtime, str(path), options=options) as runner:
                got = runner.run({input_name: np.array(ids)}, [runner.output_names[0]])[0]
            reference = np.array(want.astype(mx.float32))
            same = bool(np.array_equal(got.argmax(-1), reference.argmax(-1)))
            scaled = float(np.abs(got - reference).max() / max(np.abs(reference).max(), 1e-30))
            result[column] = {
                "passed": report.passed,
                "error": report.outputs[0].max_abs_error,
                "scaled": scaled,
                "arithmetic": [a.split(" (")[0] for a in report.arithmetic],
                "argmax": same,
            }
        except BaseException as exc:  # noqa: BLE001
            result[column] = {"passed": False, "failure": _reason(exc)}
    return result


PROMPTS = ("the quick brown fox", "hello world")
NEW_TOKENS = 12


def stage_package(model_type: str, folder: Path) -> dict:
    """One architecture as a package: a model folder written the way mlx-lm writes one
    (config.json, safetensors, a trained tokenizer), ``export_package``, then
    ``check_package`` (a left-padded batch in onnxruntime), onnxruntime-genai and
    transformers.js (each with its own tokenizer) against mlx-lm's greedy tokens."""
    import mlx.core as mx

    import mlx2onnx
    from mlx2onnx.errors import UsageError
    from mlx2onnx.io.notes import read_notes
    from mlx2onnx.llm import check_package, export_package, mlx_generate
    from mlx2onnx.targets import load_model_folder
    from tests.support import zoo
    from tests.support.mlx_lm_configs import UNBUILDABLE, config_for

    result = {"model_type": model_type}
    if model_type in UNBUILDABLE:
        return {**result, "status": "skipped", "reason": UNBUILDABLE[model_type]}
    _stage("mlx")
    try:
        source = zoo.write_model_folder(folder / "folder", model_type, config=config_for(model_type))
        model = load_model_folder(str(source)).fun
        mlx_generate(model, mx.array([[1, 2, 3]]), 2)  # mlx-lm's own generation, with its own cache
    except BaseException as exc:  # noqa: BLE001 - the model itself does not run here
        return {**result, "status": "mlx", "reason": _reason(exc)}
    package = folder / "package"
    _stage("export")
    try:
        export_package(source, package)
    except (mlx2onnx.Mlx2OnnxError, UsageError) as exc:
        return {**result, "status": "refused", "reason": _reason(exc)}
    except BaseException as exc:  # noqa: BLE001
        return {**result, "status": "crash", "reason": _reason(exc), "trace": traceback.format_exc()[-1500:]}
    result["status"] = "exported"

    def want(ids):
        return zoo.mlx_tokens(model, source, ids, NEW_TOKENS)

    _stage("check")
    try:
        checked = check_package(package, source, [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22]])
        result["check"] = {
            "passed": checked["passed"],
            "batch": checked["batch"],
            "detail": "" if checked["passed"] else json.dumps(checked["rows"])[:300],
        }
    except BaseException as exc:  # noqa: BLE001
        result["check"] = {"passed": False, "detail": _reason(exc)}
    notes = read_notes(package).runtime_notes()
    for column, runtime, run in (
        ("genai", "onnxruntime-genai", _genai),
        ("transformers.js", "transformers.js", _transformers_js),
    ):
        _stage(runtime)
        # a package whose config says a runtime cannot run it is not run there: the cell gives the reason
        result[column] = {"passed": False, "cannot": notes[runtime]} if runtime in notes else run(package, want)
    return result


def _genai(package: Path, want) -> dict:
    try:
        import onnxruntime_genai as og

        from tests.support import zoo

        model = og.Model(str(package))
        tokenizer = og.Tokenizer(model)
        for text in PROMPTS:
            ids = [int(i) for i in tokenizer.encode(text)]
            tokens = zoo.genai_tokens(model, ids, NEW_TOKENS)
            if tokens != want(ids):
                return {"passed": False, "detail": f"{text!r}: {tokens} against MLX's {want(ids)}"}
        return {"passed": True}
    except BaseException as exc:  # noqa: BLE001
        return {"passed": False, "detail": _reason(exc)}


def _transformers_js(package: Path, want) -> dict:
    try:
        from tests.support import zoo

        for text, got in zip(PROMPTS, zoo.transformers_js_tokens(package, NEW_TOKENS, PROMPTS)):
            if got["tokens"] != want(got["ids"]):
                return {"passed": False, "detail": f"{text!r}: {got['tokens']} against MLX's {want(got['ids'])}"}
        return {"passed": True}
    except BaseException as exc:  # noqa: BLE001
        return {"passed": False, "detail": _reason(exc)}


def _stage(name: str) -> None:
    """Say which stage runs, so a process that dies (a segmentation fault) is attributed."""
    print(f"stage: {name}", flush=True)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def one(model_type: str, timeout: float, stage: str = "4bit") -> dict:
    """``model_type`` swept in a fresh process (a crash or hang is that row's result)."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.mlx_lm_sweep", "--worker", model_type, "--stage", stage],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {"model_type": model_type, "status": "timeout", "reason": f"over {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        stages = [line[len("stage: ") :] for line in done.stdout.splitlines() if line.startswith("stage: ")]
        stage = stages[-1] if stages else "start"
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode} (a segmentation fault is 11)"
        return {
            "model_type": model_type,
            "status": "mlx" if stage == "mlx" else "crash",
            "reason": f"the process died while running {stage}: {last}",
        }
    row = json.loads(lines[-1])
    row["seconds"] = round(time.monotonic() - start, 1)
    return row


def cell(entry: dict | None) -> str:
    if entry is None:
        return "not run"
    if "failure" in entry:
        return f"error: {entry['failure'][:80]}"
    trades = "; ".join(entry["arithmetic"]) or "float32"
    verdict = "PASS" if entry["passed"] else "**FAIL**"
    tokens = "tokens =" if entry["argmax"] else "**tokens differ**"
    return f"{verdict} {entry['error']:.1g} ({entry['scaled']:.0e} of max), {tokens} ({trades})"


STATUSES = (
    ("refused", "Refused by the exporter"),
    ("crash", "Crashed (to fix)"),
    ("timeout", "Timed out"),
    ("mlx", "MLX cannot run the tiny model on the CPU"),
    ("skipped", "Not built by the sweep"),
)


def _outcomes(rows: list[dict], columns: list[str], cell) -> list[str]:
    """A stage's table (one row per exported architecture), its other outcomes and totals."""
    exported = [r for r in rows if r["status"] == "exported"]
    lines = ["| architecture | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    lines += [f"| {r['model_type']} | " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in exported]
    for status, title in STATUSES:
        group = [r for r in rows if r["status"] == status]
        if group:
            lines += ["", f"{title} ({len(group)}):", ""] + [f"- {r['model_type']}: {r['reason']}" for r in group]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("exported", *dict(STATUSES))}
    passing = {c: sum(1 for r in exported if (r.get(c) or {}).get("passed")) for c in columns}
    declared = {c: sum(1 for r in exported if (r.get(c) or {}).get("cannot")) for c in columns}
    lines += [
        "",
        "Totals: "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        + "; passing: "
        + ", ".join(
            f"{c} {n}/{len(exported)}" + (f" ({declared[c]} the export says it cannot run)" if declared[c] else "")
            for c, n in passing.items()
        )
        + ".",
    ]
    return lines


def package_cell(entry: dict | None) -> str:
    if entry is None:
        return "not run"
    if entry.get("cannot"):
        return f"the export says it {entry['cannot'][:150]}"
    if entry["passed"]:
        return "tokens =" + (" (one prompt at a time)" if entry.get("batch", "").startswith("one prompt") else "")
    return f"**no**: {entry['detail'][:160]}"


def markdown(rows: dict[str, list[dict]], seconds: float) -> str:
    import mlx.core as mx
    import mlx_lm

    from mlx2onnx.verify import runtimes

    lines = [
        "# mlx-lm architectures",
        "",
        f"Written by `python -m scripts.mlx_lm_sweep` (one run, {seconds / 60:.0f} min on this 2-core machine); do",
        f"not edit by hand. Every model module of mlx-lm {mlx_lm.__version__} (MLX {mx.__version__}) with a tiny config",
        "(`tests/support/mlx_lm_configs.py`) and random weights, each in its own process.",
    ]
    if "package" in rows:
        lines += [
            "",
            "## As packages",
            "",
            "A model folder written as mlx-lm writes one (config.json, model.safetensors, a byte-level BPE",
            "tokenizer trained for it, weights N(0, 0.5)), exported with `mlx2onnx export FOLDER -o PACKAGE/`;",
            "then `mlx2onnx check PACKAGE FOLDER` (a left-padded batch in onnxruntime), onnxruntime-genai and",
            "transformers.js (under Node), each generating "
            f"{NEW_TOKENS} greedy tokens after {len(PROMPTS)} prompts with its own tokenizer,",
            "against mlx-lm's greedy tokens for the same ids. Recurrent layers carry their states as named inputs",
            "and outputs (`past_conv.<i>`, `past_ssm.<i>`, ...). Where the package's config.json says a runtime",
            "cannot run it, or that it does not serve left-padded batches (a scan that does not mask padding), the",
            "cell gives that reason and the check runs one prompt at a time.",
            "",
        ]
        lines += _outcomes(rows["package"], ["check", "genai", "transformers.js"], package_cell)
    if "4bit" in rows:
        columns = [c for c in RUNS if any(c in r for r in rows["4bit"])]
        lines += [
            "",
            "## 4-bit, each runtime at its default settings",
            "",
            f"`nn.quantize` at 4 bits and group size {GROUP}, exported with default options and run on 7 tokens in",
            "each runtime at its default settings (and OpenVINO with `INFERENCE_PRECISION_HINT=f32`,",
            "`DYNAMIC_QUANTIZATION_GROUP_SIZE=0`: `openvino f32`). A cell: the check's verdict at the default",
            "tolerances (float outputs at the tolerance of the arithmetic the runtime chose, in brackets), the",
            "largest logit error (and over the largest logit: random tiny models can have logits in the",
            "hundreds, where float32's own rounding exceeds the element-wise tolerance on the small ones), and",
            "whether the greedy token at every position is MLX's. Versions: "
            + ", ".join(f"{c} {runtimes.runtime_version(RUNS[c][0])}" for c in columns if c in runtimes.RUNTIMES)
            + ".",
            "",
        ]
        lines += _outcomes(rows["4bit"], columns, cell)
    noted = sorted({r["model_type"] for stage in rows.values() for r in stage if r["model_type"] in NOTES})
    if noted:
        lines += ["", "## Notes", ""] + [f"- {name}: {NOTES[name]}" for name in noted]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model types (printed, the page is not written)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--stage", choices=("4bit", "package", "all"), default="all")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            run = stage_4bit if args.stage == "4bit" else stage_package
            print(json.dumps(run(args.worker, Path(folder))))
        return 0
    from tests.support.mlx_lm_configs import model_types

    names = args.only.split(",") if args.only else model_types()
    start = time.monotonic()
    rows = {}
    for stage in ("package", "4bit") if args.stage == "all" else (args.stage,):
        rows[stage] = []
        with ThreadPoolExecutor(args.jobs) as pool:
            for row in pool.map(lambda n: one(n, args.timeout, stage), names):
                rows[stage].append(row)
                print(json.dumps({"stage": stage, **row}), flush=True)
    if not args.only and args.stage == "all":
        page = ROOT / "docs" / "mlx-lm-sweep.md"
        page.write_text(markdown(rows, time.monotonic() - start))
        print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
