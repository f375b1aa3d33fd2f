"""A random MLX program generator for differential fuzzing (MLX vs onnxruntime).

``generate(seed)`` returns a :class:`Program`: a few example inputs and a short list of
steps, each one MLX op applied to earlier values (program inputs or step results) and
Python literals. Every candidate step is run on the example inputs while the program is
built, so the program is valid MLX by construction (MLX's own errors just discard the
candidate) and the generator always knows every value's real shape and dtype.

Each value carries an ``exact`` flag: program inputs are exact, and so is anything
computed by ops that round the same way on both sides (elementwise add/mul/div, data
movement, integer arithmetic; for bfloat16, which is carried as float32 by default, only
data movement and max/min). Discontinuous ops (comparisons, floor/round, argmax,
float -> int casts, remainder) are only applied to exact values, so a last-bit difference
in ``exp`` or a float sum never shows up as a spurious mismatch.

``check(program, opset)`` exports the program, runs it in onnxruntime on the example
inputs and compares with MLX through :class:`mlx2onnx.Verifier`; ``program.source()``
is a self-contained reproducer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import mlx.core as mx
import numpy as np

from tests.support.harness import ort_session

DTYPES = {
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
    "int32": mx.int32,
    "int8": mx.int8,
    "uint8": mx.uint8,
    "bool": mx.bool_,
}
FLOAT = ("float32", "float16", "bfloat16")
HALF = (DTYPES["float16"], DTYPES["bfloat16"])
DTYPES_FLOAT = tuple(DTYPES[d] for d in FLOAT)
INT = ("int32", "int8", "uint8", "uint32")  # (uint32 only as an argmax/argsort result)
NAME_OF = {v: k for k, v in DTYPES.items()} | {mx.uint32: "uint32"}  # argmax/argsort results
MAX_SIZE = 48
HALF_SUM_TOLERANCES = {
    "float16": (0.06, 0.02),
    "bfloat16": (0.5, 0.06),
}  # (tests/support/cases/quantized.py's LOW_PRECISION)


def dname(dtype: mx.Dtype) -> str:
    return NAME_OF.get(dtype, str(dtype).replace("mlx.core.", ""))


# -- ops that need a named wrapper (so a reproducer can be printed) --------------------
def getitem(x, index):
    """``x[index]`` with ``index`` a tuple of (start, stop, step) triples."""
    return x[tuple(slice(*t) for t in index)]


def astype(x, dtype):
    return x.astype(DTYPES[dtype])


def take(x, indices, axis):
    return mx.take(x, indices, axis=axis)


def conv1d(x, w):
    return mx.conv1d(x, w)


def conv2d(x, w, stride, padding):
    return mx.conv2d(x, w, stride=stride, padding=padding)


def pad(x, widths, mode, value):
    return mx.pad(x, [tuple(w) for w in widths], mode=mode, constant_values=value)


def split(x, parts, axis):
    return tuple(mx.split(x, parts, axis=axis))


def clip(x, lo, hi):
    return mx.clip(x, lo, hi)


def where(c, a, b):
    return mx.where(c, a, b)


UNARY_FLOAT_SMOOTH = [
    "exp",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "erf",
    "arctan",
    "sinh",
    "cosh",
    "expm1",
    "log1p",
    "log",
    "sqrt",
    "rsqrt",
    "arcsin",
    "arccos",
    "arcsinh",
    "arccosh",
    "arctanh",
    "tan",
    "reciprocal",
]
UNARY_EXACT = ["abs", "negative", "square"]
UNARY_TAME = ["sin", "cos", "tanh", "sigmoid", "erf", "arctan", "arcsinh", "abs", "negative"]
UNARY_JUMPY = ["floor", "ceil", "round", "sign"]
BINARY_EXACT = ["add", "subtract", "multiply", "maximum", "minimum"]
BINARY_FLOAT = ["divide", "logaddexp", "arctan2", "power"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGICAL = ["logical_and", "logical_or"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]
REDUCE = ["sum", "mean", "prod", "max", "min", "all", "any"]


def mx_fn(name: str) -> Callable:
    wrapped = globals().get(name) if name in WRAPPERS else None
    return wrapped or getattr(mx, name)


def dyn_slice(x, start, axis, size):
    """``mx.slice`` with a start index array (a DynamicSlice record)."""
    return mx.slice(x, mx.array([start], mx.int32), [axis], [size if i == axis else d for i, d in enumerate(x.shape)])


def dyn_slice_update(x, update, start, axis):
    return mx.slice_update(x, update, mx.array([start], mx.int32), [axis])


def setitem(x, index, value):
    """``x[index] = value`` on a copy (a SliceUpdate record)."""
    y = x + mx.zeros_like(x)
    y[tuple(slice(*t) for t in index)] = value
    return y


def at_add(x, indices, update):
    return x.at[indices].add(update)


def put_along_axis(x, indices, values, axis):
    """``mx.put_along_axis`` (a ScatterAxis record); a Python ``values`` becomes an array of x's dtype."""
    values = values if isinstance(values, mx.array) else mx.array(values, dtype=x.dtype)
    return mx.put_along_axis(x, indices, values, axis=axis)


def masked_set(x, mask, value):
    y = x + mx.zeros_like(x)
    y[mask] = value
    return y


def with_arange(x):
    return x + mx.arange(x.shape[-1]).astype(x.dtype)


def view(x, dtype):
    return x.view(DTYPES[dtype])


def rfft_parts(x, axis):
    y = mx.fft.rfft(x, axis=axis)
    return y.real, y.imag


def rms_norm(x, w):
    return mx.fast.rms_norm(x, w, 1e-5)


def layer_norm(x, w, b):
    return mx.fast.layer_norm(x, w, b, 1e-5)


def rope(x, dims, traditional, offset):
    return mx.fast.rope(x, dims, traditional=traditional, base=10000.0, scale=1.0, offset=offset)


def attention(q, k, v, causal):
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=q.shape[-1] ** -0.5, mask="causal" if causal else None)


def random_bits(x, seed):
    return x + mx.random.randint(-3, 4, x.shape, key=mx.random.key(seed)).astype(x.dtype)


def random_uniform(x, seed):
    return x * mx.random.uniform(shape=x.shape, key=mx.random.key(seed)).astype(x.dtype)


def topk(x, k):
    """``mx.topk`` along the last axis, sorted: MLX leaves the order of the k values open."""
    return mx.sort(mx.topk(x, k, axis=-1), axis=-1)


def hadamard(x):
    return mx.hadamard_transform(x)


# -- the rarer primitives (step_rare) -------------------------------------------------------
def argpartition(x, kth, axis):
    """What MLX defines of ``mx.argpartition``: the value the index at ``kth`` selects, and
    the sorted values on either side (the order within each side is MLX's own)."""
    picked = mx.take_along_axis(x, mx.argpartition(x, kth, axis=axis), axis=axis)
    d = x.shape[axis]
    kth = kth % d
    low, at, high = mx.split(picked, [kth, kth + 1], axis=axis)
    return mx.sort(low, axis=axis), at, mx.sort(high, axis=axis)


def searchsorted(a, v, side):
    """``mx.searchsorted`` of ``v`` in the sorted, flattened ``a``."""
    return mx.searchsorted(mx.sort(mx.flatten(a)), v, side=side)


def conj_parts(x, fft):
    """Real and imaginary part of ``conj(z)``, z the complex ``x`` (or its DFT over the last axis)."""
    z = mx.fft.fft(x) if fft else x.astype(mx.complex64)
    y = mx.conj(z)
    return y.real, y.imag


def depends(x, y):
    return mx.depends([x], [y])[0]


def gather_mm(a, b, lhs, rhs):
    """``mx.gather_mm`` with constant index lists (``None``: MLX's own arange)."""
    lhs = None if lhs is None else mx.array(np.array(lhs, np.uint32))
    rhs = None if rhs is None else mx.array(np.array(rhs, np.uint32))
    return mx.gather_mm(_matrix(a), _matrix(b), lhs, rhs)


def _matrix(a):
    """``a`` as a float32 array of rank >= 2 (MLX's CPU GatherMM and BlockMaskedMM take float32 only)."""
    a = a.astype(mx.float32)
    return a[None] if a.ndim == 1 else a


def block_masked_mm(a, b, block_size, mask_out, mask_lhs, mask_rhs, grow):
    """``mx.block_masked_mm`` with constant masks (nested lists of bools or floats). ``grow``
    (rm, rk, rn): a's rows, the inner axis and b's columns are first tiled by these factors,
    so the product spans several blocks; a grown product is summed over its rows (a small
    result)."""
    masks = [None if m is None else mx.array(np.array(m)) for m in (mask_out, mask_lhs, mask_rhs)]
    if masks[1] is not None and masks[1].dtype == mx.float64:
        masks[1], masks[2] = masks[1].astype(mx.float32), masks[2].astype(mx.float32)
    a, b = _matrix(a), _matrix(b)
    rm, rk, rn = grow
    a = mx.tile(a, [1] * (a.ndim - 2) + [rm, rk]) if (rm, rk) != (1, 1) else a
    b = mx.tile(b, [1] * (b.ndim - 2) + [rk, rn]) if (rk, rn) != (1, 1) else b
    out = mx.block_masked_mm(a, b, block_size, *masks)
    return mx.sum(out, axis=-2, keepdims=True) if rm > 1 else out


def _widen(x, k):
    """The last axis of ``x`` repeated and cut to length ``k`` (a multiple of a group size)."""
    reps = -(-k // x.shape[-1])
    return mx.tile(x, [1] * (x.ndim - 1) + [reps])[..., :k]


def _weights(seed, shape, group_size, bits, mode):
    """A random float weight of ``shape``, quantized and evaluated: constants of the export."""
    w = mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    q = mx.quantize(w, group_size=group_size, bits=bits, mode=mode)
    mx.eval(q)
    return q


def quantized_matmul(x, seed, n, group_size, bits, mode, transpose, in_graph):
    """``x`` times a random quantized weight: with ``transpose``, x widened to a group
    size k times an [n, k] weight transposed, else x [..., d] times a [d, n] weight (n a
    group size). ``in_graph``: the float weight is a constant quantized in the graph."""
    k = group_size if transpose else x.shape[-1]
    xk = _widen(x, k) if transpose else x
    shape = (n, k) if transpose else (k, n)
    if in_graph:
        w = mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
        q = mx.quantize(w, group_size=group_size, bits=bits, mode=mode)
    else:
        q = _weights(seed, shape, group_size, bits, mode)
    return mx.quantized_matmul(xk, *q, transpose=transpose, group_size=group_size, bits=bits, mode=mode)


def quantize(x, k, group_size, bits):
    """Affine ``mx.quantize`` of ``x`` (as float32) widened to ``k``: codes, scales and biases."""
    return tuple(mx.quantize(_widen(x.astype(mx.float32), k), group_size=group_size, bits=bits))


def gather_qmm(x, seed, experts, n, k, group_size, bits, mode, rhs):
    """``mx.gather_qmm`` of ``x`` (widened to ``k``) with constant quantized expert weights
    [experts, n, k] and a constant expert index list ``rhs``."""
    q = _weights(seed, (experts, n, k), group_size, bits, mode)
    return mx.gather_qmm(
        _widen(x, k), *q, rhs_indices=mx.array(np.array(rhs, np.uint32)), group_size=group_size, bits=bits, mode=mode
    )


def weight_constant(seed, shape):
    """A random float32 constant (a weight of the export)."""
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def index_constant(seed, shape, high):
    """A random int32 constant in [0, high)."""
    return mx.array(np.random.default_rng(seed).integers(0, high, size=shape).astype(np.int32))


def scatter_add_axis(x, indices, axis):
    """The VJP of take_along_axis: ones scattered (summed) into zeros like ``x`` along
    ``axis`` (MLX's ScatterAxis Sum)."""

    def gather(t):
        return mx.take_along_axis(t, indices, axis=axis)

    cotangent = mx.ones(gather(x).shape, x.dtype)
    return mx.vjp(gather, [x], [cotangent])[1][0] + x


WRAPPERS = {
    "getitem",
    "astype",
    "take",
    "conv1d",
    "conv2d",
    "pad",
    "split",
    "clip",
    "where",
    "dyn_slice",
    "dyn_slice_update",
    "setitem",
    "at_add",
    "put_along_axis",
    "masked_set",
    "with_arange",
    "view",
    "rfft_parts",
    "rms_norm",
    "layer_norm",
    "rope",
    "attention",
    "random_bits",
    "random_uniform",
    "hadamard",
    "topk",
    "argpartition",
    "searchsorted",
    "conj_parts",
    "depends",
    "gather_mm",
    "block_masked_mm",
    "quantized_matmul",
    "quantize",
    "gather_qmm",
    "scatter_add_axis",
    "weight_constant",
    "index_constant",
}


# -- programs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref:
    """A reference to value ``i`` of the program (inputs first, then step results)."""

    i: int

    def __repr__(self) -> str:
        return f"v{self.i}"


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple
    kwargs: tuple = ()  # (key, value) pairs
    outputs: int = 1


@dataclass
class Program:
    seed: int
    inputs: list  # mx.array example inputs
    steps: list = field(default_factory=list)
    returns: tuple = ()
    tolerances: dict = field(default_factory=dict)  # per output dtype, loosened by half-precision steps

    def __call__(self, *arrays):
        values = self._values(arrays, in_float32=False)
        out = tuple(values[r] for r in self.returns)
        return out if len(out) > 1 else out[0]

    def _values(self, arrays, in_float32: bool) -> list:
        values = [a.astype(mx.float32) if in_float32 and a.dtype in HALF else a for a in arrays]
        for step in self.steps:
            args = _resolve(step.args, values)
            result = mx_fn(step.op)(*args, **dict(step.kwargs))
            if in_float32 and step.op == "astype" and DTYPES[args[1]] in HALF:
                result = result.astype(mx.float32)  # rounded to the half type where the program casts
            values.extend(result if isinstance(result, (tuple, list)) else [result])
        return values

    def in_float32(self):
        """The program with its half-precision floats computed in float32 (as the export
        carries bfloat16, and as MLX on a GPU sums quantized products), rounded to the half
        type only where the program casts to it; outputs in the program's dtypes. ``None``
        where it has no half-precision value, or a step reads one's bits (``view``)."""
        values = self._values(self.inputs, in_float32=False)
        if not any(v.dtype in HALF for v in values) or any(step.op == "view" for step in self.steps):
            return None
        dtypes = [values[r].dtype for r in self.returns]

        def fn(*arrays):
            values = self._values(arrays, in_float32=True)
            out = tuple(values[r].astype(d) for r, d in zip(self.returns, dtypes))
            return out if len(out) > 1 else out[0]

        return fn

    def source(self) -> str:
        """A reproducer: Python code building the inputs and the function."""
        lines = [
            "import mlx.core as mx, numpy as np",
            "from tests.support.fuzzgen import *  # wrappers: getitem, astype, pad ...",
            "nan, inf = np.nan, np.inf",
            "",
        ]
        names = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        lines.append(f"def fn({names}):")
        k = len(self.inputs)
        for step in self.steps:
            targets = ", ".join(f"v{k + j}" for j in range(step.outputs))
            call = ", ".join([repr(a) for a in step.args] + [f"{key}={v!r}" for key, v in step.kwargs])
            prefix = "" if step.op in WRAPPERS else "mx."
            lines.append(f"    {targets}{',' if step.outputs > 1 else ''} = {prefix}{step.op}({call})")
            k += step.outputs
        lines.append(f"    return {', '.join(f'v{r}' for r in self.returns)}")
        lines.append("")
        for i, a in enumerate(self.inputs):
            np_dtype = "bool" if a.dtype == mx.bool_ else ("float32" if a.dtype == mx.bfloat16 else dname(a.dtype))
            values = np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a).astype(np_dtype).tolist()
            lines.append(
                f"v{i} = mx.array(np.array({values!r}, dtype={np_dtype!r}).reshape({tuple(a.shape)!r}))"
                f".astype(mx.{dname(a.dtype) if a.dtype != mx.bool_ else 'bool_'})"
            )
        lines.append(f"args = ({', '.join(f'v{i}' for i in range(len(self.inputs)))},)")
        return "\n".join(lines)

    def primitives(self) -> set[str]:
        import mlx2onnx

        return {p.name for p in mlx2onnx.capture(self, tuple(self.inputs), {}).primitives}


def _resolve(args, values):
    """``args`` with every :class:`Ref` (also inside lists and tuples) replaced by its value."""
    if isinstance(args, Ref):
        return values[args.i]
    if isinstance(args, (list, tuple)):
        return type(args)(_resolve(a, values) for a in args)
    return args


def _refs_in(args) -> list[Ref]:
    if isinstance(args, Ref):
        return [args]
    if isinstance(args, (list, tuple)):
        return [r for a in args for r in _refs_in(a)]
    return []


@dataclass
class _Value:
    array: mx.array
    exact: bool

    @property
    def shape(self):
        return tuple(self.array.shape)

    @property
    def dtype(self):
        return dname(self.array.dtype)


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.values: list[_Value] = []
        self.steps: list[Step] = []
        self.n_inputs = 0
        self.half_sums: set[str] = set()  # half-precision dtypes a quantized product summed in

    # random helpers
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq):
        if seq and isinstance(seq[0], Ref) and self.chance(0.5):
            return seq[-1]  # prefer the newest value, so programs are chains rather than dead code
        return seq[int(self.rng.integers(len(seq)))]

    def dim(self) -> int:
        r = self.rng.random()
        if r < 0.04:
            return 0
        if r < 0.3:
            return 1
        return int(self.rng.integers(2, 6))

    def shape(self, rank=None) -> tuple:
        rank = int(self.pick([0, 1, 1, 2, 2, 2, 3, 3, 4])) if rank is None else rank
        while True:
            shape = tuple(self.dim() for _ in range(rank))
            if int(np.prod(shape)) <= MAX_SIZE:
                return shape

    def make_array(self, shape, dtype: str) -> mx.array:
        rng = self.rng
        if dtype == "bool":
            return mx.array(rng.random(shape) < 0.5)
        if dtype in INT:
            info = np.iinfo(np.dtype(dtype))
            lo, hi = (info.min, info.max) if self.chance(0.3) else (max(info.min, -9), min(info.max, 9))
            return mx.array(rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype))
        values = rng.standard_normal(shape).astype(np.float32) * float(self.pick([0.5, 1.0, 3.0]))
        if self.chance(0.15) and values.size:
            specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
            mask = rng.random(shape) < 0.2
            values = np.where(mask, specials[rng.integers(0, 5, size=shape)], values)
        return mx.array(values).astype(DTYPES[dtype])

    def add_input(self, shape, dtype: str, array=None) -> Ref:
        if self.steps:
            raise RuntimeError("inputs come first")
        array = self.make_array(shape, dtype) if array is None else array
        self.values.append(_Value(array, True))
        self.n_inputs += 1
        return Ref(len(self.values) - 1)

    def refs(self, pred=lambda v: True) -> list[Ref]:
        return [Ref(i) for i, v in enumerate(self.values) if pred(v)]

    def try_step(self, op: str, args: tuple, kwargs: dict | None = None, exact: bool | None = None) -> bool:
        kwargs = kwargs or {}
        concrete = _resolve(args, [v.array for v in self.values])
        try:
            result = mx_fn(op)(*concrete, **kwargs)
            results = list(result) if isinstance(result, (tuple, list)) else [result]
            mx.eval(results)
        except Exception:
            return False
        if any(r.dtype not in NAME_OF or r.size > 4 * MAX_SIZE for r in results):
            return False
        if exact is None:
            exact = all(self.values[r.i].exact for r in _refs_in(args))
        self.steps.append(Step(op, tuple(args), tuple(sorted(kwargs.items())), len(results)))
        self.values.extend(_Value(r, exact) for r in results)
        return True


# -- step makers: each picks operands and parameters, returns whether a step was added -------
def _partner(b: _Builder, x: Ref, dtype: str | None = None, exact_only=False):
    """A second operand broadcast-compatible with ``x``: an existing value, a literal or
    (while no step exists yet) not possible, so existing values or literals only."""
    vx = b.values[x.i]
    dtype = dtype or vx.dtype
    same = [
        r
        for r in b.refs(lambda v: v.dtype == dtype and (v.exact or not exact_only))
        if _broadcastable(b.values[r.i].shape, vx.shape)
    ]
    if same and b.chance(0.75):
        return b.pick(same)
    if dtype == "bool":
        return bool(b.chance(0.5))
    if dtype in INT:
        return int(b.rng.integers(0, 5))
    return float(np.round(b.rng.standard_normal() * 2, 2))


def _broadcastable(a, c) -> bool:
    for p, q in zip(reversed(a), reversed(c)):
        if p != q and p != 1 and q != 1:
            return False
    return True


CONDITIONED = ("sin", "cos", "tan", "arcsin", "arccos", "arccosh", "arctanh")


# jump or blow up at 0, so the sign of a rounding noise decides their value there
SINGULAR_AT_ZERO = ("sqrt", "rsqrt", "log", "reciprocal")


def _noisy_zeros(v) -> bool:
    """Whether ``v`` is an inexact value holding exact zeros: a DFT bin that is zero in exact
    arithmetic is 0.0 in MLX (pocketfft's butterflies cancel exactly) and +-1e-8 rounding
    noise in onnxruntime's DFT (its Bluestein algorithm for a length that is not a power of
    two), and sqrt of the noise is NaN where MLX's is 0 (rfft of a length-3 row [a, 0, 0],
    seed 20261215 program 18022); a matrix product whose every term is +-0.0 is a zero
    whose sign the GEMM kernel decides (where its accumulator starts, in which order it adds
    beta * c): ``-0.83 / addmm(c, a, w, alpha=0.5, beta=2.0)`` with a row of a and c -0.0
    was inf in MLX, -inf in onnxruntime (seed 20261215 program 24293)."""
    return not v.exact and v.dtype in FLOAT and bool((np.array(v.array.astype(mx.float32)) == 0).any())


def _finite_magnitudes(x: mx.array) -> np.ndarray:
    """|x| of the finite elements of ``x``, as float32."""
    a = np.abs(np.array(x.astype(mx.float32)))
    return a[np.isfinite(a)]


def _all_finite(x: mx.array) -> bool:
    """Whether every element of ``x`` is finite. A constant 4-bit (affine, mxfp4, nvfp4)
    weight is exported as a sum of blocked nibble products, so a row of activations
    holding inf gives NaN where MLX's one product gives +-inf (seed 20261211 programs
    13522 and 14304; README "Quantized weights"): non-finite in, non-finite out, but not
    the same one, and a later sort moves finite values to other places."""
    return _finite_magnitudes(x).size == x.size


def _slope(op: str, a: np.ndarray) -> np.ndarray:
    """|d op / dx| at |x| = ``a`` (float64), an upper bound where the sign does not matter."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if op == "tan":
            return 1.0 + np.tan(a) ** 2
        if op in ("arcsin", "arccos"):
            return np.where(a < 1, 1.0 / np.sqrt(np.maximum(1.0 - a * a, 0.0)), 0.0)  # NaN outside: no slope
        if op == "arccosh":
            return np.where(a > 1, 1.0 / np.sqrt(np.maximum(a * a - 1.0, 0.0)), 0.0)
        if op == "arctanh":
            return np.where(a < 1, 1.0 / np.maximum(1.0 - a * a, 0.0), 0.0)
    return np.ones_like(a)


def _keeps_close(op: str, x: mx.array) -> bool:
    """Whether ``op`` (one of CONDITIONED) of an inexact float32 ``x`` keeps a difference
    of a few ulps in x (a sum taken in another order, a tanh rounded the other way) inside
    the float32 tolerance: slope times 8 ulps at most 1e-5. The output's error is absolute
    and the input's grows with |x|: tan of a gather_qmm result near 300 (ulp 3e-5) with
    slope 8.6 was 5e-4 off (seed 20261208 program 5297); near a pole or a branch point the
    slope multiplies any ulp by thousands: arctanh(tanh(-6.33)), one float32 ulp from 1,
    was 0.0095 off (seed 20261210 program 2227)."""
    a = _finite_magnitudes(x).astype(np.float64)
    spacing = np.spacing(a.astype(np.float32)).astype(np.float64)
    return not (np.nan_to_num(_slope(op, a), posinf=1e30) * 8 * spacing > 1e-5).any()


def step_unary(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    if v.dtype in FLOAT:
        choices = UNARY_FLOAT_SMOOTH + UNARY_EXACT + (UNARY_JUMPY if v.exact else [])
        if v.dtype in ("float16", "bfloat16") and not v.exact:
            choices = UNARY_TAME  # a half-precision rounding difference, blown up by exp, is no bug
        op = b.pick(choices)
        if op in CONDITIONED and v.dtype == "float32" and not v.exact and not _keeps_close(op, v.array):
            return False
        if op in SINGULAR_AT_ZERO and _noisy_zeros(v):
            return False
        rounds = op == "square" and v.dtype == "bfloat16"
        return b.try_step(op, (x,), exact=v.exact and op in UNARY_EXACT and not rounds)
    if v.dtype == "bool":
        return b.try_step("logical_not", (x,))
    return b.try_step(b.pick(UNARY_EXACT + ["sign"]), (x,))


def step_binary(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    if v.dtype in FLOAT:
        jumpy = ["floor_divide", "remainder"] if v.exact and v.dtype != "bfloat16" else []
        op = b.pick(BINARY_EXACT * 2 + BINARY_FLOAT + jumpy)
        if op == "power" and not v.exact:
            # power jumps in its exponent at a negative base (an integer exponent gives a
            # number, any other NaN), so an exponent off by a last bit is no fixed answer:
            # exponents are exact values or literals
            return b.try_step(op, (x, _partner(b, x, exact_only=True)), exact=False)
        y = _partner(b, x, exact_only=op in ("floor_divide", "remainder", "power"))
        if op in ("floor_divide", "remainder") and not isinstance(y, Ref) and y == 0:
            y = 1.5
        if op in ("divide", "arctan2") and (_noisy_zeros(v) or isinstance(y, Ref) and _noisy_zeros(b.values[y.i])):
            return False  # (either operand may end up the divisor: the pair is swapped below)
        exact = op in BINARY_EXACT + ["divide"] and v.exact and (not isinstance(y, Ref) or b.values[y.i].exact)
        # bfloat16 is carried as float32 by default (Exporter(bfloat16="auto")): its arithmetic
        # is not rounded to bfloat16 after each op, so only max/min stay exact
        exact = exact and (v.dtype != "bfloat16" or op in ("maximum", "minimum"))
        return b.try_step(op, (x, y) if b.chance(0.8) else (y, x), exact=exact)
    if v.dtype == "bool":
        return b.try_step(b.pick(LOGICAL + ["bitwise_xor", "bitwise_and"]), (x, _partner(b, x)))
    op = b.pick(BINARY_EXACT * 2 + BITWISE + ["floor_divide", "remainder", "divide"])
    if op in ("floor_divide", "remainder"):
        y = int(b.pick([1, 2, 3, 7, -3]))  # never zero: MLX's integer division by zero is undefined
        if b.values[x.i].dtype.startswith("uint"):
            y = abs(y)
        return b.try_step(op, (x, y))
    y = _partner(b, x)
    return b.try_step(op, (x, y) if b.chance(0.8) else (y, x), exact=op != "divide" or None)


def step_compare(b: _Builder) -> bool:
    exact = b.refs(lambda v: v.exact)
    if not exact:
        return False
    x = b.pick(exact)
    op = b.pick(COMPARE)
    y = _partner(b, x, exact_only=True)
    return b.try_step(op, (x, y) if b.chance(0.8) else (y, x))


def step_where(b: _Builder) -> bool:
    conds = b.refs(lambda v: v.dtype == "bool")
    x = b.pick(b.refs())
    if not conds:
        return False
    c = b.pick(conds)
    y = _partner(b, x)
    return b.try_step("where", (c, x, y) if b.chance(0.5) else (c, y, x))


def step_reduce(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    op = b.pick(REDUCE + ["argmax", "argmin"] + (["var", "std"] if v.dtype in FLOAT else []))
    if op in ("argmax", "argmin") and not v.exact:
        op = "max"
    rank = len(v.shape)
    kwargs: dict[str, Any] = {"keepdims": b.chance(0.4)}
    if op in ("argmax", "argmin"):
        if rank:
            kwargs["axis"] = int(b.rng.integers(-rank, rank))
    elif rank and b.chance(0.8):
        k = int(b.rng.integers(1, rank + 1))
        axes = sorted(int(a) for a in b.rng.choice(rank, size=k, replace=False))
        kwargs["axis"] = axes if b.chance(0.7) or k > 1 else axes[0] - rank * int(b.chance(0.5))
    if op in ("var", "std") and b.chance(0.3):
        kwargs["ddof"] = 1
    if v.array.size == 0:
        return False  # MLX's reductions of empty arrays give 0 or uninitialised memory (tests/translate/test_fuzz.py)
    if op in ("var", "std") and not _spread_is_resolvable(v.array, kwargs.get("axis"), op):
        return False
    int_result = op in ("all", "any", "argmax", "argmin") or v.dtype not in FLOAT
    exact = v.exact and (int_result or op in ("max", "min"))
    return b.try_step(op, (x,), kwargs, exact=exact)


def _spread_is_resolvable(x: mx.array, axis, op: str) -> bool:
    """Whether var/std of ``x`` over ``axis`` is a fixed answer within the verifier's
    tolerance. Both sides subtract a mean computed in their own summation order (and MLX
    rounds it to a half-precision dtype), so each deviation carries an error up to about
    delta = (n * u32 + 2 * u) * max|x|; where the spread is small next to max|x| (8 equal
    values of 5.6e7: MLX's std is 4, the exact one and onnxruntime's 0) that error is the
    whole answer. Non-finite values give NaN on both sides and are kept."""
    a = np.array(x.astype(mx.float32), dtype=np.float64)
    if not np.all(np.isfinite(a)):
        return True
    axes = tuple(range(a.ndim)) if axis is None else tuple(int(i) % a.ndim for i in np.atleast_1d(axis))
    n = int(np.prod([a.shape[i] for i in axes]))
    from mlx2onnx.verify.compare import DEFAULT_TOLERANCES

    name = dname(x.dtype)
    atol, rtol = DEFAULT_TOLERANCES[name]
    u32, u = np.finfo(np.float32).eps / 2, {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}[name]
    delta = (n * u32 + 2 * u) * np.max(np.abs(a), axis=axes)
    spread = np.std(a, axis=axes)
    error, result = (delta, spread) if op == "std" else (2 * spread * delta + delta**2, spread**2)
    return bool(np.all(error <= atol + rtol * result))


def step_shape(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    shape, rank = v.shape, len(v.shape)
    kind = b.pick(
        [
            "reshape",
            "transpose",
            "expand_dims",
            "squeeze",
            "getitem",
            "getitem",
            "broadcast_to",
            "flatten",
            "swapaxes",
            "moveaxis",
            "flip",
            "tile",
            "repeat",
            "pad",
        ]
    )
    if kind == "reshape":
        size = int(np.prod(shape))
        dims = [d for d in range(1, size + 1) if size % d == 0] if size else [0, 1, 2]
        new, left = [], size
        for _ in range(int(b.rng.integers(0, 4))):
            d = b.pick([d for d in dims if (left % d == 0 if d else True)] or [1])
            new.append(d)
            left = left // d if d else left
        if size:
            new.append(size // int(np.prod(new)) if int(np.prod(new)) else 1)
        if b.chance(0.3) and new and size:
            new[int(b.rng.integers(len(new)))] = -1
        return b.try_step("reshape", (x, new))
    if kind == "transpose":
        return b.try_step("transpose", (x, [int(a) for a in b.rng.permutation(rank)]))
    if kind == "expand_dims":
        return b.try_step("expand_dims", (x, int(b.rng.integers(-rank - 1, rank + 1))))
    if kind == "squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        return b.try_step("squeeze", (x,), {"axis": b.pick(ones)} if ones and b.chance(0.6) else {})
    if kind == "getitem":
        index = []
        for d in shape[: int(b.rng.integers(0, rank + 1))]:
            step = int(b.pick([1, 1, 1, 2, -1, -2, 3]))
            start = int(b.rng.integers(-d - 1, d + 2)) if b.chance(0.6) else None
            stop = int(b.rng.integers(-d - 1, d + 2)) if b.chance(0.6) else None
            index.append((start, stop, step))
        return b.try_step("getitem", (x, tuple(index)))
    if kind == "broadcast_to":
        new = [d if d != 1 or b.chance(0.5) else int(b.rng.integers(2, 4)) for d in shape]
        if b.chance(0.4):
            new = [int(b.rng.integers(1, 3))] + new
        return b.try_step("broadcast_to", (x, new))
    if kind == "flatten":
        if rank < 2:
            return b.try_step("flatten", (x,))
        s = int(b.rng.integers(0, rank))
        return b.try_step("flatten", (x, s, int(b.rng.integers(s, rank))))
    if rank == 0:
        return False
    axis = int(b.rng.integers(-rank, rank))
    if kind == "swapaxes":
        return b.try_step("swapaxes", (x, axis, int(b.rng.integers(0, rank))))
    if kind == "moveaxis":
        return b.try_step("moveaxis", (x, axis, int(b.rng.integers(0, rank))))
    if kind == "flip":
        return b.try_step(
            "getitem", (x, tuple((None, None, -1) if i == axis % rank else (None, None, 1) for i in range(rank)))
        )
    if kind == "tile":
        return b.try_step("tile", (x, [int(b.rng.integers(1, 3)) for _ in range(int(b.rng.integers(1, rank + 2)))]))
    if kind == "repeat":
        return b.try_step("repeat", (x, int(b.rng.integers(1, 3))), {"axis": axis})
    widths = [[int(b.rng.integers(0, 3)), int(b.rng.integers(0, 3))] for _ in range(rank)]
    mode = b.pick(["constant", "constant", "edge"])
    value = 0 if v.dtype in INT + ("bool",) else float(b.pick([0.0, 1.5, -2.0]))
    if v.dtype == "bool":
        value = False
    return b.try_step("pad", (x, widths, mode, value))


def step_join(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    rank = len(v.shape)
    kind = b.pick(["concatenate", "stack", "split", "split"])
    if kind == "split":
        if rank == 0:
            return False
        axis = int(b.rng.integers(0, rank))
        d = v.shape[axis]
        if b.chance(0.5) and d:
            parts = [n for n in (1, 2, 3) if d % n == 0]
            return b.try_step("split", (x, b.pick(parts), axis))
        points = sorted({int(p) for p in b.rng.integers(0, d + 1, size=int(b.rng.integers(1, 3)))})
        return b.try_step("split", (x, points, axis))
    others = [r for r in b.refs(lambda w: w.dtype == v.dtype and len(w.shape) == rank)]
    if kind == "stack":
        mates = [r for r in others if b.values[r.i].shape == v.shape]
        parts = [x] + [b.pick(mates) for _ in range(int(b.rng.integers(0, 3)))]
        return b.try_step("stack", (parts,), {"axis": int(b.rng.integers(-rank - 1, rank + 1))})
    if rank == 0:
        return False
    axis = int(b.rng.integers(0, rank))
    mates = [
        r for r in others if all(p == q for i, (p, q) in enumerate(zip(b.values[r.i].shape, v.shape)) if i != axis)
    ]
    parts = [x] + [b.pick(mates) for _ in range(int(b.rng.integers(1, 3)))]
    return b.try_step("concatenate", (parts,), {"axis": axis - rank * int(b.chance(0.3))})


def step_gather(b: _Builder) -> bool:
    """take / take_along_axis with index inputs built for the chosen value."""
    x = b.pick(b.refs())
    v = b.values[x.i]
    rank = len(v.shape)
    idx = b.refs(lambda w: w.dtype in ("int32", "uint8") and w.exact)
    if rank == 0 or not idx:
        return False
    axis = int(b.rng.integers(-rank, rank))
    d = v.shape[axis]
    if d == 0:
        return False
    i = b.pick(idx)
    # make the indices valid for this axis: MLX clamps nothing, out-of-range reads are undefined
    safe = ("remainder", (i, d))
    if not b.try_step(*safe):
        return False
    i = Ref(len(b.values) - 1)
    if b.chance(0.3) and b.values[i.i].dtype == "int32":  # negative indices count from the end
        if not b.try_step("subtract", (i, d)):
            return False
        i = Ref(len(b.values) - 1)
    iv = b.values[i.i]
    if b.chance(0.5) or len(iv.shape) != rank:
        return b.try_step("take", (x, i, axis))
    return b.try_step("take_along_axis", (x, i), {"axis": axis})


def step_linalg(b: _Builder) -> bool:
    # MLX's CPU BLAS aborts the process on empty matmul/conv operands: keep them non-empty
    floats = b.refs(lambda v: v.dtype in FLOAT and len(v.shape) >= 1 and v.array.size > 0)
    if not floats:
        return False
    x = b.pick(floats)
    v = b.values[x.i]
    kind = b.pick(["matmul", "matmul", "softmax", "logsumexp", "conv"])
    if kind == "matmul":
        mates = [
            r
            for r in b.refs(lambda w: w.dtype == v.dtype and len(w.shape) >= 1 and w.array.size > 0)
            if b.values[r.i].shape[-1 if len(b.values[r.i].shape) == 1 else -2] == v.shape[-1]
        ]
        if not mates:
            return False
        return b.try_step("matmul", (x, b.pick(mates)), exact=False)
    rank = len(v.shape)
    if kind in ("softmax", "logsumexp"):
        axis = int(b.rng.integers(-rank, rank))
        kwargs = {"axis": axis}
        if kind == "logsumexp" and v.array.size == 0:
            return False  # (the MLX empty-axis reduction bug, see step_reduce)
        if kind == "logsumexp":
            kwargs["keepdims"] = b.chance(0.5)
        elif b.chance(0.3):
            kwargs["precise"] = True
        return b.try_step(kind, (x,), kwargs, exact=False)
    # a small convolution over a channels-last value with a fresh constant-like weight from an input
    weights = b.refs(lambda w: w.dtype == v.dtype and len(w.shape) == rank and rank in (3, 4) and w.array.size > 0)
    if rank not in (3, 4) or not weights:
        return False
    w = b.pick(weights)
    if rank == 3:
        return b.try_step("conv1d", (x, w), exact=False)
    return b.try_step("conv2d", (x, w, int(b.pick([1, 2])), int(b.pick([0, 1]))), exact=False)


def step_scan(b: _Builder) -> bool:
    x = b.pick(b.refs(lambda v: len(v.shape) >= 1 and v.dtype != "bool") or [None])
    if x is None:
        return False
    v = b.values[x.i]
    rank = len(v.shape)
    kind = b.pick(["cumsum", "cumprod", "cummax", "cummin", "sort", "argsort", "topk"])
    axis = int(b.rng.integers(-rank, rank))
    if kind in ("cumsum", "cumprod", "cummax", "cummin"):
        kwargs = {"axis": axis, "reverse": b.chance(0.3), "inclusive": b.chance(0.8)}
        exact = v.exact and (kind in ("cummax", "cummin") or v.dtype not in FLOAT)
        return b.try_step(kind, (x,), kwargs, exact=exact)
    if kind == "sort":
        return b.try_step("sort", (x,), {"axis": axis})
    if kind == "argsort":
        if not v.exact:
            return False
        return b.try_step("argsort", (x,), {"axis": axis})
    d = v.shape[-1]
    if not d:
        return False
    return b.try_step("topk", (x, int(b.rng.integers(1, d + 1))))


def step_cast(b: _Builder) -> bool:
    x = b.pick(b.refs())
    v = b.values[x.i]
    target = b.pick(list(DTYPES))
    if not v.exact and target not in FLOAT:
        target = "float32"
    if v.dtype in FLOAT and target in INT:
        # float -> int is undefined outside the target range in MLX; bound the values first
        info = np.iinfo(np.dtype(target))
        if not b.try_step("nan_to_num", (x,), {"posinf": 1000.0, "neginf": -1000.0}):
            return False
        x = Ref(len(b.values) - 1)
        if not b.try_step("clip", (x, float(max(info.min, -1000)), float(min(info.max, 1000)))):
            return False
        x = Ref(len(b.values) - 1)
        v = b.values[x.i]
    return b.try_step("astype", (x, target), exact=v.exact)


def step_clip(b: _Builder) -> bool:
    x = b.pick(b.refs(lambda v: v.dtype != "bool") or [None])
    if x is None:
        return False
    v = b.values[x.i]
    lo, hi = (-1, 3) if v.dtype in INT else (-0.5, 1.25)
    if v.dtype == "uint8":
        lo = 1
    return b.try_step("clip", (x, lo if b.chance(0.8) else None, hi if b.chance(0.8) else None))


def _dft_resolvable(x: mx.array) -> bool:
    """Whether a DFT of ``x`` can be compared at float32's tolerance: finite (a DFT of
    inf is NaN in a pattern each implementation picks for itself) and |x| <= 100, since a
    bin's rounding is about 6e-8 of the sum of |x| whatever the bin's own size: a bin that
    cancels to zero over values near 1e36 (``view`` of random bits) was 1.8e29 in
    onnxruntime and -6e15 in MLX (seed 20261208 program 21102)."""
    return _all_finite(x) and bool((_finite_magnitudes(x) <= 100).all())


def _tame_for_erfinv(x: mx.array) -> bool:
    """Whether erfinv keeps a last-bit difference in ``x`` small: |x| <= 0.99 (the slope
    there is 24; by 0.9999 it is 3e6, and erfinv(tanh(x)) of one float32 tanh that
    onnxruntime rounds one ulp from MLX's is 0.016 off, seed 20261206 program 19558)."""
    return not (_finite_magnitudes(x) > 0.99).any()


def step_special(b: _Builder) -> bool:
    """The less common primitives: updates, scatters, dynamic slices, fast ops, FFT, ..."""
    x = b.pick(b.refs())
    v = b.values[x.i]
    shape, rank = v.shape, len(v.shape)
    kind = b.pick(
        [
            "erfinv",
            "divmod",
            "addmm",
            "stop_gradient",
            "unflatten",
            "view",
            "dyn_slice",
            "dyn_slice_update",
            "setitem",
            "at_add",
            "put_along_axis",
            "masked_set",
            "with_arange",
            "rfft",
            "rms_norm",
            "layer_norm",
            "rope",
            "attention",
            "random",
            "hadamard",
            "cumsum_float",
            "as_strided",
            "isnan",
            "nan_to_num",
        ]
    )
    if kind == "erfinv":
        if v.dtype not in FLOAT or not (v.exact or _tame_for_erfinv(v.array)):
            return False
        return b.try_step("erfinv", (x,), exact=False)
    if kind == "divmod":
        if v.dtype in ("bool", "bfloat16") or not v.exact:
            return False
        y = int(b.pick([2, 3, 7])) if v.dtype in INT else _partner(b, x, exact_only=True)
        return b.try_step("divmod", (x, y))
    if kind == "addmm":
        if v.dtype not in FLOAT or rank != 2 or not v.array.size:
            return False
        m, k = shape
        mates = b.refs(lambda w: w.dtype == v.dtype and len(w.shape) == 2 and w.shape[0] == k and w.array.size > 0)
        if not mates:
            return False
        y = b.pick(mates)
        n = b.values[y.i].shape[1]
        cs = b.refs(lambda w: w.dtype == v.dtype and _broadcastable(w.shape, (m, n)) and len(w.shape) <= 2)
        if not cs:
            return False
        return b.try_step(
            "addmm",
            (b.pick(cs), x, y),
            {"alpha": float(b.pick([1.0, 0.5])), "beta": float(b.pick([1.0, 2.0]))},
            exact=False,
        )
    if kind == "stop_gradient":
        return b.try_step("stop_gradient", (x,))
    if kind == "isnan":
        return b.try_step(b.pick(["isnan", "isinf", "isposinf", "isfinite"]), (x,)) if v.exact else False
    if kind == "nan_to_num":
        return b.try_step("nan_to_num", (x,), exact=v.exact)
    if kind == "unflatten":
        if rank == 0 or shape[0] not in (4, 6):
            return False
        return b.try_step("unflatten", (x, 0, [2, -1]))
    if kind == "view":
        if v.dtype == "bool" or (v.dtype in FLOAT and bool(mx.any(mx.isnan(v.array)))):
            return False  # NaN bit patterns are each implementation's own
        same = {
            "float32": ["int32", "float32"],
            "float16": ["bfloat16", "float16"],
            "bfloat16": ["float16"],
            "int32": ["float32"],
            "int8": ["uint8"],
            "uint8": ["int8"],
        }  # (bytes other than 0/1 are no bool)
        if v.dtype not in same or not v.exact:
            return False  # the bits of an inexact float are no fixed answer
        return b.try_step("view", (x, b.pick(same[v.dtype])), exact=v.exact and v.dtype not in FLOAT)
    if rank == 0:
        return False
    if kind in ("at_add", "put_along_axis", "masked_set", "dyn_slice_update", "setitem") and not v.array.size:
        return False  # MLX's CPU scatter into an empty array dies of SIGFPE
    axis = int(b.rng.integers(0, rank))
    d = shape[axis]
    if kind == "dyn_slice":
        size = int(b.rng.integers(0, d + 1))
        return b.try_step("dyn_slice", (x, int(b.rng.integers(0, d - size + 1)), axis, size))
    if kind == "dyn_slice_update":
        mates = b.refs(
            lambda w: (
                w.dtype == v.dtype
                and len(w.shape) == rank
                and w.shape[axis] <= d
                and all(p == q for i, (p, q) in enumerate(zip(w.shape, shape)) if i != axis)
            )
        )
        if not mates:
            return False
        u = b.pick(mates)
        return b.try_step("dyn_slice_update", (x, u, int(b.rng.integers(0, d - b.values[u.i].shape[axis] + 1)), axis))
    if kind == "setitem":
        start = int(b.rng.integers(0, d + 1))
        index = tuple((None, None, 1) if i != axis else (start, None, int(b.pick([1, 2]))) for i in range(axis + 1))
        value = _partner(b, x) if b.chance(0.5) else (1 if v.dtype in INT else (True if v.dtype == "bool" else 2.5))
        return b.try_step("setitem", (x, index, value))
    if kind in ("at_add", "put_along_axis"):
        idx = b.refs(lambda w: w.dtype in ("int32", "uint8") and w.exact)
        if not idx or not d:
            return False
        if not b.try_step("remainder", (b.pick(idx), d)):
            return False
        i = Ref(len(b.values) - 1)
        if kind == "at_add":
            if axis != 0 or v.dtype == "bool":
                return False
            upd = 1 if v.dtype in INT else 0.5
            return b.try_step("at_add", (x, i, upd), exact=v.exact and v.dtype not in FLOAT)
        if len(b.values[i.i].shape) != rank:
            return False
        value = 2 if v.dtype in INT else (False if v.dtype == "bool" else -1.5)
        return b.try_step("put_along_axis", (x, i, value, axis))
    if kind == "masked_set":
        masks = b.refs(lambda w: w.dtype == "bool" and w.shape == shape)
        if not masks:
            return False
        value = 2 if v.dtype in INT else (True if v.dtype == "bool" else 0.25)
        return b.try_step("masked_set", (x, b.pick(masks), value))
    if kind == "with_arange":
        return b.try_step("with_arange", (x,), exact=v.exact and v.dtype not in FLOAT)
    if v.dtype not in FLOAT or not v.array.size:
        return False
    if kind == "rfft":
        if v.dtype != "float32" or not _dft_resolvable(v.array):
            return False
        return b.try_step("rfft_parts", (x, axis - rank), exact=False)
    if kind == "cumsum_float":
        return b.try_step("cumsum", (x,), {"axis": axis}, exact=False)
    last = shape[-1]
    if kind == "rms_norm":
        ws = b.refs(lambda w: w.dtype == v.dtype and w.shape == (last,))
        return b.try_step("rms_norm", (x, b.pick(ws) if ws else None), exact=False)
    if kind == "layer_norm":
        ws = b.refs(lambda w: w.dtype == v.dtype and w.shape == (last,))
        return b.try_step(
            "layer_norm", (x, b.pick(ws) if ws else None, b.pick(ws) if ws and b.chance(0.5) else None), exact=False
        )
    if kind == "rope":
        if rank < 3 or last % 2:
            return False
        dims = int(b.pick([d for d in range(2, last + 1, 2)]))
        return b.try_step("rope", (x, dims, b.chance(0.5), int(b.rng.integers(0, 4))), exact=False)
    if kind == "attention":
        if rank != 4:
            return False
        mates = b.refs(
            lambda w: w.dtype == v.dtype and len(w.shape) == 4 and w.shape[-1] == last and w.shape[:2] == shape[:2]
        )
        k = b.pick(mates)
        return b.try_step("attention", (x, k, k if b.chance(0.5) else b.pick(mates), b.chance(0.4)), exact=False)
    if kind == "random":
        op = b.pick(["random_bits", "random_uniform"])
        return b.try_step(op, (x, int(b.rng.integers(0, 1000))), exact=op == "random_bits" and v.exact)
    if kind == "hadamard":
        if last & (last - 1):
            return False
        return b.try_step("hadamard", (x,), exact=False)
    if kind == "as_strided":
        return b.try_step("as_strided", (x, [int(np.prod(shape))], [1]))
    return False


def _quantized_operand(w: _Value) -> bool:
    return w.dtype in FLOAT and len(w.shape) >= 1 and w.array.size > 0 and (w.exact or w.dtype == "float32")


def step_rare(b: _Builder) -> bool:
    """Primitives no other maker reaches: ArgPartition, SearchSorted, Conjugate, Depends,
    GatherMM, BlockMaskedMM, QuantizedMatmul, Quantize, GatherQMM, ScatterAxis (Sum)."""
    kind = b.pick(
        [
            "argpartition",
            "searchsorted",
            "conj",
            "depends",
            "gather_mm",
            "block_masked_mm",
            "quantized_matmul",
            "quantize",
            "gather_qmm",
            "scatter_add_axis",
            "addmm",
        ]
    )
    need = {  # the values each kind can start from
        "argpartition": lambda w: w.exact and len(w.shape) >= 1 and w.array.size > 0,  # (discontinuous)
        "searchsorted": lambda w: w.exact and w.dtype != "bool",
        "conj": lambda w: w.dtype == "float32",
        "scatter_add_axis": lambda w: w.dtype in FLOAT and len(w.shape) >= 1 and w.array.size > 0,
        "quantize": lambda w: w.dtype in FLOAT and w.exact and w.array.size > 0 and bool(mx.all(mx.isfinite(w.array))),
        # quantized products sum over a group (32-128 terms): a half-precision value MLX rounded
        # after each op but the export carries in float32 would be off by that rounding,
        # amplified by cancellation, so only exact half-precision values go in
        "quantized_matmul": lambda w: _quantized_operand(w),
        "gather_qmm": lambda w: _quantized_operand(w),
    }.get(kind, lambda w: w.dtype in FLOAT and len(w.shape) >= 1 and w.array.size > 0)
    if kind == "depends":
        need = lambda w: True  # noqa: E731
    starts = b.refs(need)
    if not starts:
        return False
    x = b.pick(starts)
    v = b.values[x.i]
    shape, rank = v.shape, len(v.shape)
    if kind == "argpartition":
        axis = int(b.rng.integers(-rank, rank))
        d = shape[axis]
        return bool(d) and b.try_step("argpartition", (x, int(b.rng.integers(-d, d)), axis))
    if kind == "searchsorted":
        mates = b.refs(lambda w: w.dtype == v.dtype and w.exact)
        return b.try_step("searchsorted", (b.pick(mates), x, b.pick(["left", "right"])))
    if kind == "depends":
        return b.try_step("depends", (x, b.pick(b.refs())))
    if kind == "conj":
        fft = rank >= 1 and v.array.size > 0 and _dft_resolvable(v.array) and b.chance(0.5)
        return b.try_step("conj_parts", (x, fft), exact=v.exact and not fft)
    if kind == "scatter_add_axis":
        axis = int(b.rng.integers(0, rank))
        idx = b.refs(lambda w: w.dtype in ("int32", "uint8") and w.exact and len(w.shape) == rank)
        if idx:
            i = b.pick(idx)
        else:  # indices of x's rank, from a constant
            ishape = [int(b.rng.integers(1, 4)) if a == axis else int(b.pick([1, d])) for a, d in enumerate(shape)]
            if not b.try_step("index_constant", (int(b.rng.integers(0, 1000)), ishape, shape[axis])):
                return False
            i = Ref(len(b.values) - 1)
        if not b.try_step("remainder", (i, shape[axis])):
            return False
        return b.try_step(
            "scatter_add_axis", (x, Ref(len(b.values) - 1), axis), exact=v.exact and v.dtype != "bfloat16"
        )
    # the matrix products: float operands, non-empty (MLX's CPU BLAS aborts on empty ones)
    if v.dtype not in FLOAT or not rank or not v.array.size:
        return False
    if kind == "addmm":  # (step_special's addmm needs a 2-D value with a 2-D partner: rare)
        if rank < 2:
            return False
        m, k = shape[-2:]
        n = int(b.rng.integers(1, 6))
        if not b.try_step("weight_constant", (int(b.rng.integers(0, 1000)), (k, n))):
            return False
        w = Ref(len(b.values) - 1)
        cs = b.refs(lambda u: u.dtype == v.dtype and _broadcastable(u.shape, shape[:-1] + (n,)) and u.array.size > 0)
        if cs and b.chance(0.5):
            c = b.pick(cs)
        elif b.try_step("weight_constant", (int(b.rng.integers(0, 1000)), (n,) if b.chance(0.5) else (m, n))):
            c = Ref(len(b.values) - 1)
        else:
            return False
        return b.try_step(
            "addmm",
            (c, x, w),
            {"alpha": float(b.pick([1.0, 0.5, -2.0])), "beta": float(b.pick([1.0, 2.0, 0.0]))},
            exact=False,
        )
    if kind in ("gather_mm", "block_masked_mm"):
        shape = (1,) + shape if rank == 1 else shape  # (the wrappers: float32 matrices, as MLX's CPU kernels need)
        mates = b.refs(
            lambda w: len(w.shape) >= 2 and w.dtype in FLOAT and w.shape[-2] == shape[-1] and w.array.size > 0
        )
        if not mates or b.chance(0.3):  # a constant weight
            wshape = tuple(int(b.rng.integers(1, 4)) for _ in range(int(b.rng.integers(0, 2)))) + (
                shape[-1],
                int(b.rng.integers(1, 6)),
            )
            if not b.try_step("weight_constant", (int(b.rng.integers(0, 1000)), wshape)):
                return False
            mates = [Ref(len(b.values) - 1)]
        y = b.pick(mates)
        wshape = b.values[y.i].shape
        if kind == "gather_mm":
            na, nb = int(np.prod(shape[:-2])), int(np.prod(wshape[:-2]))
            ishape = tuple(int(b.rng.integers(1, 4)) for _ in range(int(b.rng.integers(0, 3))))
            lhs = b.rng.integers(0, na, size=ishape).tolist() if b.chance(0.7) else None
            rhs = b.rng.integers(0, nb, size=ishape).tolist() if b.chance(0.7) or lhs is None else None
            return b.try_step("gather_mm", (x, y, lhs, rhs), exact=False)
        bs = int(b.pick([32, 64]))
        if shape[:-2] != wshape[:-2] and int(np.prod(shape[:-2] + wshape[:-2])) > 1:
            # MLX 0.32's CPU BlockMaskedMM applies per-batch masks wrongly when one operand's
            # batch is broadcast (tests/translate/test_fuzz.py): equal batches only
            return False
        batch = np.broadcast_shapes(shape[:-2], wshape[:-2])
        dims = (shape[-2], shape[-1], wshape[-1])
        grow = tuple(-(-int(b.rng.integers(bs + 1, 2 * bs + 9)) // n) if b.chance(0.4) else 1 for n in dims)
        if grow[2] > 1 and grow[0] == 1:
            grow = (1, grow[1], 1)  # (a grown column count only with summed rows: a small result)
        tm, tk, tn = (-(-n * g // bs) for n, g in zip(dims, grow))
        variant = b.pick(["out", "operands", "both"])
        mask_out = (b.rng.random(batch + (tm, tn)) < 0.6).tolist() if variant != "operands" else None
        mask_lhs = mask_rhs = None
        if variant != "out":
            if b.chance(0.5):
                mask_lhs, mask_rhs = ((b.rng.random(batch + s) < 0.7).tolist() for s in ((tm, tk), (tk, tn)))
            else:
                mask_lhs, mask_rhs = (
                    np.round(b.rng.uniform(-2, 2, batch + s), 2).tolist() for s in ((tm, tk), (tk, tn))
                )
        return b.try_step("block_masked_mm", (x, y, bs, mask_out, mask_lhs, mask_rhs, grow), exact=False)
    seed = int(b.rng.integers(0, 1000))
    mode, group_size, bits = b.pick(
        [
            ("affine", 32, 4),
            ("affine", 64, 2),
            ("affine", 32, 3),
            ("affine", 128, 8),
            ("affine", 32, 5),
            ("affine", 64, 6),
            ("affine", 32, 8),
            ("mxfp4", 32, 4),
            ("mxfp8", 32, 8),
            ("nvfp4", 16, 4),
        ]
    )
    if kind == "quantize":  # the codes are a rounding of x / scale: exact finite float32 only
        if mode != "affine":
            return False
        return b.try_step("quantize", (x, group_size, group_size, bits), exact=False)
    if kind == "gather_qmm":
        experts = int(b.rng.integers(1, 4))
        rhs = b.rng.integers(0, experts, size=shape[:-2] if rank >= 2 and b.chance(0.7) else ()).tolist()
        return _half_sum(
            b,
            b.try_step(
                "gather_qmm",
                (x, seed, experts, int(b.rng.integers(1, 5)), group_size, group_size, bits, mode, rhs),
                exact=False,
            ),
        )
    transpose = b.chance(0.6)
    n = int(b.rng.integers(1, 5)) if transpose else group_size
    in_graph = mode in ("affine", "mxfp4") and b.chance(0.4)  # (MLX cannot export an in-graph mxfp8/nvfp4 quantize)
    if not in_graph and mode != "mxfp8" and not _all_finite(v.array):
        return False  # a blocked low-bit product: which non-finite value a non-finite row gives is unspecified
    return _half_sum(
        b, b.try_step("quantized_matmul", (x, seed, n, group_size, bits, mode, transpose, in_graph), exact=False)
    )


def _half_sum(b: _Builder, added: bool) -> bool:
    """Note a quantized product with a half-precision result: MLX's CPU kernels sum its
    terms in that dtype, one rounding per term (tests/support/cases/quantized.py), the export in
    float32, so the program is compared at the quantized parity cases' tolerances."""
    if added and b.values[-1].dtype in ("float16", "bfloat16"):
        b.half_sums.add(b.values[-1].dtype)
    return added


MAKERS = [
    (step_unary, 4),
    (step_binary, 5),
    (step_compare, 2),
    (step_where, 2),
    (step_reduce, 3),
    (step_shape, 5),
    (step_join, 2),
    (step_gather, 2),
    (step_linalg, 2),
    (step_scan, 2),
    (step_cast, 2),
    (step_clip, 1),
    (step_special, 5),
    (step_rare, 3),
]


def generate(seed: int, max_steps: int = 5) -> Program:
    """A random valid MLX program, fully determined by ``seed``."""
    b = _Builder(seed)
    n_inputs = int(b.rng.integers(1, 4))
    base = b.shape()
    for k in range(n_inputs):
        dtype = b.pick(list(DTYPES))
        if k and b.chance(0.6):  # often related shapes, so binary ops and concatenation find partners
            shape = tuple(d if b.chance(0.8) else 1 for d in base[int(b.rng.integers(0, len(base) + 1)) :])
            if b.chance(0.5):
                dtype = b.values[0].dtype
        else:
            shape = b.shape()
        b.add_input(shape, dtype)
    weights = np.array([w for _, w in MAKERS], dtype=float)
    target = int(b.rng.integers(1, max_steps + 1))
    attempts = 0
    while len(b.steps) < target and attempts < 40:
        attempts += 1
        maker = MAKERS[int(b.rng.choice(len(MAKERS), p=weights / weights.sum()))][0]
        maker(b)
    used = {r.i for step in b.steps for r in _refs_in(step.args)}
    leaves = [i for i in range(b.n_inputs, len(b.values)) if i not in used]
    returns = leaves[-3:] or [len(b.values) - 1]
    if b.chance(0.1):
        returns.append(int(b.rng.integers(0, len(b.values))))  # an input unchanged, or a value twice
    tolerances = _tolerances({v.dtype for v in b.values if not v.exact}, b.half_sums)
    return Program(seed, [v.array for v in b.values[: b.n_inputs]], b.steps, tuple(returns), tolerances)


def _tolerances(inexact: set, half_sums: set) -> dict:
    """The comparison's tolerances for every float output: the parity check's, loosened to
    the loosest half precision an inexact value was computed in (a half-precision result
    cast to float32 keeps its error), or to the quantized cases' where a quantized product
    was summed in one."""
    from mlx2onnx.verify.compare import DEFAULT_TOLERANCES

    summed = next((d for d in ("bfloat16", "float16") if d in half_sums), None)
    if summed:
        return {d: HALF_SUM_TOLERANCES[summed] for d in FLOAT}
    loosest = next((d for d in ("bfloat16", "float16") if d in inexact), None)
    return {d: DEFAULT_TOLERANCES[loosest] for d in FLOAT} if loosest else {}


def from_source(source: str) -> Program:
    """The :class:`Program` a reproducer (``Program.source()``) prints, to replay it; every
    computed value counts as inexact for the tolerances."""
    import ast

    namespace: dict = {}
    exec(compile(source, "<reproducer>", "exec"), namespace)  # noqa: S102 - our own printed programs
    inputs = list(namespace["args"])
    fn = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    names = {a.arg: i for i, a in enumerate(fn.args.args)}

    def arg(node):
        if isinstance(node, ast.Name):
            return Ref(names[node.id]) if node.id in names else {"nan": np.nan, "inf": np.inf}[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [arg(e) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Name):
            return -arg(node.operand)
        return ast.literal_eval(node)

    steps, returns = [], ()
    for node in fn.body:
        if isinstance(node, ast.Return):
            value = node.value
            returns = tuple(arg(e).i for e in (value.elts if isinstance(value, ast.Tuple) else [value]))
            continue
        call, targets = node.value, node.targets[0]
        targets = targets.elts if isinstance(targets, ast.Tuple) else [targets]
        op = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
        steps.append(
            Step(
                op, tuple(arg(a) for a in call.args), tuple((k.arg, arg(k.value)) for k in call.keywords), len(targets)
            )
        )
        for t in targets:
            names[t.id] = len(names)
    program = Program(0, inputs, steps, returns)
    values = program._values(inputs, in_float32=False)
    half_sums = {
        dname(values[len(inputs) + i].dtype)
        for i, step in enumerate(steps)
        if step.op in ("quantized_matmul", "gather_qmm")
    } & {"float16", "bfloat16"}
    program.tolerances = _tolerances({dname(v.dtype) for v in values[len(inputs) :]}, half_sums)
    return program


@dataclass(frozen=True)
class Outcome:
    seed: int
    opset: int
    status: str  # "pass", "mismatch", "explained" (a mismatch measured as MLX's own arithmetic), "export-error", "skip"
    detail: str = ""
    primitives: frozenset = frozenset()


def check(program: Program, opset: int | None = None, verifier=None, shapeless: bool = False) -> Outcome:
    """Export ``program`` and compare onnxruntime with MLX on its example inputs.

    ``shapeless``: trace with MLX's ``shapeless=True`` (as dynamic exports do), still at the
    example sizes: Broadcast then names the operands it follows, matmul batches broadcast
    with BroadcastAxes and ``mean`` counts with NumberOfElements."""
    import mlx2onnx
    from mlx2onnx.translate.opset import default_opset

    opset = opset or default_opset()
    verifier = verifier or mlx2onnx.Verifier(random_inputs=False)
    if program.tolerances:
        verifier = replace(verifier, tolerances=program.tolerances)
    try:
        trace = mlx2onnx.capture(program, tuple(program.inputs), {}, shapeless=shapeless)
    except Exception as exc:  # noqa: BLE001 - the program ran in MLX while it was built
        if shapeless:  # (MLX refuses a shapeless trace of some primitives)
            return Outcome(program.seed, opset, "skip", f"shapeless capture: {type(exc).__name__}: {exc}")
        if isinstance(exc, mlx2onnx.CaptureError) and "has no producer" in str(exc):
            # MLX's simplification dropped an output's producer (tests/translate/test_refusals.py)
            return Outcome(program.seed, opset, "skip", f"refused: {exc}")
        return Outcome(program.seed, opset, "export-error", f"capture: {type(exc).__name__}: {exc}")
    prims = frozenset(p.name for p in trace.primitives)
    try:
        model = mlx2onnx.Exporter(opset=opset).export_trace(trace)  # (the trace above, not a second one)
    except (mlx2onnx.UnsupportedPrimitiveError,) as exc:
        return Outcome(program.seed, opset, "skip", f"unsupported: {exc}", prims)
    except mlx2onnx.ConversionError as exc:  # a handler's deliberate, explained refusal
        if "contract broken" in str(exc):  # (the translator's own consistency check: a finding)
            return Outcome(program.seed, opset, "export-error", f"{type(exc).__name__}: {exc}", prims)
        return Outcome(program.seed, opset, "skip", f"refused: {exc}", prims)
    except Exception as exc:  # noqa: BLE001 - every other failure is a finding
        return Outcome(program.seed, opset, "export-error", f"{type(exc).__name__}: {exc}", prims)
    try:
        report = verifier.verify(model, program, *program.inputs)
    except Exception as exc:  # noqa: BLE001
        return Outcome(program.seed, opset, "mismatch", f"{type(exc).__name__}: {exc}", prims)
    if not report.passed:
        explained = (
            _half_precision(program, model, verifier)
            or _overflow_order(program, model, verifier)
            or _exp_underflow(program, model, verifier)
        )
        if explained:
            return Outcome(program.seed, opset, "explained", f"{explained}\nagainst MLX itself:\n{report}", prims)
        return Outcome(program.seed, opset, "mismatch", str(report), prims)
    return Outcome(program.seed, opset, "pass", "", prims)


OVERFLOW_SCALE = 1e38  # a float32 value this large can overflow a sum it enters (FLT_MAX is 3.4e38)
OVERFLOW_FACTOR = 1.9e19  # two float32 values this large overflow their product (sqrt(FLT_MAX))


def _overflow_order(program: Program, model, verifier) -> str | None:
    """Why a mismatch is a float32 overflow inside a sum, measured: the program holds a
    value whose square overflows (``nan_to_num`` of inf, ``view`` of random bits), and the
    outputs differ only at elements where MLX or the runtime is non-finite and the other is
    non-finite too or beyond 1e38 (which of inf, -inf and NaN a sum of such terms gives
    depends on its order, which neither MLX's kernels nor onnxruntime's fix), or NaN
    against an exact 0 (a product of a zero and two huge factors is 0 when the zero comes
    first and inf * 0 = NaN when the huge ones do: bfloat16 prod of nan_to_num(inf),
    seed 20261212 program 10673); every other element within tolerance,
    every non-float output equal. ``None`` otherwise."""
    values = program._values(program.inputs, in_float32=False)
    largest = max(
        (float(_finite_magnitudes(v).max(initial=0.0)) for v in values if v.dtype in DTYPES_FLOAT), default=0.0
    )
    if largest < OVERFLOW_FACTOR:
        return None
    pairs = _float_outputs(program, model, verifier)
    if pairs is None:
        return None
    differ = 0
    for g, w, atol, rtol in pairs:
        odd = ~np.isfinite(g) | ~np.isfinite(w)
        overflowed = (
            odd & (~np.isfinite(g) | (np.abs(g) > OVERFLOW_SCALE)) & (~np.isfinite(w) | (np.abs(w) > OVERFLOW_SCALE))
        )
        overflowed |= (np.isnan(g) & (w == 0)) | (np.isnan(w) & (g == 0))  # a product: inf * 0 or 0 * huge first
        if (odd & ~overflowed).any() or not np.all(np.abs(g - w)[~odd] <= atol + rtol * np.abs(w[~odd])):
            return None
        differ += int((odd & ~((np.isnan(g) & np.isnan(w)) | (g == w))).sum())
    return (
        f"explained: float32 overflow inside a sum (the program holds values up to {largest:.3g}): the outputs "
        f"differ only at {differ} element(s) where both sides overflowed (inf, -inf or NaN by summation order), "
        "every other element within tolerance"
    )


FLT_MIN_LOG = float(np.log(np.finfo(np.float32).tiny))  # -87.34: the log of the smallest normal float32
SUBNORMAL_LOG = float(np.log(np.float32(2.0**-149)))  # -103.28: the log of the smallest subnormal


def _exp_underflow(program: Program, model, verifier) -> str | None:
    """Why a mismatch is MLX's exp underflowing early, measured: MLX's CPU exp gives 0
    where the result is a float32 subnormal (exp(-87.7) = 0, exp(-87.6) = 9.03e-39, while
    its products keep their subnormals), onnxruntime's gives the subnormal, and a log after
    it makes MLX's 0 -inf (log(softmax(x, precise=True)) with logits 96 apart: MLX -inf,
    the export -96.0003; seed 20261214 program 3874). Explained when the outputs differ
    only where MLX is -inf and the export holds the log of a subnormal (-103.3 to -87.3),
    or MLX is 0 and the export a subnormal, with every other element within tolerance and
    every non-float output equal; ``None`` otherwise (onnxruntime's
    ``session.set_denormal_as_zero`` does not reach its exp, so it cannot be measured by
    flushing)."""
    pairs = _float_outputs(program, model, verifier)
    if pairs is None:
        return None
    differ = 0
    for g, w, atol, rtol in pairs:
        flushed = (w == -np.inf) & (g >= SUBNORMAL_LOG - 0.01) & (g <= FLT_MIN_LOG)
        flushed |= (w == 0) & (g != 0) & (np.abs(g) < np.finfo(np.float32).tiny)
        with np.errstate(invalid="ignore"):
            close = np.isfinite(w) & (np.abs(g - w) <= atol + rtol * np.abs(w))
        close |= (np.isnan(g) & np.isnan(w)) | (g == w)
        if not np.all(close | flushed):
            return None
        differ += int((flushed & ~close).sum())
    if not differ:
        return None
    return (
        f"explained: MLX's exp gives 0 for a float32 subnormal result (onnxruntime keeps it): the outputs "
        f"differ only at {differ} element(s) where MLX is -inf (0) and the export the log of a subnormal "
        "(the subnormal), every other element within tolerance"
    )


def _float_outputs(program: Program, model, verifier) -> list | None:
    """(onnxruntime's, MLX's, atol, rtol) per float output, as float64, or None when a
    non-float output differs (then nothing is explained)."""
    got, want = _runtime_outputs(program, model)
    pairs = []
    for g, w in zip(got, want):
        if w.dtype not in DTYPES_FLOAT:
            if not np.array_equal(np.asarray(g), dtypes_numpy(w)):
                return None
            continue
        atol, rtol = verifier.tolerance(dname(w.dtype))
        pairs.append((np.asarray(g, np.float64), np.array(w.astype(mx.float32), np.float64), atol, rtol))
    return pairs


def _runtime_outputs(program: Program, model) -> tuple[list, list]:
    """onnxruntime's outputs for the program's inputs (default session), and MLX's."""

    from mlx2onnx.io import metadata
    from mlx2onnx.verify.session import as_declared_types, run_session

    meta = metadata.read(model)
    feeds = {b.name: dtypes_numpy(program.inputs[b.position]) for b in meta.inputs}
    session = ort_session(model)
    got = run_session(session, meta.output_names(), as_declared_types(session, feeds))
    values = program._values(program.inputs, in_float32=False)
    return got, [values[r] for r in program.returns]


def dtypes_numpy(array):
    from mlx2onnx import dtypes

    return dtypes.array_to_numpy(array)


def _half_precision(program: Program, model, verifier) -> str | None:
    """Why a mismatch is MLX's half-precision arithmetic, measured: the same program with
    its float16/bfloat16 values computed in float32 (rounded where it casts) gives the
    export's outputs at the same tolerances, where MLX's half-precision kernels (its CPU's
    quantized products summed term by term in the half type, its non-precise softmax, a
    rounding after every op that an ill-conditioned step such as ``cos`` of a large value
    or ``arctan2`` of a value near zero amplifies) do not. ``None`` when that reference
    fails too, or the program has no half-precision value."""
    twin = program.in_float32()
    if twin is None:
        return None
    try:
        report = verifier.verify(model, twin, *program.inputs)
    except Exception:  # noqa: BLE001 - then it explains nothing
        return None
    if not report.passed:
        return None
    return (
        f"explained: half-precision arithmetic (MLX's half-precision result is off the float32 computation "
        f"the export follows):\n{report}"
    )
