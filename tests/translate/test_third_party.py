"""Real third-party MLX model code, not written for this project, with random weights:
each model is built from its package's own modules, exported with ``mlx2onnx.export`` and
checked against MLX with ``mlx2onnx.verify`` on fresh random inputs.

The packages are installed with ``pip install --no-deps -r tests/third_party.txt`` (their
declared dependencies pull torch); each test skips when its package is missing. Nothing is
downloaded: every model is built with random weights and small inputs.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

import mlx2onnx
from tests.support import zoo
from tests.support.zoo import IMAGE_MODELS, randomised

pytestmark = pytest.mark.third_party


def export_and_verify(model, *args, opset=None, tolerances=None, bound=None):
    """Export ``model``, verify it against MLX and return the proto and the worst absolute
    error, which must stay under ``bound`` times the output's largest magnitude (at least 1).
    Also checks that the model's output really depends on its inputs (random weights can
    leave a deep net's output dominated by biases): a second random input must move the
    output by ten times the verifier's tolerance, so a wrong layer could not pass unseen."""
    proto = mlx2onnx.Exporter(opset=opset).export(model, *args)
    verifier = mlx2onnx.Verifier(tolerances=tolerances)
    report = verifier.verify(proto, model, *args)
    assert report.passed, str(report)
    others = [
        mx.random.normal(a.shape).astype(a.dtype)
        if isinstance(a, mx.array) and mx.issubdtype(a.dtype, mx.floating)
        else a
        for a in args
    ]
    first, second = (np.array(_main_output(model(*a)).astype(mx.float32)) for a in (args, others))
    scale = max(1.0, float(np.abs(first).max()))
    worst = max(o.max_abs_error for o in report.outputs)
    if bound is not None:
        assert worst <= bound * scale, f"max abs error {worst} above {bound} x {scale}\n{report}"
    atol, rtol = verifier.tolerance(report.outputs[0].dtype)
    moved = np.abs(first - second).max()
    assert moved > 10 * (atol + rtol * scale), f"output barely depends on the input: moved {moved}"
    return proto, worst


def _main_output(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


# -- mlx-image (mlxim): image classifiers -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_mlxim_classifier(name):
    model = zoo.mlxim_classifier(name)
    x = mx.random.normal((1, 64, 64, 3))
    proto, _ = export_and_verify(model, x, bound=1e-5)
    ops = {n.op_type for n in proto.graph.node}
    assert "Conv" in ops


def test_mlxim_mobilenet_v3_opset17():
    mlxim_model = pytest.importorskip("mlxim.model")
    mx.random.seed(0)
    model = randomised(mlxim_model.create_model("mobilenet_v3_small", weights=False, num_classes=10), seed=2)
    export_and_verify(model, mx.random.normal((1, 64, 64, 3)), opset=17, bound=1e-5)


@pytest.mark.slow
def test_mlxim_mobilenet_v3_float16():
    """The whole model cast to float16, kept float16 in the graph (onnxruntime computes the
    ops it lacks float16 kernels for in float32 and rounds back, as MLX does), at a tighter
    tolerance than the float16 default so that the input-dependence check stays meaningful.
    Not tested here: with these random weights resnet18 and mobilenet_v2 amplify single
    rounding flips to 1-2 % of the output scale (MLX's own float16 run differs from its
    float32 run five times more than the export differs from MLX float16), and bfloat16
    models, carried as float32 by default, are not rounded to bfloat16 after every layer as
    in MLX, so they drift by ~1 % of the output scale."""
    mlxim_model = pytest.importorskip("mlxim.model")
    mx.random.seed(0)
    model = randomised(mlxim_model.create_model("mobilenet_v3_small", weights=False, num_classes=10), seed=1)
    model.set_dtype(mx.float16)
    export_and_verify(model, mx.random.normal((1, 64, 64, 3)).astype(mx.float16), tolerances={"float16": (5e-3, 1e-2)})


@pytest.mark.parametrize("name", ["swin", "swin_v2", "vit"])
def test_mlxim_vision_transformer(name):
    """mlxim's own Swin (shifted windows: roll, window partition, relative position bias),
    Swin V2 (cosine attention, log-spaced continuous position bias MLP) and ViT classes,
    at a tiny width on 32x32 images."""
    model = zoo.tiny_vision_transformer(name)
    export_and_verify(model, mx.random.normal((1, 32, 32, 3)), bound=1e-5)


# -- mlx-whisper: the audio encoder (Conv1d + GELU stem, attention blocks) ----------------
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16], ids=["float32", "float16"])
def test_whisper_audio_encoder(dtype):
    encoder = zoo.whisper_audio_encoder(dtype)
    mel = mx.random.normal((1, 16, 16)).astype(dtype)  # (batch, frames, mels); conv stride 2 -> 8 = n_ctx
    export_and_verify(encoder, mel, bound=1e-5 if dtype == mx.float32 else 2e-2)


def test_whisper_encoder_decoder():
    """The whole Whisper model: audio encoder, then the text decoder (token and learned
    position embeddings, causal self-attention, cross-attention on the audio, tied output
    projection). Token ids are an int32 input; verify draws them within the example's range."""
    model = zoo.whisper_model()
    mel, tokens = mx.random.normal((1, 16, 16)), mx.array([[0, 17, 42, 63]], dtype=mx.int32)
    proto, _ = export_and_verify(model, mel, tokens, bound=1e-5)
    assert "Gather" in {n.op_type for n in proto.graph.node}


# -- mflux: FLUX.2 VAE decoder and the Depth Pro feature-fusion block ---------------------


def test_mflux_flux2_vae_decoder_float32(monkeypatch):
    """Latents (1, 4, 8, 8) -> image (1, 3, 16, 16): GroupNorm + SiLU, conv, a mid-block
    single-head attention and nearest 2x upsampling (broadcast + reshape)."""
    decoder = zoo.flux2_decoder()
    from mflux.models.common.config.model_config import ModelConfig

    monkeypatch.setattr(ModelConfig, "precision", mx.float32)
    export_and_verify(decoder, mx.random.normal((1, 4, 8, 8)), bound=1e-4)


def test_mflux_flux2_vae_decoder_bfloat16_activations(monkeypatch):
    """mflux's default: GroupNorm in float32, activations rounded to bfloat16 between layers
    while the weights stay float32, so the output is float32. MLX's bfloat16 sigmoid (inside
    SiLU) differs from a correctly rounded one by one bfloat16 ulp on about 1 in 8 values;
    ~15 layers of random weights amplify those flips to ~1e-2 on outputs of order 1, so the
    bound is set from bfloat16 precision, not float32's."""
    decoder = zoo.flux2_decoder()
    from mflux.models.common.config.model_config import ModelConfig

    monkeypatch.setattr(ModelConfig, "precision", mx.bfloat16)
    export_and_verify(decoder, mx.random.normal((1, 4, 8, 8)), tolerances={"float32": (5e-2, 2e-2)}, bound=5e-2)


@pytest.mark.parametrize("opset", [None, 17], ids=["default", "opset17"])
def test_mflux_depth_pro_feature_fusion_deconv(opset):
    """Two residual conv blocks, then ConvTranspose2d (kernel 2, stride 2) and a 1x1 conv."""
    block = zoo.depth_pro_fusion()
    x0, x1 = mx.random.normal((1, 8, 6, 6)), mx.random.normal((1, 8, 6, 6))
    proto, _ = export_and_verify(block, x0, x1, opset=opset, bound=1e-5)
    assert "ConvTranspose" in {n.op_type for n in proto.graph.node}


# -- mlx-audio: the Descript audio codec decoder ------------------------------------------
@pytest.mark.parametrize("opset", [None, 17], ids=["default", "opset17"])
def test_mlx_audio_dac_decoder(opset):
    """Weight-normed Conv1d / ConvTranspose1d upsampling (rates 2, 2), Snake activations,
    dilated residual units, tanh: latents (1, 8 frames, 8) -> audio (1, 32, 1)."""
    decoder = zoo.dac_decoder()
    proto, _ = export_and_verify(decoder, mx.random.normal((1, 8, 8)), opset=opset, bound=1e-5)
    assert "ConvTranspose" in {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "centred"])
def test_mlx_audio_encodec_decoder(causal):
    """EnCodec's SEANet decoder: reflect-padded Conv1d, an LSTM unrolled over the frames,
    ELU, ConvTranspose1d upsampling (ratios 2, 2) trimmed causally or centred, residual
    blocks."""
    decoder = zoo.encodec_decoder(causal)
    proto, _ = export_and_verify(decoder, mx.random.normal((1, 6, 16)), bound=1e-5)
    assert "ConvTranspose" in {n.op_type for n in proto.graph.node}


# -- mlx-diffuser: a latent-diffusion UNet --------------------------------------------------
@pytest.mark.parametrize("opset", [None, 17], ids=["default", "opset17"])
def test_mlx_diffuser_unet2d_cross_attention(opset):
    """UNet2D with two levels: sinusoidal timestep embedding + MLP, GroupNorm + SiLU ResNet
    blocks, strided-conv downsampling, spatial self- and cross-attention on a text context,
    nearest Upsample and concatenated skips. The timestep is a graph input."""
    unet = zoo.unet2d()
    latents, timestep, context = mx.random.normal((1, 8, 8, 4)), mx.array([300.0]), mx.random.normal((1, 5, 8))
    proto, _ = export_and_verify(unet, latents, timestep, context, opset=opset, bound=1e-5)
    assert len(proto.graph.input) == 3


def test_mlx_audio_vocos_backbone_and_istft_head():
    """Vocos vocoder: ConvNeXt-1D backbone (depthwise Conv1d, LayerNorm, GELU) and its
    ISTFT head (exp magnitude, cos/sin phase, complex spectrum, inverse STFT with a Hann
    window and overlap-add): features (1, 10 frames, 8) -> waveform (36,)."""
    vocoder = zoo.vocoder()
    export_and_verify(vocoder, mx.random.normal((1, 10, 8)), bound=1e-5)


def test_mlx_audio_parakeet_conformer_encoder():
    """Parakeet's FastConformer encoder: depthwise-striding Conv2d subsampling (x4) of the
    mel frames with length bookkeeping, relative-position multi-head attention, the
    conformer conv module (pointwise Conv1d + GLU, depthwise Conv1d, BatchNorm, SiLU) and
    macaron feed-forwards, with a padding mask built from the per-utterance lengths, which
    are a graph input (verify draws new lengths within the example's range)."""
    encoder = zoo.parakeet_conformer()
    mel, lengths = mx.random.normal((2, 32, 16)), mx.array([20, 32])
    proto, _ = export_and_verify(encoder, mel, lengths, bound=1e-5)
    assert len(proto.graph.input) == 2
