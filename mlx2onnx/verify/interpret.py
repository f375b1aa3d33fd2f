"""An interpreter for captured records: evaluate a :class:`~mlx2onnx.capture.Trace`
primitive by primitive with MLX's own Python ops.

It is the reference implementation of each record (``Reduce [Sum, (1,)]`` ->
``mx.sum(x, axis=[1], keepdims=True)``), used by ``mlx2onnx check --localize`` to
compute what every intermediate value should be, and usable for constant folding::

    from mlx2onnx import capture
    from mlx2onnx.verify import interpret
    trace = capture(fun, (x,), {})
    outputs = interpret.run(trace, x)          # == fun(x), record by record
    values = interpret.evaluate(rec, inputs)   # one record

Primitives it cannot evaluate raise :class:`CannotEvaluate` (see :data:`SKIPPED`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx

from ..capture.inputs import normalize_inputs
from ..capture.records import (
    ArgReduceType,
    BitwiseOp,
    LogBase,
    QuantizationMode,
    ReduceType,
    ScanType,
    ScatterReduce,
)
from ..capture.trace import Primitive, Trace

Evaluator = Callable[[Primitive, list, dict], Sequence[mx.array]]


class CannotEvaluate(Exception):
    """The interpreter has no MLX implementation of this record."""


EVALUATORS: dict[str, Evaluator] = {}

# Primitives known to the callback that the interpreter does not evaluate, and why.
SKIPPED: dict[str, str] = {
    "RandomBits": "MLX 0.32 has no Python op for raw threefry bits (mx.random.bits is not exposed)",
    "CustomKernel": "user Metal/CUDA kernels do not run on this device",
}


def evaluator(*names: str):
    def register(fn: Evaluator) -> Evaluator:
        for name in names:
            EVALUATORS[name] = fn
        return fn

    return register


def can_evaluate(name: str) -> bool:
    return name in EVALUATORS


def evaluate(rec: Primitive, inputs: Sequence[mx.array]) -> list[mx.array]:
    """The MLX values of ``rec.outputs`` for the given input arrays (lazy; call mx.eval)."""
    fn = EVALUATORS.get(rec.name)
    if fn is None:
        raise CannotEvaluate(SKIPPED.get(rec.name, f"no MLX evaluator for primitive {rec.name}"))
    outputs = list(fn(rec, list(inputs), rec.args))
    if len(outputs) != len(rec.outputs):
        raise CannotEvaluate(f"{rec.name}: evaluator gave {len(outputs)} outputs for {len(rec.outputs)}")
    result = []
    for value, spec in zip(outputs, rec.outputs):
        if tuple(value.shape) != spec.shape:
            raise CannotEvaluate(
                f"{rec.name} (record {rec.index}): evaluator shape {list(value.shape)} differs from the "
                f"recorded {list(spec.shape)} (interpreter bug)"
            )
        if value.dtype != spec.dtype:
            value = value.astype(spec.dtype)
        result.append(value)
    return result


def bind_inputs(trace: Trace, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, mx.array]:
    """MLX name -> array for the trace's graph inputs and constants."""
    positional, keywords = normalize_inputs(args, kwargs).arrays()
    env: dict[str, mx.array] = {c.spec.name: c.array for c in trace.constants}
    for graph_input in trace.inputs:
        if graph_input.keyword is None:
            env[graph_input.spec.name] = positional[graph_input.position]
        else:
            env[graph_input.spec.name] = keywords[graph_input.keyword]
    return env


def environment(trace: Trace, *args: Any, **kwargs: Any) -> dict[str, mx.array]:
    """Every value of the trace (inputs, constants, each record's outputs), by MLX name."""
    env = bind_inputs(trace, args, kwargs)
    for rec in trace.primitives:
        outputs = evaluate(rec, [env[s.name] for s in rec.inputs])
        mx.eval(outputs)
        for spec, value in zip(rec.outputs, outputs):
            env[spec.name] = value
    return env


def run(trace: Trace, *args: Any, **kwargs: Any) -> list[mx.array]:
    """The trace's outputs, computed record by record (the same inputs as the function)."""
    env = environment(trace, *args, **kwargs)
    return [env[o.spec.name] for o in trace.outputs]


def _out(rec: Primitive, k: int = 0):
    return rec.outputs[k]


# -- elementwise --------------------------------------------------------------------------
_UNARY = {
    "Abs": mx.abs, "Negative": mx.negative, "Sign": mx.sign, "Floor": mx.floor, "Ceil": mx.ceil,
    "Round": mx.round, "Square": mx.square, "Exp": mx.exp, "Expm1": mx.expm1, "Log1p": mx.log1p,
    "Sin": mx.sin, "Cos": mx.cos, "Tan": mx.tan, "Sinh": mx.sinh, "Cosh": mx.cosh, "Tanh": mx.tanh,
    "ArcSin": mx.arcsin, "ArcCos": mx.arccos, "ArcTan": mx.arctan, "ArcSinh": mx.arcsinh,
    "ArcCosh": mx.arccosh, "ArcTanh": mx.arctanh, "Sigmoid": mx.sigmoid, "Erf": mx.erf,
    "ErfInv": mx.erfinv, "LogicalNot": mx.logical_not, "Conjugate": mx.conj, "Real": mx.real,
    "Imag": mx.imag,
}
_BINARY = {
    "Add": mx.add, "Subtract": mx.subtract, "Multiply": mx.multiply, "Divide": mx.divide,
    "FloorDivide": mx.floor_divide, "Remainder": mx.remainder, "Power": mx.power,
    "Maximum": mx.maximum, "Minimum": mx.minimum, "NotEqual": mx.not_equal, "Less": mx.less,
    "LessEqual": mx.less_equal, "Greater": mx.greater, "GreaterEqual": mx.greater_equal,
    "LogicalAnd": mx.logical_and, "LogicalOr": mx.logical_or, "ArcTan2": mx.arctan2,
    "LogAddExp": mx.logaddexp,
}
for _name, _fn in _UNARY.items():
    EVALUATORS[_name] = (lambda f: lambda rec, xs, a: [f(xs[0])])(_fn)
for _name, _fn in _BINARY.items():
    EVALUATORS[_name] = (lambda f: lambda rec, xs, a: [f(xs[0], xs[1])])(_fn)


@evaluator("Sqrt")
def sqrt(rec, xs, a):
    return [mx.rsqrt(xs[0]) if a.recip else mx.sqrt(xs[0])]


@evaluator("Log")
def log(rec, xs, a):
    return [{LogBase.two: mx.log2, LogBase.ten: mx.log10, LogBase.e: mx.log}[a.base](xs[0])]


@evaluator("AsType")
def astype(rec, xs, a):
    return [xs[0].astype(a.dtype)]


@evaluator("View")
def view(rec, xs, a):
    return [xs[0].view(a.dtype)]


@evaluator("Equal")
def equal(rec, xs, a):
    x, y = xs
    result = mx.equal(x, y)
    if a.equal_nan and mx.issubdtype(x.dtype, mx.inexact):
        result = result | (mx.isnan(x) & mx.isnan(y))
    return [result]


@evaluator("DivMod")
def divmod_(rec, xs, a):
    return list(mx.divmod(xs[0], xs[1]))


@evaluator("Select")
def select(rec, xs, a):
    return [mx.where(xs[0], xs[1], xs[2])]


_BITWISE = {BitwiseOp.And: mx.bitwise_and, BitwiseOp.Or: mx.bitwise_or, BitwiseOp.Xor: mx.bitwise_xor,
            BitwiseOp.LeftShift: mx.left_shift, BitwiseOp.RightShift: mx.right_shift}


@evaluator("BitwiseBinary")
def bitwise(rec, xs, a):
    return [_BITWISE[a.op](xs[0], xs[1])]


# -- reductions, scans, softmax -----------------------------------------------------------
_REDUCE = {ReduceType.And: mx.all, ReduceType.Or: mx.any, ReduceType.Sum: mx.sum, ReduceType.Prod: mx.prod,
           ReduceType.Min: mx.min, ReduceType.Max: mx.max}
_SCAN = {ScanType.Max: mx.cummax, ScanType.Min: mx.cummin, ScanType.Sum: mx.cumsum, ScanType.Prod: mx.cumprod,
         ScanType.LogAddExp: mx.logcumsumexp}


@evaluator("Reduce")
def reduce(rec, xs, a):
    return [_REDUCE[a.type](xs[0], axis=list(a.axes), keepdims=True)]


@evaluator("ArgReduce")
def arg_reduce(rec, xs, a):
    fn = mx.argmin if a.type == ArgReduceType.ArgMin else mx.argmax
    return [fn(xs[0], axis=a.axis, keepdims=True)]


@evaluator("Scan")
def scan(rec, xs, a):
    return [_SCAN[a.type](xs[0], axis=a.axis, reverse=a.reverse, inclusive=a.inclusive)]


@evaluator("Softmax")
def softmax(rec, xs, a):
    return [mx.softmax(xs[0], axis=-1, precise=bool(a.precise))]


@evaluator("LogSumExp")
def logsumexp(rec, xs, a):
    return [mx.logsumexp(xs[0], axis=-1, keepdims=True)]


@evaluator("NumberOfElements")
def number_of_elements(rec, xs, a):
    count = math.prod(xs[0].shape[ax] for ax in a.axes)
    value = 1.0 / count if a.inverted else count
    return [mx.array(value, dtype=a.dtype)]


# -- matrix products ------------------------------------------------------------------------
@evaluator("Matmul")
def matmul(rec, xs, a):
    return [mx.matmul(xs[0], xs[1])]


@evaluator("AddMM")
def addmm(rec, xs, a):
    x, w, c = xs
    return [mx.addmm(c, x, w, alpha=a.alpha, beta=a.beta)]


@evaluator("BlockMaskedMM")
def block_masked_mm(rec, xs, a):
    x, w, *masks = xs
    mask_out = mask_lhs = mask_rhs = None
    if len(masks) == 1:
        (mask_out,) = masks
    elif len(masks) == 2:
        mask_lhs, mask_rhs = masks
    elif len(masks) == 3:
        mask_out, mask_lhs, mask_rhs = masks
    return [mx.block_masked_mm(x, w, a.block_size, mask_out, mask_lhs, mask_rhs)]


@evaluator("GatherMM")
def gather_mm(rec, xs, a):
    x, w, lhs, rhs = xs
    return [mx.gather_mm(x, w, lhs, rhs, sorted_indices=bool(a.right_sorted))]


def _mode(a) -> str:
    return QuantizationMode(a.mode).name


@evaluator("QuantizedMatmul")
def quantized_matmul(rec, xs, a):
    x, w, scales, *rest = xs
    biases = rest[0] if rest else None
    return [mx.quantized_matmul(x, w, scales, biases, transpose=bool(a.transpose),
                                group_size=a.group_size, bits=a.bits, mode=_mode(a))]


@evaluator("GatherQMM")
def gather_qmm(rec, xs, a):
    x, w, scales, *rest = xs
    biases = rest[0] if len(rest) == 3 else None
    lhs, rhs = rest[-2:]
    return [mx.gather_qmm(x, w, scales, biases, lhs, rhs, transpose=bool(a.transpose),
                          group_size=a.group_size, bits=a.bits, mode=_mode(a),
                          sorted_indices=bool(a.right_sorted))]


@evaluator("Quantize")
def quantize(rec, xs, a):
    if a.dequantize:
        w, scales, *rest = xs
        biases = rest[0] if rest else None
        return [mx.dequantize(w, scales, biases, group_size=a.group_size, bits=a.bits, mode=_mode(a),
                              dtype=_out(rec).dtype)]
    parts = mx.quantize(xs[0], group_size=a.group_size, bits=a.bits, mode=_mode(a))
    return list(parts)[: len(rec.outputs)]


@evaluator("Hadamard")
def hadamard(rec, xs, a):
    return [mx.hadamard_transform(xs[0], scale=a.scale)]


@evaluator("Convolution")
def convolution(rec, xs, a):
    x, w = xs
    return [mx.conv_general(
        x, w, stride=list(a.kernel_strides), padding=(list(a.padding_lo), list(a.padding_hi)),
        kernel_dilation=list(a.kernel_dilation), input_dilation=list(a.input_dilation),
        groups=a.groups, flip=bool(a.flip),
    )]


# -- shape, layout, creation ----------------------------------------------------------------
@evaluator("Broadcast", "BroadcastAxes")
def broadcast(rec, xs, a):
    return [mx.broadcast_to(xs[0], _out(rec).shape)]


@evaluator("Reshape")
def reshape(rec, xs, a):
    return [mx.reshape(xs[0], _out(rec).shape)]


@evaluator("Flatten")
def flatten(rec, xs, a):
    return [mx.flatten(xs[0], a.start_axis, a.end_axis)]


@evaluator("Unflatten")
def unflatten(rec, xs, a):
    return [mx.unflatten(xs[0], a.axis, list(a.shape))]


@evaluator("ExpandDims")
def expand_dims(rec, xs, a):
    return [mx.expand_dims(xs[0], list(a.axes))]


@evaluator("Squeeze")
def squeeze(rec, xs, a):
    return [mx.squeeze(xs[0], list(a.axes)) if a.axes else xs[0]]


@evaluator("Transpose")
def transpose(rec, xs, a):
    return [mx.transpose(xs[0], list(a.perm))]


@evaluator("Concatenate")
def concatenate(rec, xs, a):
    return [mx.concatenate(xs, axis=a.axis)]


@evaluator("Split")
def split(rec, xs, a):
    return list(mx.split(xs[0], list(a.indices), axis=a.axis))


@evaluator("Pad")
def pad(rec, xs, a):
    x, value = xs
    width = [(0, 0)] * x.ndim
    for axis, low, high in zip(a.axes, a.low_pad, a.high_pad):
        width[axis] = (low, high)
    return [mx.pad(x, width, constant_values=value)]


@evaluator("Arange")
def arange(rec, xs, a):
    return [mx.arange(a.start, a.stop, a.step, dtype=_out(rec).dtype)]


@evaluator("Full")
def full(rec, xs, a):
    return [mx.broadcast_to(xs[0], _out(rec).shape)]


@evaluator("AsStrided")
def as_strided(rec, xs, a):
    return [mx.as_strided(xs[0], list(a.shape), list(a.strides), a.offset)]


@evaluator("Copy", "StopGradient")
def identity(rec, xs, a):
    return [xs[0]]


@evaluator("Depends")
def depends(rec, xs, a):
    return xs[: len(rec.outputs)]


# -- indexing -----------------------------------------------------------------------------
def _slices(a) -> tuple:
    return tuple(slice(s, e, st) for s, e, st in zip(a.start, a.stop, a.strides))


@evaluator("Slice")
def slice_(rec, xs, a):
    return [xs[0][_slices(a)]]


_AT = {ScatterReduce.Sum: "add", ScatterReduce.Prod: "multiply", ScatterReduce.Max: "maximum",
       ScatterReduce.Min: "minimum"}


@evaluator("SliceUpdate")
def slice_update(rec, xs, a):
    src, update = xs
    index = _slices(a)
    if str(a.reduce) == "None":
        out = mx.array(src)  # a copy: item assignment must not rebind the caller's array
        out[index] = update
        return [out]
    return [getattr(src.at[index], _AT[a.reduce])(update)]


@evaluator("DynamicSlice")
def dynamic_slice(rec, xs, a):
    return [mx.slice(xs[0], xs[1], list(a.axes), list(a.slice_size))]


@evaluator("DynamicSliceUpdate")
def dynamic_slice_update(rec, xs, a):
    return [mx.slice_update(xs[0], xs[1], xs[2], list(a.axes))]


def _index_grid(shape: Sequence[int], axes: Sequence[int], indices: Sequence[mx.array],
                window: Sequence[int]) -> tuple[mx.array, ...]:
    """Index arrays of shape ``I + window`` addressing ``a[idx_k + s_k (indexed axes), s_j]``.

    ``I`` is the broadcast shape of ``indices``; negative indices wrap as on MLX CPU.
    """
    batch = mx.broadcast_shapes(*[tuple(i.shape) for i in indices]) if indices else ()
    nb, nw = len(batch), len(window)
    grid = []
    positions = {axis: k for k, axis in enumerate(axes)}
    for d in range(len(shape)):
        offsets = mx.arange(window[d], dtype=mx.int64).reshape((1,) * nb + tuple(
            window[d] if j == d else 1 for j in range(nw)))
        if d in positions:
            idx = indices[positions[d]].astype(mx.int64)
            idx = mx.where(idx < 0, idx + shape[d], idx)
            idx = mx.broadcast_to(idx, batch).reshape(tuple(batch) + (1,) * nw)
            grid.append(idx + offsets)
        else:
            grid.append(offsets)
    return tuple(grid)


@evaluator("Gather")
def gather(rec, xs, a):
    x, *indices = xs
    axes, sizes = list(a.axes), list(a.slice_sizes)
    if x.ndim == 0:
        return [x]
    return [x[_index_grid(x.shape, axes, indices, sizes)]]


@evaluator("GatherAxis")
def gather_axis(rec, xs, a):
    return [mx.take_along_axis(xs[0], xs[1], axis=a.axis)]


@evaluator("Scatter")
def scatter(rec, xs, a):
    x, *indices, updates = xs
    axes = list(a.axes)
    batch_rank = updates.ndim - x.ndim
    window = list(updates.shape[batch_rank:])
    grid = _index_grid(x.shape, axes, indices, window)
    updates = mx.broadcast_to(updates, mx.broadcast_shapes(*[tuple(g.shape) for g in grid], tuple(updates.shape)))
    if str(a.reduce) == "None":
        out = mx.array(x)
        out[grid] = updates
        return [out]
    return [getattr(x.at[grid], _AT[a.reduce])(updates)]


@evaluator("ScatterAxis")
def scatter_axis(rec, xs, a):
    x, idx, updates = xs
    axis = a.axis
    if str(a.reduce) == "None":
        return [mx.put_along_axis(x, idx, updates, axis=axis)]
    idx = idx.astype(mx.int64)
    idx = mx.where(idx < 0, idx + x.shape[axis], idx)
    grid = tuple(
        idx if d == axis else mx.arange(idx.shape[d]).reshape(tuple(-1 if j == d else 1 for j in range(x.ndim)))
        for d in range(x.ndim)
    )
    return [x.at[grid].add(updates)]


@evaluator("MaskedScatter")
def masked_scatter(rec, xs, a):
    x, mask, src = xs
    batch = x.shape[0] if x.ndim else 1
    flat_mask = mx.broadcast_to(mask, x.shape).reshape(batch, -1)
    flat_src = src.reshape(batch, -1)
    position = mx.cumsum(flat_mask.astype(mx.int32), axis=1) - 1
    position = mx.clip(position, 0, max(flat_src.shape[1] - 1, 0))
    picked = mx.take_along_axis(flat_src, position, axis=1).astype(x.dtype)
    return [mx.where(flat_mask, picked, x.reshape(batch, -1)).reshape(x.shape)]


# -- sort and search ------------------------------------------------------------------------
@evaluator("Sort")
def sort(rec, xs, a):
    return [mx.sort(xs[0], axis=a.axis)]


@evaluator("ArgSort")
def argsort(rec, xs, a):
    return [mx.argsort(xs[0], axis=a.axis)]


@evaluator("Partition")
def partition(rec, xs, a):
    return [mx.partition(xs[0], a.kth, axis=a.axis)]


@evaluator("ArgPartition")
def argpartition(rec, xs, a):
    return [mx.argpartition(xs[0], a.kth, axis=a.axis)]


@evaluator("SearchSorted")
def searchsorted(rec, xs, a):
    return [mx.searchsorted(xs[0], xs[1], side="right" if a.right else "left")]


# -- FFT and linear algebra -----------------------------------------------------------------
@evaluator("FFT")
def fft(rec, xs, a):
    (x,) = xs
    axes = list(a.axes)
    out = _out(rec)
    if not a.real:
        fn = mx.fft.ifftn if a.inverse else mx.fft.fftn
        return [fn(x, s=[out.shape[ax] for ax in axes], axes=axes)]
    if not a.inverse:
        return [mx.fft.rfftn(x, s=[x.shape[ax] for ax in axes], axes=axes)]
    return [mx.fft.irfftn(x, s=[out.shape[ax] for ax in axes], axes=axes)]


_CPU = mx.cpu


@evaluator("QRF")
def qrf(rec, xs, a):
    return list(mx.linalg.qr(xs[0], stream=_CPU))


@evaluator("SVD")
def svd(rec, xs, a):
    result = mx.linalg.svd(xs[0], compute_uv=bool(a.compute_uv), stream=_CPU)
    return list(result) if isinstance(result, (list, tuple)) else [result]


@evaluator("Inverse")
def inverse(rec, xs, a):
    if a.tri:
        return [mx.linalg.tri_inv(xs[0], upper=bool(a.upper), stream=_CPU)]
    return [mx.linalg.inv(xs[0], stream=_CPU)]


@evaluator("Cholesky")
def cholesky(rec, xs, a):
    return [mx.linalg.cholesky(xs[0], upper=bool(a.upper), stream=_CPU)]


@evaluator("Eig")
def eig(rec, xs, a):
    if a.compute_eigenvectors:
        return list(mx.linalg.eig(xs[0], stream=_CPU))
    return [mx.linalg.eigvals(xs[0], stream=_CPU)]


@evaluator("Eigh")
def eigh(rec, xs, a):
    if a.compute_eigenvectors:
        return list(mx.linalg.eigh(xs[0], UPLO=a.uplo, stream=_CPU))
    return [mx.linalg.eigvalsh(xs[0], UPLO=a.uplo, stream=_CPU)]


# -- fused mx.fast primitives (GPU traces) ---------------------------------------------------
@evaluator("RMSNorm")
def rms_norm(rec, xs, a):
    x, w = xs
    return [mx.fast.rms_norm(x, w if w.ndim else None, a.eps)]


@evaluator("LayerNorm")
def layer_norm(rec, xs, a):
    x, w, b = xs
    return [mx.fast.layer_norm(x, w if w.ndim else None, b if b.ndim else None, a.eps)]


@evaluator("RMSNormVJP", "LayerNormVJP")
def norm_vjp(rec, xs, a):
    """The gradient of the forward norm with respect to every primal; a primal that was
    absent (0-d) gets a 0-d zero, as MLX's kernel gives."""
    *primals, g = xs
    forward = rms_norm if rec.name == "RMSNormVJP" else layer_norm
    _, grads = mx.vjp(lambda *p: forward(rec, list(p), a), primals, [g])
    return [d if p.ndim else mx.zeros_like(p) for d, p in zip(grads, primals)]


@evaluator("RoPE")
def rope(rec, xs, a):
    if not a.forward:
        raise CannotEvaluate("RoPE with forward=False only appears in gradients")
    x, offset, *freqs = xs
    freqs = freqs[0] if freqs else None
    return [mx.fast.rope(x, a.dims, traditional=bool(a.traditional),
                         base=None if freqs is not None else a.base, scale=a.scale,
                         offset=offset, freqs=freqs)]


@evaluator("ScaledDotProductAttention")
def sdpa(rec, xs, a):
    if a.output_logsumexp:
        raise CannotEvaluate("ScaledDotProductAttention with output_logsumexp has no Python op")
    q, k, v, *rest = xs
    sinks = rest.pop() if a.has_sinks else None
    mask = "causal" if a.do_causal else (rest[0] if rest else None)
    return [mx.fast.scaled_dot_product_attention(q, k, v, scale=a.scale, mask=mask, sinks=sinks)]
