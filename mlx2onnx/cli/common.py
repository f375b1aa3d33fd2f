"""What every command shares: exit codes, error display, the target and its inputs."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from .progress import Progress

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_USAGE = 2
EXIT_EXPORT = 3
EXIT_USER = 4
EXIT_WRITE = 5


def exit_code(exc: BaseException) -> tuple[int, str]:
    """The exit code of a library error, and the words put before its message: the one
    place an error becomes an exit code (the epilog of ``mlx2onnx --help`` lists them)."""
    from ..errors import CheckOptionError, ExportOptionError, UsageError, UserFunctionError, VerificationError

    if isinstance(exc, (UsageError, ExportOptionError, CheckOptionError)):
        return EXIT_USAGE, ""
    if isinstance(exc, UserFunctionError):
        return EXIT_USER, ""
    if isinstance(exc, VerificationError):
        return EXIT_EXPORT, "verification failed: "
    return EXIT_EXPORT, ""


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)  # the mlx2onnx package


# -- error display ----------------------------------------------------------------------
def user_traceback(error: BaseException) -> str:
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


def error(message: str) -> None:
    sys.stderr.write(f"mlx2onnx: error: {message}\n")


def run_user(fn: Callable, where: str):
    """Run code that calls into the user's function: its own exceptions become UserFunctionError."""
    from ..errors import Mlx2OnnxError, UserFunctionError

    try:
        return fn()
    except Mlx2OnnxError:
        raise
    except Exception as exc:
        raise UserFunctionError(where, exc) from exc


# -- shared option handling --------------------------------------------------------------
def target_and_inputs(ns) -> tuple[Any, tuple, dict, str]:
    from ..errors import UsageError
    from ..specs import bind_inputs, parse_input_spec
    from ..targets import load_target

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


def names(text: str | None):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if any("=" in t for t in items):
        pairs = [t.split("=", 1) for t in items]
        from ..errors import UsageError

        if any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
            raise UsageError(f"names {text!r}: write either a,b,c or old=new,old2=new2")
        return {old: new for old, new in pairs}
    return items


def tolerances(ns) -> dict | None:
    from ..verify.compare import uniform_tolerances

    return uniform_tolerances(ns.atol, ns.rtol)  # argparse's tolerance_number checked them


def capture_traced(fun, args, kwargs, progress: Progress):
    from ..capture.tracing import capture

    with progress.stage("tracing the function with MLX"):
        return run_user(lambda: capture(fun, args, kwargs), "the traced function")


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def spec_text(spec) -> str:
    from ..dtypes import name

    return f"{name(spec.dtype)}{list(spec.shape)}"


def value_text(value) -> str:
    from .. import dtypes

    dtype = dtypes.name(dtypes.from_onnx(value.dtype)) if value.dtype is not None else "?"
    shape = [d if isinstance(d, int) else str(d) for d in value.shape] if value.shape is not None else "?"
    return f"{dtype}[{', '.join(map(str, shape))}]" if shape != "?" else f"{dtype}?"


def runtime_options(ns) -> dict[str, str]:
    """``--runtime-option KEY=VALUE`` (repeatable) as a mapping."""
    from ..errors import UsageError

    options = {}
    for spec in getattr(ns, "runtime_option", None) or ():
        key, sep, value = spec.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--runtime-option {spec!r}: write KEY=VALUE, e.g. INFERENCE_PRECISION_HINT=f32 "
                "or session.qdq_matmulnbits_accuracy_level=0"
            )
        options[key.strip()] = value.strip()
    return options


def verify_against(model, fun, args, kwargs, ns, progress: Progress):
    from ..specs import parse_sizes
    from ..verify.parity import Verifier

    verifier = Verifier(
        seed=ns.seed,
        random_inputs=not ns.example_inputs,
        tolerances=tolerances(ns),
        sizes=parse_sizes(ns.sizes),
        runtime=ns.runtime,
        runtime_options=runtime_options(ns),
        reference=getattr(ns, "reference", "device"),
    )
    with progress.stage(f"running {ns.runtime} and MLX"):
        return verifier.verify(model, fun, *args, **kwargs)
