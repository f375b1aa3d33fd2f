"""Which ONNX opset to target, by export target.

* ``"portable"`` (the default): opset :data:`PORTABLE_OPSET`, the newest opset every
  runtime of the consumer matrix loads and runs (docs/runtimes.md): onnxruntime-web and
  onnxruntime-node 1.30/1.31 stop at IR version 13 and ai.onnx opset 26, and from opset 25
  onnxruntime no longer has a kernel for ``Attention`` (it runs the op's function body), so
  24 is the newest opset with every fused op the export writes (LayerNormalization,
  Gelu, RMSNormalization, Attention, RotaryEmbedding) running as one kernel everywhere.
* ``"onnxruntime"``: the newest opset the installed onnxruntime fully runs (may be an
  opset other runtimes do not load yet).

An explicit ``opset=N`` is honoured exactly with either target.
"""

from __future__ import annotations

import functools

import onnx

MIN_OPSET = 17
PORTABLE_OPSET = 24
TARGETS = ("portable", "onnxruntime")

# Every ONNX feature a handler or pass chooses its spelling by, named once: the opset it
# first exists at (ctx.has(feature); below it the export spells the same arithmetic
# another way, or refuses).
FEATURES = {
    "bitwise ops": 18,  # BitwiseAnd / Or / Xor / Not
    "scatter max/min": 18,  # ScatterND and ScatterElements reduction="max" / "min"
    "axes as input": 18,  # Reduce* (ReduceSum from 13) and Split take axes / sizes as an input
    "DFT axis as input": 20,  # DFT's axis an input, and its real input of any rank
    "blocked DequantizeLinear": 21,  # block_size and 4-bit types
    "LayerNormalization": 17,
    "Gelu": 20,
    "Attention": 23,  # the fused Attention op
    "RMSNormalization": 23,
    "RotaryEmbedding": 23,
    "CumProd": 26,
    "BitCast": 26,
    "signed BitShift": 28,  # BitShift of signed types (arithmetic right shift)
}


def has(opset: int, feature: str) -> bool:
    """Whether ONNX opset ``opset`` has ``feature`` (a key of :data:`FEATURES`)."""
    return opset >= FEATURES[feature]


def target_opset(target: str) -> int:
    """The default opset of export target ``target`` (one of :data:`TARGETS`)."""
    if target == "onnxruntime":
        return default_opset()
    return min(PORTABLE_OPSET, default_opset())


@functools.lru_cache(maxsize=None)
def default_opset() -> int:
    """The newest opset (>= 17) for which onnxruntime's CPU provider registers a kernel
    range that includes the current version of every standard op it implements at all.

    onnxruntime itself runs an open-ended registration only for that registration's first
    version (see :func:`mlx2onnx.translate.kernels.has_kernel`): at opset 28 that leaves out ops the
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
    """The lowest ONNX IR version that can carry ``opset`` (so older runtimes load it):
    the IR version of the first onnx release with that opset (24 -> 12, 26 -> 13)."""
    best = None
    for _release, ir_version, ai_onnx, *_ in onnx.helper.VERSION_TABLE:
        if ai_onnx >= opset and (best is None or ir_version < best):
            best = ir_version
    return best if best is not None else onnx.IR_VERSION
