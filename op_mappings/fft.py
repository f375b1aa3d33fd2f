"""FFT and complex64 values.

ONNX Runtime has no complex kernels, so a complex64 MLX value travels as a float32
value with a trailing dimension of 2 holding (real, imaginary): the layout ONNX ``DFT``
reads and writes (``context.onnx_layout``). Records that read or produce complex64 are
dispatched by the translator to the handlers registered here with
``@handles_complex``; any other primitive on a complex value is refused. Graph inputs
and outputs cannot be complex (the context refuses them): complex values live inside
the graph, e.g. ``abs(rfft(x))``, ``irfft(rfft(x))`` or ``real(ifft(fft(x)))``.

FFT is one ``DFT`` per transformed axis (inverse DFTs include the 1/N factor, as in
MLX). The real inverse (irfft) rebuilds the Hermitian spectrum before a complex inverse
DFT and keeps the real part, which ignores the imaginary parts of the DC and Nyquist
bins exactly as MLX's pocketfft c2r does.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.records import ReduceType
from mlx2onnx.translate.registry import handles, handles_complex

F32 = mx.float32


# -- the pair layout ------------------------------------------------------------------
def real_part(ctx, z):
    """Re(z) of a pair value [..., 2] -> [...]."""
    return ctx.op.Gather(z, ctx.const(np.array(0, np.int64)), axis=-1)


def imag_part(ctx, z):
    return ctx.op.Gather(z, ctx.const(np.array(1, np.int64)), axis=-1)


def make_pair(ctx, re, im):
    """Stack float32 ``re`` and ``im`` [...] into a pair value [..., 2]."""
    return ctx.op.Concat(ctx.unsqueeze(re, [-1]), ctx.unsqueeze(im, [-1]), axis=-1)


def to_pair(ctx, x, spec):
    """A value of MLX spec ``spec`` as a complex pair (real values get a zero imaginary part)."""
    if spec.dtype == mx.complex64:
        return x
    re = ctx.cast(x, F32)
    return make_pair(ctx, re, _zeros_like(ctx, re, spec.shape))


def _zeros_like(ctx, re, shape):
    return ctx.op.Expand(ctx.scalar(0, F32), ctx.ints(list(shape)))


def _axis(axis, rank):
    return int(axis) % rank if rank else 0


def dft(ctx, x, axis: int, inverse: bool, rank: int, onesided: bool = False):
    """ONNX DFT along ``axis`` (a non-negative axis of the MLX shape) of pair value ``x``
    (rank ``rank``, the pair dim last).

    The axis is an attribute in opset 17 and an input from opset 20. OpenVINO (2026.4)
    reads DFT-20 as if its axis input were always 1, so a portable export moves the signal
    to axis 1 first (Unsqueeze or Transpose: data movement, exact) and back after."""
    attrs = dict(inverse=int(inverse), onesided=int(onesided))
    if not ctx.has("DFT axis as input"):
        return ctx.op.DFT(x, axis=axis, **attrs)
    if axis == 1 or not ctx.portable:
        return ctx.op.DFT(x, None, ctx.const(np.array(axis, np.int64)), **attrs)
    one = ctx.const(np.array(1, np.int64))
    if axis == 0:
        return ctx.squeeze(ctx.op.DFT(ctx.unsqueeze(x, [0]), None, one, **attrs), [0])
    perm = list(range(rank))
    perm[1], perm[axis] = axis, 1
    return ctx.op.Transpose(ctx.op.DFT(ctx.op.Transpose(x, perm=perm), None, one, **attrs), perm=perm)


# -- FFT ------------------------------------------------------------------------------
@handles("FFT")
@handles_complex("FFT")
def fft(ctx, rec):
    """inputs (x,); arguments [axes:list, inverse, real, odd_out] (odd_out from MLX 0.32.4):
    fft/ifft (complex -> complex), rfft (real -> complex, last axis n//2+1) and irfft
    (complex -> real of length out.shape[axes[-1]]) over every axis in ``axes``."""
    axes, inverse, real = rec.args[:3]
    src, out = rec.inputs[0], rec.outputs[0]
    (x,) = ctx.inputs(rec)
    axes = [_axis(a, src.rank) for a in axes]
    if not axes:
        return [ctx.op.Identity(x)]
    if not real:
        for axis in axes:
            x = summed_bins(ctx, x, dft(ctx, x, axis, inverse, src.rank + 1), axis, inverse, src.shape)
        return [x]
    if not inverse:  # rfftn: one-sided DFT of the real input on the last axis, then full DFTs
        x = ctx.unsqueeze(ctx.cast(x, F32), [-1])
        x = real_bins_exact(ctx, dft(ctx, x, axes[-1], False, src.rank + 1, onesided=True), axes[-1], src.shape)
        for axis in axes[:-1]:
            x = dft(ctx, x, axis, False, src.rank + 1)
        return [x]
    for axis in axes[:-1]:  # irfftn: full inverse DFTs, then the Hermitian inverse on the last axis
        x = dft(ctx, x, axis, True, src.rank + 1)
    last = axes[-1]
    n, m = out.shape[last], src.shape[last]
    tail = n - m  # the bins m..n-1 are conj(X[n-k]) for k = m..n-1, i.e. X[n-m], ..., X[1]
    if tail > 0:
        mirrored = ctx.slice(x, [tail], [0], [last], [-1])
        mirrored = ctx.op.Mul(mirrored, ctx.const(np.array([1, -1], np.float32)))
        x = ctx.op.Concat(x, mirrored, axis=last)
    elif tail < 0:
        x = ctx.slice(x, [0], [n], [last])
    x = dft(ctx, x, last, True, src.rank + 1)
    return [ctx.cast(real_part(ctx, x), out.dtype)]


def summed_bins(ctx, z, y, axis: int, inverse: bool, shape):
    """``y`` (the DFT of pair value ``z`` along ``axis``) with the imaginary parts of the
    DC bin, and of the Nyquist bin for an even length, computed as plain sums of ``z``'s
    imaginary parts (with signs (-1)^k at Nyquist; divided by n for the inverse). For
    real input (``fft(x)`` of a float x) both are exactly 0.0, as MLX's pocketfft gives;
    onnxruntime's DFT leaves ~1e-7 * scale of rounding noise there, which a reciprocal
    or a division turns into any number (fuzz seed 20261208: 4 programs)."""
    n = shape[axis]
    if not isinstance(n, int) or n == 0:
        return y
    trailing = (1,) * (len(shape) - 1 - axis)
    imag = imag_part(ctx, z)
    bins = [(0, ctx.op.ReduceSum(imag, ctx.ints([axis]), keepdims=1))]
    if n % 2 == 0:
        signs = ctx.const(np.where(np.arange(n) % 2, -1.0, 1.0).astype(np.float32).reshape((n,) + trailing))
        bins.append((n // 2, ctx.op.ReduceSum(ctx.op.Mul(imag, signs), ctx.ints([axis]), keepdims=1)))
    for k, total in bins:
        if inverse:
            total = ctx.op.Div(total, ctx.scalar(float(n), F32))
        at = np.zeros((n,) + trailing + (2,), bool)
        at[(k,) + (0,) * len(trailing) + (1,)] = True
        y = ctx.op.Where(ctx.const(at), ctx.unsqueeze(total, [-1]), y)
    return y


def real_bins_exact(ctx, x, axis: int, shape):
    """A one-sided DFT of real values with the imaginary parts of the DC bin (and of the
    Nyquist bin for an even length) exactly +0.0, as MLX's pocketfft r2c writes them;
    onnxruntime's DFT leaves rounding noise there (8.6e-7 for length 5), which a later
    reciprocal or comparison blows up."""
    n = shape[axis]
    if not isinstance(n, int) or n == 0:
        return x
    keep = np.ones((n // 2 + 1, 2), bool)
    keep[0, 1] = False
    if n % 2 == 0:
        keep[n // 2, 1] = False
    zeroed = ctx.const(~keep.reshape((n // 2 + 1,) + (1,) * (len(shape) - 1 - axis) + (2,)))
    # Where(zeroed, 0, x), not Where(keep, x, 0): onnxruntime's Where loses the sign of a
    # -0.0 it selects from its second input (see op_mappings/elementwise.py, select_value)
    return ctx.op.Where(zeroed, ctx.scalar(0, F32), x)


# -- complex elementwise ----------------------------------------------------------------
@handles("Real")
@handles_complex("Real")
def real(ctx, rec):
    """inputs (z,) complex64; arguments []: the real part (float32)."""
    (z,) = ctx.inputs(rec)
    return [real_part(ctx, z)]


@handles("Imag")
@handles_complex("Imag")
def imag(ctx, rec):
    """inputs (z,) complex64; arguments []: the imaginary part (float32)."""
    (z,) = ctx.inputs(rec)
    return [imag_part(ctx, z)]


@handles("Conjugate")
@handles_complex("Conjugate")
def conjugate(ctx, rec):
    """inputs (z,) complex64; arguments []: (re, -im)."""
    (z,) = ctx.inputs(rec)
    return [ctx.op.Mul(z, ctx.const(np.array([1, -1], np.float32)))]


@handles_complex("Abs")
def complex_abs(ctx, rec):
    """inputs (z,) complex64; arguments []: |z| + 0i (MLX keeps complex64; an AsType
    follows). hypot computed in float64, so the float32 result is correctly rounded."""
    (z,) = ctx.inputs(rec)
    wide = ctx.op.Cast(z, to=ctx.onnx_type(mx.float64))
    norm = ctx.op.Sqrt(ctx.reduce("ReduceSum", ctx.op.Mul(wide, wide), [-1], keepdims=False))
    norm = ctx.cast(norm, F32)
    return [make_pair(ctx, norm, _zeros_like(ctx, norm, rec.outputs[0].shape))]


@handles_complex("AsType")
def complex_astype(ctx, rec):
    """inputs (x,); arguments [dtype]: to complex64, real values get a zero imaginary part;
    from complex64, the real part is cast (bool: true when either part is nonzero)."""
    (x,) = ctx.inputs(rec)
    (target,) = rec.args
    src = rec.inputs[0]
    if src.dtype == target:
        return [ctx.op.Identity(x)]
    if target == mx.complex64:
        return [to_pair(ctx, x, src)]
    if target == mx.bool_:
        nonzero = ctx.op.Not(ctx.op.Equal(x, ctx.scalar(0, F32)))
        return [ctx.op.Or(real_part(ctx, nonzero), imag_part(ctx, nonzero))]
    return [ctx.cast(real_part(ctx, x), target)]


@handles_complex("Add", "Subtract")
def complex_add(ctx, rec):
    """inputs (a, b) complex64; arguments []: componentwise Add / Sub."""
    a, b = ctx.inputs(rec)
    return [(ctx.op.Add if rec.name == "Add" else ctx.op.Sub)(a, b)]


@handles_complex("Negative")
def complex_negative(ctx, rec):
    """inputs (z,) complex64; arguments []: componentwise Neg."""
    (z,) = ctx.inputs(rec)
    return [ctx.op.Neg(z)]


def complex_mul(ctx, x, y):
    a, b = real_part(ctx, x), imag_part(ctx, x)
    c, d = real_part(ctx, y), imag_part(ctx, y)
    return make_pair(
        ctx, ctx.op.Sub(ctx.op.Mul(a, c), ctx.op.Mul(b, d)), ctx.op.Add(ctx.op.Mul(a, d), ctx.op.Mul(b, c))
    )


@handles_complex("Multiply")
def complex_multiply(ctx, rec):
    """inputs (a, b) complex64; arguments []: (ac - bd) + (ad + bc)i."""
    x, y = ctx.inputs(rec)
    return [complex_mul(ctx, x, y)]


@handles_complex("Divide")
def complex_divide(ctx, rec):
    """inputs (a, b) complex64; arguments []: ((ac + bd) + (bc - ad)i) / (c^2 + d^2),
    computed in float64 (no overflow or cancellation for float32 operands; MLX's
    std::complex division may differ in the last bit, and for zero divisors)."""
    x, y = (ctx.op.Cast(v, to=ctx.onnx_type(mx.float64)) for v in ctx.inputs(rec))
    a, b, c, d = real_part(ctx, x), imag_part(ctx, x), real_part(ctx, y), imag_part(ctx, y)
    denom = ctx.op.Add(ctx.op.Mul(c, c), ctx.op.Mul(d, d))
    re = ctx.op.Div(ctx.op.Add(ctx.op.Mul(a, c), ctx.op.Mul(b, d)), denom)
    im = ctx.op.Div(ctx.op.Sub(ctx.op.Mul(b, c), ctx.op.Mul(a, d)), denom)
    return [ctx.op.Cast(make_pair(ctx, re, im), to=ctx.onnx_type(F32))]


@handles_complex("Equal", "NotEqual")
def complex_equal(ctx, rec):
    """inputs (a, b) complex64; arguments [equal_nan] (NotEqual: []): both parts equal
    (NotEqual: either differs). equal_nan on complex is refused."""
    a, b = ctx.inputs(rec)
    if rec.name == "Equal" and rec.args.equal_nan:
        raise ctx.fail("argument equal_nan=True on complex64 is not supported: compare mx.real and mx.imag")
    same = ctx.op.Equal(a, b)
    both = ctx.op.And(real_part(ctx, same), imag_part(ctx, same))
    return [both if rec.name == "Equal" else ctx.op.Not(both)]


@handles_complex("Square")
def complex_square(ctx, rec):
    """inputs (z,) complex64; arguments []: z * z."""
    (z,) = ctx.inputs(rec)
    return [complex_mul(ctx, z, z)]


@handles_complex("Reduce")
def complex_reduce(ctx, rec):
    """inputs (z,) complex64; arguments [type, axes:list] keepdims: only Sum (2), a
    ReduceSum of both parts over the MLX axes."""
    (z,) = ctx.inputs(rec)
    kind, axes = rec.args
    if kind != ReduceType.Sum:
        raise ctx.fail(f"argument type={kind!r} on complex64 is not supported: only Sum (2)")
    rank = rec.inputs[0].rank
    if not axes:
        return [ctx.op.Identity(z)]
    return [ctx.reduce("ReduceSum", z, [_axis(a, rank) for a in axes], keepdims=True)]


# -- complex layout: the MLX shape plus the trailing pair dimension -------------------------
@handles_complex("Broadcast")
def complex_broadcast(ctx, rec):
    """inputs (z,); arguments [shape:tuple]: Expand to shape + (2,)."""
    z = ctx.inputs(rec)[0]
    return [ctx.op.Expand(z, ctx.ints(list(rec.outputs[0].shape) + [2]))]


@handles_complex("Full", "Depends")
def complex_identity(ctx, rec):
    """inputs (z, ...); arguments []: the first len(outputs) inputs pass through."""
    values = ctx.inputs(rec)
    return [ctx.op.Identity(v) for v in values[: len(rec.outputs)]]


@handles_complex("Reshape", "Flatten", "Unflatten")
def complex_reshape(ctx, rec):
    """inputs (z,); arguments [shape] (Flatten: [start_axis, end_axis]; Unflatten: [axis, shape]):
    Reshape to the output shape + (2,)."""
    (z,) = ctx.inputs(rec)
    return [ctx.reshape(z, list(rec.outputs[0].shape) + [2])]


@handles_complex("Transpose")
def complex_transpose(ctx, rec):
    """inputs (z,); arguments [perm:list]: Transpose with the pair dimension kept last."""
    (z,) = ctx.inputs(rec)
    (perm,) = rec.args
    rank = rec.inputs[0].rank
    return [ctx.op.Transpose(z, perm=[_axis(p, rank) for p in perm] + [rank])]


@handles_complex("ExpandDims")
def complex_expand_dims(ctx, rec):
    """inputs (z,); arguments [axes:list] (output positions): Unsqueeze."""
    (z,) = ctx.inputs(rec)
    (axes,) = rec.args
    return [ctx.unsqueeze(z, [_axis(a, rec.outputs[0].rank) for a in axes])]


@handles_complex("Squeeze")
def complex_squeeze(ctx, rec):
    """inputs (z,); arguments [axes:list]: Squeeze."""
    (z,) = ctx.inputs(rec)
    (axes,) = rec.args
    if not axes:
        return [ctx.op.Identity(z)]
    return [ctx.squeeze(z, [_axis(a, rec.inputs[0].rank) for a in axes])]


@handles_complex("Concatenate")
def complex_concatenate(ctx, rec):
    """inputs (arrays...) complex64; arguments [axis]: Concat."""
    values = ctx.inputs(rec)
    (axis,) = rec.args
    if len(values) == 1:
        return [ctx.op.Identity(values[0])]
    return [ctx.op.Concat(*values, axis=_axis(axis, rec.outputs[0].rank))]


@handles_complex("Slice")
def complex_slice(ctx, rec):
    """inputs (z,); arguments [start, stop, strides] (full rank, stop as written): Slice
    on the MLX axes only."""
    (z,) = ctx.inputs(rec)
    start, stop, strides = rec.args
    rank = rec.inputs[0].rank
    return [ctx.slice(z, list(start), list(stop), list(range(rank)), list(strides))]


@handles_complex("Split")
def complex_split(ctx, rec):
    """inputs (z,); arguments [indices:tuple, axis]: one Slice per part (zero-size parts included)."""
    (z,) = ctx.inputs(rec)
    axis = _axis(rec.args.axis, rec.inputs[0].rank)
    outs, start = [], 0
    for part in rec.outputs:
        size = part.shape[axis]
        outs.append(ctx.slice(z, [start], [start + size], [axis]))
        start += size
    return outs


@handles_complex("Select")
def complex_select(ctx, rec):
    """inputs (condition, x, y); arguments []: Where with the condition broadcast over
    the pair dimension (real operands are promoted to pairs)."""
    cond, x, y = ctx.inputs(rec)
    x, y = to_pair(ctx, x, rec.inputs[1]), to_pair(ctx, y, rec.inputs[2])
    return [ctx.op.Where(ctx.unsqueeze(ctx.cast(cond, mx.bool_), [-1]), x, y)]


@handles_complex("SliceUpdate")
def complex_slice_update(ctx, rec):
    """inputs (src, update) complex64; arguments [reduce, start, stop, strides]: only
    reduce=None (4, plain assignment, e.g. fft(x, n) zero-padding): ScatterND over the
    slice's index grid, writing whole pairs."""
    src, update = ctx.inputs(rec)
    reduce, start, _stop, strides = rec.args
    if reduce != 4:
        raise ctx.fail(f"argument reduce={reduce!r} on complex64 is not supported: only plain assignment (4)")
    shape = rec.inputs[1].shape
    if 0 in shape:
        return [ctx.op.Identity(src)]
    grid = np.indices(shape, dtype=np.int64)
    index = np.stack([s + g * st for g, s, st in zip(grid, start, strides)], axis=-1)
    return [ctx.op.ScatterND(src, ctx.const(index), update)]
