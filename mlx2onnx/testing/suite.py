"""``mlx2onnx check-suite SUITE.toml``: export and check a list of targets in one run.

The suite file (TOML; documented in ``docs/check-suite.md``)::

    runtimes = ["onnxruntime"]          # defaults for every target (any target key but name/target)
    seed = 0

    [[targets]]
    name = "mlp"                        # the row's name in the reports (default: target)
    target = "mlp"                      # bundled model, MODULE:CALLABLE or path/to/file.py:CALLABLE
    inputs = ["x=4x32:float32"]         # --input specs (default: the callable's own example)
    dynamic = ["x:0=batch"]             # --dynamic specs
    sizes = ["batch=1,3"]               # --sizes specs
    atol = 1e-4                         # for every float dtype (default per dtype)
    rtol = 1e-4
    opset = 18
    model_seed = 0                      # passed to a factory that takes `seed`
    runtime_options = { openvino = { INFERENCE_PRECISION_HINT = "f32" } }  # per runtime (default: none)

Relative paths and dotted modules are resolved from the suite file's folder. A target
that fails (cannot be loaded, exported, or does not match) is reported and the others
still run. Every error in the file itself is found before anything runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Mlx2OnnxError, UsageError, UserFunctionError

TARGET_KEYS = {
    "name": str,
    "target": str,
    "inputs": list,
    "dynamic": list,
    "sizes": list,
    "runtimes": list,
    "atol": (int, float),
    "rtol": (int, float),
    "opset": int,
    "seed": int,
    "model_seed": int,
    "runtime_options": dict,
}
DEFAULT_KEYS = set(TARGET_KEYS) - {"name", "target"}


@dataclass(frozen=True)
class SuiteTarget:
    name: str
    target: str
    options: dict


@dataclass
class Row:
    """One target checked in one runtime."""

    name: str
    target: str
    runtime: str
    passed: bool
    reason: str = ""
    seconds: float = 0.0
    report: dict | None = None
    outputs: list = field(default_factory=list)  # OutputReport objects, for the histograms

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "target": self.target,
            "runtime": self.runtime,
            "passed": self.passed,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "report": self.report,
        }


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read the suite file {str(path)!r}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None


def _check_keys(table: dict, allowed: dict | set, where: str) -> None:
    for key, value in table.items():
        if key not in allowed:
            raise UsageError(f"{where}: unknown key {key!r}; the keys are {', '.join(sorted(allowed))}")
        kind = TARGET_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise UsageError(f"{where}: {key} = {value!r} should be a {getattr(kind, '__name__', 'number')}")
        if kind is list and not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: {key} should be a list of strings")
        if key in ("atol", "rtol") and (not math.isfinite(value) or value < 0):
            raise UsageError(f"{where}: {key} = {value!r}; a tolerance is a finite number >= 0")
        if key in ("seed", "model_seed") and value < 0:
            raise UsageError(f"{where}: {key} = {value!r}; seeds are integers >= 0")


def load_suite(path: str | os.PathLike) -> list[SuiteTarget]:
    """The suite's targets with the defaults applied; UsageError naming what is wrong."""
    from ..specs import parse_dynamic_specs, parse_input_spec, parse_sizes
    from .check import RUNTIMES

    path = Path(path)
    data = _toml(path)
    targets = data.pop("targets", None)
    _check_keys(data, DEFAULT_KEYS, f"{path} (top level)")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, dict) for t in targets):
        raise UsageError(f'{path}: no [[targets]] tables; each target needs at least target = "MODULE:CALLABLE"')
    result, names = [], set()
    for k, table in enumerate(targets, 1):
        where = f"{path}, target {k}"
        _check_keys(table, TARGET_KEYS, where)
        if "target" not in table:
            raise UsageError(f"{where}: no 'target' key (a bundled model, MODULE:CALLABLE or file.py:CALLABLE)")
        options = {**data, **{key: v for key, v in table.items() if key not in ("name", "target")}}
        name = table.get("name", table["target"])
        if name in names:
            raise UsageError(f"{where}: the name {name!r} is used twice; give each target its own name")
        names.add(name)
        for spec in options.get("inputs", []):
            parse_input_spec(spec)
        parse_dynamic_specs(options.get("dynamic", []))
        parse_sizes(options.get("sizes", []))
        unknown = [r for r in options.get("runtimes", ["onnxruntime"]) if r not in RUNTIMES]
        if unknown:
            raise UsageError(
                f"{where}: runtimes {unknown} are not available; this version checks in {', '.join(RUNTIMES)}"
            )
        for runtime, table in options.get("runtime_options", {}).items():
            if (
                runtime not in RUNTIMES
                or not isinstance(table, dict)
                or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in table.values())
            ):
                raise UsageError(
                    f"{where}: runtime_options.{runtime} must be a table of option = value for one of "
                    f"{', '.join(RUNTIMES)}, e.g. runtime_options = {{ openvino = {{ "
                    'INFERENCE_PRECISION_HINT = "f32" }} }}'
                )
        result.append(SuiteTarget(name, table["target"], options))
    return result


@contextlib.contextmanager
def _in_folder(folder: Path):
    old, added = os.getcwd(), str(folder)
    os.chdir(folder)
    sys.path.insert(0, added)
    try:
        yield
    finally:
        os.chdir(old)
        if added in sys.path:
            sys.path.remove(added)


def run_target(item: SuiteTarget) -> list[Row]:
    """Load, export and check one target in each of its runtimes; failures become rows."""
    from ..exporter import Exporter
    from ..specs import bind_inputs, parse_dynamic_specs, parse_input_spec, parse_sizes
    from ..targets import load_target
    from ..verify.compare import uniform_tolerances
    from ..verify.parity import Verifier
    from .check import Check

    opts = item.options
    runtimes = list(opts.get("runtimes", ["onnxruntime"]))
    start = time.monotonic()

    def rows(passed: bool, reason: str, result=None) -> list[Row]:
        out = []
        for runtime in runtimes:
            report = result.reports.get(runtime) if result is not None else None
            out.append(
                Row(
                    item.name,
                    item.target,
                    runtime,
                    passed,
                    reason,
                    time.monotonic() - start,
                    report.to_dict() if report is not None else None,
                    list(report.outputs) if report is not None else [],
                )
            )
        return out

    try:
        loaded = load_target(item.target, seed=opts.get("model_seed", 0))
        specs = [parse_input_spec(s) for s in opts.get("inputs", [])]
        if specs:
            args, kwargs = bind_inputs(loaded.fun, specs, opts.get("seed", 0))
        elif loaded.args is not None:
            args, kwargs = loaded.args, loaded.kwargs
        else:
            return rows(
                False, f'{item.target} gives a function without example inputs: add inputs = ["x=4x32:float32"]'
            )
        tolerances = uniform_tolerances(opts.get("atol"), opts.get("rtol"))
        check = Check(
            exporter=Exporter(opset=opts.get("opset"), dynamic=parse_dynamic_specs(opts.get("dynamic", []))),
            verifier=Verifier(
                seed=opts.get("seed", 0), tolerances=tolerances, sizes=parse_sizes(opts.get("sizes", []))
            ),
            runtimes=runtimes,
            runtime_options=opts.get("runtime_options", {}),
        )
        result = check.run(loaded.fun, *args, **kwargs)
    except UsageError as exc:
        return rows(False, f"bad target: {exc}")
    except UserFunctionError as exc:
        return rows(False, f"{exc.where} raised {type(exc.error).__name__}: {exc.error}")
    except Mlx2OnnxError as exc:
        return rows(False, str(exc))
    except Exception as exc:  # the user's function raised while traced: their error, this row only
        return rows(False, f"raised {type(exc).__name__}: {exc}")
    return rows(result.passed, result.failure, result)


def run_suite(path: str | os.PathLike, progress=None) -> list[Row]:
    """Every target of the suite file, in order; ``progress(k, total, item, rows)`` after each."""
    path = Path(path).resolve()
    targets = load_suite(path)
    all_rows: list[Row] = []
    with _in_folder(path.parent):
        for k, item in enumerate(targets, 1):
            got = run_target(item)
            all_rows += got
            if progress is not None:
                progress(k, len(targets), item, got)
    return all_rows


def summary(rows: list[Row]) -> dict[str, Any]:
    failed = [r for r in rows if not r.passed]
    return {
        "checks": len(rows),
        "passed": len(rows) - len(failed),
        "failed": len(failed),
        "failing": [f"{r.name} [{r.runtime}]" for r in failed],
    }
