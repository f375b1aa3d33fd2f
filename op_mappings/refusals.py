"""Primitives that ONNX cannot express exactly: each says why, and what the user can do.

A refused primitive is reported, with its count, by the translator's up-front scan
(``UnsupportedPrimitiveError``) before anything is built or written. Primitives that
MLX's own export aborts on (``LUF``, ``Load``) are listed too, so a future MLX that
starts emitting them gets the same explanation instead of "no handler".
"""

from __future__ import annotations

from mlx2onnx.translate.registry import refuses

_CONSTANT = (
    "If the matrix does not depend on the function's inputs, compute the result with "
    "mx.linalg outside the function (on mx.cpu), mx.eval it and close over it: it is "
    "then exported as a constant."
)
_INPUT = (
    "If it does depend on the inputs, split the function: run the decomposition in MLX "
    "and pass its result to the exported part as an extra input."
)

refuses(
    "QRF",
    "ONNX has no QR decomposition operator (mx.linalg.qr), and an unrolled Householder "
    "graph would not reproduce LAPACK's results and signs bit for bit.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "SVD",
    "ONNX has no singular value decomposition operator (mx.linalg.svd, and pinv / "
    "matrix norms that use it); an iterative graph would not match LAPACK's results.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "Inverse",
    "standard ONNX has no matrix inverse (mx.linalg.inv, tri_inv, cholesky_inv, "
    "solve_triangular); only the com.microsoft contrib domain has one, which other "
    "runtimes lack and which does not follow LAPACK's pivoting.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "Cholesky",
    "ONNX has no Cholesky factorisation operator (mx.linalg.cholesky); a per-column loop "
    "would not match LAPACK's blocked algorithm exactly.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "Eig",
    "ONNX has no eigendecomposition operator (mx.linalg.eig), and its complex64 results "
    "could not leave the graph in any case.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "Eigh",
    "ONNX has no symmetric eigendecomposition operator (mx.linalg.eigh / eigvalsh); an "
    "iterative Jacobi graph would not match LAPACK's eigenvector signs and order.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "LUF",
    "ONNX has no LU factorisation operator (mx.linalg.lu, lu_factor, solve, det); MLX 0.32 "
    "itself cannot export it either.",
    f"{_CONSTANT} {_INPUT}",
)
refuses(
    "CustomKernel",
    "the node holds user Metal/CUDA kernel source (mx.fast.metal_kernel / cuda_kernel), "
    "which ONNX runtimes cannot compile or run.",
    "Write the computation with ordinary mx operations (a reference implementation of the "
    "kernel) for export, and keep the custom kernel for MLX inference.",
)
refuses(
    "Load",
    "the graph reads arrays lazily from a file (a function obtained from mx.import_function), "
    "and ONNX has no file-reading operator.",
    "Export the original Python function instead, or mx.eval the imported function's constants before re-exporting it.",
)
