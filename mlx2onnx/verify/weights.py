"""Whether a model's weights are the callable's: the check's guard against a factory that
initialises a new random model on each call."""

from __future__ import annotations

import ml_dtypes
import mlx.core as mx
import numpy as np
import onnx
from mlx.utils import tree_flatten

from .. import dtypes
from ..capture.inputs import owned_modules


def weight_problems(proto: onnx.ModelProto, base_dir: str | None, call, module) -> list[str]:
    """Initializers named after a parameter path whose values are not the callable's
    parameters (compared as multisets, so weights the passes transposed still match)."""
    initializers = {t.name: t for t in proto.graph.initializer}
    differ, compared = [], 0
    for prefix, owner in owned_modules(call, module):
        for path, array in tree_flatten(owner.parameters()):
            tensor = initializers.get(prefix + path)
            if (
                tensor is None
                or not isinstance(array, mx.array)
                or array.size != int(np.prod(tensor.dims, dtype=np.int64))
            ):
                continue
            if tensor.data_location == onnx.TensorProto.EXTERNAL and base_dir is None:
                continue
            stored = onnx.numpy_helper.to_array(tensor, base_dir or "")
            compared += 1
            if not _same_values(dtypes.array_to_numpy(array), stored):
                differ.append(prefix + path)
    if not differ:
        return []
    listed = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
    return [
        f"the model's weights differ from the callable's: {listed} ({len(differ)} of {compared} parameters). "
        "The callable made other weights than the ones exported (a factory that initialises a new random "
        "model on each call): load the weights, or seed the factory (CLI: --model-seed as at export)"
    ]


def _same_values(mine: np.ndarray, stored: np.ndarray) -> bool:
    """The same values up to order and the export's dtype conversion: count, sum and sum
    of squares (in float64) agree."""
    if mine.dtype.kind not in "fiub" and mine.dtype != ml_dtypes.bfloat16:
        return True
    a = mine.astype(np.float64).ravel()
    b = (
        stored.astype(np.float32).astype(np.float64).ravel()
        if stored.dtype == ml_dtypes.bfloat16
        else stored.astype(np.float64).ravel()
    )
    if np.isnan(a).any() or np.isnan(b).any() or np.isinf(a).any() or np.isinf(b).any():
        return bool(np.isnan(a).sum() == np.isnan(b).sum())
    half = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
    rtol = 1e-2 if (mine.dtype in half or stored.dtype in half) else 1e-6
    scale = np.abs(a).sum() + 1e-30
    return bool(
        abs(a.sum() - b.sum()) <= rtol * scale and abs((a * a).sum() - (b * b).sum()) <= rtol * (a * a).sum() + 1e-30
    )
