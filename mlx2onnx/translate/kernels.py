"""What onnxruntime's CPU provider can run: the element types each op has kernels for.

ONNX allows float16 ``Add`` or int8 ``ReduceSum``, but onnxruntime's CPU provider has no
kernels for many such pairs. Handlers ask :func:`compute_dtype` for the type to compute
in: the MLX dtype itself when a kernel exists, otherwise the nearest wider type that is
exact for the op (float16/bfloat16 -> float32, int8 -> int16 -> int32 -> int64), with
casts around the op. The table is read from the installed onnxruntime.
"""

from __future__ import annotations

import functools

import mlx.core as mx

from ..dtypes import name as dtype_name

_WIDER = {
    mx.float16: (mx.float32, mx.float64),
    mx.bfloat16: (mx.float32, mx.float64),
    mx.float32: (mx.float64,),
    mx.int8: (mx.int16, mx.int32, mx.int64),
    mx.int16: (mx.int32, mx.int64),
    mx.int32: (mx.int64,),
    mx.uint8: (mx.uint16, mx.int32, mx.uint32, mx.int64, mx.uint64),
    mx.uint16: (mx.int32, mx.uint32, mx.int64, mx.uint64),
    mx.uint32: (mx.int64, mx.uint64),
    mx.uint64: (mx.int64,),  # same bits: exact for data movement and wrapping arithmetic
    mx.int64: (),
    mx.bool_: (mx.uint8, mx.int32, mx.int64),
    mx.float64: (),
}

_ONNX_TYPE_NAMES = {
    "tensor(bool)": mx.bool_,
    "tensor(uint8)": mx.uint8,
    "tensor(uint16)": mx.uint16,
    "tensor(uint32)": mx.uint32,
    "tensor(uint64)": mx.uint64,
    "tensor(int8)": mx.int8,
    "tensor(int16)": mx.int16,
    "tensor(int32)": mx.int32,
    "tensor(int64)": mx.int64,
    "tensor(float16)": mx.float16,
    "tensor(float)": mx.float32,
    "tensor(double)": mx.float64,
    "tensor(bfloat16)": mx.bfloat16,
}


@functools.lru_cache(maxsize=None)
def _table() -> dict[tuple[str, str], dict[int, frozenset]]:
    """(domain, op) -> {since_version: {type-constraint name: {mx dtypes}}} per version range."""
    from onnxruntime.capi import _pybind_state as C

    table: dict = {}
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider":
            continue
        domain = "" if k.domain == "ai.onnx" else k.domain
        entry = table.setdefault((domain, k.op_name), [])
        types = {
            n: frozenset(_ONNX_TYPE_NAMES[t] for t in ts if t in _ONNX_TYPE_NAMES)
            for n, ts in k.type_constraints.items()
        }
        entry.append((tuple(k.version_range), types))
    return table


_OPEN = 2**31 - 1  # onnxruntime's "and every later version"


@functools.lru_cache(maxsize=None)
def _since_version(op_type: str, opset: int) -> int | None:
    """The version of ``op_type`` a model of ``opset`` uses (its schema's since_version)."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return None


def _kernel_serves(lo: int, hi: int, since: int) -> bool:
    """Whether a kernel registered for versions [lo, hi] runs a node of version ``since``.
    onnxruntime matches an open-ended registration only to its first version: a newer
    version of the op (Attention 25 against a kernel for 24+) is not run by that kernel
    (onnxruntime falls back to the op's ONNX function body, a graph of small ops)."""
    return lo == since or (lo < since <= hi and hi != _OPEN)


def _supported_types(op_type: str, opset: int, constraint: str | None, domain: str = "") -> set | None:
    entries = _table().get((domain, op_type))
    if entries is None:
        return None
    since = None if domain else _since_version(op_type, opset)
    found: set = set()
    for (lo, hi), types in entries:
        if domain or (_kernel_serves(lo, hi, since) if since is not None else lo <= opset <= hi):
            if constraint is not None:
                found |= set(types.get(constraint, ()))
            else:
                first = next(iter(types.values()), frozenset())
                found |= set(first)
    return found


# (op, dtype) pairs that onnxruntime runs but another runtime of the portable target does
# not, so a portable export computes them in a wider type (see docs/runtimes.md)
NOT_PORTABLE = {
    ("ReduceMax", mx.bool_): "tract 0.23 reduces numbers only ('Bool is not a number')",
    ("ReduceMin", mx.bool_): "tract 0.23 reduces numbers only ('Bool is not a number')",
}


def serves(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether onnxruntime's CPU provider has a kernel for the version of ``op_type`` a
    model of ``opset`` uses (in any type)."""
    entries = _table().get((domain, op_type), ())
    since = None if domain else _since_version(op_type, opset)
    return any(_kernel_serves(lo, hi, since) if since is not None else lo <= opset <= hi for (lo, hi), _ in entries)


def has_kernel(
    op_type: str, dtype: mx.Dtype, opset: int, constraint: str | None = "T", domain: str = "", portable: bool = False
) -> bool:
    """Whether onnxruntime's CPU provider runs ``op_type`` in ``dtype`` at ``opset`` (and,
    when ``portable``, the pair is not one of :data:`NOT_PORTABLE`)."""
    if portable and (op_type, dtype) in NOT_PORTABLE:
        return False
    types = _supported_types(op_type, opset, constraint, domain)
    if types is None:
        return False
    if not types and constraint is not None:
        types = _supported_types(op_type, opset, None, domain) or set()
    return dtype in types


# Ops whose result depends on the order or sign of values: uint64 cannot borrow int64.
_ORDERED = frozenset(
    "Max Min ReduceMax ReduceMin ArgMax ArgMin TopK Less Greater LessOrEqual GreaterOrEqual Div Mod "
    "Clip Sign Abs CumSum Cast".split()
)


def compute_dtype(
    op_type: str, dtype: mx.Dtype, opset: int, constraint: str | None = "T", portable: bool = False
) -> mx.Dtype:
    """The dtype to run ``op_type`` in for values carried as ``dtype`` (``dtype`` when
    onnxruntime has a kernel for it and, when ``portable``, every portable runtime does)."""
    if has_kernel(op_type, dtype, opset, constraint, portable=portable):
        return dtype
    for wider in _WIDER.get(dtype, ()):
        if dtype == mx.uint64 and op_type in _ORDERED:
            break
        if has_kernel(op_type, wider, opset, constraint, portable=portable):
            return wider
    return dtype  # nothing better: let the checker/runtime report it


def describe(dtype: mx.Dtype) -> str:
    return dtype_name(dtype)


def runs_bfloat16(opset: int) -> bool:
    """Whether onnxruntime's CPU provider runs bfloat16 for the ops every model needs."""
    return all(has_kernel(op, mx.bfloat16, opset) for op in ("Add", "Mul", "MatMul", "Softmax"))
