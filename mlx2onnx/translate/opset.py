"""Which ONNX opset to target: the newest one the installed onnxruntime fully runs."""

from __future__ import annotations

import functools

import onnx

MIN_OPSET = 17


@functools.lru_cache(maxsize=None)
def default_opset() -> int:
    """The newest opset (>= 17) for which onnxruntime's CPU provider registers a kernel
    range that includes the current version of every standard op it implements at all.

    onnxruntime itself runs an open-ended registration only for that registration's first
    version (see :func:`mlx2onnx.kernels.has_kernel`): at opset 28 that leaves out ops the
    export never emits (RandomNormal 22, DequantizeLinear 28) and Attention 25, which
    onnxruntime runs as its function body; the handlers and passes ask ``has_kernel`` and
    write Attention only at opsets 23-24."""
    newest = onnx.defs.onnx_opset_version()
    try:
        from onnxruntime.capi import _pybind_state as C

        kernels = C.get_all_opkernel_def()
    except Exception:  # pragma: no cover - very old or unusual onnxruntime builds
        return max(MIN_OPSET, min(newest, 21))
    cpu: dict[str, list[tuple[int, int]]] = {}
    for k in kernels:
        if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
            cpu.setdefault(k.op_name, []).append(tuple(k.version_range))
    history: dict[str, list[int]] = {}
    deprecated = set()
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "":
            history.setdefault(schema.name, []).append(schema.since_version)
            if schema.deprecated:
                deprecated.add(schema.name)
    for opset in range(newest, MIN_OPSET - 1, -1):
        complete = True
        for op, ranges in cpu.items():
            versions = [v for v in history.get(op, ()) if v <= opset]
            if op in deprecated or not versions:
                continue
            current = max(versions)
            if not any(lo <= current <= hi for lo, hi in ranges):
                complete = False
                break
        if complete:
            return opset
    return MIN_OPSET


def ir_version_for(opset: int) -> int:
    """The lowest ONNX IR version that can carry ``opset`` (so older runtimes load it)."""
    best = None
    for _release, ir_version, ai_onnx, *_ in onnx.helper.VERSION_TABLE:
        if ai_onnx >= opset and (best is None or ir_version < best):
            best = ir_version
    return best if best is not None else onnx.IR_VERSION
