"""What the 4-bit blocks of a constant quantized weight give for non-finite activations.

A constant affine / mxfp4 / nvfp4 weight is exported as a sum of blocked nibble products
(``op_mappings/lowbit.py``), exact for finite activations. A row holding inf or NaN is
non-finite in MLX's single product and in the sum of terms alike, but which non-finite
value each element is can differ (MLX's inf can be the terms' NaN: inf from one term and
-inf from another; found by the fuzzer, seed 20261211 programs 13522 and 14304). This
pins that contract: finite rows at the float32 tolerance, non-finite rows non-finite in
every element on both sides.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from tests.support.harness import ort_session, randn, rng_for

MODES = [("affine", 32, 4), ("affine", 64, 8), ("mxfp4", 32, 4), ("nvfp4", 16, 4)]


@pytest.mark.parametrize("mode, group_size, bits", MODES, ids=[f"{m}{b}" for m, _, b in MODES])
def test_non_finite_rows_stay_non_finite(mode, group_size, bits):
    rng = rng_for("lowbit_non_finite", mode, bits)
    w = mx.quantize(randn(rng, (8, 2 * group_size)), group_size=group_size, bits=bits, mode=mode)
    mx.eval(w)

    def linear(x):
        return mx.quantized_matmul(x, *w, transpose=True, group_size=group_size, bits=bits, mode=mode)

    x = np.array(randn(rng, (4, 2 * group_size)))
    x[1, 3], x[2, 5], x[2, 9], x[3, 0] = np.inf, -np.inf, np.inf, np.nan
    x = mx.array(x)
    model = mlx2onnx.Exporter().export(linear, x)
    onnx.checker.check_model(model, full_check=True)
    assert "MatMulNBits" in {n.op_type for n in model.graph.node}  # the blocked path, not unpacked bytes
    session = ort_session(model)
    got = session.run(None, {session.get_inputs()[0].name: np.array(x)})[0]
    want = np.array(linear(x))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    assert not np.isfinite(want[1:]).any() and not np.isfinite(got[1:]).any()
