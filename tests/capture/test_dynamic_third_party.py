"""Dynamic dimensions on real third-party model code: each model is exported ONCE with
``Exporter(dynamic=...)`` and the one ONNX model is checked against MLX by the verifier at
every size listed (fresh random inputs at each). Where a model's own code fixes a size
(an assert on the frame count, a Python loop over the frames), the export must refuse with
a :class:`~mlx2onnx.DynamicShapeError` that names the input and the dimension.

Packages come from ``tests/third_party.txt`` (installed with ``--no-deps``); each test skips
when its package is missing. Random weights, tiny configs, nothing downloaded.
"""

from __future__ import annotations

import itertools

import mlx.core as mx
import numpy as np
import onnx
import pytest

from mlx2onnx import Dim, DynamicShapeError, Exporter, Verifier
from tests.capture.test_loops import loops_in
from tests.support.zoo import EMBEDDING_CONFIGS, EMBEDDING_VOCAB, embedding_encoder

pytestmark = pytest.mark.third_party

IMAGE = {0: "batch", 1: Dim("h", multiple_of=32), 2: Dim("w", multiple_of=32)}


def export_once(fun, *args, dynamic, **kwargs) -> onnx.ModelProto:
    proto = Exporter(dynamic=dynamic).export(fun, *args, **kwargs)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def dims(values) -> list[list]:
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values]


def grid(**sizes) -> list[dict[str, int]]:
    names = list(sizes)
    return [dict(zip(names, row)) for row in itertools.product(*sizes.values())]


def text(sizes: dict[str, int]) -> str:
    return " ".join(f"{s}={v}" for s, v in sizes.items())


def check_at_sizes(proto, fun, *args, sizes, **kwargs):
    """Verify ``proto`` against ``fun`` at every row of ``sizes`` and insist that each row
    really ran, every output passed and no MLX reference was NaN."""
    report = Verifier(sizes=sizes).verify(proto, fun, *args, **kwargs)
    assert report.passed, str(report)
    assert {o.at for o in report.outputs} == {text(s) for s in sizes}, str(report)
    assert len(report.outputs) == len(sizes) * len(proto.graph.output)
    assert not any(o.nan_in_reference for o in report.outputs), str(report)
    return report


def tokens(shape, vocab, seed=0) -> mx.array:
    """Token ids; the first two are 0 and ``vocab - 1`` because the verifier draws fresh
    integer inputs over the example's own value range."""
    ids = np.random.default_rng(seed).integers(0, vocab, shape).astype(np.int32)
    ids.flat[:2] = [0, vocab - 1]
    return mx.array(ids)


# -- mlx-lm: llama and qwen3 ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_mlx_lm_dynamic_batch_and_sequence(name):
    pytest.importorskip("mlx_lm")
    from tests.support.zoo import LM_VOCAB as VOCAB  # the tiny random configs of the static tests
    from tests.support.zoo import mlx_lm_model as build

    model = build(name)
    ids = tokens((2, 5), VOCAB)
    proto = export_once(model, ids, dynamic={"inputs": {0: "batch", 1: "seq"}})
    assert dims(proto.graph.input) == [["batch", "seq"]]
    assert dims(proto.graph.output) == [["batch", "seq", VOCAB]]
    sizes = grid(batch=[1, 3, 8], seq=[1, 7, 64]) + [{"batch": 2, "seq": 256}]
    report = check_at_sizes(proto, model, ids, sizes=sizes)
    assert max(o.max_abs_error for o in report.outputs) < 1e-4


# -- mlx-embeddings: BERT-style encoders with a dynamic attention mask ---------------------


# left out: on a fresh all-zero mask row EmbeddingGemma, Llama bidirectional and LFM2 give
# NaN in MLX itself (every key masked: no reference); their packages are traced at several
# sizes and checked in tests/packages/test_task_packages.py. Qwen3's package mask lets a
# query that sees no key see itself, so it stays here.
NAN_ON_EMPTY_MASKS = {"gemma3_text", "llama_bidirec", "lfm2"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(EMBEDDING_CONFIGS) - NAN_ON_EMPTY_MASKS))
def test_mlx_embeddings_dynamic_batch_sequence_and_mask(name):
    encode = embedding_encoder(name)  # ModernBERT gets its tokenizer's int mask as float32
    ids = tokens((2, 5), EMBEDDING_VOCAB)
    mask = mx.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=mx.int32)  # fresh masks are random 0/1
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    proto = export_once(encode, ids, attention_mask=mask, dynamic=dynamic)
    assert [i.name for i in proto.graph.input] == ["input_ids", "attention_mask"]
    assert dims(proto.graph.input) == [["batch", "seq"], ["batch", "seq"]]
    assert dims(proto.graph.output)[0] == ["batch", "seq", 32]
    check_at_sizes(proto, encode, ids, attention_mask=mask, sizes=grid(batch=[1, 3, 8], seq=[1, 7, 64, 256]))


# -- mlx-image: classifiers at any batch and any image size in steps of 32 -----------------
# Four runs cover batch 1 and 3, heights and widths 64, 96 and 128, both non-square ways:
# MLX's CPU convolutions take ~1-2 s per batch-3 128x128 ResNet-18 run here.
IMAGE_SIZES = [
    {"batch": 1, "h": 64, "w": 64},
    {"batch": 3, "h": 96, "w": 64},
    {"batch": 1, "h": 128, "w": 96},
    {"batch": 1, "h": 96, "w": 128},
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0"])
def test_mlxim_dynamic_batch_and_image_size(name):
    mlxim_model = pytest.importorskip("mlxim.model")
    from tests.support.zoo import randomised  # He-scaled weights, real BatchNorm statistics

    mx.random.seed(0)
    model = randomised(mlxim_model.create_model(name, weights=False, num_classes=10), seed=1)
    x = mx.random.normal((2, 64, 64, 3))
    proto = export_once(model, x, dynamic={"x": IMAGE})
    assert dims(proto.graph.input) == [["batch", "h", "w", 3]]
    assert dims(proto.graph.output) == [["batch", 10]]
    if name == "resnet18":  # the stem's max pool is fused at dynamic sizes as in a static export
        kinds = [n.op_type for n in proto.graph.node]
        assert kinds.count("MaxPool") == 2 and not {"Range", "Pad", "ReduceMax"} & set(kinds), kinds
        assert len(kinds) <= 72, len(kinds)  # 117 with MLX's Gather windows, 59 static
    check_at_sizes(proto, model, x, sizes=IMAGE_SIZES)


# -- mlx-whisper: the audio encoder -----------------------------------------------------------
def whisper_encoder():
    pytest.importorskip("tiktoken")
    whisper = pytest.importorskip("mlx_whisper.whisper")
    mx.random.seed(0)
    encoder = whisper.AudioEncoder(n_mels=16, n_ctx=8, n_state=32, n_head=4, n_layer=2, dtype=mx.float32)
    mx.eval(encoder.parameters())
    return encoder, mx.random.normal((2, 16, 16))  # (batch, frames, mels); stride 2 -> 8 = n_ctx


def test_whisper_audio_encoder_dynamic_batch():
    encoder, mel = whisper_encoder()
    proto = export_once(encoder, mel, dynamic={"x": {0: "batch"}})
    assert dims(proto.graph.input) == [["batch", 16, 16]]
    assert dims(proto.graph.output) == [["batch", 8, 32]]
    check_at_sizes(proto, encoder, mel, sizes=grid(batch=[1, 3, 8]))


def test_whisper_audio_encoder_frame_count_is_fixed_by_its_positional_embedding():
    """The encoder asserts that the conv output has exactly n_ctx frames (its sinusoidal
    positional embedding is a fixed (n_ctx, n_state) table), so frames cannot be dynamic."""
    encoder, mel = whisper_encoder()
    with pytest.raises(
        DynamicShapeError,
        match=r"dimension 1 \('frames'\) of input 'x' cannot be dynamic.*"
        r"AssertionError: incorrect audio shape",
    ):
        Exporter(dynamic={"x": {0: "batch", 1: "frames"}}).export(encoder, mel)


@pytest.mark.slow
def test_whisper_dynamic_batch_and_token_count():
    """The whole model: the text decoder slices its learned positional embedding and its
    causal mask to the token count, so tokens are dynamic up to n_text_ctx (16 here): a
    plain symbol is refused (the far trace is past the table), Dim(max=16) is not."""
    from tests.support.zoo import whisper_model

    model = whisper_model()
    mel, ids = mx.random.normal((2, 16, 16)), tokens((2, 4), 64)
    with pytest.raises(DynamicShapeError, match="'tokens'.*the function fails at"):
        Exporter(dynamic={"tokens": {1: "tokens"}}).export(model, mel, ids)
    proto = export_once(
        model, mel, ids, dynamic={"mel": {0: "batch"}, "tokens": {0: "batch", 1: Dim("tokens", max=16)}}
    )
    assert dims(proto.graph.input) == [["batch", 16, 16], ["batch", "tokens"]]
    assert dims(proto.graph.output) == [["batch", "tokens", 64]]
    check_at_sizes(proto, model, mel, ids, sizes=grid(batch=[1, 3], tokens=[1, 5, 16]))


# -- mlx-audio: codec decoders ------------------------------------------------------------------
def test_mlx_audio_dac_decoder_dynamic_length():
    """Conv1d / ConvTranspose1d upsampling by 2 and 2: audio is 4 samples per latent frame."""
    dac = pytest.importorskip("mlx_audio.codec.models.descript.dac")
    mx.random.seed(0)
    decoder = dac.Decoder(8, 16, [2, 2])
    mx.eval(decoder.parameters())
    z = mx.random.normal((2, 8, 8))
    proto = export_once(decoder, z, dynamic={"x": {0: "batch", 1: "frames"}})
    assert dims(proto.graph.input) == [["batch", "frames", 8]]
    assert dims(proto.graph.output) == [["batch", "4*frames", 1]]
    check_at_sizes(proto, decoder, z, sizes=grid(batch=[1, 3], frames=[1, 5, 64, 256]))


def encodec_decoder():
    from tests.support.zoo import encodec_decoder as build

    return build(causal=True), mx.random.normal((2, 6, 16))


def test_mlx_audio_encodec_decoder_dynamic_batch():
    decoder, z = encodec_decoder()
    proto = export_once(decoder, z, dynamic={"hidden_states": {0: "batch"}})
    assert dims(proto.graph.input) == [["batch", 6, 16]]
    check_at_sizes(proto, decoder, z, sizes=grid(batch=[1, 3, 8]))


def test_mlx_audio_encodec_lstm_over_frames_from_8_frames():
    """EnCodec's LSTM is a Python loop over the frames: recovered as one ONNX Loop, the
    decoder takes any number of frames from 7 up (at 6 and below MLX traces a shorter
    LSTM: a size the model treats specially, so the export declares where it starts)."""
    decoder, _ = encodec_decoder()
    z = mx.random.normal((2, 8, 16))
    proto = export_once(decoder, z, dynamic={"hidden_states": {0: "batch", 1: Dim("frames", min=7)}})
    assert len(loops_in(proto)) == 1
    check_at_sizes(proto, decoder, z, sizes=grid(batch=[1, 3], frames=[7, 8, 20, 64]))


@pytest.mark.slow
def test_mlx_audio_encodec_lstm_from_6_frames_is_refused_as_dynamic():
    """From a 6-frame example the loop is found, but the LSTM runs one step fewer at 6
    frames than the larger sizes predict: no one program, refused with the first difference."""
    decoder, z = encodec_decoder()
    with pytest.raises(
        DynamicShapeError,
        match=r"dimension 1 \('frames'\) of input 'hidden_states' cannot be "
        r"dynamic: the traced program changes with it.*records",
    ):
        Exporter(dynamic={"hidden_states": {0: "batch", 1: "frames"}}).export(decoder, z)
