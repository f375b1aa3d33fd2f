"""Creation primitives: Arange, Full, RandomBits."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.capture.records import BitwiseOp
from mlx2onnx.capture.symbolic import is_dynamic
from mlx2onnx.translate.registry import handles

from .bits import bitwise_via_planes


@handles("Arange")
def arange(ctx, rec):
    """no inputs; arguments [start, stop, step] (floats): a constant, filled by MLX itself
    (MLX fills by repeated addition in the output dtype, which ONNX Range does not).
    With a dynamic start or stop: ``Range`` in int64, exact for integer start and step
    in integer and float32 outputs (below 2**24, where float32 addition is exact)."""
    start, stop, step = rec.args
    out = rec.outputs[0]
    if is_dynamic(start) or is_dynamic(stop) or is_dynamic(step):
        return [dynamic_arange(ctx, start, stop, step, out.dtype, out.shape[0])]
    values = mx.arange(start, stop, step, dtype=out.dtype)
    if tuple(values.shape) != tuple(out.shape):
        raise ctx.fail(f"mx.arange{(start, stop, step)} gives shape {values.shape}, the record says {out.shape}")
    carried = ctx.carried(out.dtype)  # the export's float policy (e.g. bfloat16 as float32)
    if carried != out.dtype:
        values = values.astype(carried)
    return [ctx.const(dtypes.array_to_numpy(values), name=f"arange_{rec.index}")]


def dynamic_arange(ctx, start, stop, step, dtype, length):
    if (
        is_dynamic(step)
        or not float(step).is_integer()
        or not all(is_dynamic(v) or float(v).is_integer() for v in (start, stop))
    ):
        raise ctx.fail(
            f"mx.arange({start}, {stop}, {step}) with a dynamic bound needs integer start and step "
            "to be exact in ONNX Range (MLX adds the step repeatedly); keep that dimension static"
        )
    if not (dtypes.is_integer(dtype) or dtype == mx.float32):
        raise ctx.fail(
            f"mx.arange with a dynamic bound in {dtypes.name(dtype)}: MLX adds the step repeatedly in "
            f"{dtypes.name(dtype)}, which rounds beyond 2048 (float16) or 256 (bfloat16) where ONNX Range "
            "does not; arange in float32 or int32 and cast, or keep that dimension static"
        )

    def bound(v):
        return ctx.ints(v) if is_dynamic(v) else ctx.const(np.asarray(int(v), np.int64))

    values = ctx.op.Range(bound(start), bound(stop), ctx.const(np.asarray(int(step), np.int64)))
    # ONNX shape inference cannot size a Range from runtime bounds; a Reshape to the
    # length read off an input's Shape lets it name the dimension (a no-op at runtime).
    values = ctx.op.Reshape(values, ctx.ints([length]))
    return ctx.cast(values, dtype)


@handles("Full")
def full(ctx, rec):
    """inputs (value, already broadcast to the output shape); arguments []: the value itself."""
    (value,) = ctx.inputs(rec)
    if rec.inputs[0].dtype != rec.outputs[0].dtype:
        return [ctx.op.Cast(value, to=ctx.onnx_type(rec.outputs[0].dtype))]
    return [ctx.op.Identity(value)]


# threefry2x32 (MLX backend/cpu/threefry.cpp): 5 rounds of 4 mixes, key schedule of 3.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _xor(ctx, a, b):
    if ctx.has("bitwise ops"):
        return ctx.op.BitwiseXor(a, b)
    return bitwise_via_planes(ctx, a, b, BitwiseOp.Xor, mx.uint32)  # no Bitwise ops before opset 18


def threefry2x32(ctx, k0, k1, c0, c1):
    """The threefry2x32 hash of counters (c0, c1) under key (k0, k1), uint32 values that
    broadcast together; uint32 Add wraps exactly as the C++ does."""
    u32 = mx.uint32
    ks = [k0, k1, _xor(ctx, _xor(ctx, k0, k1), ctx.scalar(_PARITY, u32))]
    x0, x1 = ctx.op.Add(c0, ks[0]), ctx.op.Add(c1, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = ctx.op.Add(x0, x1)
            left = ctx.op.BitShift(x1, ctx.scalar(r, u32), direction="LEFT")
            right = ctx.op.BitShift(x1, ctx.scalar(32 - r, u32), direction="RIGHT")
            x1 = _xor(ctx, ctx.op.Add(left, right), x0)  # the rotated halves are disjoint bits
        x0 = ctx.op.Add(x0, ks[(i + 1) % 3])
        x1 = ctx.op.Add(ctx.op.Add(x1, ks[(i + 2) % 3]), ctx.scalar(i + 1, u32))
    return x0, x1


@handles("RandomBits")
def random_bits(ctx, rec):
    """inputs (key uint32[..., 2]); arguments [shape:tuple, width] (bytes per element):
    MLX's threefry2x32 counter scheme rebuilt bit-exactly (uint32 Add, BitShift and
    BitwiseXor; XOR through bit planes below opset 18). Only width 4 (uint32, what every
    mx.random sampler draws) is supported."""
    shape, width = rec.args
    key_spec, out = rec.inputs[0], rec.outputs[0]
    if width != 4:
        raise ctx.fail(f"argument width={width!r} is not supported: only 4-byte (uint32) bits, which mx.random uses")
    if out.size == 0:
        return [ctx.const(np.zeros(out.shape, np.uint32))]
    (key,) = ctx.inputs(rec)
    num_keys = key_spec.size // 2
    per_key = out.size // num_keys
    half, odd = per_key // 2, per_key % 2
    # Word j < half and word half + odd + j come from counter (j, half + odd + j); an odd
    # middle word is the first half of counter (half, 0).
    c0 = np.concatenate([np.arange(half), [half] * odd]).astype(np.uint32)
    c1 = np.concatenate([np.arange(half) + half + odd, [0] * odd]).astype(np.uint32)
    keys = ctx.reshape(key, [num_keys, 2])
    k0 = ctx.slice(keys, [0], [1], [1])
    k1 = ctx.slice(keys, [1], [2], [1])
    first, second = threefry2x32(ctx, k0, k1, ctx.const(c0[None]), ctx.const(c1[None]))
    words = ctx.op.Concat(first, ctx.slice(second, [0], [half], [1]), axis=1) if half else first
    return [ctx.reshape(words, out.shape)]
