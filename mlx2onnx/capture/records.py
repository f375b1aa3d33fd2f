"""Decode primitive records' ``arguments`` into named fields.

MLX's export callback reports each primitive's state as a bare list (``Reduce
[2, [1]]``). :data:`FIELDS` names every position for each primitive of
MLX reports (``docs/records.md`` is generated from it), and :data:`ENUMS` turns enum codes into their names, so
``describe("Reduce", (2, (1,)))`` reads ``type=Sum axes=[1]``. The interpreter and the
command line's ``inspect --records`` both decode through :func:`decode`.
"""

from __future__ import annotations

from typing import Any, Mapping

import mlx.core as mx

# Enum codes, as MLX 0.32 writes them.
REDUCE_TYPES = {0: "And", 1: "Or", 2: "Sum", 3: "Prod", 4: "Min", 5: "Max"}
SCAN_TYPES = {0: "Max", 1: "Min", 2: "Sum", 3: "Prod", 4: "LogAddExp"}
SCATTER_TYPES = {0: "Max", 1: "Min", 2: "Sum", 3: "Prod", 4: "None"}
SCATTER_AXIS_TYPES = {0: "Sum", 1: "None"}
ARG_REDUCE_TYPES = {0: "ArgMin", 1: "ArgMax"}
BITWISE_OPS = {0: "And", 1: "Or", 2: "Xor", 3: "LeftShift", 4: "RightShift"}
LOG_BASES = {0: "two", 1: "ten", 2: "e"}
QUANTIZATION_MODES = {0: "affine", 1: "mxfp4", 2: "mxfp8", 3: "nvfp4"}
MATH_MODES = {0: "Safe", 1: "Relaxed", 2: "Fast"}

# Which field of which primitive is an enum, and its table.
ENUMS: dict[tuple[str, str], Mapping[int, str]] = {
    ("Reduce", "type"): REDUCE_TYPES,
    ("Scan", "type"): SCAN_TYPES,
    ("Scatter", "reduce"): SCATTER_TYPES,
    ("SliceUpdate", "reduce"): SCATTER_TYPES,
    ("ScatterAxis", "reduce"): SCATTER_AXIS_TYPES,
    ("ArgReduce", "type"): ARG_REDUCE_TYPES,
    ("BitwiseBinary", "op"): BITWISE_OPS,
    ("Log", "base"): LOG_BASES,
    ("QuantizedMatmul", "mode"): QUANTIZATION_MODES,
    ("GatherQMM", "mode"): QUANTIZATION_MODES,
    ("Quantize", "mode"): QUANTIZATION_MODES,
    ("CustomKernel", "math_mode"): MATH_MODES,
}

_NO_ARGUMENTS = (
    # unary
    "Abs", "Negative", "Sign", "Floor", "Ceil", "Round", "Square", "Exp", "Expm1", "Log1p",
    "Sin", "Cos", "Tan", "Sinh", "Cosh", "Tanh", "ArcSin", "ArcCos", "ArcTan", "ArcSinh",
    "ArcCosh", "ArcTanh", "Sigmoid", "Erf", "ErfInv", "LogicalNot", "Conjugate", "Real", "Imag",
    # binary / ternary
    "Add", "Subtract", "Multiply", "Divide", "FloorDivide", "Remainder", "DivMod", "Power",
    "Maximum", "Minimum", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
    "LogicalAnd", "LogicalOr", "ArcTan2", "LogAddExp", "Select",
    # others
    "LogSumExp", "Matmul", "Full", "Depends", "MaskedScatter", "QRF",
    # simplified away before the callback in 0.32 (kept for hand-built or future records)
    "Copy", "StopGradient",
    # abort the export in MLX 0.32 (§1.4); listed so refusals of them decode too
    "LUF", "Load", "BitwiseInvert", "Contiguous", "SegmentedMM", "QQMatmul",
)

# Field names, in the order MLX reports them.
FIELDS: dict[str, tuple[str, ...]] = {name: () for name in _NO_ARGUMENTS}
FIELDS.update({
    # 3.1 / 3.2 elementwise
    "Sqrt": ("recip",),
    "Log": ("base",),
    "AsType": ("dtype",),
    "View": ("dtype",),
    "Equal": ("equal_nan",),
    "BitwiseBinary": ("op",),
    # 3.3 reductions, scans, softmax
    "Reduce": ("type", "axes"),
    "ArgReduce": ("type", "axis"),
    "Scan": ("type", "axis", "reverse", "inclusive"),
    "Softmax": ("precise",),
    "NumberOfElements": ("axes", "inverted", "dtype"),
    # 3.4 matrix products and quantized matmul
    "AddMM": ("alpha", "beta"),
    "BlockMaskedMM": ("block_size",),
    "GatherMM": ("left_sorted", "right_sorted"),
    "QuantizedMatmul": ("group_size", "bits", "mode", "transpose"),
    "GatherQMM": ("group_size", "bits", "mode", "transpose", "left_sorted", "right_sorted"),
    "Quantize": ("group_size", "bits", "mode", "dequantize"),
    "Hadamard": ("scale",),
    # 3.5 convolution
    "Convolution": (
        "kernel_strides", "padding_lo", "padding_hi", "kernel_dilation", "input_dilation", "groups", "flip",
    ),
    # 3.6 shape, layout and creation
    "Broadcast": ("shape",),
    "BroadcastAxes": ("ignore_axes",),
    "Reshape": ("shape",),
    "Flatten": ("start_axis", "end_axis"),
    "Unflatten": ("axis", "shape"),
    "ExpandDims": ("axes",),
    "Squeeze": ("axes",),
    "Transpose": ("perm",),
    "Concatenate": ("axis",),
    "Split": ("indices", "axis"),
    "Pad": ("axes", "low_pad", "high_pad"),
    "Arange": ("start", "stop", "step"),
    "AsStrided": ("shape", "strides", "offset"),
    # 3.7 indexing
    "Slice": ("start", "stop", "strides"),
    "SliceUpdate": ("reduce", "start", "stop", "strides"),
    "DynamicSlice": ("axes", "slice_size"),
    "DynamicSliceUpdate": ("axes",),
    "Gather": ("axes", "slice_sizes"),
    "GatherAxis": ("axis",),
    "Scatter": ("reduce", "axes"),
    "ScatterAxis": ("reduce", "axis"),
    # 3.8 sort and search
    "Sort": ("axis",),
    "ArgSort": ("axis",),
    "Partition": ("kth", "axis"),
    "ArgPartition": ("kth", "axis"),
    "SearchSorted": ("right",),
    # 3.9 FFT, random, linear algebra
    "FFT": ("axes", "inverse", "real", "odd_out"),
    "RandomBits": ("shape", "width"),
    "SVD": ("compute_uv",),
    "Inverse": ("tri", "upper"),
    "Cholesky": ("upper",),
    "Eig": ("compute_eigenvectors",),
    "Eigh": ("uplo", "compute_eigenvectors"),
    # 3.10 fused mx.fast primitives
    "RMSNorm": ("eps",),
    "LayerNorm": ("eps",),
    "RMSNormVJP": ("eps",),
    "LayerNormVJP": ("eps",),
    "RoPE": ("dims", "traditional", "base", "scale", "forward"),
    "ScaledDotProductAttention": ("scale", "do_causal", "has_sinks", "output_logsumexp", "force_fused"),
    "CustomKernel": (
        "name", "source", "grid_x", "grid_y", "grid_z", "threadgroup_x", "threadgroup_y", "threadgroup_z",
        "shape_infos", "ensure_row_contiguous", "scalar_arguments", "is_precompiled", "shared_memory",
        "math_mode",
    ),
})

# Fields that older or newer MLX versions leave out; they are not reported when absent.
OPTIONAL_TAIL: dict[str, int] = {"FFT": 1}  # odd_out is new in 0.32.4


class Enum(str):
    """An enum field's name that remembers its code: ``Enum("Sum", 2)``."""

    code: int

    def __new__(cls, name: str, code: int) -> "Enum":
        obj = super().__new__(cls, name)
        obj.code = code
        return obj


def decode(name: str, arguments: tuple | list) -> dict[str, Any]:
    """``{field: value}`` for a record; enum codes become :class:`Enum` names.

    Unknown primitives, and positions beyond the known fields, are named ``arg<i>``.
    Values are returned as given (tuples stay tuples, an ``mx.Dtype`` stays a Dtype).
    """
    arguments = list(arguments)
    fields = FIELDS.get(name, ())
    result: dict[str, Any] = {}
    for i, value in enumerate(arguments):
        field = fields[i] if i < len(fields) else f"arg{i}"
        table = ENUMS.get((name, field))
        if table is not None and isinstance(value, int) and not isinstance(value, bool):
            value = Enum(table.get(value, f"<unknown {value}>"), value)
        result[field] = value
    return result


def missing_fields(name: str, arguments: tuple | list) -> list[str]:
    """Field names the record should carry but does not (empty when it matches the table)."""
    fields = FIELDS.get(name)
    if fields is None:
        return []
    need = len(fields) - OPTIONAL_TAIL.get(name, 0)
    return list(fields[len(arguments):need]) if len(arguments) < need else []


def format_value(value: Any, limit: int = 60) -> str:
    """A compact, readable rendering: ``[1]`` for axes, ``float32`` for a Dtype."""
    if isinstance(value, Enum):
        return str(value)
    if isinstance(value, mx.Dtype):
        return str(value).rsplit(".", 1)[-1]
    if isinstance(value, (tuple, list)):
        text = "[" + ", ".join(format_value(v, limit) for v in value) + "]"
    elif isinstance(value, float):
        text = f"{value:.7g}"
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def describe(name: str, arguments: tuple | list) -> str:
    """``type=Sum axes=[1]`` for ``Reduce [2, [1]]``; empty for no arguments."""
    return " ".join(f"{k}={format_value(v)}" for k, v in decode(name, arguments).items())


def known_primitives() -> list[str]:
    return sorted(FIELDS)


# -- the reference page: docs/records.md ------------------------------------------------
REFERENCE_HEAD = """# MLX primitive records: argument layouts and enum codes

Generated from `mlx2onnx/records.py` (`python -m mlx2onnx.records --write docs/records.md`;
a test fails while it is stale). Verified against MLX {mlx}. What each handler does with
a record is in [primitives.md](primitives.md).

## What reaches the export callback

- `mx.export_function(callback, fun, *args)` calls the callback with records of type
  `inputs`, `keyword_inputs`, `outputs`, `constants`, then one `primitive` record per node
  in topological order: `name`, `arguments` (the primitive's state as a bare list, laid
  out below), `inputs` and `outputs` as `(name, shape, dtype)`.
- Shapes are concrete numbers, even with `shapeless=True`: a dynamic export compares
  several traces to find which numbers follow a size (`mlx2onnx/dynamic.py`).
- MLX simplifies the graph first: equal expressions are merged, and no-op `Copy` and
  `StopGradient` nodes are dropped (an output can lose its producer that way).
- The device decides the decomposition: on the CPU the `mx.fast` ops (RMSNorm, LayerNorm,
  RoPE, ScaledDotProductAttention) and dequantisation reach the callback as plain
  primitives; on Metal and CUDA as single fused records (`RMSNorm`, `LayerNorm`, `RoPE`,
  `ScaledDotProductAttention`, `QuantizedMatmul`, ...), whose layouts are listed too.
- Some primitives abort the export inside MLX itself (`Compiled`, `CustomTransforms`,
  `Contiguous`, `Load`, `BitwiseInvert`, `LUF`, `SegmentedMM`, `QQMatmul`); mlx2onnx
  disables compilation and makes `mx.contiguous` the identity while tracing, and explains
  the others.

## Layouts

| primitive | arguments, in order | enum codes |
|---|---|---|
"""


def reference_markdown() -> str:
    """docs/records.md: every known primitive's argument fields and enum codes."""
    lines = [REFERENCE_HEAD.format(mlx=mx.__version__)]
    for name in known_primitives():
        fields = FIELDS[name]
        optional = OPTIONAL_TAIL.get(name, 0)
        shown = [f"`{f}`" + (" (optional)" if i >= len(fields) - optional else "") for i, f in enumerate(fields)]
        enums = "; ".join(
            f"`{field}`: " + ", ".join(f"{code} {label}" for code, label in sorted(ENUMS[(name, field)].items()))
            for field in fields if (name, field) in ENUMS
        )
        lines.append(f"| `{name}` | {', '.join(shown) if shown else 'none'} | {enums} |\n")
    return "".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="print or write docs/records.md")
    parser.add_argument("--write", metavar="PATH")
    ns = parser.parse_args()
    text = reference_markdown()
    if ns.write:
        with open(ns.write, "w") as f:
            f.write(text)
    else:
        print(text, end="")
