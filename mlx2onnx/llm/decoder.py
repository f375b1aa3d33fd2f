"""Decoder LMs with a KV cache: a prefill graph and a decode-step graph sharing weights.

The cache is explicit and grows: the decode graph takes ``position`` (int32, the number
of tokens already in the cache) and ``past_key_values.<i>.key`` / ``.value``
([B, kv_heads, past, head_dim], ``past`` a dynamic dimension, 1 to ``max_length - 1``)
and returns ``logits`` and ``present.<i>.key`` / ``.value``: the past with the new
token's keys and values appended ([B, kv_heads, past + 1, head_dim]). A step attends
over the filled positions only, so its cost follows the tokens so far, not
``max_length``. The prefill graph takes only ``input_ids`` and returns the logits and
the first cache ([B, kv_heads, prompt, head_dim]). With ``dynamic=True`` the batch size
(both graphs) and the prompt length (prefill, 1 to ``max_length``) are dynamic
dimensions (:mod:`mlx2onnx.dynamic`), named ``batch`` and ``prompt``; otherwise both are
fixed to the values given.

Any mlx-lm style model works: ``model(input_ids, cache=[per-layer cache])`` where each
layer calls ``cache.update_and_fetch(keys, values)``, reads ``cache.offset`` for RoPE,
and builds its mask with ``cache.make_mask(...)`` (mlx-lm's ``create_attention_mask``).
"""

from __future__ import annotations

import json
import os
import shutil
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import onnx_ir as ir

from ..capture.dynamic import Dim
from ..errors import ExportOptionError
from ..exporter import Exporter
from ..io.metadata import DECODER_METADATA_KEY
from ..io.ownership import publish
from ..io.saving import check_output_path, staging_folder
from .caches import KV, GrowingKVCache, ShapeProbe


def cache_count(model: nn.Module) -> int:
    """How many caches ``model`` takes: its ``make_cache()``'s (layers may share one, or a
    model keep one more), else one per layer."""
    if hasattr(model, "make_cache"):
        return len(model.make_cache())
    return len(model.layers)


def cache_layout(model: nn.Module, layers: int | None = None) -> list[KV]:
    """Per cache: its :class:`~.caches.KV` layout, found by calling the model on one token
    (MLX is lazy: the shapes are known without computing anything)."""
    count = layers if layers is not None else cache_count(model)
    probes = [ShapeProbe() for _ in range(count)]
    model(mx.zeros((1, 1), dtype=mx.int32), cache=probes)
    for i, probe in enumerate(probes):
        if probe.layout is None:
            raise ExportOptionError(f"layer {i} never wrote to its cache; only attention layers are supported")
    return [probe.layout for probe in probes]


@dataclass(frozen=True)
class DecoderExport:
    prefill: Path
    decode: Path
    weights: Path
    max_length: int
    prompt_length: int
    batch: int
    layers: int
    dynamic: bool = False

    def sessions(self, providers: Sequence[str] = ("CPUExecutionProvider",)):
        import onnxruntime as ort

        return (
            ort.InferenceSession(str(self.prefill), providers=list(providers)),
            ort.InferenceSession(str(self.decode), providers=list(providers)),
        )


def cache_names(layers: int, prefix: str) -> list[str]:
    """``<prefix>.<i>.key`` / ``.value`` for each layer, in input order."""
    return [f"{prefix}.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def cache_arrays(layout: list[KV], rows: int, length: int, rng: np.random.Generator | None = None) -> list:
    """Per layer of ``layout`` (:func:`cache_layout`) a key and a value cache
    [rows, kv_heads, length, dim]: zeros, or standard normal values from ``rng`` (an
    example past for tracing must not be a constant the trace could fold)."""

    def make(shape, dtype):
        if rng is None:
            return mx.zeros(shape, dtype)
        return mx.array(rng.standard_normal(shape).astype(np.float32)).astype(dtype)

    out = []
    for heads, kdim, vdim, dtype, _ in layout:
        out += [make((rows, heads, length, kdim), dtype), make((rows, heads, length, vdim), dtype)]
    return out


def export_decoder(
    model: nn.Module,
    directory: str | os.PathLike,
    *,
    prompt_length: int,
    max_length: int,
    batch: int = 1,
    name: str = "model",
    exporter: Exporter | None = None,
    dynamic: bool = False,
    overwrite: bool = False,
) -> DecoderExport:
    """Export ``model`` as ``<name>.prefill.onnx`` and ``<name>.decode.onnx`` in
    ``directory``, sharing one weights file ``<name>.weights``. ``batch`` and
    ``prompt_length`` are the example sizes; with ``dynamic=True`` the graphs take any
    batch and any prompt length up to ``max_length``. The decode graph takes a past of
    any length 1..``max_length - 1``. Existing files are replaced only with
    ``overwrite=True``; a missing ``directory`` is made (in an existing folder), and
    removed again if the export fails. The decode graph refuses (onnxruntime raises) a
    ``position`` outside ``0..max_length-1``."""
    directory = Path(directory)
    made = _check_destination(directory, name, prompt_length, max_length, overwrite)
    exporter = exporter or Exporter()
    mx.eval(model.parameters())
    layout = cache_layout(model)
    n = len(layout)

    def run(self, input_ids, position, past):
        caches = [GrowingKVCache(past[2 * i], past[2 * i + 1], position) for i in range(n)]
        logits = self(input_ids, cache=caches)
        present = [a for c in caches for a in (c.keys, c.values)]
        return (logits, *present)

    def prefill(self, input_ids):
        empty = cache_arrays(layout, input_ids.shape[0], 0)
        return run(self, input_ids, mx.array(0, dtype=mx.int32), empty)

    def decode(self, input_ids, position, *past):
        return run(self, input_ids, position, list(past))

    outputs = ["logits"] + cache_names(n, "present")
    ids = mx.zeros((batch, prompt_length), dtype=mx.int32)
    one = mx.zeros((batch, 1), dtype=mx.int32)
    filled = min(prompt_length, max_length - 1)
    past = cache_arrays(layout, batch, filled, np.random.default_rng(0))
    past_length = Dim("past", min=1, max=max(max_length - 1, 1))
    prefill_dynamic = None
    decode_dynamic = {f"past_{k}": {2: past_length} for k in range(2 * n)}
    if dynamic:
        prefill_dynamic = {"input_ids": {0: "batch", 1: Dim("prompt", max=max_length)}}
        decode_dynamic = {
            "input_ids": {0: "batch"},
            **{f"past_{k}": {0: "batch", 2: past_length} for k in range(2 * n)},
        }
    prefill_ir = exporter.with_options(
        input_names=["input_ids"], output_names=outputs, path=None, dynamic=prefill_dynamic
    ).to_ir(types.MethodType(prefill, model), ids)
    decode_ir = exporter.with_options(
        input_names=["input_ids", "position"] + cache_names(n, "past_key_values"),
        output_names=outputs,
        path=None,
        dynamic=decode_dynamic,
    ).to_ir(types.MethodType(decode, model), one, mx.array(filled, dtype=mx.int32), *past)
    guard_position(decode_ir, max_length)
    meta = {
        "max_length": max_length,
        "prompt_length": prompt_length,
        "batch": batch,
        "layers": n,
        "dynamic": bool(dynamic),
    }
    for m in (prefill_ir, decode_ir):
        m.metadata_props[DECODER_METADATA_KEY] = json.dumps(meta, sort_keys=True)
    directory.mkdir(exist_ok=True)
    try:
        paths = save_sharing_weights(
            {f"{name}.prefill.onnx": prefill_ir, f"{name}.decode.onnx": decode_ir},
            directory,
            f"{name}.weights",
            check=exporter.check,
        )
    except BaseException:
        if made:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return DecoderExport(
        paths[f"{name}.prefill.onnx"],
        paths[f"{name}.decode.onnx"],
        directory / f"{name}.weights",
        max_length,
        prompt_length,
        batch,
        n,
        bool(dynamic),
    )


def _check_destination(directory: Path, name: str, prompt_length: int, max_length: int, overwrite: bool) -> bool:
    """:class:`ExportOptionError` for sizes or files :func:`export_decoder` cannot take, before
    anything is written; whether ``directory`` is still to be made."""
    if not 0 < prompt_length <= max_length:
        raise ExportOptionError(f"prompt_length={prompt_length} must be in 1..max_length={max_length}")
    made = not directory.exists()
    for suffix in ("prefill", "decode"):  # a missing directory: its parent must take it
        check_output_path(
            (directory.parent if made else directory) / f"{name}.{suffix}.onnx", overwrite, f"{name}.weights"
        )
    return made


def guard_position(model: ir.Model, max_length: int) -> None:
    """Make the decode graph refuse a ``position`` outside ``0..max_length-1`` (it would
    write the cache out of bounds, which MLX does not check): every use reads
    ``Max(Gather(r, p), Gather(r, p - max_length))`` of ``r = 0..max_length-1``, which is p
    itself where p is valid, while onnxruntime's Gather raises for an index outside
    ``-max_length..max_length-1``: the first Gather refuses p >= max_length, the second p < 0."""
    graph = model.graph
    position = next(v for v in graph.inputs if v.name == "position")
    uses = list(position.uses())
    table = ir.Value(
        name="position_range",
        shape=ir.Shape([max_length]),
        type=ir.TensorType(ir.DataType.INT32),
        const_value=ir.Tensor(np.arange(max_length, dtype=np.int32), name="position_range"),
    )
    length = ir.Value(
        name="position_limit",
        shape=ir.Shape([]),
        type=ir.TensorType(ir.DataType.INT32),
        const_value=ir.Tensor(np.array(max_length, np.int32), name="position_limit"),
    )
    graph.register_initializer(table)
    graph.register_initializer(length)
    below = ir.Node("", "Gather", [table, position], name="position/below_max_length")
    shifted = ir.Node("", "Sub", [position, length], name="position/shifted")
    at_least_zero = ir.Node("", "Gather", [table, shifted.outputs[0]], name="position/not_negative")
    checked = ir.Node("", "Max", [below.outputs[0], at_least_zero.outputs[0]], name="position/checked")
    checked.outputs[0].name = "position_checked"
    for node in (below, shifted, at_least_zero, checked):
        graph.append(node)
    for user, index in uses:
        user.replace_input_with(index, checked.outputs[0])
    graph.sort()


def _share_transposed(models: list[ir.Model]) -> None:
    """Where a later graph stores a 2-D weight transposed from an earlier graph's (its
    passes chose MatMul where the other chose Gemm(transB)), it reads the earlier layout
    through a Transpose instead, so the file holds the weight once."""
    first: dict[str, ir.Tensor] = {}
    for model in models:
        graph = model.graph
        for value in list(graph.initializers.values()):
            tensor = value.const_value
            if tensor is None or len(tensor.shape) != 2:
                continue
            base = first.setdefault(value.name, tensor)
            if base is tensor or tuple(base.shape) != tuple(tensor.shape)[::-1] or base.dtype != tensor.dtype:
                continue
            if not np.array_equal(base.numpy().T, tensor.numpy()):
                continue
            name = value.name
            graph.initializers.pop(name)
            value.name = f"{name}/transposed"
            shared = ir.Value(name=name, shape=ir.Shape(base.shape), type=ir.TensorType(base.dtype), const_value=base)
            graph.register_initializer(shared)
            node = ir.Node(
                "", "Transpose", [shared], attributes=[ir.AttrInt64s("perm", [1, 0])], name=f"{name}/transpose"
            )
            graph.insert_before(graph[0], node)
            ir.convenience.replace_all_uses_with(value, node.outputs[0])
            node.outputs[0].name = value.name
            node.outputs[0].shape, node.outputs[0].type = value.shape, value.type


def save_sharing_weights(
    models: dict[str, ir.Model], directory: Path, weights_name: str, *, check: bool = True, threshold: int = 1024
) -> dict[str, Path]:
    """Save several models whose large initializers live once in one external data file.

    Initializers equal in name, type, shape and bytes are written once; each model's
    copy becomes a reference to the same offset. Written atomically: everything goes to a
    temporary folder, is checked, then renamed into place.
    """
    directory = Path(directory)
    _share_transposed(list(models.values()))
    with staging_folder(directory, ".mlx2onnx.") as staging:
        written: dict[tuple, tuple[int, int]] = {}
        with open(staging / weights_name, "wb") as data:
            for model in models.values():
                for value in list(model.graph.initializers.values()):
                    tensor = value.const_value
                    if tensor is None or tensor.nbytes < threshold:
                        continue
                    raw = tensor.tobytes()
                    key = (value.name, tensor.dtype, tuple(tensor.shape), len(raw), hash(raw))
                    if key not in written:
                        pad = (-data.tell()) % 64
                        data.write(b"\0" * pad)
                        written[key] = (data.tell(), len(raw))
                        data.write(raw)
                    offset, length = written[key]
                    value.const_value = ir.ExternalTensor(
                        weights_name,
                        offset,
                        length,
                        tensor.dtype,
                        shape=tensor.shape,
                        name=value.name,
                        base_dir=staging,
                    )
        paths = {}
        for filename, model in models.items():
            proto = ir.serde.serialize_model(model)
            target = staging / filename
            target.write_bytes(proto.SerializeToString())
            if check:
                onnx.checker.check_model(str(target), full_check=True)
            paths[filename] = directory / filename
        publish(staging, [(staging / name, directory / name) for name in (weights_name, *models)])
        for model in models.values():  # the tensors now live beside the saved models
            for value in model.graph.initializers.values():
                if isinstance(value.const_value, ir.ExternalTensor):
                    value.const_value = ir.ExternalTensor(
                        weights_name,
                        value.const_value.offset,
                        value.const_value.length,
                        value.const_value.dtype,
                        shape=value.const_value.shape,
                        name=value.name,
                        base_dir=directory,
                    )
        return paths
