"""What the command line's ``--input``, ``--dynamic`` and ``--sizes`` say: parsed, checked
(a clear :class:`~mlx2onnx.targets.UsageError` naming what would work) and bound to the
target's parameters."""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from . import dtypes
from .errors import UsageError


@dataclass(frozen=True)
class InputSpec:
    """``name=SHAPE:DTYPE[:LOW..HIGH]``: a random example input."""

    name: str | None
    shape: tuple[int, ...]
    dtype: mx.Dtype
    low: float | None = None
    high: float | None = None

    def make(self, rng: np.random.Generator) -> mx.array:
        """Random values: floats standard normal (or uniform in [low, high)); integers
        uniform in [low, high) (default [0, 10)); bools fair coin flips."""
        if self.dtype == mx.bool_:
            return mx.array(rng.random(self.shape) < 0.5)
        np_dtype = dtypes.to_numpy(self.dtype)
        if dtypes.is_integer(self.dtype):
            low = 0 if self.low is None else int(self.low)
            high = 10 if self.high is None else int(self.high)
            return mx.array(rng.integers(low, high, size=self.shape, dtype=np_dtype))
        if self.low is not None:
            sample = rng.uniform(self.low, self.high, size=self.shape)
        else:
            sample = rng.standard_normal(self.shape)
        return mx.array(sample.astype(np.float32)).astype(self.dtype)


# The most elements one --input may have (2**28: 1 GiB of float32).
MAX_INPUT_ELEMENTS = 1 << 28

_DTYPE_NAMES = {
    dtypes.name(d): d
    for d in (
        mx.bool_,
        mx.uint8,
        mx.uint16,
        mx.uint32,
        mx.uint64,
        mx.int8,
        mx.int16,
        mx.int32,
        mx.int64,
        mx.float16,
        mx.float32,
        mx.float64,
        mx.bfloat16,
    )
}
_DTYPE_NAMES.update(
    {"bool": mx.bool_, "f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16, "i32": mx.int32, "i64": mx.int64}
)

INPUT_SPEC_HELP = (
    "[NAME=]SHAPE[:DTYPE[:LOW..HIGH]], e.g. x=4x32:float32, ids=2,8:int32:0..128, s=():float32; "
    "DTYPE defaults to float32"
)


def parse_input_spec(text: str) -> InputSpec:
    """Parse one ``--input``; raises :class:`UsageError` saying what would work."""
    original = text
    name = None
    if "=" in text:
        name, _, text = text.partition("=")
        if not name.isidentifier():
            raise UsageError(f"--input {original!r}: {name!r} is not a valid input name")
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise UsageError(f"--input {original!r} is not {INPUT_SPEC_HELP}")
    shape = _parse_shape(parts[0], original)
    dtype = mx.float32
    if len(parts) >= 2:
        key = parts[1].strip().lower()
        if key not in _DTYPE_NAMES:
            raise UsageError(
                f"--input {original!r}: unknown dtype {parts[1]!r}; choose one of "
                f"{', '.join(n for n in _DTYPE_NAMES if len(n) > 3 or n == 'bool')}"
            )
        dtype = _DTYPE_NAMES[key]
    low = high = None
    if len(parts) == 3:
        match = re.fullmatch(r"\s*(-?[0-9.eE+-]+)\s*\.\.\s*(-?[0-9.eE+-]+)\s*", parts[2])
        try:
            low, high = float(match.group(1)), float(match.group(2))
        except (AttributeError, ValueError):
            raise UsageError(f"--input {original!r}: the range must read LOW..HIGH, e.g. 0..128") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise UsageError(f"--input {original!r}: the range {parts[2]} is not finite; give finite bounds")
        if not low < high:
            raise UsageError(f"--input {original!r}: the range {parts[2]} is empty; LOW must be below HIGH")
        if dtypes.is_integer(dtype) or dtype == mx.bool_:
            if dtype == mx.bool_:
                raise UsageError(f"--input {original!r}: bool inputs take no range")
            if low != int(low) or high != int(high):
                raise UsageError(f"--input {original!r}: an integer input's range needs integer bounds, e.g. 0..128")
            info = np.iinfo(dtypes.to_numpy(dtype))
            if low < info.min or high - 1 > info.max:
                raise UsageError(
                    f"--input {original!r}: {dtypes.name(dtype)} holds {info.min}..{info.max + 1} (HIGH excluded); "
                    f"the range {parts[2]} does not fit"
                )
        elif max(abs(low), abs(high)) > float(np.finfo(dtypes.to_numpy(dtype)).max):
            raise UsageError(f"--input {original!r}: the range {parts[2]} exceeds what {dtypes.name(dtype)} holds")
    count = math.prod(shape)
    if count > MAX_INPUT_ELEMENTS:
        raise UsageError(
            f"--input {original!r}: shape {'x'.join(map(str, shape))} has {count} elements, more than "
            f"{MAX_INPUT_ELEMENTS}; give a smaller example (dynamic dimensions can be checked at larger sizes)"
        )
    return InputSpec(name, shape, dtype, low, high)


def _parse_shape(text: str, original: str) -> tuple[int, ...]:
    body = text.strip()
    if body in ("()", "[]", "scalar"):
        return ()
    body = body.strip("()[]")
    pieces = [p.strip() for p in re.split(r"[x,×]", body)]
    if not pieces or any(re.fullmatch(r"[0-9]+", p) is None for p in pieces):
        raise UsageError(
            f"--input {original!r}: shape {text!r} must be non-negative integers joined by 'x' or ',' "
            "(4x32, 2,8) or () for a scalar"
        )
    return tuple(int(p) for p in pieces)


def bind_inputs(fun: Any, specs: list[InputSpec], seed: int) -> tuple[tuple, dict]:
    """Random example inputs for ``fun`` from ``--input`` specs, as (args, kwargs).

    Unnamed specs are positional, in order. A named spec is positional when its name is
    the function's next positional parameter, otherwise a keyword input.
    """
    rng = np.random.default_rng(seed)
    positional_params, accepts, var_kw = _parameters(fun)
    args: list[mx.array] = []
    kwargs: dict[str, mx.array] = {}
    for spec in specs:
        value = spec.make(rng)
        if spec.name is None:
            if kwargs:
                raise UsageError("unnamed --input after a keyword input: give every later input a name")
            args.append(value)
        elif not kwargs and len(args) < len(positional_params) and positional_params[len(args)] == spec.name:
            args.append(value)
        else:
            if spec.name in kwargs:
                raise UsageError(f"--input {spec.name} is given twice")
            if accepts is not None and spec.name not in accepts and not var_kw:
                raise UsageError(
                    f"--input {spec.name}=...: the function has no parameter {spec.name!r}; "
                    f"its parameters are {', '.join(accepts) or '(none)'}"
                )
            kwargs[spec.name] = value
    return tuple(args), kwargs


def _parameters(fun: Any) -> tuple[list[str], list[str] | None, bool]:
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return [], None, True
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    return positional, keywords, var_kw


DYNAMIC_SPEC_HELP = (
    "NAME:AXIS=SYMBOL[,AXIS=SYMBOL...] (SYMBOL%N: sizes in steps of N; SYMBOL:MIN..MAX or "
    "SYMBOL:..MAX: sizes in a range), e.g. input_ids:0=batch,1=seq:..512"
)


def parse_dynamic_specs(texts: list[str]) -> dict | None:
    """``--dynamic`` options -> the ``dynamic`` mapping of :class:`~mlx2onnx.Exporter`."""
    from .capture.dynamic import Dim

    if not texts:
        return None
    spec: dict[str, dict[int, Dim]] = {}
    for original in texts:
        name, sep, rest = original.partition(":")
        if not sep or not name.isidentifier() or not rest:
            raise UsageError(f"--dynamic {original!r} is not {DYNAMIC_SPEC_HELP}")
        for part in rest.split(","):
            match = re.fullmatch(
                r"\s*(-?\d+)\s*=\s*([A-Za-z_]\w*)\s*(?:%\s*(\d+))?\s*(?::\s*(\d*)\s*\.\.\s*(\d+)\s*)?", part
            )
            if match is None:
                raise UsageError(
                    f"--dynamic {original!r}: {part!r} is not AXIS=SYMBOL[%N][:MIN..MAX] ({DYNAMIC_SPEC_HELP})"
                )
            axis, symbol, step, low, high = match.groups()
            if step is not None and int(step) < 1:
                raise UsageError(f"--dynamic {original!r}: the step in {part!r} must be at least 1")
            spec.setdefault(name, {})[int(axis)] = Dim(
                symbol, int(step) if step else 1, int(low) if low else None, int(high) if high is not None else None
            )
    return spec


def parse_sizes(texts: list[str]) -> dict | None:
    """``--sizes SYMBOL=N,N,...`` options -> :attr:`~mlx2onnx.Verifier.sizes`."""
    if not texts:
        return None
    sizes: dict[str, list[int]] = {}
    for original in texts:
        match = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*(\d+(?:\s*,\s*\d+)*)\s*", original)
        if match is None:
            raise UsageError(f"--sizes {original!r} is not SYMBOL=N[,N...], e.g. seq=1,7,64")
        sizes[match.group(1)] = [int(v) for v in match.group(2).split(",")]
    return sizes
