"""Every mlx-lm architecture through mlx2onnx, as a user would run it; writes docs/mlx-lm-sweep.md.

For each model module of the installed mlx-lm (tiny configs from ``mlx_lm_configs.py``,
random weights, nothing downloaded), in a fresh process with a time limit:

- ``4bit``: ``nn.quantize`` (4 bits, group 32), export with default options, and run the
  file in each runtime at its default settings (onnxruntime Python and node, OpenVINO),
  plus OpenVINO with its float32 settings: the check's verdict at the default tolerances
  (the arithmetic the runtime chose named, as the check reports it), the largest logit
  error, and whether the greedy token (the argmax at every position) is MLX's.

    python scripts/mlx_lm_sweep.py                       # every architecture, writes the page
    python scripts/mlx_lm_sweep.py --only llama,qwen3    # some, printed only
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
sys.path.insert(0, str(HERE))

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
    "minicpm3": "float32 noise, not an export error: the tiny random model's logits reach 323, and 2e-4 is 6e-7 "
                "of that; the float32 model fails the element-wise tolerance the same way on its small logits.",
}


def build(model_type: str, seed: int = 0):
    import importlib

    import mlx.core as mx

    from mlx_lm_configs import config_for

    module = importlib.import_module(f"mlx_lm.models.{model_type}")
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config_for(model_type)))
    mx.eval(model.parameters())
    return model


def quantized(model):
    import mlx.core as mx
    import mlx.nn as nn

    nn.quantize(model, group_size=GROUP, bits=4,
                class_predicate=lambda _, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % GROUP == 0)
    mx.eval(model.parameters())
    return model


def stage_4bit(model_type: str, folder: Path) -> dict:
    """One architecture at 4 bits: export, then each run of :data:`RUNS`."""
    import mlx.core as mx
    import numpy as np
    import onnx

    import mlx2onnx
    from mlx2onnx.verify import runtimes

    from mlx_lm_configs import UNBUILDABLE

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
            verifier = mlx2onnx.Verifier(runtime=runtime, runtime_options=options, compare_weights=False,
                                         random_inputs=False)
            report = verifier.verify(path, model, ids)
            with runtimes.open_runtime(runtime, str(path), options=options) as runner:
                got = runner.run({input_name: np.array(ids)}, [runner.output_names[0]])[0]
            reference = np.array(want.astype(mx.float32))
            same = bool(np.array_equal(got.argmax(-1), reference.argmax(-1)))
            scaled = float(np.abs(got - reference).max() / max(np.abs(reference).max(), 1e-30))
            result[column] = {"passed": report.passed, "error": report.outputs[0].max_abs_error, "scaled": scaled,
                              "arithmetic": [a.split(" (")[0] for a in report.arithmetic], "argmax": same}
        except BaseException as exc:  # noqa: BLE001
            result[column] = {"passed": False, "failure": _reason(exc)}
    return result


def _stage(name: str) -> None:
    """Say which stage runs, so a process that dies (a segmentation fault) is attributed."""
    print(f"stage: {name}", flush=True)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def one(model_type: str, timeout: float) -> dict:
    """``model_type`` swept in a fresh process (a crash or hang is that row's result)."""
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", model_type], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"model_type": model_type, "status": "timeout", "reason": f"over {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        stages = [line[len("stage: "):] for line in done.stdout.splitlines() if line.startswith("stage: ")]
        stage = stages[-1] if stages else "start"
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode} (a segmentation fault is 11)"
        return {"model_type": model_type, "status": "mlx" if stage == "mlx" else "crash",
                "reason": f"the process died while running {stage}: {last}"}
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


def markdown(rows: list[dict], seconds: float) -> str:
    import mlx.core as mx
    import mlx_lm

    from mlx2onnx.verify import runtimes

    exported = [r for r in rows if r["status"] == "exported"]
    columns = [c for c in RUNS if any(c in r for r in exported)]
    lines = [
        "# mlx-lm architectures", "",
        "Written by `python scripts/mlx_lm_sweep.py` (one run, "
        f"{seconds / 60:.0f} min on this 2-core machine); do not edit by hand. Every model module of",
        f"mlx-lm {mlx_lm.__version__} (MLX {mx.__version__}) with a tiny config (`scripts/mlx_lm_configs.py`), random",
        f"weights, `nn.quantize` at 4 bits and group size {GROUP}, exported with default options and run on",
        "7 tokens in each runtime at its default settings (and OpenVINO with `INFERENCE_PRECISION_HINT=f32`,",
        "`DYNAMIC_QUANTIZATION_GROUP_SIZE=0`). A cell: the check's verdict at the default tolerances (float",
        "outputs at the tolerance of the arithmetic the runtime chose, in brackets), the largest logit error",
        "(and over the largest logit: random tiny models can have logits in the hundreds, where float32's",
        "own rounding exceeds the element-wise tolerance on the small ones), and whether the greedy token",
        "at every position is MLX's.", "",
        "| architecture | " + " | ".join(f"{c} {runtimes.runtime_version(RUNS[c][0])}" for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in exported:
        lines.append(f"| {row['model_type']} | " + " | ".join(cell(row.get(c)) for c in columns) + " |")
    for status, title in (("refused", "Refused by the exporter"), ("crash", "Crashed (to fix)"),
                          ("timeout", "Timed out"), ("mlx", "MLX cannot run the tiny model on the CPU"),
                          ("skipped", "Not built by the sweep")):
        group = [r for r in rows if r["status"] == status]
        if group:
            lines += ["", f"{title} ({len(group)}):", ""]
            lines += [f"- {r['model_type']}: {r['reason']}" for r in group]
    noted = [r["model_type"] for r in rows if r["model_type"] in NOTES]
    if noted:
        lines += ["", "Notes:", ""] + [f"- {name}: {NOTES[name]}" for name in noted]
    counts = {s: sum(r["status"] == s for r in rows)
              for s in ("exported", "refused", "crash", "timeout", "mlx", "skipped")}
    passing = {c: sum(1 for r in exported if r.get(c, {}).get("passed")) for c in columns}
    lines += ["", "Totals: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + "; passing: "
              + ", ".join(f"{c} {n}/{len(exported)}" for c, n in passing.items()) + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model types (printed, the page is not written)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(stage_4bit(args.worker, Path(folder))))
        return 0
    from mlx_lm_configs import model_types

    names = args.only.split(",") if args.only else model_types()
    start = time.monotonic()
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(lambda n: one(n, args.timeout), names):
            rows.append(row)
            print(json.dumps(row), flush=True)
    if not args.only:
        page = ROOT / "docs" / "mlx-lm-sweep.md"
        page.write_text(markdown(rows, time.monotonic() - start))
        print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
