"""The ``mlx2onnx`` command line: export, check, inspect, primitives.

Exit codes (also in ``docs/cli.md``):

    0  success (and, for check, every output within tolerance)
    1  parity mismatch: an output differs, or the model does not fit the callable
    2  usage error: bad arguments, bad --input spec, unknown module or callable
    3  cannot export: unsupported or refused primitive, conversion or verification error
    4  the user's code raised (importing the module, the factory, or the traced function)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_USAGE = 2
EXIT_EXPORT = 3
EXIT_USER = 4

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


class Mismatch(Exception):
    """The model does not fit the callable (exit 1)."""


# -- progress ---------------------------------------------------------------------------
class Progress:
    """A one-line spinner on stderr with the current stage; silent unless stderr is a TTY.

    ``stage(text)`` is a context manager; ``update(text)`` changes the text in place (for
    counters such as ``12/140 primitives``).
    """

    FRAMES = "|/-\\"

    def __init__(self, quiet: bool = False, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._text = ""
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def stage(self, text: str):
        progress = self

        class _Stage:
            def __enter__(self_inner):
                progress.update(text)
                return progress

            def __exit__(self_inner, *exc):
                progress.update("")
                return False

        return _Stage()

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._text = text
        if text and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
        if not text:
            self.close()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _spin(self) -> None:
        for frame in itertools.cycle(self.FRAMES):
            if self._stop.wait(0.1):
                return
            with self._lock:
                text = self._text
            elapsed = time.monotonic() - self._start
            self.stream.write(f"\r\033[K{frame} {text} ({elapsed:.1f}s)")
            self.stream.flush()


# -- error display ----------------------------------------------------------------------
def _user_traceback(error: BaseException) -> str:
    """The user's exception with mlx2onnx's and importlib's frames removed."""
    te = traceback.TracebackException.from_exception(error)

    def keep(frame) -> bool:
        name = frame.filename or ""
        return not (name.startswith(_PACKAGE_DIR) or name.startswith("<frozen importlib"))

    def strip(t: traceback.TracebackException) -> None:
        t.stack = traceback.StackSummary.from_list([f for f in t.stack if keep(f)])
        if t.__cause__ is not None:
            strip(t.__cause__)
        if t.__context__ is not None:
            strip(t.__context__)

    strip(te)
    return "".join(te.format())


def _error(message: str) -> None:
    sys.stderr.write(f"mlx2onnx: error: {message}\n")


def _run_user(fn: Callable, where: str):
    """Run code that calls into the user's function: its own exceptions become UserCodeError."""
    from .errors import Mlx2OnnxError
    from .loading import UserCodeError

    try:
        return fn()
    except Mlx2OnnxError:
        raise
    except Exception as exc:
        raise UserCodeError(where, exc) from exc


# -- shared option handling --------------------------------------------------------------
def _target_and_inputs(ns) -> tuple[Any, tuple, dict, str]:
    from .loading import UsageError, bind_inputs, load_target, parse_input_spec

    specs = [parse_input_spec(s) for s in ns.input or []]
    target = load_target(ns.target, seed=ns.model_seed)
    if specs:
        args, kwargs = bind_inputs(target.fun, specs, ns.seed)
    elif target.args is not None:
        args, kwargs = target.args, target.kwargs
    else:
        raise UsageError(
            f"{ns.target} gives a function without example inputs: pass them with --input, "
            "e.g. --input x=4x32:float32 (or make the callable return (function, args))"
        )
    return target.fun, tuple(args), dict(kwargs), target.label


def _names(text: str | None):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if any("=" in t for t in items):
        pairs = [t.split("=", 1) for t in items]
        from .loading import UsageError

        if any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
            raise UsageError(f"names {text!r}: write either a,b,c or old=new,old2=new2")
        return {old: new for old, new in pairs}
    return items


def _tolerances(ns) -> dict | None:
    from .compare import uniform_tolerances

    return uniform_tolerances(ns.atol, ns.rtol)  # argparse's _tolerance checked them


def _capture(fun, args, kwargs, progress: Progress):
    from .capture import capture

    with progress.stage("tracing the function with MLX"):
        return _run_user(lambda: capture(fun, args, kwargs), "the traced function")


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _spec_text(spec) -> str:
    from .dtypes import name

    return f"{name(spec.dtype)}{list(spec.shape)}"


# -- export -------------------------------------------------------------------------------
def cmd_export(ns, progress: Progress) -> int:
    from .api import Exporter
    from .loading import parse_dynamic_specs
    from .saving import initializer_bytes, save_model

    fun, args, kwargs, label = _target_and_inputs(ns)
    external = {"auto": None, "always": True, "never": False}[ns.external_data]
    exporter = Exporter(
        opset=ns.opset,
        input_names=_names(ns.input_names),
        output_names=_names(ns.output_names),
        path=ns.output,
        overwrite=ns.overwrite,
        external_data=external,
        bfloat16=ns.bfloat16,
        float16=ns.float16,
        optimize=not ns.no_optimize,
        quantized_weights=ns.quantized_weights,
        dynamic=parse_dynamic_specs(ns.dynamic),
    )
    exporter._validate()  # opset and output path, before any work
    plan = None
    if exporter.dynamic:
        from .dynamic import capture_dynamic

        with progress.stage("tracing the function with MLX at several sizes"):
            trace, plan = _run_user(lambda: capture_dynamic(fun, args, kwargs, exporter.dynamic), "the traced function")
    else:
        trace = _capture(fun, args, kwargs, progress)
    with progress.stage(f"translating {len(trace.primitives)} primitives"):
        model = exporter.trace_to_ir(trace, plan)
    with progress.stage(f"checking and saving {ns.output}"):
        save_model(model, ns.output, external_data=external, check=True, overwrite=ns.overwrite)
    nodes = len(model.graph)
    print(
        f"wrote {ns.output}: {label}, opset {exporter.resolved_opset()}, {len(trace.primitives)} MLX primitives "
        f"-> {nodes} ONNX nodes, {len(model.graph.initializers)} initializers "
        f"({_fmt_bytes(initializer_bytes(model))})"
    )
    for value in model.graph.inputs:
        print(f"  input  {value.name}: {_value_text(value)}")
    for value in model.graph.outputs:
        print(f"  output {value.name}: {_value_text(value)}")
    if not ns.check:
        return EXIT_OK
    report = _verify(ns.output, fun, args, kwargs, ns, progress)
    print(report)
    return EXIT_OK if report.passed else EXIT_MISMATCH


def _value_text(value) -> str:
    from . import dtypes

    dtype = dtypes.name(dtypes.from_onnx(value.dtype)) if value.dtype is not None else "?"
    shape = [d if isinstance(d, int) else str(d) for d in value.shape] if value.shape is not None else "?"
    return f"{dtype}[{', '.join(map(str, shape))}]" if shape != "?" else f"{dtype}?"


def _verify(model, fun, args, kwargs, ns, progress: Progress):
    from .verify import Verifier

    from .loading import parse_sizes

    verifier = Verifier(seed=ns.seed, random_inputs=not ns.example_inputs, tolerances=_tolerances(ns),
                        sizes=parse_sizes(ns.sizes))
    with progress.stage("running onnxruntime and MLX"):
        return verifier.verify(model, fun, *args, **kwargs)


# -- check ----------------------------------------------------------------------------------
def _load_model(path: str):
    import onnx

    from .loading import UsageError

    if not os.path.isfile(path):
        raise UsageError(f"no such model file: {path}")
    try:
        return onnx.load(path, load_external_data=False)
    except Exception as exc:
        raise UsageError(f"{path} is not a readable ONNX model: {exc}") from None


def _check_interface(proto, fun, args, kwargs) -> None:
    """Raise Mismatch when the model's inputs cannot be fed from the callable's inputs."""
    import onnx_ir as ir

    from . import dtypes
    from .capture import normalize_inputs
    from .metadata import float_policy, io as io_metadata

    io = io_metadata(proto)
    policy = float_policy(proto)
    signature = normalize_inputs(args, kwargs)
    positional, keywords = signature.arrays()
    graph_inputs = {i.name: i for i in proto.graph.input}
    problems = []
    for entry in io["inputs"]:
        if entry["keyword"] is None:
            if entry["position"] >= len(positional):
                problems.append(f"the model's input {entry['name']!r} is positional array {entry['position']}, "
                                f"but the callable has {len(positional)} positional array(s)")
                continue
            array = positional[entry["position"]]
        else:
            if entry["keyword"] not in keywords:
                problems.append(f"the model's input {entry['name']!r} is keyword {entry['keyword']!r}, "
                                f"which the callable's inputs do not have")
                continue
            array = keywords[entry["keyword"]]
        value = graph_inputs.get(entry["name"])
        if value is None:
            continue
        tensor = value.type.tensor_type
        want_shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        got_shape = list(array.shape)
        want_dtype = dtypes.from_onnx(ir.DataType(tensor.elem_type))
        fixed = all(d is not None for d in want_shape)
        if want_dtype != policy.get(array.dtype, array.dtype) or (fixed and want_shape != got_shape) or len(want_shape) != len(got_shape):
            problems.append(
                f"input {entry['name']!r}: the model takes {dtypes.name(want_dtype)}{want_shape}, "
                f"the callable gives {dtypes.name(array.dtype)}{got_shape}"
            )
    used = {e["position"] for e in io["inputs"] if e["keyword"] is None}
    extra = [f"positional array {i}" for i in range(len(positional)) if i not in used]
    extra += [f"keyword {k!r}" for k in keywords if k not in {e["keyword"] for e in io["inputs"]}]
    if extra:
        problems.append(f"the callable has inputs the model does not take: {', '.join(extra)}")
    if problems:
        raise Mismatch("the model does not match the callable: " + "; ".join(problems))


def cmd_check(ns, progress: Progress) -> int:
    proto = _load_model(ns.model)
    fun, args, kwargs, label = _target_and_inputs(ns)
    try:
        _check_interface(proto, fun, args, kwargs)
    except Mismatch as exc:
        if ns.json:
            print(json.dumps({"passed": False, "problem": str(exc)}, indent=2))
        else:
            _error(str(exc))
        return EXIT_MISMATCH
    report = _verify(ns.model, fun, args, kwargs, ns, progress)
    result = report.to_dict()
    located = None
    if ns.localize and not report.passed and not report.problems:
        from .localize import localize

        located = localize(
            ns.model, fun, args, kwargs, seed=ns.seed, random_inputs=not ns.example_inputs,
            tolerances=_tolerances(ns), progress=progress,
        )
        result["localize"] = located.to_dict()
    if ns.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(f"{ns.model} vs {label}")
        print(report)
        if located is not None:
            print(located)
        elif ns.localize and report.problems:
            print("not localized: the problems above come before any primitive")
        elif ns.localize:
            print("every output matches; nothing to localize")
        elif not report.passed:
            print("run again with --localize to find the first MLX primitive whose ONNX translation diverges")
    return EXIT_OK if report.passed else EXIT_MISMATCH


# -- inspect ---------------------------------------------------------------------------------
def cmd_inspect(ns, progress: Progress) -> int:
    from . import records, registry

    fun, args, kwargs, label = _target_and_inputs(ns)
    trace = _capture(fun, args, kwargs, progress)
    counts = trace.primitive_counts()
    status = {}
    for name in counts:
        if registry.lookup(name) is not None:
            status[name] = "handled"
        elif registry.refusal(name) is not None:
            status[name] = "refused"
        else:
            status[name] = "no handler"
    const_bytes = sum(c.spec.size * c.spec.dtype.size for c in trace.constants)
    missing = sorted(n for n, s in status.items() if s == "no handler")
    refused = sorted(n for n, s in status.items() if s == "refused")
    if ns.json:
        data = {
            "function": trace.function_name,
            "device": trace.device,
            "inputs": [{"name": i.label, "shape": list(i.spec.shape), "dtype": _spec_text(i.spec).split("[")[0]}
                       for i in trace.inputs],
            "outputs": [{"name": o.label or f"output_{k}", "shape": list(o.spec.shape),
                         "dtype": _spec_text(o.spec).split("[")[0]} for k, o in enumerate(trace.outputs)],
            "primitives": {n: {"count": c, "status": status[n]} for n, c in sorted(counts.items())},
            "no_handler": missing,
            "refused": {n: str(registry.refusal(n)) for n in refused},
            "constants": {"count": len(trace.constants), "bytes": const_bytes},
        }
        if ns.records:
            data["records"] = [
                {
                    "index": p.index,
                    "name": p.name,
                    "arguments": {k: records.format_value(v, limit=10_000) for k, v in
                                  records.decode(p.name, p.arguments).items()},
                    "inputs": [_spec_text(s) for s in p.inputs],
                    "outputs": [_spec_text(s) for s in p.outputs],
                }
                for p in trace.primitives
            ]
        print(json.dumps(data, indent=2))
    else:
        print(f"{label} ({trace.function_name}) traced on {trace.device}")
        print("inputs:  " + ", ".join(f"{i.label} {_spec_text(i.spec)}" for i in trace.inputs))
        print("outputs: " + ", ".join(f"{o.label or f'output_{k}'} {_spec_text(o.spec)}"
                                       for k, o in enumerate(trace.outputs)))
        print(f"constants: {len(trace.constants)} ({_fmt_bytes(const_bytes)})")
        print(f"primitives: {len(trace.primitives)} records, {len(counts)} kinds")
        width = max((len(n) for n in counts), default=4)
        for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {name:<{width}}  {count:>5}  {status[name]}")
        if missing:
            print(f"no handler: {', '.join(f'{n} (x{counts[n]})' for n in missing)}")
        for name in refused:
            print(f"refused: {name} (x{counts[name]}): {registry.refusal(name)}")
        if not missing and not refused:
            print("every primitive has a handler")
        if ns.records:
            print("records:")
            for p in trace.primitives:
                ins = ", ".join(f"{s.name} {_spec_text(s)}" for s in p.inputs)
                outs = ", ".join(f"{s.name} {_spec_text(s)}" for s in p.outputs)
                decoded = records.describe(p.name, p.arguments)
                print(f"  {p.index:>4}  {p.name}{' ' + decoded if decoded else ''}  ({ins}) -> ({outs})")
    return EXIT_EXPORT if missing or refused else EXIT_OK


# -- primitives ------------------------------------------------------------------------------
def coverage_rows() -> list[tuple[str, str, str]]:
    """(primitive, status, note) for every primitive MLX can emit and every registered one.

    Uses :mod:`mlx2onnx.coverage` (statuses handled / refused / not emitted / missing) when
    it is available, else the registry alone.
    """
    from . import registry

    try:
        from . import coverage
    except ImportError:
        coverage = None
    if coverage is not None and hasattr(coverage, "rows"):
        result = []
        for row in coverage.rows({}, {}):
            name, status, _ops, restriction, _tested, reason = row
            result.append((name.strip("`"), status, reason if reason else restriction.replace("\\|", "|")))
        return result
    rows = []
    for name, fn in registry.handlers().items():
        doc = (fn.__doc__ or "").strip().splitlines()
        rows.append((name, "handled", doc[0].strip() if doc else ""))
    for name, refusal in registry.refusals().items():
        rows.append((name, "refused", str(refusal)))
    return sorted(rows)


def cmd_primitives(ns, progress: Progress) -> int:
    if ns.full:
        from . import coverage

        with progress.stage("exporting every parity case to collect ONNX ops and dtypes"):
            text = coverage.generate()
        print(text, end="")
        return EXIT_OK
    rows = coverage_rows()
    if ns.status:
        rows = [r for r in rows if r[1].split(" ")[0] == ns.status or r[1] == ns.status]
    if ns.json:
        print(json.dumps([{"primitive": n, "status": s, "note": d} for n, s, d in rows], indent=2))
        return EXIT_OK
    width = max((len(n) for n, _, _ in rows), default=9)
    swidth = max((len(s) for _, s, _ in rows), default=6)
    print(f"{'primitive':<{width}}  {'status':<{swidth}}  note")
    for name, status, note in rows:
        print(f"{name:<{width}}  {status:<{swidth}}  {note}")
    counts: dict[str, int] = {}
    for _, status, _ in rows:
        key = status.split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    print("\n" + ", ".join(f"{c} {k}" for k, c in counts.items()))
    return EXIT_OK


# -- check-suite ---------------------------------------------------------------------------
def cmd_check_suite(ns, progress: Progress) -> int:
    from .loading import UsageError
    from .report import write_html, write_json, write_junit
    from .suite import load_suite, run_suite, summary

    suite = Path(ns.suite)
    if not suite.is_file():
        raise UsageError(f"no such suite file: {ns.suite}")
    out = Path(ns.output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output {ns.output!r} is a file; give a folder for the reports")
    total = len(load_suite(suite))  # every error in the file, before anything runs
    print(f"{suite}: {total} target(s)")

    def report_progress(k, n, item, rows):
        for row in rows:
            verdict = "PASS" if row.passed else "FAIL"
            reason = f"  {row.reason.splitlines()[0]}" if row.reason and not row.passed else ""
            print(f"[{k}/{n}] {row.name} [{row.runtime}] {verdict} ({row.seconds:.1f} s){reason}", flush=True)

    with progress.stage(f"checking {total} target(s)"):
        rows = run_suite(suite, progress=report_progress)
    result = summary(rows)
    out.mkdir(parents=True, exist_ok=True)
    name = suite.stem
    write_json(rows, result, out / "report.json", name)
    write_junit(rows, result, out / "junit.xml", name)
    write_html(rows, result, out / "report.html", name)
    print(f"{result['passed']} passed, {result['failed']} failed")
    print(f"reports: {out / 'report.json'}, {out / 'junit.xml'}, {out / 'report.html'}")
    return EXIT_OK if not result["failed"] else EXIT_MISMATCH


# -- parser -----------------------------------------------------------------------------------
_EPILOG = """exit codes:
  0  success
  1  parity mismatch (or the model does not fit the callable)
  2  usage error: bad arguments, bad --input spec, unknown module or callable
  3  cannot export: unsupported/refused primitive, conversion or verification error
  4  the user's code raised (its traceback is shown)

targets:
  mlp | encoder | llama          a bundled reference model
  package.module:callable        importable from the current directory
  path/to/file.py:callable       loaded from that file
  path/to/model_folder           an mlx-lm model folder (config.json + safetensors)
The callable is a factory returning a function or mlx.nn.Module, or a (function, args)
or (function, args, kwargs) tuple; a factory that takes `seed` gets --model-seed. A callable
with required parameters (or an nn.Module object) is itself the function to export.
"""


def _para(text: str) -> str:
    import textwrap

    return textwrap.fill(text, width=88)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; seeds are integers >= 0")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number >= 0 (NaN or inf would pass anything)")
    return value


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__
    from .loading import DYNAMIC_SPEC_HELP, INPUT_SPEC_HELP

    parser = argparse.ArgumentParser(
        prog="mlx2onnx",
        description="Export Apple MLX functions and models to ONNX, and check the result against MLX.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlx2onnx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="no progress display on stderr")

    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--input", "-i", action="append", metavar="SPEC",
                        help=f"an example input with random values, repeatable: {INPUT_SPEC_HELP}. "
                             "Replaces the example inputs the callable returns")
    target.add_argument("--seed", type=_seed, default=0,
                        help="seed of the random inputs: the --input values and the check's fresh inputs (default 0)")
    target.add_argument("--model-seed", type=_seed, default=0,
                        help="passed as `seed` to a factory that takes one, e.g. the reference models' weights "
                             "(default 0; check with the seed the model was exported with)")

    checking = argparse.ArgumentParser(add_help=False)
    checking.add_argument("--atol", type=_tolerance, help="absolute tolerance for every float dtype (default per dtype)")
    checking.add_argument("--rtol", type=_tolerance, help="relative tolerance for every float dtype (default per dtype)")
    checking.add_argument("--sizes", action="append", metavar="SYMBOL=N,N",
                          help="for a model with dynamic dimensions, check it at these sizes of SYMBOL "
                               "(repeatable; every combination; default: the example sizes, the smallest, and "
                               "one beyond the traced sizes)")
    checking.add_argument("--example-inputs", action="store_true",
                          help="compare on the example inputs themselves instead of fresh random ones")

    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "export", parents=[common, target, checking], formatter_class=fmt,
        help="export a function or model to an ONNX file",
        description=_para("Trace TARGET with MLX on its example inputs, translate every primitive to ONNX, "
                    "run onnx.checker and write the model atomically (nothing is written on failure)."),
        epilog="example:\n  mlx2onnx export mlp -o mlp.onnx --check\n"
               "  mlx2onnx export mymodel.py:build -i x=1x16:float32 -o m.onnx --opset 18\n\n" + _EPILOG,
    )
    p.add_argument("target", metavar="TARGET", help="mlp | encoder | llama | MODULE:CALLABLE | path.py:CALLABLE")
    p.add_argument("-o", "--output", required=True, metavar="FILE.onnx", help="where to write the model")
    p.add_argument("--opset", type=int, help="target ONNX opset, 17 to 28 (default: the newest onnxruntime runs)")
    p.add_argument("--input-names", metavar="NAMES",
                   help="graph input names: a,b in input order, or old=new pairs (default: parameter names)")
    p.add_argument("--output-names", metavar="NAMES", help="graph output names a,b in output order")
    p.add_argument("--overwrite", action="store_true", help="replace FILE.onnx if it exists")
    p.add_argument("--external-data", choices=("auto", "always", "never"), default="auto",
                   help="weights in FILE.onnx.data: above 2 GB (auto, default), always or never")
    p.add_argument("--bfloat16", choices=("auto", "keep", "float16", "float32"), default="auto",
                   help="dtype policy: how bfloat16 values are carried in the graph (default auto: keep when "
                        "onnxruntime has bfloat16 kernels, else float32)")
    p.add_argument("--float16", choices=("keep", "float32"), default="keep",
                   help="dtype policy: carry float16 values as float16 (default) or float32")
    p.add_argument("--quantized-weights", choices=("packed", "dequantize", "matmulnbits"), default="packed",
                   help="quantized weights: MLX's packed codes unpacked in the graph (default), dequantized "
                        "at export time, or onnxruntime's com.microsoft.MatMulNBits where it fits")
    p.add_argument("--dynamic", action="append", metavar="SPEC",
                   help=f"dimensions that may change size, repeatable: {DYNAMIC_SPEC_HELP.replace('%', '%%')}. The function is "
                        "traced at several sizes; a dimension it fixes is refused with the primitive that fixes it")
    p.add_argument("--no-optimize", action="store_true",
                   help="skip the optimisation passes (broadcast dropping, constant folding, fusions, CSE); "
                        "keeps every MLX intermediate as a named ONNX value, which helps check --localize")
    p.add_argument("--check", action="store_true",
                   help="after writing, compare onnxruntime with MLX on random inputs (exit 1 on mismatch)")
    p.set_defaults(run=cmd_export)

    p = sub.add_parser(
        "check", parents=[common, target, checking], formatter_class=fmt,
        help="compare an ONNX model with the MLX function it came from",
        description=_para("Run MODEL in onnxruntime and TARGET in MLX on the same seeded random inputs "
                    "(shaped like the example inputs) and report, per output, the max absolute and "
                    "relative error against the tolerance. Exit 1 when any output differs."),
        epilog="example:\n  mlx2onnx check mlp.onnx mlp\n  mlx2onnx check m.onnx mymodel.py:build --localize\n\n"
               + _EPILOG,
    )
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("target", metavar="TARGET", help="the callable MODEL was exported from")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--localize", action="store_true",
                   help="on a mismatch, expose intermediate values and name the first MLX primitive "
                        "whose ONNX translation diverges (each primitive is evaluated in MLX on the "
                        "ONNX side's own inputs)")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser(
        "inspect", parents=[common, target], formatter_class=fmt,
        help="show what an export would contain, without exporting",
        description=_para("Trace TARGET and show its inputs, outputs, constants, a histogram of MLX "
                    "primitives and which have no handler. Exit 3 when some primitive cannot be exported."),
        epilog="example:\n  mlx2onnx inspect llama --records\n\n" + _EPILOG,
    )
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--records", action="store_true",
                   help="list every primitive record with its arguments decoded (type=Sum axes=[1])")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(run=cmd_inspect)

    p = sub.add_parser(
        "primitives", parents=[common], formatter_class=fmt,
        help="the table of MLX primitives mlx2onnx supports or refuses",
        description=_para("List every MLX primitive the export callback can report: handled (with the "
                    "handler's restrictions), refused (with the reason and what to do instead), not emitted "
                    "(MLX removes it before export) or missing."),
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--status", choices=("handled", "refused", "missing", "not emitted"),
                   help="only the primitives with this status")
    p.add_argument("--full", action="store_true",
                   help="the complete docs/primitives.md page, with the ONNX ops each handler emits and the "
                        "tested dtypes (exports every parity case: slow, needs a source checkout's tests/)")
    p.set_defaults(run=cmd_primitives)

    p = sub.add_parser(
        "check-suite", parents=[common], formatter_class=fmt,
        help="export and check every target of a suite file; JSON, JUnit XML and HTML reports",
        description=_para("Read SUITE.toml (a list of targets with their inputs, dynamic dimensions, sizes, "
                          "runtimes and tolerances; see docs/check-suite.md), export and check each one (a "
                          "failing target does not stop the others), and write report.json, junit.xml and "
                          "report.html into the output folder. Exit 1 when any check fails, 2 for a bad suite file."),
        epilog="example:\n  mlx2onnx check-suite models.toml -o reports/\n",
    )
    p.add_argument("suite", metavar="SUITE.toml")
    p.add_argument("-o", "--output", default="check-suite-report", metavar="DIR",
                   help="folder for report.json, junit.xml and report.html (default: check-suite-report)")
    p.set_defaults(run=cmd_check_suite)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help/--version, 2 for bad arguments
        return int(exc.code or 0)
    if getattr(ns, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .errors import CheckOptionError, ExportOptionError, Mlx2OnnxError, UserFunctionError, VerificationError
    from .loading import UsageError, UserCodeError

    progress = Progress(quiet=ns.quiet)
    try:
        return ns.run(ns, progress)
    except UsageError as exc:
        progress.close()
        _error(str(exc))
        return EXIT_USAGE
    except (ExportOptionError, CheckOptionError) as exc:
        progress.close()
        _error(str(exc))
        return EXIT_USAGE
    except (UserCodeError, UserFunctionError) as exc:
        progress.close()
        sys.stderr.write(f"mlx2onnx: {exc.where} raised an exception:\n")
        sys.stderr.write(_user_traceback(exc.error))
        return EXIT_USER
    except VerificationError as exc:
        progress.close()
        _error(f"verification failed: {exc}")
        return EXIT_EXPORT
    except Mlx2OnnxError as exc:
        progress.close()
        _error(str(exc))
        return EXIT_EXPORT
    except KeyboardInterrupt:
        progress.close()
        sys.stderr.write("mlx2onnx: interrupted\n")
        return 130
    except BrokenPipeError:  # e.g. `mlx2onnx primitives | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception:  # a bug in mlx2onnx itself: show our traceback, exit as a failed export
        progress.close()
        sys.stderr.write("mlx2onnx: internal error (please report it):\n" + traceback.format_exc())
        return EXIT_EXPORT
    finally:
        progress.close()


if __name__ == "__main__":
    sys.exit(main())
