"""Each primitive record's ``arguments``, named: the one table every stage decodes through.

MLX's export callback reports each primitive's state as a bare list (``Reduce
[2, [1]]``). :data:`FIELDS` names every position for each primitive MLX reports
(``docs/records.md`` is generated from it), and :data:`ENUMS` gives the enum fields
their :class:`~enum.IntEnum` (``ReduceType.Sum``). :func:`decode` turns a record's
arguments into a named tuple of that layout, so ``rec.args`` reads ``type=Sum axes=[1]``
in a handler (``kind, axes = rec.args`` or ``rec.args.type``), in the interpreter and
in the command line's ``inspect --records`` alike.
"""

from __future__ import annotations

import collections
import enum
import functools
from typing import Any

import mlx.core as mx


class Code(enum.IntEnum):
    """An enum code of a record field; ``str()`` is MLX's name for it (``Sum``)."""

    def __str__(self) -> str:
        return self.name.rstrip("_")

    def __format__(self, spec: str) -> str:  # f-strings read MLX's name too
        return format(str(self), spec)


# Enum codes, as MLX 0.32 writes them.
class ReduceType(Code):
    And = 0
    Or = 1
    Sum = 2
    Prod = 3
    Min = 4
    Max = 5


class ScanType(Code):
    Max = 0
    Min = 1
    Sum = 2
    Prod = 3
    LogAddExp = 4


class ScatterReduce(Code):
    """``Scatter`` and ``SliceUpdate``: how an update meets the value it lands on
    (``None_``: it replaces it)."""

    Max = 0
    Min = 1
    Sum = 2
    Prod = 3
    None_ = 4


class ScatterAxisReduce(Code):
    Sum = 0
    None_ = 1


class ArgReduceType(Code):
    ArgMin = 0
    ArgMax = 1


class BitwiseOp(Code):
    And = 0
    Or = 1
    Xor = 2
    LeftShift = 3
    RightShift = 4


class LogBase(Code):
    two = 0
    ten = 1
    e = 2


class QuantizationMode(Code):
    affine = 0
    mxfp4 = 1
    mxfp8 = 2
    nvfp4 = 3


class MathMode(Code):
    Safe = 0
    Relaxed = 1
    Fast = 2


# Which field of which primitive is an enum, and its type.
ENUMS: dict[tuple[str, str], type[Code]] = {
    ("Reduce", "type"): ReduceType,
    ("Scan", "type"): ScanType,
    ("Scatter", "reduce"): ScatterReduce,
    ("SliceUpdate", "reduce"): ScatterReduce,
    ("ScatterAxis", "reduce"): ScatterAxisReduce,
    ("ArgReduce", "type"): ArgReduceType,
    ("BitwiseBinary", "op"): BitwiseOp,
    ("Log", "base"): LogBase,
    ("QuantizedMatmul", "mode"): QuantizationMode,
    ("GatherQMM", "mode"): QuantizationMode,
    ("Quantize", "mode"): QuantizationMode,
    ("CustomKernel", "math_mode"): MathMode,
}

# fmt: off
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
# fmt: on

# Field names, in the order MLX reports them.
FIELDS: dict[str, tuple[str, ...]] = {name: () for name in _NO_ARGUMENTS}
FIELDS.update(
    {
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
            "kernel_strides",
            "padding_lo",
            "padding_hi",
            "kernel_dilation",
            "input_dilation",
            "groups",
            "flip",
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
            "name",
            "source",
            "grid_x",
            "grid_y",
            "grid_z",
            "threadgroup_x",
            "threadgroup_y",
            "threadgroup_z",
            "shape_infos",
            "ensure_row_contiguous",
            "scalar_arguments",
            "is_precompiled",
            "shared_memory",
            "math_mode",
        ),
    }
)

# Fields that older or newer MLX versions leave out; they are not reported when absent.
OPTIONAL_TAIL: dict[str, int] = {"FFT": 1}  # odd_out is new in 0.32.4


@functools.lru_cache(maxsize=None)
def layout(name: str, count: int) -> type:
    """The named tuple type of ``name``'s arguments when MLX reports ``count`` of them:
    the fields of :data:`FIELDS` (one MLX left out reads None: :func:`missing_fields`
    tells which), then ``arg<i>`` for positions the table does not know (a newer MLX)."""
    fields = list(FIELDS.get(name, ()))
    names = fields + [f"arg{i}" for i in range(len(fields), count)]
    return collections.namedtuple(f"{name}Args", names, defaults=[None] * len(names), module=__name__)


def decode(name: str, arguments: tuple | list) -> tuple:
    """``name``'s arguments as a named tuple (:func:`layout`), enum codes as their
    :class:`Code`; values otherwise as given (tuples stay tuples, an ``mx.Dtype`` stays a
    Dtype, a dynamic size stays a SymInt)."""
    arguments = list(arguments)
    kind = layout(name, len(arguments))
    for i, field in enumerate(kind._fields[: len(arguments)]):
        table = ENUMS.get((name, field))
        value = arguments[i]
        if table is not None and isinstance(value, int) and not isinstance(value, bool):
            arguments[i] = table(value) if value in table._value2member_map_ else value
    return kind(*arguments)


def named(name: str, arguments: tuple | list) -> dict[str, Any]:
    """``{field: value}`` of the arguments MLX reported (:func:`decode`)."""
    decoded = decode(name, arguments)
    return dict(zip(decoded._fields[: len(arguments)], decoded[: len(arguments)]))


def missing_fields(name: str, arguments: tuple | list) -> list[str]:
    """Field names the record should carry but does not (empty when it matches the table)."""
    fields = FIELDS.get(name)
    if fields is None:
        return []
    need = len(fields) - OPTIONAL_TAIL.get(name, 0)
    return list(fields[len(arguments) : need]) if len(arguments) < need else []


def format_value(value: Any, limit: int = 60) -> str:
    """A compact, readable rendering: ``[1]`` for axes, ``float32`` for a Dtype."""
    if isinstance(value, Code):
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
    return " ".join(f"{k}={format_value(v)}" for k, v in named(name, arguments).items())


def known_primitives() -> list[str]:
    return sorted(FIELDS)


# -- the reference page: docs/records.md ------------------------------------------------
REFERENCE_HEAD = """# MLX primitive records: argument layouts and enum codes

Generated from `mlx2onnx/capture/records.py` (`python -m scripts.generate_docs records.md`;
a test fails while it is stale). Verified against MLX {mlx}. What each handler does with
a record is in [primitives.md](primitives.md).

## What reaches the export callback

- `mx.export_function(callback, fun, *args)` calls the callback with records of type
  `inputs`, `keyword_inputs`, `outputs`, `constants`, then one `primitive` record per node
  in topological order: `name`, `arguments` (the primitive's state as a bare list, laid
  out below), `inputs` and `outputs` as `(name, shape, dtype)`.
- Shapes are concrete numbers, even with `shapeless=True`: a dynamic export compares
  several traces to find which numbers follow a size (`mlx2onnx/capture/dynamic.py`).
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
            f"`{field}`: " + ", ".join(f"{int(code)} {code}" for code in ENUMS[(name, field)])
            for field in fields
            if (name, field) in ENUMS
        )
        lines.append(f"| `{name}` | {', '.join(shown) if shown else 'none'} | {enums} |\n")
    return "".join(lines)


# The keys of PrimitiveFactory in MLX's mlx/export.cpp (0.32.2 source), plus FloorDivide
# (added in 0.32.4): every name the export callback can report.
# fmt: off
CALLBACK_PRIMITIVES = (
    "Abs", "Add", "AddMM", "Arange", "ArcCos", "ArcCosh", "ArcSin", "ArcSinh", "ArcTan", "ArcTan2",
    "ArcTanh", "ArgPartition", "ArgReduce", "ArgSort", "AsStrided", "AsType", "BitwiseBinary",
    "BlockMaskedMM", "Broadcast", "BroadcastAxes", "Ceil", "Cholesky", "Concatenate", "Conjugate",
    "Convolution", "Copy", "Cos", "Cosh", "CustomKernel", "Depends", "DivMod", "Divide",
    "DynamicSlice", "DynamicSliceUpdate", "Eig", "Eigh", "Equal", "Erf", "ErfInv", "Exp",
    "ExpandDims", "Expm1", "FFT", "Flatten", "Floor", "FloorDivide", "Full", "Gather", "GatherAxis",
    "GatherMM", "GatherQMM", "Greater", "GreaterEqual", "Hadamard", "Imag", "Inverse", "LayerNorm",
    "LayerNormVJP", "Less", "LessEqual", "Log", "Log1p", "LogAddExp", "LogSumExp", "LogicalAnd",
    "LogicalNot", "LogicalOr", "MaskedScatter", "Matmul", "Maximum", "Minimum", "Multiply",
    "Negative", "NotEqual", "NumberOfElements", "Pad", "Partition", "Power", "QRF", "Quantize",
    "QuantizedMatmul", "RMSNorm", "RMSNormVJP", "RandomBits", "Real", "Reduce", "Remainder",
    "Reshape", "RoPE", "Round", "SVD", "ScaledDotProductAttention", "Scan", "Scatter",
    "ScatterAxis", "SearchSorted", "Select", "Sigmoid", "Sign", "Sin", "Sinh", "Slice",
    "SliceUpdate", "Softmax", "Sort", "Split", "Sqrt", "Square", "Squeeze", "StopGradient",
    "Subtract", "Tan", "Tanh", "Transpose", "Unflatten", "View",
)
# fmt: on

# In the factory, but removed by MLX's compile_simplify before the callback sees them.
NOT_EMITTED = {
    "Copy": "removed by MLX's simplify pass before export (a no-op copy)",
    "StopGradient": "removed by MLX's simplify pass before export (no-op in inference)",
}
