"""Encoder-decoder speech models as the runtimes' graphs: the parts an architecture gives
(:class:`Seq2Seq`), each runtime's names (:class:`Names`), the graphs built from them, and
greedy decoding through the written graphs in onnxruntime (for the check).

transformers.js loads ``onnx/encoder_model.onnx`` (the features -> ``last_hidden_state``)
and ``onnx/decoder_model_merged.onnx``: ``input_ids`` int64 [batch_size,
decoder_sequence_length], ``encoder_hidden_states``, ``past_key_values.<i>.decoder.key``
/ ``.value`` [batch_size, heads, past, head width], ``past_key_values.<i>.encoder.key`` /
``.value`` and ``use_cache_branch`` (bool [1]) -> ``logits`` and the ``present.*`` of
each: at the first step (``use_cache_branch`` false) the cross-attention keys and values
are computed from ``encoder_hidden_states``, afterwards they are the past ones passed
through (:mod:`.branches`). onnxruntime-genai's whisper type loads ``encoder.onnx``,
whose outputs include each layer's cross keys and values, and ``decoder.onnx``, which
takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import mlx.core as mx
import numpy as np

from ..capture.dynamic import Dim


@dataclass(frozen=True)
class Seq2Seq:
    """What the graph builders need of one encoder-decoder model."""

    encode: Callable  # features -> encoder states
    cross: Callable  # states -> per layer: cross key, cross value [batch, heads, positions, head width]
    step: Callable  # (input_ids, per layer: self key, value, cross key, value) -> (logits, per layer self key, value)
    features: mx.array  # example encoder input, batch 2
    feature_axes: dict  # its dynamic axes
    states: mx.array  # example encoder states, batch 2
    layers: int
    heads: int  # key and value heads of the decoder's caches
    width: int  # their head width
    vocab: int
    positions: int | None  # the learned positions that bound past + new tokens (None: rotary, unbounded)
    dtype: mx.Dtype = mx.float32  # the caches' (the encoder states' and the keys' and values')


@dataclass(frozen=True)
class Names:
    """One runtime's names for the graphs' values (``{i}``: the decoder layer)."""

    features: str
    states: str
    self_past: tuple[str, str]  # past self-attention key, value
    self_present: tuple[str, str]
    cross: tuple[str, str]  # cross-attention key, value as the step reads them
    cross_past: tuple[str, str] | None = None  # where a merged decoder takes them after its first step

    def step(self, layers: int) -> tuple[list[str], list[str]]:
        """The step graph's inputs after input_ids and outputs after logits."""
        inputs = [n.format(i=i) for i in range(layers) for n in (*self.self_past, *self.cross)]
        return inputs, [n.format(i=i) for i in range(layers) for n in self.self_present]


def transformers_js_names(features: str) -> Names:
    return Names(
        features,
        "last_hidden_state",
        ("past_key_values.{i}.decoder.key", "past_key_values.{i}.decoder.value"),
        ("present.{i}.decoder.key", "present.{i}.decoder.value"),
        ("cross.{i}.key", "cross.{i}.value"),
        ("past_key_values.{i}.encoder.key", "past_key_values.{i}.encoder.value"),
    )


GENAI = Names(
    "audio_features",
    "hidden_states",
    ("past_key_self_{i}", "past_value_self_{i}"),
    ("present_key_self_{i}", "present_value_self_{i}"),
    ("past_key_cross_{i}", "past_value_cross_{i}"),
)
GENAI_CROSS_OUTPUTS = ("present_key_cross_{i}", "present_value_cross_{i}")


def _flat(names: tuple[str, str], layers: int) -> list[str]:
    return [n.format(i=i) for i in range(layers) for n in names]


def encoder_graph(
    parts: Seq2Seq,
    exporter,
    names: Names,
    cross_outputs: tuple[str, str] | None = None,
    features: mx.array | None = None,
):
    """features (``parts.features`` or, where the runtime feeds another dtype,
    ``features``) -> the encoder's states (and, with ``cross_outputs``, each layer's
    cross-attention keys and values)."""

    def encode_and_cross(features):
        states = parts.encode(features)
        return (states, *parts.cross(states))

    outputs = [names.states] + (_flat(cross_outputs, parts.layers) if cross_outputs else [])
    return exporter.with_options(
        input_names=[names.features], output_names=outputs, path=None, dynamic={"features": parts.feature_axes}
    ).to_ir(
        encode_and_cross if cross_outputs else (lambda features: parts.encode(features)),
        parts.features if features is None else features,
    )


def cross_graph(parts: Seq2Seq, exporter, names: Names):
    """encoder states -> each layer's cross-attention keys and values, named ``names.cross``."""

    def cross(encoder_hidden_states):
        return parts.cross(encoder_hidden_states)

    axes = {0: "batch_size", 1: "encoder_sequence_length"}
    return exporter.with_options(
        input_names=["encoder_hidden_states"],
        output_names=_flat(names.cross, parts.layers),
        path=None,
        dynamic={"encoder_hidden_states": axes},
    ).to_ir(cross, parts.states)


def step_graph(parts: Seq2Seq, exporter, names: Names):
    """The decoder step with the runtime's names: new tokens and past self keys and values
    of any length (within the learned positions, where the model has them)."""
    rng = np.random.default_rng(2)
    inputs, outputs = names.step(parts.layers)
    half = parts.positions // 2 if parts.positions else None
    new, before = Dim("decoder_sequence_length", max=half), Dim("past_decoder_sequence_length", max=half)
    arrays = [mx.array(rng.integers(0, parts.vocab, (2, 3)).astype(np.int64))]
    dynamic = {"input_ids": {0: "batch_size", 1: new}}
    for k in range(len(inputs)):
        own = k % 4 < 2
        length = 5 if own else parts.states.shape[1]
        arrays.append(mx.array(rng.standard_normal((2, parts.heads, length, parts.width)), dtype=parts.dtype))
        dynamic[f"past_{k}"] = {0: "batch_size", 2: before if own else "encoder_sequence_length"}

    def step(input_ids, *past):
        return parts.step(input_ids, *past)

    return exporter.with_options(
        input_names=["input_ids", *inputs], output_names=["logits", *outputs], path=None, dynamic=dynamic
    ).to_ir(step, *arrays)


def transformers_js_graphs(parts: Seq2Seq, exporter, features: str) -> dict:
    """{file: graph} of transformers.js's encoder and merged decoder."""
    from .branches import cached_or_computed

    names = transformers_js_names(features)
    past = {c.format(i=i): p.format(i=i) for i in range(parts.layers) for c, p in zip(names.cross, names.cross_past)}
    decoder = cached_or_computed(step_graph(parts, exporter, names), cross_graph(parts, exporter, names), past)
    return {"onnx/encoder_model.onnx": encoder_graph(parts, exporter, names), "onnx/decoder_model_merged.onnx": decoder}


def genai_graphs(parts: Seq2Seq, exporter) -> dict:
    """{file: graph} of onnxruntime-genai's whisper encoder and decoder. genai's processor
    gives the features in the encoder input's dtype and holds the states in that dtype:
    the features come in the caches' dtype."""
    features = parts.features.astype(parts.dtype)
    return {
        "encoder.onnx": encoder_graph(parts, exporter, GENAI, GENAI_CROSS_OUTPUTS, features),
        "decoder.onnx": step_graph(parts, exporter, GENAI),
    }


def package_greedy(
    package: Path,
    features: np.ndarray,
    prompt: list[int],
    new_tokens: int,
    eos: int,
    suppress: list[int] = (),
    suppress_first: list[int] = (),
    atol=None,
    rtol=None,
):
    """:func:`greedy` through the package's transformers.js graphs in plain onnxruntime
    sessions: (tokens, first logits, the decoder's PlainSession, which compares them)."""
    from ..io.graph_files import graph_path
    from ..verify.plain import plain_session

    encoder = plain_session(graph_path(package, "onnx/encoder_model.onnx"), atol, rtol)
    decoder = plain_session(graph_path(package, "onnx/decoder_model_merged.onnx"), atol, rtol)
    tokens, first = greedy(
        encoder.session, decoder.session, features, prompt, new_tokens, eos, suppress, suppress_first
    )
    return tokens, first, decoder


def greedy(
    encoder,
    decoder,
    features: np.ndarray,
    prompt: list[int],
    new_tokens: int,
    eos: int,
    suppress: list[int] = (),
    suppress_first: list[int] = (),
):
    """Greedy tokens of a package's transformers.js graphs (onnxruntime sessions) for one
    input ``features`` (batch 1), after ``prompt``, stopping after ``eos``; ``suppress``
    tokens never chosen, ``suppress_first`` not as the first: (tokens, first logits)."""
    feature_name = encoder.get_inputs()[0].name
    states = encoder.run(["last_hidden_state"], {feature_name: features[None]})[0]
    carried = [v for v in decoder.get_inputs() if v.name.startswith("past_key_values")]
    past = {
        v.name: np.zeros([1, v.shape[1], 0, v.shape[3]], np.float16 if v.type == "tensor(float16)" else np.float32)
        for v in carried
    }
    ids, tokens, first = prompt, [], None
    for step in range(new_tokens):
        feeds = {
            "input_ids": np.array([ids], np.int64),
            "encoder_hidden_states": states,
            "use_cache_branch": np.array([step > 0]),
            **past,
        }
        outputs = dict(zip([o.name for o in decoder.get_outputs()], decoder.run(None, feeds)))
        logits = outputs["logits"][0, -1].astype(np.float64)
        first = logits.copy() if first is None else first
        logits[list(suppress)] = -np.inf
        if step == 0:
            logits[list(suppress_first)] = -np.inf
        tokens.append(int(logits.argmax()))
        if tokens[-1] == eos:
            break
        for v in carried:  # the cross keys and values are computed once, at the first step
            if "decoder" in v.name or step == 0:
                past[v.name] = outputs[v.name.replace("past_key_values", "present", 1)]
        ids = tokens[-1:]
    return tokens, first


def check_clip(seed: int = 0, seconds: float = 2.0) -> np.ndarray:
    """The check's clip: float32 tones and noise at 16 kHz."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    audio = sum(np.sin(2 * np.pi * f * t) for f in rng.uniform(150, 1200, 4)) / 20 + 0.01 * rng.standard_normal(t.size)
    return audio.astype(np.float32)
