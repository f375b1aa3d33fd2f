"""Per-primitive handlers, one module per family (shipped as ``mlx2onnx.op_mappings``).

Each module is imported explicitly so that a broken handler file fails loudly here.
"""

from . import (
    bitwise,
    conv,
    creation,
    elementwise,
    exp_log,
    fast,
    fast_grad,
    fft,
    indexing,
    matmul,
    quantized,
    reduce,
    refusals,
    shape,
    slicing,
    sort,
    special,
)

FAMILIES = (
    elementwise,
    exp_log,
    special,
    bitwise,
    shape,
    creation,
    indexing,
    slicing,
    matmul,
    reduce,
    sort,
    conv,
    fast,
    fast_grad,
    quantized,
    fft,
    refusals,
)
