"""An mlx-lm model folder -> a package that onnxruntime-genai and transformers.js run.

The package folder holds:

- ``onnx/model.onnx`` (``model.onnx_data`` beside it for large models): one decoder graph
  in the convention Optimum, transformers.js and onnxruntime-genai use for decoder-only
  models. Inputs ``input_ids``, ``attention_mask`` [batch, past + sequence],
  ``position_ids`` [batch, sequence] (int64) and ``past_key_values.<i>.key`` / ``.value``
  [batch, kv_heads, past, head_dim]; outputs ``logits`` [batch, sequence, vocab] and
  ``present.<i>.key`` / ``.value`` [batch, kv_heads, past + sequence, head_dim]. Batch,
  sequence and past are dynamic (past may be 0), so the graph serves the prompt and
  every step. Left-padded rows get the tokens they would get alone: padded keys are
  masked out, and RoPE reads each row's own positions.
  Quantized Linear weights are onnxruntime's ``MatMulNBits`` (4-bit, ``accuracy_level=0``:
  exact whatever the runtime's session options).
- ``genai_config.json`` for onnxruntime-genai, and the source's ``config.json``,
  ``generation_config.json`` and tokenizer files, so both runtimes' tokenizers load from
  the package.

Attention caches (mlx-lm's ``KVCache`` and ``RotatingKVCache``, whose window the mask
applies) are past/present keys and values; recurrent states (``ArraysCache``: convolution
windows, scan states) are inputs ``past_conv.<i>`` (``past_ssm.<i>``, ...) and outputs
``present_conv.<i>`` of fixed size, zeros before the first token, and a ``CacheList``
carries its members' (:mod:`.states`). Another cache type is refused by name. Where a
runtime cannot carry the package's caches, config.json says so under ``mlx2onnx`` and the
export reports it (:mod:`.configs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import types
from pathlib import Path
from typing import Any, Callable, Sequence

import mlx.core as mx
import numpy as np

from ..capture.dynamic import Dim
from ..errors import DynamicShapeError, UnsupportedModelError
from ..exporter import Exporter
from ..io.graph_files import dtype_file, graph_dtype
from ..io.notes import noted
from ..io.packages import TOKENIZER_FILES, check_folder_path, copy_present, package_folder, write_json_files
from ..io.saving import save_model
from ..targets import load_model_folder
from ..verify.plain import in_float32
from . import dtype_files
from .caches import GrowingKVCache
from .check import left_padded, prompts_for
from .configs import genai_config, text_settings, transformers_js_config
from .states import Group, flat, has_states, is_kv, package_layout, package_states_class, slot_names

# bfloat16 models computed as MLX computes them (float32 rounded after every op): the
# package generates MLX's own tokens; plain float32 carriage drifts by bfloat16 steps and
# greedy decoding can take another token after a near tie
GRAPH = "onnx/model.onnx"  # the decoder graph, as transformers.js and genai name it (its file: dtype_file)
PACKAGE_BFLOAT16 = "emulate"


class PackageCache(GrowingKVCache):
    """One layer's cache in the package graph: appends to the past, exposes each row's
    RoPE offset [batch], and masks by index (causal, a sliding window where the layer
    asks for one) and by ``attention_mask`` (padding).

    The past and present hold keys and values at one width ``width`` (the wider of the
    two, zero-padded: onnxruntime-genai has one head size for both), cut back to the
    model's own widths ``dims`` before attention. The keys and values of padding tokens
    are stored as zeros: a padded position's own numbers may be anything (a model that
    takes the log of its position makes NaN there), and a masked key still meets the
    real queries' scores and weights (0 * NaN is NaN)."""

    def __init__(
        self,
        keys: mx.array,
        values: mx.array,
        offset: mx.array,
        key_mask: mx.array,
        dims: tuple[int, int],
        mask_rank: int = 4,
        kept: int | None = None,
    ):
        super().__init__(keys, values, offset)
        self.key_mask, self.dims, self.mask_rank, self.kept = key_mask, dims, mask_rank, kept

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        real = self.key_mask[:, -keys.shape[2] :][:, None, :, None]
        width = self.keys.shape[3]
        stored = [_padded(mx.where(real, new, mx.zeros_like(new)), width) for new in (keys, values)]
        super().update_and_fetch(*stored)
        return self.keys_and_values()

    def keys_and_values(self):
        width = self.keys.shape[3]
        kdim, vdim = self.dims
        return (
            self.keys if kdim == width else self.keys[..., :kdim],
            self.values if vdim == width else self.values[..., :vdim],
        )

    def make_mask(self, N: int, return_array: bool = False, window_size: int | None = None, **_: Any):
        """Bool [batch, 1, N, past + N]: query i (index past + i) sees key j <= its index
        that attention_mask keeps; each query also sees itself, so a padded query has one
        key and no row is all -inf (a NaN there would reach the real rows through runtimes
        that add masks as a bias). A one-token step of a layer whose mlx-lm cache keeps
        ``kept`` keys (a RotatingKVCache) sees at most those, as in mlx-lm, whatever window
        it asks for (plamo3 asks for window + 1 and keeps window)."""
        past = self.keys.shape[2]
        query = mx.arange(past, past + N, dtype=mx.int32)[:, None]
        key = mx.arange(past + N, dtype=mx.int32)[None]
        seen = key <= query
        if window_size is not None:
            window = window_size
            if self.kept is not None and self.kept < window_size:
                # N == 1 read from a value of the graph (a Python test of N would fix the size)
                one = mx.arange(N, dtype=mx.int32)[-1:] == 0
                window = mx.where(one, self.kept, window_size)
            seen = seen & (key > query - window)
        mask = (seen[None, None] & self.key_mask[:, None, None, :]) | (key == query)[None, None]
        # models that group query heads under their key heads score [batch, kv, group, N, total]
        return mask[:, None] if self.mask_rank == 5 else mask


def _padded(x: mx.array, width: int) -> mx.array:
    """``x`` [..., d] zero-padded to [..., width]."""
    extra = width - x.shape[-1]
    return x if extra == 0 else mx.concatenate([x, mx.zeros((*x.shape[:-1], extra), x.dtype)], axis=-1)


def stored_layout(layout: list) -> list:
    """The package's layout: keys and values of each attention cache at one width."""

    def stored(entry):
        if isinstance(entry, Group):
            return Group(tuple(stored(m) for m in entry.members))
        if not is_kv(entry):
            return entry
        width = max(entry.kdim, entry.vdim)
        return entry._replace(kdim=width, vdim=width)

    return [stored(e) for e in layout]


def decoder_function(model, layout: list, mask_rank: int = 4, state_masks: bool = True) -> Callable:
    """``f(input_ids, attention_mask, position_ids, *past) -> (logits, *present)``, the
    arrays of each cache of ``layout`` (:func:`~.states.package_layout`) in order;
    ``state_masks``: recurrent layers are given the padding mask (those that read one)."""
    from mlx_lm.models.cache import CacheList

    states = package_states_class()
    leaves = flat(layout)
    starts = list(itertools.accumulate((2 if is_kv(leaf) else len(leaf.shapes) for _, leaf in leaves), initial=0))
    first_key = next((at for at, (_, leaf) in zip(starts, leaves) if is_kv(leaf)), None)  # its past: the past length

    def forward(self, input_ids, attention_mask, position_ids, *past):
        sequence = input_ids.shape[1]
        total = past[first_key].shape[2] + sequence if first_key is not None else attention_mask.shape[1]
        key_mask = mx.take(attention_mask, mx.arange(total), axis=1).astype(mx.bool_)
        # each row's first position: its last position minus (sequence - 1), from slices
        # (a Python number would be a constant of the trace)
        last = mx.arange(sequence, dtype=position_ids.dtype)[-1:]
        offset = (position_ids[:, -1:] - last).squeeze(1).astype(mx.int32)
        members = []
        for (_, leaf), at in zip(leaves, starts):
            if is_kv(leaf):
                members.append(
                    PackageCache(past[at], past[at + 1], offset, key_mask, (leaf.kdim, leaf.vdim), mask_rank, leaf.kept)
                )
            else:
                members.append(states(list(past[at : at + len(leaf.shapes)]), key_mask if state_masks else None))
        caches, used = [], 0
        for entry in layout:
            count = len(entry.members) if isinstance(entry, Group) else 1
            group = members[used : used + count]
            caches.append(CacheList(*group) if isinstance(entry, Group) else group[0])
            used += count
        logits = self(input_ids, cache=caches)
        present = [a for c in members for a in ((c.keys, c.values) if isinstance(c, PackageCache) else c.cache)]
        return (logits, *present)

    return types.MethodType(forward, model)


def export_package(
    folder: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    stage: Callable[[str], Any] = lambda text: contextlib.nullcontext(),
    exporter: Exporter | None = None,
    external_data: bool | None = None,
    dtypes: Sequence[str] = (),
) -> Path:
    """Export the mlx-lm model folder ``folder`` as a package folder ``out`` (see module).
    Everything is checked before anything is written; the package appears whole or not
    at all. ``stage(text)`` is entered around each step (the command line's progress).
    ``external_data``: weights in ``onnx/model.onnx_data`` (None: above 2 GB only); the
    package's config.json then says so to transformers.js (``use_external_data_format``).
    ``dtypes``: more graph files, by transformers.js's dtype names (:mod:`.dtype_files`);
    the folder's own graph is always written, named by what it holds (``model.onnx``,
    ``model_q4.onnx``), each other one measured against the folder's model and its result
    recorded in config.json and the model card."""
    folder, out = Path(folder), check_folder_path(out, overwrite, folder)
    with stage(f"loading {folder} with mlx-lm"):
        target = load_model_folder(str(folder))
        config = json.loads((folder / "config.json").read_text())
        model = target.fun
        layout = package_layout(model, config.get("model_type", "?"))
        dtypes = dtype_files.check_dtypes(dtypes, (config.get("quantization") or {}).get("bits"))
    layers = len(layout)
    arrays = example_inputs(layout, batch=2)
    mask_rank = attention_mask_rank(model, layout)
    slots = slot_names(layout)
    names = ["input_ids", "attention_mask", "position_ids"] + [past for past, _ in slots]
    dynamic = {
        "input_ids": {0: "batch_size", 1: "sequence"},
        "attention_mask": {0: "batch_size", 1: "total_sequence"},
        "position_ids": {0: "batch_size", 1: "sequence"},
        **{
            f"past_{k}": (
                {0: "batch_size", 2: Dim("past_sequence")} if past.startswith("past_key_values") else {0: "batch_size"}
            )
            for k, (past, _) in enumerate(slots)
        },
    }
    outputs = ["logits"] + [present for _, present in slots]
    exporter = exporter or Exporter(bfloat16=PACKAGE_BFLOAT16)
    exporter = exporter.with_options(input_names=names, output_names=outputs, path=None, dynamic=dynamic)
    with stage(f"tracing the decoder ({layers} layers) at several sizes and translating it"):
        graph, forward, masked = traced_decoder(exporter, model, layout, mask_rank, arrays)
    padding = None
    if has_states(layout):  # attention caches mask padding by construction
        with stage("running the decoder in MLX (float32) on a fresh and a left-padded prompt"), in_float32(model):
            refuse_unlike_fresh_states(forward, model, layout, config.get("model_type", "?"))
            padding = padding_reason(forward, layout, masked)
    vocab = graph.graph.outputs[0].shape[-1]  # the logits' width: the vocabulary the graph scores
    own = graph_dtype(graph)
    dtypes = [d for d in dtypes if d != own]
    variants, measured = {}, {}
    prompts = prompts_for(vocab)
    reference = dtype_files.mlx_reference(model, prompts) if dtypes else None
    for dtype in dtypes:
        with stage(f"tracing the decoder as {dtype} computes it, translating and measuring it"):
            made = dtype_files.made_over(load_model_folder(str(folder)).fun, dtype)
            variants[dtype] = traced_decoder(exporter, made, layout, attention_mask_rank(made, layout), arrays)[0]
            measured[dtype] = {
                "file": dtype_file(GRAPH, dtype),
                **dtype_files.measured(variants[dtype], reference, made, prompts),
            }
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        for dtype, decoder in ((own, graph), *variants.items()):
            file = Path(dtype_file(GRAPH, dtype))
            save_model(
                decoder,
                package / file,
                check=exporter.check,
                data_name=f"{file.name}_data",
                external_data=external_data,
            )
        copy_present(folder, package, ("generation_config.json", *TOKENIZER_FILES))
        stored = stored_layout(layout)
        package_config, js_reason, retyped = transformers_js_config(config, stored, vocab)
        settings, genai_reason = genai_config(text_settings(config), stored, vocab, folder)
        notes = dataclasses.replace(
            retyped,
            transformers_js=js_reason and f"cannot run: {js_reason}",
            onnxruntime_genai=genai_reason and f"cannot run: {genai_reason}",
            left_padded_batches=padding and f"not served: {padding}",
            dtype_files=measured or None,
        )
        write_json_files(
            package,
            {
                "config.json": noted(package_config, notes),
                **({"genai_config.json": settings} if settings is not None else {}),
            },
            {GRAPH: own},
        )
    return out


def example_inputs(layout: list, batch: int, sequence: int = 3, past: int = 4) -> list:
    """The package decoder's example inputs: token ids, an all-ones mask, positions after
    ``past`` cached tokens and a random past and states (a constant could be folded into
    the trace)."""
    rng = np.random.default_rng(0)
    arrays = [
        mx.array(rng.integers(0, 2, (batch, sequence)).astype(np.int64)),
        mx.ones((batch, past + sequence), dtype=mx.int64),
        mx.array(np.tile(np.arange(past, past + sequence), (batch, 1)).astype(np.int64)),
    ]
    return arrays + carried_arrays(layout, batch, past, rng)


def carried_arrays(layout: list, batch: int, past: int, rng: np.random.Generator | None) -> list:
    """The keys, values ([batch, heads, past, width]) and states of ``layout``: standard
    normal values from ``rng``, or zeros (what the runtimes feed before the first token)."""

    def make(shape, dtype):
        if rng is None:
            return mx.zeros(shape, dtype)
        return mx.array(rng.standard_normal(shape).astype(np.float32)).astype(dtype)

    arrays = []
    for _, leaf in flat(stored_layout(layout)):
        if is_kv(leaf):
            arrays += [make((batch, leaf.heads, past, d), leaf.dtype) for d in (leaf.kdim, leaf.vdim)]
        else:
            arrays += [make((batch, *shape), dtype) for shape, dtype in zip(leaf.shapes, leaf.dtypes)]
    return arrays


def traced_decoder(exporter: Exporter, model, layout: list, mask_rank: int, arrays: list):
    """The package graph and the decoder function it was traced from. Where the padding
    mask given to recurrent layers keeps the traces from being one program (qwen3_next's
    scan applies it in every step but its last, which the loop recovery cannot carry), the
    layers run without it: the package then does not serve left-padded batches, which
    :func:`padding_reason` finds and the package records."""
    try:
        forward = decoder_function(model, layout, mask_rank)
        return exporter.to_ir(forward, *arrays), forward, True
    except DynamicShapeError:
        if not has_states(layout):
            raise
    forward = decoder_function(model, layout, mask_rank, state_masks=False)
    return exporter.to_ir(forward, *arrays), forward, False


def refuse_unlike_fresh_states(forward: Callable, model, layout: list, model_type: str) -> None:
    """Refuse a model whose state before the first token is not zeros: the package decoder
    with zero states against the model's forward with mlx-lm's own fresh cache, on a
    short prompt (the first tokens show it most)."""
    ids = mx.array(np.random.default_rng(2).integers(0, 2, (1, 3)).astype(np.int64))
    positions = mx.arange(3, dtype=mx.int64)[None]
    got = forward(ids, mx.ones_like(ids), positions, *carried_arrays(layout, 1, 0, None))[0][0]
    want = model(ids, cache=model.make_cache())[0]
    got, want = (np.array(a.astype(mx.float32)) for a in (got, want))
    error = np.abs(got - want).max(axis=-1)
    if (error > 1e-4 * max(1.0, float(np.abs(want).max()))).any():
        raise UnsupportedModelError(
            f"model_type {model_type!r}: its recurrent layers start without a state otherwise than from zero states "
            f"(a branch on an empty cache: recurrent_gemma's RG-LRU does not scale its first input), which the "
            f"package's zero initial states cannot say: logits {float(error.max()):.3g} off at position "
            f"{int(error.argmax())} of a 3-token prompt"
        )


def padding_reason(forward: Callable, layout: list, masked: bool = True) -> str | None:
    """Why the package cannot serve left-padded batches, or None: found by running the
    package decoder in MLX on a prompt alone and left-padded beside a longer one."""
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 2, 5).tolist(), rng.integers(0, 2, 3).tolist()]
    ids, mask, positions = (mx.array(a) for a in left_padded(prompts, pad=0))
    batched = forward(ids, mask, positions, *carried_arrays(layout, 2, 0, None))[0][1, -1]
    alone = forward(ids[1:, 2:], mask[1:, 2:], positions[1:, 2:], *carried_arrays(layout, 1, 0, None))[0][0, -1]
    batched, alone = (np.array(a.astype(mx.float32)) for a in (batched, alone))
    if np.abs(batched - alone).max() <= 1e-4 * max(1.0, float(np.abs(alone).max())):
        return None
    why = (
        "their scan does not mask it"
        if masked
        else "the mask their scan reads could not be exported with its loop, so the package runs it unmasked"
    )
    return (
        f"its recurrent layers read the padding of a left-padded row ({why}), so a prompt padded beside a "
        "longer one gets other logits than alone: give a batch prompts of one length, or one prompt at a time"
    )


def attention_mask_rank(model, layout: list) -> int:
    """4 when the model adds the mask to [batch, heads, N, total] scores, 5 when it scores
    [batch, kv_heads, group, N, total] (gemma2, phi3small): found by running the package
    decoder in MLX on a batch of 3, which no head count of 1 or 3 lines up by chance."""
    inputs = example_inputs(layout, batch=3)
    failures = []
    for rank in (4, 5):
        try:
            decoder_function(model, layout, rank)(*inputs)  # MLX checks shapes as it builds: nothing is computed
            return rank
        except ValueError as exc:
            if "Python scalars" in str(exc):
                raise UnsupportedModelError(
                    "the model reads its cache's offset as one Python number (np.arange(cache.offset, ...) in its "
                    "code), but each row of a package batch has its own offset (left padding): the package "
                    "export cannot serve this model"
                ) from exc
            failures.append(f"rank {rank}: {exc}")
    raise UnsupportedModelError(
        "no attention mask of the package fits every layer of this model (it adds one mask to scores of "
        f"different ranks, so a mask with a batch axis cannot line up with all of them): {'; '.join(failures)}"
    )
