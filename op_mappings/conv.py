"""Convolution, padding and strided views: Convolution, Pad, AsStrided.

MLX convolutions are channels-last (x [N, *spatial, C_in], w [C_out, *K, C_in/groups]);
ONNX Conv and ConvTranspose are channels-first, so each convolution is wrapped in two
Transposes. A constant weight is re-laid out at export time into a new initializer; a
runtime weight gets the same re-layout as ONNX ops. onnxruntime's Conv/ConvTranspose
kernels are float32 only: float16 and bfloat16 are computed in float32, and so is
float64, exactly as MLX's CPU does.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.symbolic import any_dynamic, is_dynamic
from mlx2onnx.translate.markers import KEEP_PACKED
from mlx2onnx.translate.registry import handles

INT64_MIN = -(2**63)
TABLE_LIMIT = 4096  # AsStrided index tables above this many entries are built at runtime (small model)


# -- weights ----------------------------------------------------------------------------
class Weight:
    """The convolution weight, re-laid out either at export time (a constant) or as ops."""

    def __init__(self, ctx, spec, work):
        self.ctx = ctx
        self.work = work
        found = ctx.constant(spec)
        self.array = None if found is None else np.asarray(found[0]).astype(ctx.numpy_type(work))
        self.path = None if found is None else found[1]
        self.value = None if found is not None else ctx.cast(ctx.value(spec), work)

    def transpose(self, perm):
        if self.array is not None:
            self.array = self.array.transpose(perm)
        else:
            self.value = self.ctx.op.Transpose(self.value, perm=list(perm))
        return self

    def reshape(self, shape):
        if self.array is not None:
            self.array = self.array.reshape(shape)
        else:
            self.value = self.ctx.reshape(self.value, shape)
        return self

    def reverse(self, axes):
        """Reverse the kernel along ``axes`` (the spatial axes)."""
        axes = list(axes)
        if not axes:
            return self
        if self.array is not None:
            self.array = np.flip(self.array, axis=axes)
        else:
            n = len(axes)
            self.value = self.ctx.slice(self.value, [-1] * n, [INT64_MIN] * n, axes, [-1] * n)
        return self

    def finish(self, suffix):
        if self.array is None:
            return self.value
        name = f"{self.path}_{suffix}" if self.path else None
        return self.ctx.const(np.ascontiguousarray(self.array), name=name)


# -- input layout -----------------------------------------------------------------------
def dilate_input(ctx, x, shape, factors, first):
    """Insert ``factor - 1`` zeros after every element along the spatial axes
    ``first, first + 1, ...`` of ``x`` of ``shape``; returns the value and its shape
    (length L*f: the last f-1 zeros are surplus, the caller takes them off the high pad)."""
    shape = list(shape)
    for i, f in enumerate(factors):
        if f == 1:
            continue
        axis = first + i
        x = ctx.unsqueeze(x, [axis + 1])
        pads = [0] * (len(shape) + 1) * 2
        pads[len(shape) + 1 + axis + 1] = f - 1
        x = ctx.pad(x, pads, None, "constant")
        shape[axis] *= f
        x = ctx.reshape(x, shape)
    return x, shape


def crop_negative(ctx, x, shape, lo, hi, first):
    """Slice away negative padding of the spatial axes ``first, ...``; returns x, its
    shape and the padding that is left (all >= 0)."""
    shape = list(shape)
    starts, ends, axes = [], [], []
    for i, (before, h) in enumerate(zip(lo, hi)):
        if before < 0 or h < 0:
            axes.append(first + i)
            starts.append(max(-before, 0))
            ends.append(shape[first + i] - max(-h, 0))
            shape[first + i] = ends[-1] - starts[-1]
    if axes:
        x = ctx.slice(x, starts, ends, axes)
    return x, shape, [max(p, 0) for p in lo], [max(p, 0) for p in hi]


@handles("Convolution")
def convolution(ctx, rec):
    """inputs (x [N, *S, C_in], w [C_out, *K, C_in/groups]); arguments [kernel_strides,
    padding_lo, padding_hi, kernel_dilation, input_dilation, groups, flip], one entry per
    spatial dim in each list.

    flip=True is a true convolution (the kernel reversed); input_dilation inserts
    ``d - 1`` zeros between input elements. conv_transpose (flip=True, input_dilation=s,
    kernel_strides=1) becomes ConvTranspose; everything else becomes Conv, with explicit
    zero insertion for input_dilation and a reversed kernel for flip.

    Known difference: MLX's grouped and dilated 2-D kernels skip padded taps, so an
    infinite weight over the padding gives inf in MLX and inf * 0 = NaN in ONNX Conv.
    Finite weights (every trained model) give the same results."""
    strides, lo, hi, kdil, idil, groups, flip = rec.args
    strides, lo, hi, kdil, idil = (list(map(int, v)) for v in (strides, lo, hi, kdil, idil))
    groups, flip = int(groups), bool(flip)
    xs, ws, out = rec.inputs[0], rec.inputs[1], rec.outputs[0]
    d = xs.rank - 2
    dtype = out.dtype
    # MLX's CPU computes a float64 convolution in float32 (verified: bit-equal to the
    # float32 result), and onnxruntime has only float32 Conv kernels: float32 for all.
    work = mx.float32
    c_in, c_out = xs.shape[-1], ws.shape[0]
    k_eff = [(k - 1) * kd + 1 for k, kd in zip(ws.shape[1:-1], kdil)]
    spatial = list(range(1, d + 1))

    x = ctx.op.Transpose(ctx.cast(ctx.value(xs), work), perm=[0, d + 1] + spatial)
    x_shape = [xs.shape[0], c_in] + list(xs.shape[1:-1])
    weight = Weight(ctx, ws, work)

    transposed = _as_conv_transpose(strides, lo, hi, idil, k_eff)
    if transposed is not None and any(s > 1 for s in idil):
        pads_begin, pads_end, output_padding = transposed
        cig, cog = c_in // groups, c_out // groups
        # [C_out, *K, C_in/g] -> [C_in, C_out/g, *K], grouped by input channel.
        if groups == 1:
            weight.transpose([d + 1, 0] + spatial)
        else:
            weight.reshape([groups, cog] + list(ws.shape[1:]))
            weight.transpose([0, d + 2, 1] + [2 + i for i in range(d)])
            weight.reshape([groups * cig, cog] + list(ws.shape[1:-1]))
        if not flip:
            weight.reverse([2 + i for i in range(d)])
        y = ctx.op.ConvTranspose(
            x,
            weight.finish("iohw"),
            strides=idil,
            dilations=kdil,
            pads=pads_begin + pads_end,
            output_padding=output_padding if any(output_padding) else None,
            group=groups,
        )
    else:
        if any(s > 1 for s in idil):
            x, x_shape = dilate_input(ctx, x, x_shape, idil, 2)
            hi = [h - (s - 1) for h, s in zip(hi, idil)]
        x, x_shape, lo, hi = crop_negative(ctx, x, x_shape, lo, hi, 2)
        weight.transpose([0, d + 1] + spatial)
        if flip:
            weight.reverse([2 + i for i in range(d)])
        y = ctx.op.Conv(
            x,
            weight.finish("oihw"),
            strides=strides,
            dilations=kdil,
            pads=lo + hi,
            group=groups,
        )
    y = ctx.op.Transpose(y, perm=[0] + [2 + i for i in range(d)] + [1])
    same = ctx.onnx_type(work) == ctx.onnx_type(dtype)
    return [y if same else ctx.op.Cast(y, to=ctx.onnx_type(dtype))]


def _as_conv_transpose(strides, lo, hi, idil, k_eff):
    """ConvTranspose (pads_begin, pads_end, output_padding) computing the same result,
    or None when the record is not of that form."""
    if any(s != 1 for s in strides):
        return None
    begin, end, extra = [], [], []
    for before, h, s, k in zip(lo, hi, idil, k_eff):
        b, e = k - 1 - before, k - 1 - h
        if b < 0:
            return None
        op = 0
        if e < 0:
            op, e = -e, 0
        if op >= s:
            return None
        begin.append(b)
        end.append(e)
        extra.append(op)
    return begin, end, extra


# -- padding ----------------------------------------------------------------------------
@handles("Pad")
def pad(ctx, rec):
    """inputs (x, pad_value 0-d); arguments [axes:list, low_pad:tuple, high_pad:tuple]: constant
    padding of the listed axes (the value can be -inf, as for max pooling)."""
    x, value = ctx.inputs(rec)
    axes, low, high = rec.args
    dtype = rec.outputs[0].dtype
    rank = rec.inputs[0].rank
    begins, ends = [0] * rank, [0] * rank
    for axis, before, h in zip(axes, low, high):
        begins[int(axis)] = int(before)
        ends[int(axis)] = int(h)
    if not any(begins) and not any(ends):
        return [ctx.op.Identity(x)]
    value = ctx.cast(value, dtype)
    return [ctx.run("Pad", [x, ctx.ints(begins + ends), value], dtype, fixed=(1,), mode="constant")]


# -- strided views ----------------------------------------------------------------------
def dynamic_as_strided(ctx, x, src, shape, strides, offset):
    """AsStrided whose shape, strides or offset follow a dynamic size (pooling over an
    image of dynamic size): the index grid offset + sum_k arange(n_k) * s_k is built at
    runtime with Range, one axis at a time."""
    if src.rank != 1:
        x = ctx.reshape(x, [src.size])
    rank = len(shape)
    if not rank:
        start = ctx.ints([offset])
        return ctx.reshape(ctx.op.Slice(x, start, ctx.op.Add(start, ctx.ints([1]))), [])
    index = ctx.ints(offset) if is_dynamic(offset) else ctx.const(np.asarray(int(offset), np.int64))
    for k, (n, stride) in enumerate(zip(shape, strides)):
        step = ctx.ints(stride) if is_dynamic(stride) else ctx.const(np.asarray(int(stride), np.int64))
        index = ctx.op.Add(index, ctx.op.Mul(ctx.axis_range(n, k, rank), step))
    return ctx.op.Gather(x, index, axis=0)


@handles("AsStrided")
def as_strided(ctx, rec):
    """inputs (x,), 1-D (MLX flattens first); arguments [shape:tuple, strides:tuple,
    offset]: out[i] = x[offset + sum_k i_k * strides_k], a Gather with a constant index
    table (built at runtime from one small constant per axis when it would be large)."""
    (x,) = ctx.inputs(rec)
    shape, strides, offset = rec.args
    src = rec.inputs[0]
    if any_dynamic((*shape, *strides, offset, *src.shape)):
        return [dynamic_as_strided(ctx, x, src, shape, strides, offset)]
    shape, strides, offset = [int(n) for n in shape], [int(s) for s in strides], int(offset)
    if src.rank != 1:
        x = ctx.reshape(x, [src.size])
    length = src.size
    size = math.prod(shape)
    if size:
        low = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
        high = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
        if low < 0 or high >= length:
            raise ctx.fail(
                f"arguments shape={tuple(shape)}, strides={tuple(strides)}, offset={offset} read "
                f"elements {low}..{high} of an input of {length}: out of bounds (undefined in MLX)"
            )
    if not shape:
        return [ctx.reshape(ctx.slice(x, [offset], [offset + 1], [0]), [])]
    if size <= TABLE_LIMIT:
        index = np.full(shape, offset, dtype=np.int64)
        for k, (n, s) in enumerate(zip(shape, strides)):
            index += (np.arange(n, dtype=np.int64) * s).reshape([n if j == k else 1 for j in range(len(shape))])
        return [ctx.op.Gather(x, ctx.const(index, name=f"as_strided_{rec.index}_index"), axis=0)]
    index = None
    for k, (n, s) in enumerate(zip(shape, strides)):
        part = (np.arange(n, dtype=np.int64) * s + (offset if k == 0 else 0)).reshape(
            [n if j == k else 1 for j in range(len(shape))]
        )
        if index is None:
            index = ctx.const(part)
        else:
            # Keep it computed at runtime: the optimiser would otherwise fold it into the
            # full table (the flag the quantized handlers use for the same reason).
            index = ctx.mark(ctx.op.Add(index, ctx.const(part)), KEEP_PACKED)
    return [ctx.op.Gather(x, index, axis=0)]
