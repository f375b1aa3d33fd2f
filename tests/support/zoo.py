"""The models of the consumer matrix: the bundled reference models and real third-party
MLX model code (random weights, tiny configs, nothing downloaded), each as a builder
returning ``(model, args, kwargs)``. A builder raises ``pytest.skip`` when its package is
not installed (``pip install --no-deps -r tests/third_party.txt``).

``tests/runtimes/test_runtimes.py`` exports each with default options and runs it in every
runtime; ``python -m scripts.generate_docs runtimes.md`` writes the same matrix to ``docs/runtimes.md``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from mlx2onnx.models import example as reference_example


def randomised(model, seed):
    """Random weights at He scale (so a deep net's signal neither dies nor explodes),
    BatchNorm/LayerNorm scales near one, small biases, non-trivial BatchNorm statistics,
    eval mode."""
    rng = np.random.default_rng(seed)
    params = []
    for path, value in tree_flatten(model.parameters()):
        if not mx.issubdtype(value.dtype, mx.floating):
            continue  # index tables stored as arrays (Swin's relative_position_index)
        if value.ndim > 1:
            drawn = rng.standard_normal(value.shape) * math.sqrt(2.0 / math.prod(value.shape[1:]))
        elif path.endswith("weight"):
            drawn = rng.uniform(0.9, 1.3, value.shape)
        else:
            drawn = rng.standard_normal(value.shape) * 0.1
        params.append((path, mx.array(drawn.astype(np.float32))))
    model.update(tree_unflatten(params))
    for module in model.modules():
        if isinstance(module, nn.BatchNorm) and "running_mean" in module:
            module.running_mean = mx.array(rng.standard_normal(module.running_mean.shape).astype(np.float32) * 0.1)
            module.running_var = mx.array(rng.uniform(0.5, 2.0, module.running_var.shape).astype(np.float32))
    model.eval()
    mx.eval(model.parameters(), model.state)
    return model


# -- mlx-image --------------------------------------------------------------------------
IMAGE_MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf"]


def mlxim_classifier(name, seed=1):
    mlxim_model = pytest.importorskip("mlxim.model")
    mx.random.seed(0)
    return randomised(mlxim_model.create_model(name, weights=False, num_classes=10), seed=seed)


def tiny_vision_transformer(name):
    swin = pytest.importorskip("mlxim.model.swin_transformer.swin_transformer")
    vit = pytest.importorskip("mlxim.model.vit.vit")
    common = dict(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10)
    mx.random.seed(0)
    if name == "swin":
        model = swin.SwinTransformer(**common)
    elif name == "swin_v2":
        model = swin.SwinTransformer(**common, block=swin.SwinTransformerBlockV2, downsample_layer=swin.PatchMergingV2)
    else:
        model = vit.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32, num_classes=10
        )
    return randomised(model, seed=3)


# -- mlx-whisper --------------------------------------------------------------------------
def whisper_audio_encoder(dtype=mx.float32):
    pytest.importorskip("tiktoken")
    whisper = pytest.importorskip("mlx_whisper.whisper")
    mx.random.seed(0)
    encoder = whisper.AudioEncoder(n_mels=16, n_ctx=8, n_state=32, n_head=4, n_layer=2, dtype=dtype)
    encoder.update(tree_map(lambda p: p.astype(dtype), encoder.parameters()))
    mx.eval(encoder.parameters())
    return encoder


def whisper_model():
    """A small whole Whisper model (16 mels, 8 audio positions, vocab 64, 16 text positions)."""
    pytest.importorskip("tiktoken")
    whisper = pytest.importorskip("mlx_whisper.whisper")
    dims = whisper.ModelDimensions(
        n_mels=16,
        n_audio_ctx=8,
        n_audio_state=32,
        n_audio_head=4,
        n_audio_layer=2,
        n_vocab=64,
        n_text_ctx=16,
        n_text_state=32,
        n_text_head=4,
        n_text_layer=2,
    )
    mx.random.seed(0)
    model = whisper.Whisper(dims, dtype=mx.float32)
    mx.eval(model.parameters())
    return model


# -- mflux ---------------------------------------------------------------------------------
def flux2_decoder():
    decoder_module = pytest.importorskip("mflux.models.flux2.model.flux2_vae.decoder.decoder")
    mx.random.seed(0)
    decoder = decoder_module.Flux2Decoder(
        in_channels=4, block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8
    )
    mx.eval(decoder.parameters())
    return decoder


@contextlib.contextmanager
def flux_precision(dtype):
    """mflux reads its activation precision from ``ModelConfig.precision`` at call time."""
    from mflux.models.common.config.model_config import ModelConfig

    saved = ModelConfig.precision
    ModelConfig.precision = dtype
    try:
        yield
    finally:
        ModelConfig.precision = saved


class AtPrecision(nn.Module):
    """``model`` run with mflux's activation precision set to ``dtype``."""

    def __init__(self, model, dtype):
        super().__init__()
        self.model = model
        self._dtype = dtype

    def __call__(self, *args):
        with flux_precision(self._dtype):
            return self.model(*args)


def depth_pro_fusion():
    block_module = pytest.importorskip("mflux.models.depth_pro.model.decoder.feature_fusion_block_2d")
    mx.random.seed(0)
    block = block_module.FeatureFusionBlock2d(8, deconv=True)
    mx.eval(block.parameters())
    return block


# -- mlx-audio ---------------------------------------------------------------------------------
def dac_decoder():
    dac = pytest.importorskip("mlx_audio.codec.models.descript.dac")
    mx.random.seed(0)
    decoder = dac.Decoder(8, 16, [2, 2])
    mx.eval(decoder.parameters())
    return decoder


def encodec_decoder(causal: bool):
    """EnCodec's SEANet decoder (4 filters, hidden 16, ratios 2, 2, one LSTM layer). Its
    LSTM weights start at zero, so every parameter is drawn at random."""
    encodec = pytest.importorskip("mlx_audio.codec.models.encodec.encodec")
    config = encodec.EncodecConfig(
        num_filters=4,
        hidden_size=16,
        upsampling_ratios=[2, 2],
        num_lstm_layers=1,
        use_causal_conv=causal,
        pad_mode="reflect",
    )
    mx.random.seed(0)
    decoder = encodec.EncodecDecoder(config)
    decoder.update(tree_map(lambda p: mx.random.normal(p.shape) * 0.3, decoder.parameters()))
    mx.eval(decoder.parameters())
    return decoder


def vocoder():
    """Vocos: ConvNeXt-1D backbone and its ISTFT head (inverse real DFT, overlap-add)."""
    vocos = pytest.importorskip("mlx_audio.codec.models.vocos.vocos")

    class Vocoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = vocos.VocosBackbone(input_channels=8, dim=16, intermediate_dim=32, num_layers=2)
            self.head = vocos.ISTFTHead(dim=16, n_fft=16, hop_length=4)

        def __call__(self, features):
            return self.head(self.backbone(features))

    mx.random.seed(0)
    model = Vocoder()
    mx.eval(model.parameters())
    return model


def parakeet_conformer():
    conformer = pytest.importorskip("mlx_audio.stt.models.parakeet.conformer")
    args = conformer.ConformerArgs(
        feat_in=16,
        n_layers=2,
        d_model=32,
        n_heads=4,
        ff_expansion_factor=2,
        subsampling_factor=4,
        self_attention_model="rel_pos",
        subsampling="dw_striding",
        conv_kernel_size=9,
        subsampling_conv_channels=8,
        pos_emb_max_len=64,
        mask_padding=True,
    )
    mx.random.seed(0)
    return randomised(conformer.Conformer(args), seed=4)


# -- mlx-diffuser ---------------------------------------------------------------------------
def unet2d():
    module = pytest.importorskip("mlx_diffuser.models.unet2d")
    config = module.UNet2DConfig(
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        num_heads=2,
        norm_groups=4,
        cross_attention_dim=8,
    )
    mx.random.seed(0)
    unet = module.UNet2D(config)
    mx.eval(unet.parameters())
    return unet


# -- mlx-embeddings ----------------------------------------------------------------------------
EMBEDDING_VOCAB = 128
TINY_TOWER = dict(
    hidden_size=32, intermediate_size=64, num_attention_heads=4, num_hidden_layers=2
)  # a vision or text tower
_DECODER_EMBEDDING = dict(  # the sizes the decoder embedding models share
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    hidden_size=32,
    intermediate_size=64,
    vocab_size=EMBEDDING_VOCAB,
)
EMBEDDING_CONFIGS = {
    "bert": dict(
        model_type="bert",
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=512,
        vocab_size=EMBEDDING_VOCAB,
    ),
    # position ids are a cumsum over the non-padding tokens (pad id 1 is among the random ids),
    # so up to seq + 2 positions are read
    "xlm_roberta": dict(
        model_type="xlm-roberta",
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=514,
        vocab_size=EMBEDDING_VOCAB,
    ),
    # layers 0 and 2 attend globally, layer 1 within a window of 4 on each side, with RoPE,
    # a GLU MLP and the masked-LM head
    "modernbert": dict(
        model_type="modernbert",
        num_hidden_layers=3,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=48,
        vocab_size=EMBEDDING_VOCAB,
        local_attention=8,
        global_attn_every_n_layers=2,
    ),
    # decoder embedding models: Qwen3-Embedding (causal, last token), EmbeddingGemma
    # (bidirectional, mean then two dense layers; layer 0 in a window of 4), Llama
    # bidirectional (mean), LFM2's late-interaction model (causal, convolutions, one
    # vector a token)
    "qwen3": dict(_DECODER_EMBEDDING, model_type="qwen3", head_dim=8, architectures=["Qwen3ForCausalLM"]),
    "gemma3_text": dict(
        _DECODER_EMBEDDING,
        model_type="gemma3_text",
        head_dim=8,
        sliding_window=4,
        sliding_window_pattern=2,
        query_pre_attn_scalar=8,
        architectures=["Gemma3TextModel"],
    ),
    "llama_bidirec": dict(
        _DECODER_EMBEDDING,
        model_type="llama_bidirec",
        rms_norm_eps=1e-5,
        architectures=["LlamaBidirectionalModel"],
    ),
    "lfm2": dict(
        _DECODER_EMBEDDING,
        model_type="lfm2",
        num_hidden_layers=3,
        max_position_embeddings=512,
        norm_eps=1e-5,
        conv_bias=False,
        conv_L_cache=3,
        block_dim=32,
        block_ff_dim=64,
        block_multiple_of=16,
        block_ffn_dim_multiplier=1.0,
        block_auto_adjust_ff_dim=False,
        full_attn_idxs=[1],
        rope_theta=1e6,
        out_features=16,
        architectures=["Lfm2Model"],
    ),
}
DECODER_EMBEDDINGS = ("qwen3", "gemma3_text", "llama_bidirec", "lfm2")


def embedding_models(name: str):
    """``mlx_embeddings.models.<name>`` without running ``mlx_embeddings/__init__.py``: that
    imports ``.utils``, which imports mlx-vlm (and through it torch-sized dependencies) that
    the model files never use. The models folder is loaded as a package of its own from its
    file path; its ``__init__.py`` is empty and the model files import only mlx and
    ``.base``."""
    spec = importlib.util.find_spec("mlx_embeddings")
    if spec is None or spec.origin is None:
        pytest.skip("mlx-embeddings is not installed")
    folder = Path(spec.origin).parent / "models"
    package = "_mlx_embeddings_models"
    if package not in sys.modules:
        pspec = importlib.util.spec_from_file_location(
            package, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        module = importlib.util.module_from_spec(pspec)
        sys.modules[package] = module
        pspec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{name}")


def embedding_encoder(name: str):
    """An mlx-embeddings model as a function of token ids and an int attention mask,
    returning the outputs it gives (a decoder embedding gives no ``pooler_output``)."""
    module = embedding_models(name)
    mx.random.seed(0)
    model = module.Model(module.ModelArgs.from_dict(EMBEDDING_CONFIGS[name]))
    model.eval()
    mx.eval(model.parameters())

    if name in DECODER_EMBEDDINGS:  # what the package computes: Qwen3's own pooling branches on the mask's values
        from mlx2onnx.tasks import EMBEDDINGS
        from mlx2onnx.tasks.kinds import spec_of

        encoder = spec_of(EMBEDDINGS, EMBEDDING_CONFIGS[name])
        return lambda input_ids, attention_mask: dict(
            zip(encoder.output_names, _as_tuple(encoder.outputs(model, input_ids, attention_mask)))
        )

    def encode(input_ids, attention_mask):
        # ModernBERT builds its additive masks in the mask's own dtype, so it gets float32
        mask = attention_mask.astype(mx.float32) if name == "modernbert" else attention_mask
        out = model(input_ids, attention_mask=mask)
        given = {"last_hidden_state": out.last_hidden_state, "text_embeds": out.text_embeds}
        return given if out.pooler_output is None else dict(given, pooler_output=out.pooler_output)

    return encode


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


# -- mlx-lm ------------------------------------------------------------------------------------
LM_VOCAB = 256
LM_COMMON = dict(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=LM_VOCAB,
)
LM_CONFIGS = {
    "llama": dict(model_type="llama", rms_norm_eps=1e-5, **LM_COMMON),
    "qwen3": dict(
        model_type="qwen3",
        rms_norm_eps=1e-6,
        head_dim=16,
        max_position_embeddings=512,
        rope_theta=1e6,
        tie_word_embeddings=True,
        **LM_COMMON,
    ),
    "mixtral": dict(model_type="mixtral", rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2, **LM_COMMON),
    "gemma3_text": dict(
        model_type="gemma3_text",
        head_dim=16,
        rms_norm_eps=1e-6,
        sliding_window=4,
        sliding_window_pattern=2,
        **LM_COMMON,
    ),
    "phi3": dict(model_type="phi3", rms_norm_eps=1e-5, **LM_COMMON),
}


def mlx_lm_model(name: str, seed: int = 0) -> nn.Module:
    return _mlx_lm(LM_CONFIGS[name], seed)


def _mlx_lm(config: dict, seed: int) -> nn.Module:
    """mlx-lm's model of ``config["model_type"]`` with the seed's random weights."""
    pytest.importorskip("mlx_lm")
    module = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    return model


def lm_tokens(shape, seed=0):
    return mx.array(np.random.default_rng(seed).integers(0, LM_VOCAB, shape).astype(np.int32))


def quantized(model, bits=4, group_size=64):
    nn.quantize(model, group_size=group_size, bits=bits)
    mx.eval(model.parameters())
    return model


def in_dtype(model, dtype):
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    return model


def _normal(*shape):
    return mx.random.normal(shape)


# name -> builder of (model, args, kwargs), in the order the matrix lists them
MATRIX = {
    "mlp (bundled)": lambda: reference_example("mlp"),
    "encoder (bundled)": lambda: reference_example("encoder"),
    "llama (bundled)": lambda: reference_example("llama"),
    **{f"mlx-image {n}": (lambda n=n: (mlxim_classifier(n), (_normal(1, 64, 64, 3),), {})) for n in IMAGE_MODELS},
    **{
        f"mlx-image {n}": (lambda n=n: (tiny_vision_transformer(n), (_normal(1, 32, 32, 3),), {}))
        for n in ("swin", "swin_v2", "vit")
    },
    "mlx-whisper audio encoder": lambda: (whisper_audio_encoder(), (_normal(1, 16, 16),), {}),
    "mlx-whisper encoder-decoder": lambda: (
        whisper_model(),
        (_normal(1, 16, 16), mx.array([[0, 17, 42, 63]], mx.int32)),
        {},
    ),
    "mflux FLUX.2 VAE decoder": lambda: (AtPrecision(flux2_decoder(), mx.float32), (_normal(1, 4, 8, 8),), {}),
    "mflux FLUX.2 VAE decoder, bfloat16 activations": lambda: (
        AtPrecision(flux2_decoder(), mx.bfloat16),
        (_normal(1, 4, 8, 8),),
        {},
    ),
    "mflux Depth Pro fusion": lambda: (depth_pro_fusion(), (_normal(1, 8, 6, 6), _normal(1, 8, 6, 6)), {}),
    "mlx-audio DAC decoder": lambda: (dac_decoder(), (_normal(1, 8, 8),), {}),
    "mlx-audio EnCodec decoder": lambda: (encodec_decoder(True), (_normal(1, 6, 16),), {}),
    "mlx-audio Vocos": lambda: (vocoder(), (_normal(1, 10, 8),), {}),
    "mlx-audio Parakeet conformer": lambda: (parakeet_conformer(), (_normal(2, 32, 16), mx.array([20, 32])), {}),
    "mlx-diffuser UNet2D": lambda: (unet2d(), (_normal(1, 8, 8, 4), mx.array([300.0]), _normal(1, 5, 8)), {}),
    **{
        f"mlx-embeddings {n}": (
            lambda n=n: (
                embedding_encoder(n),
                (lm_tokens((2, 5)) % EMBEDDING_VOCAB,),
                {"attention_mask": mx.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], mx.int32)},
            )
        )
        for n in EMBEDDING_CONFIGS
    },
    "mlx-vlm DINOv2": lambda: (dinov2_encoder(), (_normal(2, 3, 32, 32),), {}),
    "mlx-embeddings siglip": lambda: (
        siglip_outputs(),
        (lm_tokens((3, SIGLIP_CONFIG["text_config"]["max_position_embeddings"])) % EMBEDDING_VOCAB,),
        {"pixel_values": _normal(2, 3, 32, 32)},
    ),
    **{f"mlx-lm {n}": (lambda n=n: (mlx_lm_model(n), (lm_tokens((2, 7)),), {})) for n in LM_CONFIGS},
    "mlx-lm llama 4-bit": lambda: (quantized(mlx_lm_model("llama")), (lm_tokens((1, 7)),), {}),
    # the experts (GatherQMM) unpacked from their bytes: OpenVINO misread the uint32 words
    "mlx-lm mixtral 4-bit": lambda: (quantized(mlx_lm_model("mixtral")), (lm_tokens((1, 7)),), {}),
    "mlx-lm qwen3 bfloat16": lambda: (in_dtype(mlx_lm_model("qwen3"), mx.bfloat16), (lm_tokens((1, 7)),), {}),
}


# -- mlx-lm model folders (for the package export) ----------------------------------------
PACKAGE_TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world from mlx to onnx",
    "a small tokenizer for tests",
]
MAMBA_CONFIG = dict(
    model_type="mamba",
    vocab_size=LM_VOCAB,
    hidden_size=32,
    intermediate_size=64,
    state_size=4,
    num_hidden_layers=2,
    conv_kernel=4,
    use_bias=False,
    use_conv_bias=True,
    time_step_rank=4,
    tie_word_embeddings=True,
)


def byte_level_bpe(folder, specials: list[str]):
    """A byte-level BPE tokenizer trained on PACKAGE_TEXTS with ``specials`` first, saved
    as tokenizer.json in ``folder`` (the tokenizers library's object)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        PACKAGE_TEXTS * 20,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tokenizer.save(str(Path(folder) / "tokenizer.json"))
    return tokenizer


def train_tokenizer(folder):
    """A byte-level BPE tokenizer trained on PACKAGE_TEXTS, saved as tokenizer.json and
    tokenizer_config.json in ``folder``; returns its vocabulary size."""
    tokenizer = byte_level_bpe(folder, ["<unk>", "<s>", "</s>"])
    (Path(folder) / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 512,
                "add_bos_token": False,
            }
        )
    )
    return tokenizer.get_vocab_size()


def as_variant(
    model,
    settings: dict,
    dtype=None,
    bits: int | None = None,
    group_size: int = 32,
    predicate=None,
    record_dtype: bool = True,
) -> None:
    """The folder's variant of ``model``, as the MLX packages' converters make it: cast to
    ``dtype`` (named in ``settings`` as ``torch_dtype`` where the package's config takes
    it), or quantized to ``bits`` (``settings["quantization"]``, which their loaders read);
    then evaluated."""
    if dtype is not None:
        model.set_dtype(dtype)
        if record_dtype:
            settings["torch_dtype"] = str(dtype).rsplit(".", 1)[-1]
    if bits:
        nn.quantize(model, group_size=group_size, bits=bits, class_predicate=predicate)
        settings["quantization"] = {"group_size": group_size, "bits": bits}
    mx.eval(model.parameters())


def write_model_folder(
    folder,
    name: str,
    bits: int | None = None,
    group_size: int = 64,
    seed: int = 0,
    config: dict | None = None,
    dtype=None,
):
    """An mlx-lm model folder as people hold them: config.json (``quantization`` when
    ``bits``), model.safetensors, generation_config.json and a trained tokenizer. The
    weights are drawn wider than mlx-lm's initialisation (std 0.5) so that greedy
    decoding does not settle on one token and a wrong token shows."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = train_tokenizer(folder)
    settings = dict(
        config or LM_CONFIGS[name], vocab_size=vocab, bos_token_id=1, eos_token_id=2, max_position_embeddings=512
    )
    if "text_config" in settings:  # a vision-language folder: the text model's settings are nested
        settings["text_config"] = dict(settings["text_config"], vocab_size=vocab)
    module = importlib.import_module(f"mlx_lm.models.{settings['model_type']}")
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(settings))
    model.update(
        tree_map(
            lambda a: mx.random.normal(a.shape) * 0.5 if a.ndim > 1 else 1 + 0.1 * mx.random.normal(a.shape),
            model.parameters(),
        )
    )
    as_variant(model, settings, dtype, bits, group_size)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(settings))
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    return folder


# -- mlx-lm mixture-of-experts architectures (tiny configs) --------------------------------
MOE_ARCHITECTURES = ("mixtral", "qwen3_moe", "olmoe", "granitemoe", "gpt_oss", "deepseek_v3", "phimoe")
_MOE_FIELDS = dict(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=LM_VOCAB,
    rms_norm_eps=1e-5,
    head_dim=16,
    max_position_embeddings=512,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    num_experts=4,
    num_local_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    decoder_sparse_step=1,
    norm_topk_prob=True,
    mlp_only_layers=[],
    n_routed_experts=4,
    n_shared_experts=1,
    first_k_dense_replace=0,
    moe_layer_freq=1,
    kv_lora_rank=16,
    q_lora_rank=None,
    qk_rope_head_dim=8,
    qk_nope_head_dim=8,
    v_head_dim=16,
    n_group=1,
    topk_group=1,
    routed_scaling_factor=1.0,
    topk_method="noaux_tc",
    scoring_func="sigmoid",
    sliding_window=128,
    layer_types=None,
    embedding_multiplier=1.0,
    attention_multiplier=1.0,
    logits_scaling=1.0,
    residual_multiplier=1.0,
    attention_bias=False,
    rope_scaling=None,
)


_OTHER_FIELDS = dict(
    n_embd=64,
    n_layer=2,
    n_head=4,
    n_inner=128,
    n_positions=512,
    layer_norm_epsilon=1e-5,
    multi_query=True,
    attention_window_size=4,
    block_types=["recurrent", "attention"],
    conv1d_width=4,
    embeddings_scale_by_sqrt_dim=True,
    final_w_init_variance_scale=1.0,
    lru_width=64,
    logits_soft_cap=30.0,
    rnn_num_heads=4,
    partial_rotary_factor=0.5,
)


def moe_model(name: str, seed: int = 0) -> nn.Module:
    """mlx-lm's ``name`` (a mixture of experts: 4 experts, 2 per token; or gpt_bigcode,
    recurrent_gemma) with the fields of its ModelArgs from one small table."""
    import dataclasses

    pytest.importorskip("mlx_lm")
    module = importlib.import_module(f"mlx_lm.models.{name}")
    fields = {f.name for f in dataclasses.fields(module.ModelArgs)}
    config = {k: v for k, v in {**_MOE_FIELDS, **_OTHER_FIELDS}.items() if k in fields}
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict({**config, "model_type": name}))
    mx.eval(model.parameters())
    return model


# -- mlx-lm architectures that loop over the sequence in Python (tiny configs) ---------------
RECURRENT_CONFIGS = {
    "mamba": MAMBA_CONFIG,
    "rwkv7": dict(
        model_type="rwkv7",
        vocab_size=LM_VOCAB,
        hidden_size=32,
        intermediate_size=64,
        norm_eps=1e-5,
        head_dim=8,
        num_hidden_layers=2,
        a_low_rank_dim=8,
        v_low_rank_dim=8,
        gate_low_rank_dim=8,
        decay_low_rank_dim=8,
        tie_word_embeddings=False,
    ),
    "jamba": dict(
        model_type="jamba",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_offset=1,
        attn_layer_period=2,
        expert_layer_offset=1,
        expert_layer_period=2,
        mamba_d_conv=4,
        mamba_d_state=8,
        mamba_expand=2,
        num_experts=4,
        num_experts_per_tok=2,
        rms_norm_eps=1e-5,
        max_position_embeddings=512,
        vocab_size=LM_VOCAB,
    ),
    "qwen3_next": dict(
        model_type="qwen3_next",
        hidden_size=64,
        num_hidden_layers=4,
        intermediate_size=128,
        num_attention_heads=4,
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        shared_expert_intermediate_size=32,
        mlp_only_layers=[],
        moe_intermediate_size=32,
        rms_norm_eps=1e-5,
        vocab_size=LM_VOCAB,
        num_key_value_heads=2,
        rope_theta=10000.0,
        partial_rotary_factor=0.5,
        max_position_embeddings=512,
        head_dim=16,
        full_attention_interval=4,
    ),
    "qwen3_5": dict(
        model_type="qwen3_5",
        text_config=dict(
            model_type="qwen3_5_text",
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=4,
            num_attention_heads=4,
            rms_norm_eps=1e-5,
            vocab_size=LM_VOCAB,
            num_key_value_heads=2,
            max_position_embeddings=512,
            linear_num_value_heads=4,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=4,
            head_dim=16,
            full_attention_interval=4,
            rope_parameters={
                "type": "default",
                "mrope_section": [2, 1, 1],
                "rope_theta": 10000,
                "partial_rotary_factor": 0.5,
            },
        ),
    ),
    "kimi_linear": dict(
        model_type="kimi_linear",
        vocab_size=LM_VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=128,
        head_dim=16,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        model_max_length=512,
        num_experts=4,
        linear_attn_config={
            "num_heads": 4,
            "head_dim": 16,
            "kda_layers": [1],
            "full_attn_layers": [2],
            "short_conv_kernel_size": 4,
        },
        moe_intermediate_size=32,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=8,
        v_head_dim=16,
        num_experts_per_token=2,
    ),
    "olmo_hybrid": dict(
        model_type="olmo_hybrid",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=LM_VOCAB,
        max_position_embeddings=512,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        linear_allow_neg_eigval=False,
        tie_word_embeddings=False,
        attention_bias=False,
    ),
    "bailing_moe_linear": dict(
        model_type="bailing_moe_linear",
        hidden_size=64,
        intermediate_size=128,
        max_position_embeddings=512,
        moe_intermediate_size=32,
        num_experts=4,
        num_shared_experts=1,
        norm_topk_prob=True,
        num_attention_heads=4,
        num_experts_per_tok=2,
        num_hidden_layers=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        vocab_size=LM_VOCAB,
        first_k_dense_replace=0,
        layer_group_size=2,
        group_norm_size=1,
    ),
}


def recurrent_model(name: str, seed: int = 0) -> nn.Module:
    """mlx-lm's ``name``, an architecture whose layers loop over the sequence in Python
    (:data:`RECURRENT_CONFIGS`; recurrent_gemma from :func:`moe_model`'s table)."""
    if name not in RECURRENT_CONFIGS:
        return moe_model(name, seed)
    return _mlx_lm(RECURRENT_CONFIGS[name], seed)


# -- running packages in their runtimes ----------------------------------------------------------
def mlx_tokens(model, folder, ids: list[int], new_tokens: int) -> list[int]:
    """mlx-lm's greedy tokens after ``ids`` up to and with the first end-of-sequence token of
    ``folder``'s generation_config.json, where the runtimes stop (forcing a minimum length
    would make them skip it)."""
    from mlx2onnx.llm import mlx_generate

    tokens = mlx_generate(model, mx.array([ids]), new_tokens)[0].tolist()
    eos = json.loads((Path(folder) / "generation_config.json").read_text()).get("eos_token_id")
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


def genai_tokens(model, ids: list[int], new_tokens: int) -> list[int]:
    """onnxruntime-genai's greedy tokens after ``ids`` (an ``og.Model`` of a package), up to
    ``new_tokens`` or the end-of-sequence token, where it stops."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + new_tokens)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    tokens = []
    while not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def transformers_js_tokens(package, new_tokens: int, texts) -> list[dict]:
    """transformers.js (under Node) on ``package``: per text ``{"ids", "tokens"}``, its
    tokenizer's ids and its greedy tokens (tests/support/js/transformers_generate.mjs)."""
    lines = _node("transformers_generate.mjs", str(package), str(new_tokens), *texts)
    return [json.loads(line) for line in lines if line.startswith("{")]


def transformers_js_chat(package, new_tokens: int, conversations) -> list[dict]:
    """transformers.js (under Node) on ``package``: per conversation ``{"ids", "tokens",
    "reply"}``, its chat template's ids, its greedy tokens and its text-generation
    pipeline's reply (tests/support/js/transformers_chat.mjs)."""
    lines = _node("transformers_chat.mjs", str(package), str(new_tokens), *map(json.dumps, conversations))
    return [json.loads(line) for line in lines if line.startswith("{")]


def node_available() -> bool:
    """Whether Node and transformers.js (npm ci --ignore-scripts) are here."""
    import shutil

    return (
        shutil.which("node") is not None
        and (Path(__file__).resolve().parents[2] / "node_modules" / "@huggingface" / "transformers").is_dir()
    )


def transformers_js_pipeline(task: str, package, options: dict, inputs) -> Any:
    """transformers.js's ``pipeline(task, package)(inputs, options)`` under Node
    (tests/support/js/transformers_pipeline.mjs); a Tensor result comes as ``{"dims", "data"}``."""
    lines = _node("transformers_pipeline.mjs", task, str(package), json.dumps(options), *map(str, inputs))
    return json.loads(lines[-1])


def transformers_js_model(package, output: str, texts, model_class="AutoModel", padding=True) -> dict:
    """transformers.js's ``model_class`` on the package, its output ``output`` for ``texts``
    tokenized by ``AutoTokenizer`` in one batch with ``padding`` (tests/support/js/transformers_model.mjs),
    as ``{"dims", "data"}``."""
    options = json.dumps({"padding": padding, "truncation": True})
    return json.loads(_node("transformers_model.mjs", str(package), model_class, output, options, *map(str, texts))[-1])


def transformers_js_embeddings(package, texts) -> np.ndarray:
    """The embeddings of ``texts`` a transformers.js user gets from a feature-extraction
    package, as its config.json says to read them: the pipeline with its pooling and
    normalisation, or AutoModel's ``sentence_embedding`` where no pooling gives them."""
    notes = json.loads((Path(package) / "config.json").read_text())["mlx2onnx"]
    if notes["pooling"] is None:
        got = transformers_js_model(package, "sentence_embedding", texts)
    else:
        options = {"pooling": notes["pooling"], "normalize": notes["normalize"]}
        got = transformers_js_pipeline("feature-extraction", package, options, texts)
    return np.array(got["data"], np.float32).reshape(got["dims"])


def _node(script: str, *args: str) -> list[str]:
    import subprocess

    path = Path(__file__).resolve().parent / "js" / script
    done = subprocess.run(["node", str(path), *args], capture_output=True, text=True, timeout=300, cwd=path.parents[2])
    if done.returncode:
        errors = [line for line in done.stderr.splitlines() if "Error" in line] or done.stderr.splitlines() or ["?"]
        raise RuntimeError(f"transformers.js failed: {errors[0].strip()}")
    return done.stdout.splitlines()


# -- task folders: mlx-embeddings and mlx-image, as those packages write them ----------------
EMBEDDING_TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world from mlx to onnx",
    "a small tokenizer for tests",
    "sentence embeddings pooled in javascript",
]
_EMBEDDING_SPECIALS = {  # the special tokens, and the template around a text, of each family's tokenizer
    "bert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]", "BertTokenizer"),
    "modernbert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]", "PreTrainedTokenizerFast"),
    "xlm_roberta": (["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s>", "</s>", "XLMRobertaTokenizer"),
}


def train_encoder_tokenizer(folder, name: str) -> dict:
    """A WordPiece (BERT, ModernBERT) or Unigram (XLM-RoBERTa) tokenizer trained on
    EMBEDDING_TEXTS with its family's special tokens and template, saved in ``folder``;
    returns the config fields that name its ids."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials, first, last, kind = _EMBEDDING_SPECIALS[name]
    if name == "xlm_roberta":
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=100, special_tokens=specials, unk_token="<unk>")
    else:
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials)
    tokenizer.train_from_iterator(EMBEDDING_TEXTS * 20, trainer)
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{first} $A {last}",
        pair=f"{first} $A {last} $B:1 {last}:1",
        special_tokens=[(first, ids[first]), (last, ids[last])],
    )
    tokenizer.save(str(Path(folder) / "tokenizer.json"))
    pad, unk, mask = (
        specials[0 if name != "xlm_roberta" else 1],
        specials[1 if name != "xlm_roberta" else 3],
        specials[4],
    )
    (Path(folder) / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": kind,
                "cls_token": first,
                "sep_token": last,
                "pad_token": pad,
                "unk_token": unk,
                "mask_token": mask,
                "bos_token": first,
                "eos_token": last,
                "model_max_length": 512,
                "do_lower_case": True,
            }
        )
    )
    return {
        "vocab_size": tokenizer.get_vocab_size(),
        "pad_token_id": ids[pad],
        "bos_token_id": ids[first],
        "eos_token_id": ids[last],
        "cls_token_id": ids[first],
        "sep_token_id": ids[last],
    }


def train_decoder_tokenizer(folder) -> dict:
    """A byte-level BPE tokenizer (:func:`byte_level_bpe`) that wraps a text in
    ``<s> ... </s>`` (the last token a decoder embedding pools is the end of text), with a
    pad token, saved in ``folder``; returns the config fields that name its ids."""
    from tokenizers import processors

    tokenizer = byte_level_bpe(folder, ["<unk>", "<s>", "</s>", "<pad>"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    tokenizer.save(str(Path(folder) / "tokenizer.json"))
    (Path(folder) / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": 512,
            }
        )
    )
    return {"vocab_size": tokenizer.get_vocab_size(), "pad_token_id": 3, "bos_token_id": 1, "eos_token_id": 2}


SENTENCE_FILES = ("modules.json", "config_sentence_transformers.json")


def write_sentence_files(folder) -> None:
    """The sentence-transformers files (SENTENCE_FILES) a decoder embedding repository holds
    beside its weights (mlx-embeddings' converter copies every top-level JSON file)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
    (Path(folder) / "modules.json").write_text(json.dumps(modules))
    (Path(folder) / "config_sentence_transformers.json").write_text(
        json.dumps(
            {"prompts": {"query": "", "document": ""}, "default_prompt_name": None, "similarity_fn_name": "cosine"}
        )
    )


def write_embedding_folder(folder, name: str, bits: int | None = None, dtype=None):
    """An mlx-embeddings model folder (config.json, model.safetensors through
    mlx-embeddings' own save functions, a trained tokenizer, and a decoder's
    sentence-transformers files); ``bits``: quantized as its converter does (group size
    32, weights whose size is a multiple of 64)."""
    import mlx_embeddings.utils as saving

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if name in DECODER_EMBEDDINGS:
        settings = dict(EMBEDDING_CONFIGS[name], **train_decoder_tokenizer(folder))
        write_sentence_files(folder)
    else:
        settings = dict(EMBEDDING_CONFIGS[name], **train_encoder_tokenizer(folder, name))
    if name == "modernbert":
        settings["architectures"] = ["ModernBertModel"]
    module = embedding_models(name)
    mx.random.seed(0)
    model = module.Model(module.ModelArgs.from_dict(settings))
    as_variant(
        model, settings, dtype, bits, predicate=lambda p, m: hasattr(m, "to_quantized") and m.weight.size % 64 == 0
    )
    saving.save_weights(folder, dict(tree_flatten(model.parameters())))
    saving.save_config(settings, folder / "config.json")
    return folder


SIGLIP_CONFIG = dict(
    model_type="siglip",
    architectures=["SiglipModel"],
    text_config=dict(TINY_TOWER, model_type="siglip_text_model", max_position_embeddings=32),
    vision_config=dict(TINY_TOWER, model_type="siglip_vision_model", image_size=32, patch_size=8),
)
SIGLIP_LABELS = ["fox", "dog", "tokenizer", "sentence"]


def siglip_model(settings: dict = SIGLIP_CONFIG):
    """mlx-embeddings' SigLIP of ``settings`` (both towers), the logit scale and bias drawn
    rather than zero."""
    module = embedding_models("siglip")
    args = module.ModelArgs.from_dict(settings)
    args.text_config = module.TextConfig(**settings["text_config"])
    args.vision_config = module.VisionConfig(**settings["vision_config"])
    mx.random.seed(0)
    model = module.Model(args)
    model.logit_scale = mx.array([2.3])
    model.logit_bias = mx.array([-1.5])
    mx.eval(model.parameters())
    return model


def siglip_outputs():
    """SigLIP as a function of token ids and channels-first pixels, returning its logits and
    normalised embeddings."""
    model = siglip_model()

    def score(input_ids, pixel_values):
        out = model(input_ids=input_ids, pixel_values=pixel_values)
        return {name: getattr(out, name) for name in ("logits_per_image", "text_embeds", "image_embeds")}

    return score


def write_siglip_folder(folder, bits: int | None = None, dtype=None):
    """An mlx-embeddings SigLIP folder as its converter writes one from a SigLIP repository:
    config.json with both towers' settings, model.safetensors (mlx-embeddings' save
    functions, and its converter's quantization for ``bits``; the logit scale and bias
    drawn, not zero), a Unigram tokenizer that ends a
    text with ``</s>`` and pads with ``<pad>``, and the repository's preprocessor_config.json."""
    import mlx_embeddings.utils as saving
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    specials = ["<pad>", "</s>", "<unk>"]
    texts = [f"This is a photo of {label}." for label in SIGLIP_LABELS] + EMBEDDING_TEXTS
    tokenizer.train_from_iterator(
        texts * 20, trainers.UnigramTrainer(vocab_size=150, special_tokens=specials, unk_token="<unk>")
    )
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "pad_token": "<pad>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 1000000000000000019884624838656,
            }
        )
    )
    size = SIGLIP_CONFIG["vision_config"]["image_size"]
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "SiglipImageProcessor",
                "processor_class": "SiglipProcessor",
                "do_resize": True,
                "size": {"height": size, "width": size},
                "resample": 3,
                "do_rescale": True,
                "rescale_factor": 1 / 255,
                "do_normalize": True,
                "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5],
            }
        )
    )
    settings = json.loads(json.dumps(SIGLIP_CONFIG))
    settings["text_config"]["vocab_size"] = tokenizer.get_vocab_size()
    model = siglip_model(settings)
    as_variant(model, settings, dtype)
    if bits:  # mlx-embeddings' converter: the text tower quantized, the vision tower kept (skip_vision)
        from mlx_embeddings.convert import quantize_model

        _, settings = quantize_model(model, settings, 32, bits)
    saving.save_weights(folder, dict(tree_flatten(model.parameters())))
    saving.save_config(settings, folder / "config.json")
    return folder


def siglip_reference(package, folder, png):
    """Write a generated PNG at the SigLIP folder's image size to ``png``: (mlx-embeddings'
    model, the zero-shot pipeline's hypothesis texts of SIGLIP_LABELS, their ids as the
    package's tokenizer pads them, the image's pixels, the sigmoid of logits_per_image)."""
    from PIL import Image
    from transformers import AutoTokenizer

    from mlx2onnx.tasks.siglip import load_siglip_folder

    model, config = load_siglip_folder(Path(folder))
    image = generated_image(config["vision_config"]["image_size"], seed=3)
    Image.fromarray(image).save(png)
    pixels = mx.array(siglip_pixels(image))
    texts = [f"This is a photo of {label}" for label in SIGLIP_LABELS]  # the pipeline's template
    length = config["text_config"]["max_position_embeddings"]
    ids = AutoTokenizer.from_pretrained(str(package))(texts, padding="max_length", max_length=length, truncation=True)
    ids = mx.array(np.array(ids["input_ids"]))
    logits = np.array(model(input_ids=ids, pixel_values=pixels).logits_per_image.astype(mx.float32))[0]
    return model, texts, ids, pixels, 1 / (1 + np.exp(-logits))


def siglip_in_transformers_js(package, folder, where) -> dict:
    """A SigLIP package in transformers.js against mlx-embeddings on a generated PNG at the
    model's size: {what: (transformers.js's values, MLX's)} for the zero-shot pipeline's
    scores of SIGLIP_LABELS (the sigmoid of logits_per_image for the pipeline's hypothesis
    texts), the image-feature-extraction pipeline's pooled features (get_image_features)
    and SiglipTextModel's pooler_output of those texts (get_text_features)."""
    model, texts, ids, pixels, scores_want = siglip_reference(package, folder, Path(where) / "image.png")
    scores = transformers_js_pipeline(
        "zero-shot-image-classification", package, {"candidate_labels": SIGLIP_LABELS}, [Path(where) / "image.png"]
    )[0]
    features = transformers_js_pipeline(
        "image-feature-extraction", package, {"pool": True}, [Path(where) / "image.png"]
    )
    text = transformers_js_model(package, "pooler_output", texts, "SiglipTextModel", "max_length")
    return {
        "zero-shot scores": (
            np.array([next(r["score"] for r in scores if r["label"] == label) for label in SIGLIP_LABELS]),
            scores_want,
        ),
        "image features": (
            np.array(features["data"]).reshape(features["dims"]),
            np.array(model.get_image_features(pixel_values=pixels).astype(mx.float32)),
        ),
        "text features": (
            np.array(text["data"]).reshape(text["dims"]),
            np.array(model.get_text_features(input_ids=ids).astype(mx.float32)),
        ),
    }


def dinov2_states(package, folder, png) -> np.ndarray:
    """Write a generated PNG at the package processor's resize size (which its resize keeps)
    to ``png``; mlx-vlm's last_hidden_state of it centre-cropped and normalised as the
    processor says."""
    from mlx_vlm.utils import load_model
    from PIL import Image

    processor = json.loads((Path(package) / "preprocessor_config.json").read_text())
    edge, crop = processor["size"]["shortest_edge"], processor["crop_size"]["height"]
    image = generated_image(edge, seed=3)
    Image.fromarray(image).save(png)
    start = (edge - crop) // 2
    cropped = image[start : start + crop, start : start + crop] / 255.0
    pixels = ((cropped - np.array(processor["image_mean"])) / np.array(processor["image_std"])).astype(np.float32)
    return np.array(load_model(Path(folder))(mx.array(pixels[None]))["last_hidden_state"].astype(mx.float32))


def dinov2_in_transformers_js(package, folder, where) -> dict:
    """A DINOv2 package in transformers.js's image-feature-extraction pipeline against
    mlx-vlm on a generated PNG at the processor's resize size (which its resize keeps):
    {what: (transformers.js's values, MLX's)} for the token sequence and, with
    ``{pool: true}``, the class token; MLX's input is the PNG centre-cropped and normalised
    as the package's processor says."""
    png = Path(where) / "image.png"
    want = dinov2_states(package, folder, png)
    tokens = transformers_js_pipeline("image-feature-extraction", package, {}, [png])
    pooled = transformers_js_pipeline("image-feature-extraction", package, {"pool": True}, [png])
    return {
        "token sequence": (np.array(tokens["data"]).reshape(tokens["dims"]), want),
        "class token": (np.array(pooled["data"]).reshape(pooled["dims"]), want[:, 0]),
    }


def siglip_pixels(image: np.ndarray) -> np.ndarray:
    """SigLIP's processor on an image already at the model's size: rescaled, mean and std
    0.5, channels first [1, 3, height, width]."""
    return ((image.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]


DINOV2_CONFIG = dict(  # 6 x 6 position embeddings, interpolated to the crop's 4 x 4 patches
    model_type="dinov2",
    architectures=["Dinov2Model"],
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    image_size=48,
    patch_size=8,
    layerscale_value=0.5,
)


def dinov2_encoder():
    """mlx-vlm's DINOv2 of DINOV2_CONFIG as a function of channels-first pixels."""
    from mlx_vlm.models.dinov2 import Model, ModelConfig

    from mlx2onnx.tasks.dinov2 import encoder

    mx.random.seed(0)
    model = Model(ModelConfig.from_dict(DINOV2_CONFIG))
    mx.eval(model.parameters())
    return encoder(model)


def write_dinov2_folder(folder, bits: int | None = None, dtype=None, registers: int = 0):
    """An mlx-vlm DINOv2 folder as its converter writes one from a DINOv2 repository:
    config.json, model.safetensors (mlx-vlm's save functions), and the repository's
    preprocessor_config.json (DINOv2's processor: shortest edge to 36, centre crop 32);
    ``registers``: a DINOv2-with-registers folder of that many register tokens."""
    saving = pytest.importorskip("mlx_vlm.utils")
    from mlx_vlm.models.dinov2 import Model, ModelConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    settings = dict(DINOV2_CONFIG)
    if registers:
        settings.update(
            model_type="dinov2_with_registers",
            architectures=["Dinov2WithRegistersModel"],
            num_register_tokens=registers,
        )
    mx.random.seed(0)
    model = Model(ModelConfig.from_dict(settings))
    if registers:  # mlx-vlm starts them at zero, as a checkpoint's are not
        model.register_tokens = mx.random.normal((1, registers, DINOV2_CONFIG["hidden_size"]))
    as_variant(
        model, settings, dtype, bits, predicate=lambda p, m: hasattr(m, "to_quantized") and m.weight.size % 64 == 0
    )
    saving.save_weights(folder, model)
    saving.save_config(dict(settings), folder / "config.json")
    processor = {
        "image_processor_type": "BitImageProcessor",
        "do_resize": True,
        "size": {"shortest_edge": 36},
        "resample": 3,
        "do_center_crop": True,
        "crop_size": {"height": 32, "width": 32},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "do_convert_rgb": True,
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(processor))
    return folder


def write_image_folder(folder, name: str, dtype=None):
    """An mlx-image weights folder as mlx-vision publishes one: model.safetensors only
    (10 classes), written by mlx-image's own save_weights."""
    from mlxim.model._utils import save_weights

    folder = Path(folder)
    model = mlxim_classifier(name)
    if dtype is not None:
        model.set_dtype(dtype)
    save_weights(dict(tree_flatten(model.parameters())), str(folder / "model.safetensors"))
    return folder


def generated_image(size: int, seed: int = 0, width: int | None = None) -> np.ndarray:
    """An RGB uint8 image [size, width (default size), 3]: colour gradients with noise, so
    every channel and position matters."""
    rng = np.random.default_rng(seed)
    width = size if width is None else width
    y, x = np.mgrid[0:size, 0:width] * (255.0 / max(size, width))
    image = np.stack([x, y, (x + y) / 2], axis=-1) + rng.normal(0, 30, (size, width, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


WHISPER_DIMS = dict(
    n_mels=80,
    n_audio_ctx=1500,
    n_audio_state=64,
    n_audio_head=4,
    n_audio_layer=2,
    n_vocab=51865,
    n_text_ctx=64,
    n_text_state=64,
    n_text_head=4,
    n_text_layer=2,
)
ENGLISH_WHISPER_DIMS = dict(WHISPER_DIMS, n_vocab=51864)  # an English-only model (tiny.en ...): GPT-2's vocabulary


def _wandering_whisper(build):
    """``build()``'s Whisper model (seed 0) with random weights at a scale that makes greedy
    decoding wander over the vocabulary."""
    mx.random.seed(0)
    model = build()
    model.update(
        tree_map(
            lambda a: (
                mx.random.normal(a.shape) * (0.3 if a.ndim > 1 else 0.1) if mx.issubdtype(a.dtype, mx.floating) else a
            ),
            model.parameters(),
        )
    )
    return model


def write_whisper_folder(folder, dims: dict | None = None, bits: int | None = None, dtype=None):
    """An mlx-whisper model folder as its converter writes one (config.json with the
    model's dimensions and model_type, weights.safetensors), random weights at a scale
    that makes greedy decoding wander; the real vocabulary size, so that mlx-whisper's own
    tokenizer serves it."""
    whisper = pytest.importorskip("mlx_whisper.whisper")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    settings = dict(dims or WHISPER_DIMS)
    model = _wandering_whisper(lambda: whisper.Whisper(whisper.ModelDimensions(**settings), dtype=mx.float32))
    as_variant(model, settings, dtype, bits, record_dtype=False)  # mlx-whisper's config holds dimensions only
    mx.save_safetensors(str(folder / "weights.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper", **settings}))
    return folder


# MLX Whisper names -> Transformers' (mlx-audio's sanitize maps them back)
_TRANSFORMERS_WHISPER_NAMES = [
    ("decoder.positional_embedding", "decoder.embed_positions.weight"),
    ("encoder.ln_post.", "encoder.layer_norm."),
    ("decoder.ln.", "decoder.layer_norm."),
    ("encoder.blocks.", "encoder.layers."),
    ("decoder.blocks.", "decoder.layers."),
    (".attn_ln.", ".self_attn_layer_norm."),
    (".mlp_ln.", ".final_layer_norm."),
    (".cross_attn_ln.", ".encoder_attn_layer_norm."),
    (".mlp1.", ".fc1."),
    (".mlp2.", ".fc2."),
    (".cross_attn.query.", ".encoder_attn.q_proj."),
    (".cross_attn.key.", ".encoder_attn.k_proj."),
    (".cross_attn.value.", ".encoder_attn.v_proj."),
    (".cross_attn.out.", ".encoder_attn.out_proj."),
    (".attn.query.", ".self_attn.q_proj."),
    (".attn.key.", ".self_attn.k_proj."),
    (".attn.value.", ".self_attn.v_proj."),
    (".attn.out.", ".self_attn.out_proj."),
    ("decoder.token_embedding.", "decoder.embed_tokens."),
]


def _transformers_whisper_weights(weights: dict) -> dict:
    out = {}
    for name, value in weights.items():
        for mlx_name, name_there in _TRANSFORMERS_WHISPER_NAMES:
            name = name.replace(mlx_name, name_there)
        if ".conv" in name and name.endswith("weight"):
            value = value.transpose(0, 2, 1)  # [out, kernel, in] -> Transformers' [out, in, kernel]
        out["model." + name] = value
    return out


def write_mlx_audio_whisper_folder(
    folder, bits: int | None = None, dtype=None, layout: str = "transformers", dims: dict | None = None
):
    """An mlx-audio Whisper folder as the hub holds them: config.json (Transformers'
    WhisperConfig, or with ``layout="dimensions"`` Whisper's dimensions), model.safetensors
    in MLX's layout (``layout="transformers-weights"``: Transformers' names and convolution
    layout, as a Transformers Whisper checkpoint holds them), and the files transformers'
    WhisperProcessor loads (the Whisper tokenizer, mlx-whisper's vocabulary, and its
    feature extractor); random weights as in
    :func:`write_whisper_folder`. ``dtype``: the stored weights' (mlx-audio computes in
    float16 whatever they are)."""
    whisper = pytest.importorskip("mlx_audio.stt.models.whisper.whisper")
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    from mlx2onnx.tasks import whisper_files

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dims = dict(dims or WHISPER_DIMS)
    model = _wandering_whisper(lambda: whisper.Model(whisper.ModelDimensions(**dims), dtype=mx.float32))
    settings = (
        {"model_type": "whisper", **dims}
        if layout == "dimensions"
        else WhisperConfig(
            vocab_size=dims["n_vocab"],
            num_mel_bins=dims["n_mels"],
            d_model=dims["n_audio_state"],
            encoder_layers=dims["n_audio_layer"],
            encoder_attention_heads=dims["n_audio_head"],
            decoder_layers=dims["n_text_layer"],
            decoder_attention_heads=dims["n_text_head"],
            max_source_positions=dims["n_audio_ctx"],
            max_target_positions=dims["n_text_ctx"],
        ).to_dict()
    )
    as_variant(model, settings, dtype or mx.float16, bits)
    weights = dict(tree_flatten(model.parameters()))
    if layout == "transformers-weights":  # a Transformers checkpoint as the hub holds it, which mlx-audio reads too
        weights = _transformers_whisper_weights(weights)
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    (folder / "config.json").write_text(json.dumps(settings))
    source = pytest.importorskip("mlx_whisper.whisper")
    vocabulary = whisper_files.whisper_tokenizer(source.Whisper(source.ModelDimensions(**dims)))
    whisper_files.write_tokenizer(vocabulary, folder)
    WhisperProcessor(
        WhisperFeatureExtractor(feature_size=dims["n_mels"]), WhisperTokenizer.from_pretrained(str(folder))
    ).save_pretrained(str(folder))
    return folder


def _float32_sums(x, layer):
    def wide(a):
        return None if a is None else a.astype(mx.float32)

    return mx.quantized_matmul(
        wide(x),
        layer["weight"],
        scales=wide(layer["scales"]),
        biases=wide(layer.get("biases")),
        transpose=True,
        group_size=layer.group_size,
        bits=layer.bits,
        mode=layer.mode,
    ).astype(x.dtype)


class _Float32SumsLinear(nn.QuantizedLinear):
    def __call__(self, x):
        y = _float32_sums(x, self)
        return y + self["bias"] if "bias" in self else y


class _Float32SumsEmbedding(nn.QuantizedEmbedding):
    def as_linear(self, x):
        return _float32_sums(x, self)


def with_float32_sums(model):
    """``model`` with its quantized products summed in float32 and rounded once, as MLX's
    Metal and CUDA kernels and the runtimes' MatMulNBits sum them. MLX's CPU sums a
    float16 quantized product in float16, one term at a time (its result differs from a
    float32 sum by up to 0.1 for 256 random terms), which no runtime does; a float16 4-bit
    model's greedy tokens on the CPU can then turn at a near tie (measured: one float16
    step apart, mlx-audio's 4-bit Whisper, tests/packages/test_speech_packages.py)."""
    for _, module in model.named_modules():
        if type(module) is nn.QuantizedLinear:
            module.__class__ = _Float32SumsLinear
        elif type(module) is nn.QuantizedEmbedding:
            module.__class__ = _Float32SumsEmbedding
    return model


def speech_clip(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    """float32 audio at 16 kHz: a few tones that glide, with noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    tone = sum(np.sin(2 * np.pi * f * t * (1 + 0.3 * t)) for f in rng.uniform(150, 1200, 4))
    return (0.2 * tone / 4 + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


MOONSHINE_CONFIG = dict(
    model_type="moonshine",
    hidden_size=32,
    intermediate_size=64,
    encoder_num_hidden_layers=2,
    decoder_num_hidden_layers=2,
    encoder_num_attention_heads=4,
    decoder_num_attention_heads=4,
    max_position_embeddings=512,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=1,
)


def write_moonshine_folder(folder, bits: int | None = None, dtype=None):
    """An mlx-audio Moonshine folder as the hub holds them (config.json, model.safetensors
    with Transformers' layout: convolution weights [out, in, kernel], which mlx-audio's
    sanitize turns to MLX's; a trained tokenizer), random weights wide enough that greedy
    decoding wanders."""
    moonshine = pytest.importorskip("mlx_audio.stt.models.moonshine.moonshine")
    config = pytest.importorskip("mlx_audio.stt.models.moonshine.config")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    settings = dict(MOONSHINE_CONFIG, vocab_size=train_tokenizer(folder))
    mx.random.seed(0)
    model = moonshine.Model(config.ModelConfig.from_dict(settings))
    model.update(tree_map(lambda a: mx.random.normal(a.shape) * (1.0 if a.ndim > 1 else 0.1), model.parameters()))
    as_variant(model, settings, dtype, bits)
    weights = {
        k: (v.transpose(0, 2, 1) if "conv" in k and k.endswith("weight") and v.ndim == 3 else v)
        for k, v in tree_flatten(model.parameters())
    }
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    (folder / "config.json").write_text(json.dumps(settings))
    return folder


# -- the MLX packages' own results, for the task packages' tests and scripts/task_packages.py --
def mlx_embeddings(folder, texts) -> np.ndarray:
    """mlx-embeddings' pooled, normalised ``text_embeds`` of ``texts`` in one padded batch
    (its own loader and tokenizer)."""
    from mlx_embeddings.utils import load

    model, tokenizer = load(str(folder))
    batch = tokenizer._tokenizer(list(texts), padding=True, return_tensors="np")
    mask = mx.array(batch["attention_mask"])
    if json.loads((folder / "config.json").read_text())["model_type"] == "modernbert":
        mask = mask.astype(mx.float32)  # ModernBERT builds its additive masks in the mask's dtype
    out = model(mx.array(batch["input_ids"]), attention_mask=mask)
    return np.array(out.text_embeds.astype(mx.float32))


def mlx_class_probabilities(folder, name, image, crop):
    """mlxim's evaluation transform of an image already at its resize size (centre crop,
    ImageNet normalisation), then the model's class probabilities."""
    from mlxim.model import create_model

    model = create_model(name, weights=str(folder / "model.safetensors"), num_classes=10)
    model.eval()
    top, left = (image.shape[0] - crop) // 2, (image.shape[1] - crop) // 2
    image = image[top : top + crop, left : left + crop]
    pixels = (image / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    logits = np.array(model(mx.array(pixels[None].astype(np.float32))).astype(mx.float32))[0].astype(np.float64)
    p = np.exp(logits - logits.max())
    return p / p.sum()


def write_wav(path, audio) -> np.ndarray:
    """``audio`` written as a 16-bit mono WAV file; the samples as the file holds them."""
    import wave

    pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(pcm.tobytes())
    return pcm.astype(np.float32) / 32768


def genai_transcription(package, wav, max_length: int) -> list[int]:
    """onnxruntime-genai's greedy tokens for the WAV file through its own processor, after
    the prompt mlx-whisper starts from (English-only models': without language and task)."""
    import onnxruntime_genai as og

    model = og.Model(str(package))
    processor = model.create_multimodal_processor()
    multilingual = json.loads((Path(package) / "generation_config.json").read_text())["is_multilingual"]
    prompt = (
        "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
        if multilingual
        else "<|startoftranscript|><|notimestamps|>"
    )
    inputs = processor(prompt, audios=og.Audios.open(str(wav)))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=max_length)
    generator = og.Generator(model, params)
    generator.set_inputs(inputs)
    while not generator.is_done():
        generator.generate_next_token()
    return [int(t) for t in generator.get_sequence(0)]


# -- mlx-vlm folders ---------------------------------------------------------------------------
VLM_SPECIALS = {
    "gemma3": ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"],
    "idefics3": [
        "<pad>",
        "<eos>",
        "<bos>",
        "<unk>",
        "<fake_token_around_image>",
        "<global-img>",
        "<image>",
        "<end_of_utterance>",
        *(f"<row_{r}_col_{c}>" for r in (1, 2) for c in (1, 2)),
    ],
    "qwen2_vl": [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
    ],
}
for _qwen in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
    VLM_SPECIALS[_qwen] = VLM_SPECIALS["qwen2_vl"]
VLM_SPECIALS["smolvlm"] = VLM_SPECIALS["idefics3"]  # SmolVLM: Idefics3's layout under its own model_type
VLM_SPECIALS["llava_bunny"] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # Bunny's image is the id -200
VLM_SPECIALS["llava"] = VLM_SPECIALS["llava_next"] = VLM_SPECIALS["paligemma"] = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<image>",
]
VLM_SPECIALS["internvl_chat"] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>"]
VLM_SPECIALS["aya_vision"] = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<|START_OF_IMG|>",
    "<|END_OF_IMG|>",
    "<|IMG_PATCH|>",
    "TILE_GLOBAL",
]
VLM_SPECIALS["glm_ocr"] = [
    "<|endoftext|>",
    "<|user|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|video|>",
]
VLM_SPECIALS["mistral3"] = ["<pad>", "<eos>", "<bos>", "<unk>", "[IMG]", "[IMG_BREAK]", "[IMG_END]"]
VLM_SPECIALS["pixtral"] = VLM_SPECIALS["mistral3"]
VLM_PROMPTS = {
    "gemma3": "<start_of_image> a small tokenizer",
    "idefics3": "<image> a small tokenizer",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|> a small tokenizer",
}
for _qwen in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
    VLM_PROMPTS[_qwen] = VLM_PROMPTS["qwen2_vl"]
VLM_PROMPTS["llava"] = VLM_PROMPTS["llava_next"] = VLM_PROMPTS["llava_bunny"] = "<image> a small tokenizer"
VLM_PROMPTS["smolvlm"] = VLM_PROMPTS["idefics3"]
VLM_PROMPTS["paligemma"] = "<image>caption a small tokenizer"
VLM_PROMPTS["internvl_chat"] = "<img><IMG_CONTEXT></img> a small tokenizer"
VLM_PROMPTS["aya_vision"] = "<|START_OF_IMG|>TILE_GLOBAL<|IMG_PATCH|><|END_OF_IMG|> a small tokenizer"
VLM_PROMPTS["glm_ocr"] = "<|begin_of_image|><|image|><|end_of_image|> a small tokenizer"
VLM_PROMPTS["mistral3"] = VLM_PROMPTS["pixtral"] = "[IMG] a small tokenizer"
VLM_SCALES = {
    "qwen2_vl": 0.5,
    "qwen2_5_vl": 0.5,
    "qwen3_vl": 0.8,
    "qwen3_vl_moe": 0.8,
    "glm_ocr": 0.5,
    "paligemma": 0.2,
    "internvl_chat": 0.2,
    "aya_vision": 0.2,
    "llava_bunny": 0.5,
    "mistral3": 0.3,
    "pixtral": 0.3,
}  # weight scales at which greedy tokens differ (the others: 0.1)
# qwen2_vl: 8 x 8 patches of 14, 16 image tokens; qwen2_5_vl: 16 x 16, 64 tokens in 4 attention windows
# of 112 pixels (the others: the tower's image_size)
VLM_IMAGE_SIZES = {"qwen2_vl": 112, "qwen2_5_vl": 224, "qwen3_vl": 128, "qwen3_vl_moe": 128, "glm_ocr": 112}
# the Pixtral towers' largest image: 8 x 8 patches of 8 pixels (mistral3 merges 2 x 2 into a token)
PIXTRAL_TOWER = dict(
    model_type="pixtral",
    hidden_size=32,
    intermediate_size=64,
    num_attention_heads=2,
    head_dim=16,
    num_hidden_layers=2,
    image_size=64,
    patch_size=8,
)


# the language model of the llama-based folders (idefics3, llava)
VLM_LLAMA_TEXT = dict(
    model_type="llama",
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=2,
    rms_norm_eps=1e-5,
)


def _vlm_settings(architecture: str, ids: dict, vocab: int) -> dict:
    if architecture == "glm_ocr":  # GLM-OCR's layout: a GLM text model over mRoPE, Qwen-VL patches of 14
        return dict(
            model_type="glm_ocr",
            image_token_id=ids["<|image|>"],
            video_token_id=ids["<|video|>"],
            image_start_token_id=ids["<|begin_of_image|>"],
            image_end_token_id=ids["<|end_of_image|>"],
            video_start_token_id=ids["<|begin_of_video|>"],
            video_end_token_id=ids["<|end_of_video|>"],
            vocab_size=vocab,
            hidden_size=64,
            eos_token_id=[ids["<|endoftext|>"]],
            pad_token_id=ids["<|endoftext|>"],
            text_config=dict(
                model_type="glm_ocr_text",
                vocab_size=vocab,
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                num_hidden_layers=2,
                eos_token_id=[ids["<|endoftext|>"]],
                pad_token_id=ids["<|endoftext|>"],
                rope_parameters={
                    "rope_type": "default",
                    "mrope_section": [2, 3, 3],
                    "partial_rotary_factor": 1.0,
                    "rope_theta": 10000,
                },
            ),
            vision_config=dict(
                model_type="glm_ocr_vision",
                depth=2,
                hidden_size=32,
                intermediate_size=64,
                num_heads=2,
                patch_size=14,
                out_hidden_size=64,
                spatial_merge_size=2,
                temporal_patch_size=2,
            ),
        )
    if architecture == "qwen3_vl_moe":  # Qwen3-VL-30B-A3B's layout: every text layer a mixture of 4 experts
        settings = _vlm_settings("qwen3_vl", ids, vocab)
        text = dict(
            settings["text_config"],
            model_type="qwen3_vl_moe_text",
            num_experts=4,
            num_experts_per_tok=2,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            moe_intermediate_size=64,
        )
        vision = dict(settings["vision_config"], model_type="qwen3_vl_moe")
        return dict(settings, model_type="qwen3_vl_moe", text_config=text, vision_config=vision)
    if architecture == "qwen3_vl":  # Qwen3-VL's layout: text settings in text_config, patches of 16
        top = _vlm_settings("qwen2_vl", ids, vocab)
        return dict(
            model_type="qwen3_vl",
            **{k: top[k] for k in top if k.endswith("_token_id") or k in ("eos_token_id", "pad_token_id")},
            text_config=dict(
                model_type="qwen3_vl_text",
                hidden_size=64,
                num_hidden_layers=3,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                rms_norm_eps=1e-6,
                vocab_size=vocab,
                rope_theta=10000.0,
                max_position_embeddings=512,
                rope_scaling={"rope_type": "default", "mrope_section": [4, 2, 2], "mrope_interleaved": True},
                tie_word_embeddings=False,
            ),
            # 8 x 8 patches of 16 for the check's image: position embeddings interpolated from a 6 x 6 grid;
            # the first two blocks' states added to the first two text layers (DeepStack)
            vision_config=dict(
                model_type="qwen3_vl",
                depth=3,
                hidden_size=32,
                intermediate_size=64,
                out_hidden_size=64,
                num_heads=2,
                patch_size=16,
                spatial_merge_size=2,
                temporal_patch_size=2,
                in_channels=3,
                num_position_embeddings=36,
                deepstack_visual_indexes=[0, 1],
            ),
        )
    if architecture == "qwen2_5_vl":
        settings = _vlm_settings("qwen2_vl", ids, vocab)
        return dict(
            settings,
            model_type="qwen2_5_vl",
            vision_config=dict(
                model_type="qwen2_5_vl",
                depth=2,
                hidden_size=32,
                intermediate_size=64,
                out_hidden_size=64,
                num_heads=2,
                patch_size=14,
                spatial_patch_size=14,
                spatial_merge_size=2,
                temporal_patch_size=2,
                in_channels=3,
                window_size=112,
                fullatt_block_indexes=[1],
                tokens_per_second=2,
            ),
        )
    if architecture == "qwen2_vl":  # the text settings at the top, as Qwen2-VL's config.json has them
        return dict(
            model_type="qwen2_vl",
            hidden_size=64,
            num_hidden_layers=2,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-6,
            vocab_size=vocab,
            rope_theta=10000.0,
            rope_scaling={"type": "mrope", "mrope_section": [4, 2, 2]},
            tie_word_embeddings=False,
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
            eos_token_id=[ids["<|im_end|>"]],
            pad_token_id=ids["<|endoftext|>"],
            vision_config=dict(
                model_type="qwen2_vl",
                depth=2,
                embed_dim=32,
                hidden_size=64,
                num_heads=2,
                mlp_ratio=2.0,
                patch_size=14,
                spatial_patch_size=14,
                spatial_merge_size=2,
                temporal_patch_size=2,
                in_channels=3,
            ),
        )
    if architecture in ("mistral3", "pixtral"):  # Mistral Small 3.1's layout: a Mistral text model
        return dict(
            model_type=architecture,
            image_token_index=ids["[IMG]"],
            vocab_size=vocab,
            eos_token_id=[ids["<eos>"]],
            pad_token_id=ids["<pad>"],
            vision_feature_layer=-1,
            **({"spatial_merge_size": 2} if architecture == "mistral3" else {}),
            text_config=dict(VLM_LLAMA_TEXT, model_type="mistral", head_dim=16, rope_theta=10000.0, vocab_size=vocab),
            vision_config=PIXTRAL_TOWER,
        )
    if architecture == "internvl_chat":  # InternVL3's layout: a Qwen2 text model, 4 x 4 patches shuffled to 4 tokens
        return dict(
            model_type="internvl_chat",
            image_token_index=ids["<IMG_CONTEXT>"],
            vocab_size=vocab,
            downsample_ratio=0.5,
            eos_token_id=[ids["<|im_end|>"]],
            pad_token_id=ids["<|endoftext|>"],
            text_config=dict(VLM_LLAMA_TEXT, model_type="qwen2", vocab_size=vocab),
            vision_config=dict(TINY_TOWER, model_type="intern_vit_6b", image_size=32, patch_size=8),
        )
    if architecture == "aya_vision":  # Aya Vision's layout: a Cohere2 text model, SigLIP tiles shuffled by 2
        return dict(
            model_type="aya_vision",
            image_token_index=ids["<|IMG_PATCH|>"],
            downsample_factor=2,
            alignment_intermediate_size=128,
            vocab_size=vocab,
            eos_token_id=[ids["<eos>"]],
            pad_token_id=ids["<pad>"],
            text_config=dict(
                model_type="cohere2",
                hidden_size=64,
                head_dim=16,
                num_hidden_layers=2,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=2,
                vocab_size=vocab,
                sliding_window=8,
                sliding_window_pattern=2,
            ),
            vision_config=dict(TINY_TOWER, model_type="siglip_vision_model", image_size=32, patch_size=8),
        )
    if architecture == "paligemma":  # PaliGemma's layout: a Gemma text model, a SigLIP tower of 16 tokens
        text = dict(
            model_type="gemma",
            hidden_size=64,
            num_hidden_layers=2,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            vocab_size=vocab,
        )
        return dict(
            model_type="paligemma",
            image_token_index=ids["<image>"],
            hidden_size=64,
            projection_dim=64,
            vocab_size=vocab,
            pad_token_id=ids["<pad>"],
            eos_token_id=[ids["<eos>"]],
            text_config=text,
            vision_config=dict(
                TINY_TOWER, model_type="siglip_vision_model", image_size=32, patch_size=8, projection_dim=64
            ),
        )
    if architecture == "llava_bunny":  # Bunny-Llama's layout: its text settings at the top, SigLIP's 27 x 27 patches
        text = dict(VLM_LLAMA_TEXT, vocab_size=vocab, tie_word_embeddings=True)
        return dict(
            text,
            model_type="bunny-llama",
            auto_map={"AutoModelForCausalLM": "modeling_bunny_qwen2.BunnyQwen2ForCausalLM"},
            mm_hidden_size=TINY_TOWER["hidden_size"],
            eos_token_id=[ids["<|im_end|>"]],
            pad_token_id=ids["<|endoftext|>"],
            text_config=text,
            vision_config=dict(TINY_TOWER, model_type="siglip_vision_model", image_size=384, patch_size=14),
        )
    if architecture == "llava_next":  # LLaVA 1.6's layout: LLaVA's with any-resolution pinpoints
        return dict(
            _vlm_settings("llava", ids, vocab), model_type="llava_next", image_grid_pinpoints=[[32, 32], [32, 64]]
        )
    if architecture == "llava":
        return dict(
            model_type="llava",
            image_token_index=ids["<image>"],
            vocab_size=vocab,
            eos_token_id=[ids["<eos>"]],
            pad_token_id=ids["<pad>"],
            vision_feature_layer=-2,
            vision_feature_select_strategy="default",
            text_config=dict(VLM_LLAMA_TEXT, vocab_size=vocab),
            # CLIP: 4 x 4 patches of 8 and a class token, which the default strategy drops: 16 image tokens
            vision_config=dict(
                TINY_TOWER,
                model_type="clip_vision_model",
                num_hidden_layers=3,
                image_size=32,
                patch_size=8,
                projection_dim=32,
            ),
        )
    if architecture == "gemma3":
        return dict(
            model_type="gemma3",
            image_token_index=ids["<image_soft_token>"],
            hidden_size=64,
            pad_token_id=ids["<pad>"],
            vocab_size=vocab,
            eos_token_id=[ids["<eos>"]],
            text_config=dict(
                model_type="gemma3_text",
                hidden_size=64,
                num_hidden_layers=2,
                intermediate_size=128,
                num_attention_heads=4,
                head_dim=16,
                num_key_value_heads=2,
                vocab_size=vocab,
                sliding_window=8,
                sliding_window_pattern=2,
                mm_tokens_per_image=256,
                query_pre_attn_scalar=16,
            ),
            # 16 x 16 patches, one token each: the 256 image tokens onnxruntime-genai's gemma3 processor expands
            vision_config=dict(
                TINY_TOWER,
                model_type="siglip_vision_model",
                patch_size=4,
                image_size=64,
            ),
        )
    return dict(
        model_type=architecture,  # idefics3, smolvlm
        image_token_id=ids["<image>"],
        vocab_size=vocab,
        scale_factor=2,
        eos_token_id=[ids["<end_of_utterance>"]],
        pad_token_id=ids["<pad>"],
        text_config=dict(VLM_LLAMA_TEXT, vocab_size=vocab),
        # 8 x 8 patches, pixel-shuffled by 2: 16 image tokens
        vision_config=dict(
            model_type="idefics3_vision",
            hidden_size=32,
            num_attention_heads=4,
            patch_size=4,
            num_hidden_layers=2,
            intermediate_size=64,
            image_size=32,
        ),
    )


def write_vlm_folder(
    folder,
    architecture: str = "gemma3",
    scale: float | None = None,
    dtype=None,
    bits: int | None = None,
    split: bool = False,
    model_type: str | None = None,
):
    """An mlx-vlm folder as mlx-vlm's save functions write it (config.json with text and
    vision configs, model.safetensors with the vision tower), a byte-level BPE tokenizer
    trained here with the architecture's image tokens, its tokenizer_config naming them (as
    transformers.js's processors read them) and a chat template; ``split`` (idefics3):
    SmolVLM's processor files beside, which split an image into tiles of the tower's size
    (longest edge resized to two tiles) and add a global image; ``model_type``: another of
    the mlx-vlm module's model types (mlx-vlm's MODEL_REMAPPING: Bunny's ``llava-qwen2``)."""
    scale = VLM_SCALES.get(architecture, 0.1) if scale is None else scale
    module = pytest.importorskip(f"mlx_vlm.models.{architecture}.{architecture}")
    configs = pytest.importorskip(f"mlx_vlm.models.{architecture}.config")
    saving = pytest.importorskip("mlx_vlm.utils")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specials = VLM_SPECIALS[architecture]
    tokenizer = byte_level_bpe(folder, specials)
    ids = {t: tokenizer.token_to_id(t) for t in specials}
    names = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "add_bos_token": False,
        "model_max_length": 512,
    }
    if architecture in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "internvl_chat"):
        names.update(bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None)
    if architecture == "glm_ocr":
        names.update(bos_token=None, eos_token="<|endoftext|>", pad_token="<|endoftext|>", unk_token=None)
    if architecture == "gemma3":
        names.update(boi_token="<start_of_image>", eoi_token="<end_of_image>", image_token="<image_soft_token>")
    (folder / "tokenizer_config.json").write_text(json.dumps(names))
    settings = _vlm_settings(architecture, ids, tokenizer.get_vocab_size())
    settings["model_type"] = model_type or settings["model_type"]
    config = configs.ModelConfig.from_dict(settings)
    config.text_config = configs.TextConfig.from_dict(settings["text_config"])
    config.vision_config = configs.VisionConfig.from_dict(settings["vision_config"])
    mx.random.seed(0)
    model = module.Model(config)
    model.update(
        tree_map(
            lambda a: mx.random.normal(a.shape) * scale if a.ndim > 1 else 1 + 0.1 * mx.random.normal(a.shape),
            model.parameters(),
        )
    )
    as_variant(
        model,
        settings,
        dtype,
        bits,
        record_dtype=False,
        # as mlx-vlm's loader quantizes: whole groups of 32, and weights of a multiple of 64 elements
        predicate=lambda p, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % 32 == 0 and m.weight.size % 64 == 0,
    )
    saving.save_weights(folder, model)
    saving.save_config(dict(settings), folder / "config.json")
    (folder / "generation_config.json").write_text(
        json.dumps(
            {
                "eos_token_id": settings["eos_token_id"][0],
                "pad_token_id": settings["pad_token_id"],
                "bos_token_id": ids.get("<bos>"),
            }
        )
    )
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    )
    if split:
        tile = settings["vision_config"]["image_size"]
        (folder / "preprocessor_config.json").write_text(
            json.dumps(
                {
                    "image_processor_type": "Idefics3ImageProcessor",
                    "processor_class": "Idefics3Processor",
                    "do_convert_rgb": True,
                    "do_image_splitting": True,
                    "do_normalize": True,
                    "do_pad": True,
                    "do_rescale": True,
                    "do_resize": True,
                    "image_mean": [0.5] * 3,
                    "image_std": [0.5] * 3,
                    "max_image_size": {"longest_edge": tile},
                    "resample": 1,
                    "rescale_factor": 1 / 255,
                    "size": {"longest_edge": 2 * tile},
                }
            )
        )
    return folder


def transformers_vlm_tiles(package, png, prompt: str, where) -> tuple[dict, dict[str, np.ndarray]]:
    """transformers.js's image-text-to-text run of :func:`_node`'s transformers_vlm.mjs
    (12 new tokens) with the pixels its processor made: (its JSON line, those pixels and
    their all-true mask as mlx-vlm's idefics3 reads them)."""
    heard = json.loads(
        _node("transformers_vlm.mjs", str(package), str(png), "12", prompt, str(Path(where) / "pixels.f32"))[-1]
    )
    pixels = np.fromfile(Path(where) / "pixels.f32", np.float32).reshape(heard["pixel_dims"])
    return heard, {
        "pixel_values": pixels,
        "pixel_attention_mask": np.ones((*pixels.shape[:2], *pixels.shape[3:]), bool),
    }


def vlm_pixels(architecture: str, image: np.ndarray) -> dict[str, np.ndarray]:
    """The pixel inputs both runtimes' processors make of an image at the tower's size:
    scaled to [-1, 1] (SigLIP's mean and std 0.5), channels first; idefics3's with an
    images axis and its all-true pixel mask; the Qwen-VL ones normalised with CLIP's mean
    and std (Qwen3-VL: 0.5) and cut into patches (the folder writer's patch sizes)."""
    if architecture in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm_ocr"):
        from mlx2onnx.tasks.vlm_qwen2_vl import normalised, patches

        qwen3 = architecture.startswith("qwen3")
        return patches(
            normalised(image, *([(0.5,) * 3] * 2 if qwen3 else [])),
            {"patch_size": 16 if qwen3 else 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
            "grid_thw" if architecture == "qwen2_vl" else "image_grid_thw",
        )
    if architecture in ("llava", "llava_next", "mistral3", "pixtral", "internvl_chat"):
        from mlx2onnx.tasks.image_processors import CLIP_MEAN, CLIP_STD, IMAGENET_MEAN, IMAGENET_STD

        mean, std = (IMAGENET_MEAN, IMAGENET_STD) if architecture == "internvl_chat" else (CLIP_MEAN, CLIP_STD)
        scaled = (image.astype(np.float32) / 255 - np.array(mean, np.float32)) / np.array(std, np.float32)
        return {"pixel_values": scaled.transpose(2, 0, 1)[None].astype(np.float32)}
    pixels = ((image.astype(np.float32) / 255 - 0.5) / 0.5).transpose(2, 0, 1)[None]
    if architecture in ("gemma3", "paligemma", "aya_vision", "llava_bunny"):
        return {"pixel_values": pixels}
    return {"pixel_values": pixels[:, None], "pixel_attention_mask": np.ones((1, 1, *image.shape[:2]), bool)}


def genai_vlm_tokens(package, png, text: str, new_tokens: int) -> tuple[list[int], list[int]]:
    """onnxruntime-genai's prompt ids (its processor's expansion of the image tokens) and
    greedy tokens for a PNG (or a list of them) and a prompt; for gemma3, the ids are
    checked against the expansion its processor is known to write (256 image tokens)."""
    import onnxruntime_genai as og

    model = og.Model(str(package))
    processor = model.create_multimodal_processor()
    inputs = processor(text, images=og.Images.open(*(str(p) for p in (png if isinstance(png, list) else [png]))))
    ids = [int(t) for t in inputs["input_ids"].as_numpy().reshape(-1)]
    if "<start_of_image>" in text:
        from tokenizers import Tokenizer

        expanded = text.replace(
            "<start_of_image>", "\n\n<start_of_image>" + "<image_soft_token>" * 256 + "<end_of_image>\n\n"
        )
        assert ids == Tokenizer.from_file(str(package / "tokenizer.json")).encode(expanded).ids
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + new_tokens)
    generator = og.Generator(model, params)
    generator.set_inputs(inputs)
    while not generator.is_done():
        generator.generate_next_token()
    sequence = [int(t) for t in generator.get_sequence(0)]
    assert sequence[: len(ids)] == ids
    return ids, sequence[len(ids) :]
