"""MLX evaluators of the interpreter: elementwise ops, reductions and scans, matrix products."""

from __future__ import annotations

import math

import mlx.core as mx

from ..capture.records import (
    ArgReduceType,
    BitwiseOp,
    LogBase,
    QuantizationMode,
    ReduceType,
    ScanType,
)
from .evaluators import EVALUATORS, evaluator, out_spec

# -- elementwise --------------------------------------------------------------------------
_UNARY = {
    "Abs": mx.abs,
    "Negative": mx.negative,
    "Sign": mx.sign,
    "Floor": mx.floor,
    "Ceil": mx.ceil,
    "Round": mx.round,
    "Square": mx.square,
    "Exp": mx.exp,
    "Expm1": mx.expm1,
    "Log1p": mx.log1p,
    "Sin": mx.sin,
    "Cos": mx.cos,
    "Tan": mx.tan,
    "Sinh": mx.sinh,
    "Cosh": mx.cosh,
    "Tanh": mx.tanh,
    "ArcSin": mx.arcsin,
    "ArcCos": mx.arccos,
    "ArcTan": mx.arctan,
    "ArcSinh": mx.arcsinh,
    "ArcCosh": mx.arccosh,
    "ArcTanh": mx.arctanh,
    "Sigmoid": mx.sigmoid,
    "Erf": mx.erf,
    "ErfInv": mx.erfinv,
    "LogicalNot": mx.logical_not,
    "Conjugate": mx.conj,
    "Real": mx.real,
    "Imag": mx.imag,
}
_BINARY = {
    "Add": mx.add,
    "Subtract": mx.subtract,
    "Multiply": mx.multiply,
    "Divide": mx.divide,
    "FloorDivide": mx.floor_divide,
    "Remainder": mx.remainder,
    "Power": mx.power,
    "Maximum": mx.maximum,
    "Minimum": mx.minimum,
    "NotEqual": mx.not_equal,
    "Less": mx.less,
    "LessEqual": mx.less_equal,
    "Greater": mx.greater,
    "GreaterEqual": mx.greater_equal,
    "LogicalAnd": mx.logical_and,
    "LogicalOr": mx.logical_or,
    "ArcTan2": mx.arctan2,
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


_BITWISE = {
    BitwiseOp.And: mx.bitwise_and,
    BitwiseOp.Or: mx.bitwise_or,
    BitwiseOp.Xor: mx.bitwise_xor,
    BitwiseOp.LeftShift: mx.left_shift,
    BitwiseOp.RightShift: mx.right_shift,
}


@evaluator("BitwiseBinary")
def bitwise(rec, xs, a):
    return [_BITWISE[a.op](xs[0], xs[1])]


# -- reductions, scans, softmax -----------------------------------------------------------
_REDUCE = {
    ReduceType.And: mx.all,
    ReduceType.Or: mx.any,
    ReduceType.Sum: mx.sum,
    ReduceType.Prod: mx.prod,
    ReduceType.Min: mx.min,
    ReduceType.Max: mx.max,
}
_SCAN = {
    ScanType.Max: mx.cummax,
    ScanType.Min: mx.cummin,
    ScanType.Sum: mx.cumsum,
    ScanType.Prod: mx.cumprod,
    ScanType.LogAddExp: mx.logcumsumexp,
}


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
    return [
        mx.quantized_matmul(
            x, w, scales, biases, transpose=bool(a.transpose), group_size=a.group_size, bits=a.bits, mode=_mode(a)
        )
    ]


@evaluator("GatherQMM")
def gather_qmm(rec, xs, a):
    x, w, scales, *rest = xs
    biases = rest[0] if len(rest) == 3 else None
    lhs, rhs = rest[-2:]
    return [
        mx.gather_qmm(
            x,
            w,
            scales,
            biases,
            lhs,
            rhs,
            transpose=bool(a.transpose),
            group_size=a.group_size,
            bits=a.bits,
            mode=_mode(a),
            sorted_indices=bool(a.right_sorted),
        )
    ]


@evaluator("Quantize")
def quantize(rec, xs, a):
    if a.dequantize:
        w, scales, *rest = xs
        biases = rest[0] if rest else None
        return [
            mx.dequantize(
                w, scales, biases, group_size=a.group_size, bits=a.bits, mode=_mode(a), dtype=out_spec(rec).dtype
            )
        ]
    parts = mx.quantize(xs[0], group_size=a.group_size, bits=a.bits, mode=_mode(a))
    return list(parts)[: len(rec.outputs)]


@evaluator("Hadamard")
def hadamard(rec, xs, a):
    return [mx.hadamard_transform(xs[0], scale=a.scale)]


@evaluator("Convolution")
def convolution(rec, xs, a):
    x, w = xs
    return [
        mx.conv_general(
            x,
            w,
            stride=list(a.kernel_strides),
            padding=(list(a.padding_lo), list(a.padding_hi)),
            kernel_dilation=list(a.kernel_dilation),
            input_dilation=list(a.input_dilation),
            groups=a.groups,
            flip=bool(a.flip),
        )
    ]
