"""Fresh random inputs like the example's: the parity check's and localize's."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .. import dtypes
from ..errors import VerificationError
from ..io import metadata


def random_like(example: mx.array, rng: np.random.Generator, shape: tuple[int, ...] | None = None) -> mx.array:
    """A random array with the shape (or ``shape``) and dtype of ``example``.

    Floats are standard normal; bools are fair coin flips; integers are uniform over the
    example's own value range, so token ids stay below the vocabulary size. An integer
    example whose values are all equal (a cache position ``[3]``, one token ``[[2]]``)
    says nothing about its valid range: its value is kept, since any other could index
    out of bounds in MLX (which does not check).
    """
    dtype = example.dtype
    shape = tuple(example.shape) if shape is None else tuple(shape)
    count = int(np.prod(shape, dtype=np.int64))
    if count > metadata.MAX_CHECK_ELEMENTS:
        raise VerificationError(
            f"an input of shape {list(shape)} has {count} elements, more than the check draws "
            f"({metadata.MAX_CHECK_ELEMENTS}); check at smaller sizes"
        )
    if dtype == mx.bool_:
        return mx.array(rng.random(shape) < 0.5)
    if dtypes.is_integer(dtype):
        np_dtype = dtypes.to_numpy(dtype)
        values = dtypes.array_to_numpy(example)
        if not values.size:
            return mx.array(rng.integers(0, 1, size=shape, endpoint=True, dtype=np_dtype))
        lo, hi = values.min(), values.max()
        if lo == hi:
            return mx.array(np.full(shape, lo, dtype=np_dtype))
        return mx.array(rng.integers(lo, hi, size=shape, endpoint=True, dtype=np_dtype))
    if dtype in (mx.complex64,):
        raise VerificationError("complex inputs cannot be fed to onnxruntime; pass real and imaginary parts")
    sample = rng.standard_normal(shape).astype(np.float32)
    return mx.array(sample).astype(dtype)
