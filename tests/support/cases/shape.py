"""Parity cases: shape and layout primitives (Broadcast, Reshape, Flatten, Unflatten,
Transpose, ExpandDims, Squeeze, Concatenate, Split, Depends), zero-size tensors included.

BroadcastAxes only appears in ``shapeless=True`` exports, which the tracer does not
produce; it is tested with hand-built records in ``tests/capture/test_shape_records.py``.
"""

from __future__ import annotations

import mlx.core as mx

from tests.support.harness import FLOATS, INTS, Case, rand

DATA = FLOATS + (mx.int32, mx.int8, mx.uint8, mx.int64, mx.uint32, mx.bool_)
SOME = (mx.float32, mx.float16, mx.bfloat16, mx.int32, mx.bool_)

COVERS = {"BroadcastAxes", "Copy", "StopGradient"}


def one(*shape):
    return lambda rng, dt: (rand(rng, shape, dt, -9, 9),)


def two(a, b):
    return lambda rng, dt: (rand(rng, a, dt, -9, 9), rand(rng, b, dt, -9, 9))


def three(a, b, c):
    return lambda rng, dt: (rand(rng, a, dt, -9, 9), rand(rng, b, dt, -9, 9), rand(rng, c, dt, -9, 9))


CASES = [
    # Broadcast
    Case("shape.broadcast_to", lambda x: mx.broadcast_to(x, (2, 3, 4)), one(3, 1), dtypes=DATA,
         primitives=("Broadcast",), onnx_ops=("Expand",)),
    Case("shape.broadcast_implicit", lambda x, y: mx.maximum(x, y), two((3, 1), (1, 4)), dtypes=SOME,
         primitives=("Broadcast",)),
    Case("shape.broadcast_zero_size", lambda x: mx.broadcast_to(x, (0, 4)), one(1, 4), dtypes=SOME,
         primitives=("Broadcast",)),
    Case("shape.broadcast_from_zero_size", lambda x: mx.broadcast_to(x, (2, 0, 3)), one(0, 1), primitives=("Broadcast",)),
    # Reshape
    Case("shape.reshape", lambda x: x.reshape(2, 6), one(3, 4), dtypes=DATA, primitives=("Reshape",),
         onnx_ops=("Reshape",)),
    Case("shape.reshape_minus_one", lambda x: x.reshape(-1, 3, 2), one(3, 4), dtypes=SOME, primitives=("Reshape",)),
    Case("shape.reshape_to_scalar", lambda x: x.reshape(()) * 2, one(1, 1), primitives=("Reshape",)),
    Case("shape.reshape_zero_size", lambda x: x.reshape(0, 2, 2) + 1, one(0, 4), dtypes=SOME, primitives=("Reshape",)),
    Case("shape.reshape_zero_size_minus_one", lambda x: x.reshape(4, -1), one(0, 4), primitives=("Reshape",)),
    # Flatten / Unflatten
    Case("shape.flatten_all", lambda x: mx.flatten(x), one(2, 3, 4), dtypes=DATA, primitives=("Flatten",)),
    Case("shape.flatten_middle", lambda x: mx.flatten(x, 1, 2), one(2, 3, 4, 2), dtypes=SOME, primitives=("Flatten",)),
    Case("shape.flatten_zero_size", lambda x: mx.flatten(x, 0, 1), one(2, 0, 3), primitives=("Flatten",)),
    Case("shape.unflatten", lambda x: mx.unflatten(x, 1, (2, 3)), one(4, 6), dtypes=DATA, primitives=("Unflatten",)),
    Case("shape.unflatten_minus_one", lambda x: mx.unflatten(x, -1, (-1, 2)), one(3, 8), dtypes=SOME,
         primitives=("Unflatten",)),
    # Transpose
    Case("shape.transpose_2d", lambda x: x.T, one(3, 4), dtypes=DATA, primitives=("Transpose",), onnx_ops=("Transpose",)),
    Case("shape.transpose_perm", lambda x: mx.transpose(x, (2, 0, 1)), one(2, 3, 4), dtypes=SOME,
         primitives=("Transpose",)),
    Case("shape.swapaxes_moveaxis", lambda x: mx.moveaxis(mx.swapaxes(x, 0, 2), 0, -1), one(2, 3, 4),
         primitives=("Transpose",)),
    Case("shape.transpose_zero_size", lambda x: mx.transpose(x, (1, 0, 2)), one(2, 0, 3), primitives=("Transpose",)),
    # ExpandDims / Squeeze
    Case("shape.expand_dims", lambda x: x[None, :, None], one(3, 4), dtypes=DATA, primitives=("ExpandDims",),
         onnx_ops=("Unsqueeze",)),
    Case("shape.expand_dims_negative", lambda x: mx.expand_dims(x, (-1, 0)), one(3, 4), dtypes=SOME,
         primitives=("ExpandDims",)),
    Case("shape.squeeze_axis", lambda x: mx.squeeze(x, 1), one(3, 1, 4), dtypes=DATA, primitives=("Squeeze",),
         onnx_ops=("Squeeze",)),
    Case("shape.squeeze_all", lambda x: mx.squeeze(x), one(1, 3, 1, 4, 1), dtypes=SOME, primitives=("Squeeze",)),
    Case("shape.squeeze_zero_size", lambda x: mx.squeeze(x, 0), one(1, 0, 3), primitives=("Squeeze",)),
    # Concatenate / stack
    Case("shape.concatenate", lambda x, y, z: mx.concatenate([x, y, z], axis=1), three((2, 3), (2, 1), (2, 4)),
         dtypes=DATA, primitives=("Concatenate",), onnx_ops=("Concat",)),
    Case("shape.concatenate_negative_axis", lambda x, y: mx.concatenate([x, y], axis=-2), two((2, 3, 4), (2, 1, 4)),
         dtypes=SOME, primitives=("Concatenate",)),
    Case("shape.concatenate_zero_size_part", lambda x, y, z: mx.concatenate([x, y, z], axis=0),
         three((2, 3), (0, 3), (1, 3)), dtypes=SOME, primitives=("Concatenate",)),
    Case("shape.concatenate_all_zero_size", lambda x, y: mx.concatenate([x, y], axis=1), two((0, 3), (0, 2)),
         primitives=("Concatenate",)),
    Case("shape.stack", lambda x, y: mx.stack([x, y], axis=1), two((3, 4), (3, 4)), dtypes=SOME,
         primitives=("Concatenate", "ExpandDims")),
    # Split
    Case("shape.split_even", lambda x: tuple(mx.split(x, 3, axis=1)), one(2, 6), dtypes=DATA, primitives=("Split",),
         onnx_ops=("Split",)),
    Case("shape.split_uneven", lambda x: tuple(mx.split(x, [1, 4], axis=0)), one(6, 2), dtypes=SOME,
         primitives=("Split",)),
    Case("shape.split_zero_size_parts",
         lambda x: tuple(mx.split(x, [2, 2], axis=1)) + tuple(mx.split(x, [1, 1, 1, 3], axis=1)), one(3, 5), dtypes=SOME,
         primitives=("Split",)),
    Case("shape.split_one_used", lambda x: mx.split(x, [1], axis=-1)[1] * 2, one(3, 4), primitives=("Split",)),
    Case("shape.split_of_zero_size", lambda x: tuple(mx.split(x, 2, axis=1)), one(0, 4), primitives=("Split",)),
    # Depends
    Case("shape.depends", lambda x, y: mx.depends([x * 2, y + 1], [x - y])[1] + x, two((3, 4), (3, 4)),
         primitives=("Depends",)),
]

CASES += [
    Case("shape.split_concat_roll", lambda x: mx.roll(x, 2, axis=1), one(3, 5), dtypes=INTS,
         primitives=("Split", "Concatenate")),
]
