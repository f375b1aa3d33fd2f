"""Speech folders -> automatic-speech-recognition packages, run by transformers.js and
onnxruntime-genai: Whisper from mlx-whisper's and mlx-audio's folders, Moonshine from
mlx-audio's.

Each Whisper folder is written as its package writes one (mlx-whisper: config.json of the
model's dimensions, weights.safetensors, float32, 4-bit and bfloat16; mlx-audio:
Transformers' config, model.safetensors and the WhisperProcessor's files, float16, 4-bit
and bfloat16 weights, computed in float16), exported with ``mlx2onnx export``, checked
with ``mlx2onnx check`` and run under Node by transformers.js's
``pipeline("automatic-speech-recognition")`` on a synthesised clip, which computes the
features itself: its text and its model's greedy tokens are the MLX package's (``decode``,
English, without timestamps; mlx-whisper's with fp16=False, mlx-audio's in float16) on
its own features of the clip; and by onnxruntime-genai's whisper type, its multimodal
processor reading the clip as a WAV file (its own frontend, onnxruntime-extensions'),
whose greedy tokens are the MLX package's on the same 16-bit samples.
"""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import onnx
import pytest

from mlx2onnx.io.graph_files import graph_path
from tests.support import zoo
from tests.support.commands import cli
from tests.support.harness import ort_session

VARIANTS = {
    "float32": {},
    "4-bit": {"bits": 4},
    "bfloat16": {"dtype": mx.bfloat16},
    "float16": {"dtype": mx.float16},
    "english-only": {"dims": zoo.ENGLISH_WHISPER_DIMS},
}
WRITERS = {
    "whisper": zoo.write_whisper_folder,
    "moonshine": zoo.write_moonshine_folder,
    "mlx-audio-whisper": zoo.write_mlx_audio_whisper_folder,
}
# (architecture, variant) of the Whisper packages: mlx-whisper's folders, and mlx-audio's
# (which computes in float16 whatever the weights: float16, 4-bit and bfloat16 folders);
# multilingual, and English-only (its own vocabulary and prompt, no language to detect)
WHISPERS = [("whisper", v) for v in ("float32", "4-bit", "bfloat16", "english-only")] + [
    ("mlx-audio-whisper", v) for v in ("float16", "4-bit", "bfloat16", "english-only")
]


@pytest.fixture(scope="module")
def speech_packages(tmp_path_factory):
    made = {}

    def make(variant, architecture="whisper"):
        if (architecture, variant) not in made:
            where = tmp_path_factory.mktemp(architecture + variant.replace("-", ""))
            folder = WRITERS[architecture](where / "folder", **VARIANTS[variant])
            cli("export", folder, "-o", where / "package", cwd=where, check_rc=0)
            made[architecture, variant] = folder, where / "package"
        return made[architecture, variant]

    return make


def _checked(tmp_path, folder, package, graphs):
    for graph in graphs:
        onnx.checker.check_model(onnx.load(str(graph_path(package, graph))), full_check=True)
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    result = json.loads(checked.stdout)
    assert checked.returncode == 0 and result["passed"], checked.stdout + checked.stderr
    return result


def _asr(tmp_path, package, audio, new_tokens):
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    audio.tofile(tmp_path / "clip.f32")
    return json.loads(zoo._node("transformers_asr.mjs", str(package), str(tmp_path / "clip.f32"), str(new_tokens))[-1])


def _eos(package) -> int:
    return json.loads((package / "generation_config.json").read_text())["eos_token_id"]


def _source(architecture):
    """The WhisperSource of an architecture of WHISPERS (the MLX package that decodes it)."""
    if architecture == "whisper":
        pytest.importorskip("mlx_whisper.decoding")
        from mlx2onnx.tasks.whisper import MLX_WHISPER as source
    else:
        pytest.importorskip("mlx_audio.stt.models.whisper.decoding")
        from mlx2onnx.tasks.whisper_audio import MLX_AUDIO as source
    return source


def _mlx_decode(architecture, folder, audio, variant=None):
    """The MLX package's greedy tokens of ``audio`` (its own features), its model and the
    prompt the tokens follow. mlx-audio's 4-bit Whisper computes in float16: its quantized
    products summed in float32 as on MLX's GPUs (:func:`zoo.with_float32_sums`; ``mlx2onnx
    check`` compares with MLX's CPU sums, within float16's tolerance)."""
    from mlx2onnx.tasks.whisper import whisper_prompt

    source = _source(architecture)
    model = source.load(folder)
    if architecture == "mlx-audio-whisper" and variant == "4-bit":
        model = zoo.with_float32_sums(model)
    tokens = source.transcription(model, source.features(audio, model.dims.n_mels))
    return tokens, model, list(whisper_prompt(source.tokenizer(model))), source


@pytest.mark.node
@pytest.mark.third_party
@pytest.mark.parametrize("architecture,variant", WHISPERS)
def test_whisper_package_checks_and_transcribes_in_transformers_js(tmp_path, speech_packages, architecture, variant):
    folder, package = speech_packages(variant, architecture)
    _checked(tmp_path, folder, package, ("onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx"))
    if variant == "4-bit":
        ops = {n.op_type for n in onnx.load(str(graph_path(package, "onnx/decoder_model_merged.onnx"))).graph.node}
        assert "MatMulNBits" in ops or "GatherBlockQuantized" in ops, ops
    audio = zoo.speech_clip(seed=7)
    tokens, model, prompt, source = _mlx_decode(architecture, folder, audio, variant)
    assert len(set(tokens)) > 2  # a transcription that tells a wrong token from a right one
    heard = _asr(tmp_path, package, audio, model.dims.n_text_ctx // 2)
    assert heard["tokens"][: len(prompt)] == prompt
    assert [t for t in heard["tokens"][len(prompt) :] if t != _eos(package)] == tokens
    text = source.tokenizer(model).decode(tokens)
    assert heard["text"].strip() == text.strip()


@pytest.mark.third_party
def test_mlx_audio_whisper_package_computes_in_float16_as_mlx_audio(speech_packages):
    """mlx-audio decodes in float16 whatever the folder stores: the package's graphs hold
    float16 weights and caches, transformers.js's encoder takes the processor's float32
    features, onnxruntime-genai's takes them in float16 (its processor casts to the
    encoder input's type, and holds the states in it)."""
    _, package = speech_packages("bfloat16", "mlx-audio-whisper")
    types = {}
    for graph in ("onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "encoder.onnx", "decoder.onnx"):
        proto = onnx.load(str(graph_path(package, graph)))
        types[graph] = {
            v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
            for v in (*proto.graph.input, *proto.graph.output)
        }
        assert not any(t.data_type == onnx.TensorProto.BFLOAT16 for t in proto.graph.initializer)
    assert types["onnx/encoder_model.onnx"] == {"input_features": np.float32, "last_hidden_state": np.float16}
    assert types["encoder.onnx"]["audio_features"] == np.float16
    assert types["decoder.onnx"]["past_key_self_0"] == np.float16
    assert types["onnx/decoder_model_merged.onnx"]["past_key_values.0.decoder.key"] == np.float16


def test_merged_decoder_takes_cross_attention_from_the_past_after_the_first_step(speech_packages):
    folder, package = speech_packages("float32")
    proto = onnx.load(str(graph_path(package, "onnx/decoder_model_merged.onnx")))
    (branch,) = [n for n in proto.graph.node if n.op_type == "If"]
    then = next(a.g for a in branch.attribute if a.name == "then_branch")
    assert {n.op_type for n in then.node} == {"Identity"}  # the cached branch computes nothing
    session = ort_session(str(graph_path(package, "onnx/decoder_model_merged.onnx")))
    rng = np.random.default_rng(0)
    heads = {v.name: v.shape for v in session.get_inputs()}
    feeds = {
        "input_ids": np.array([[50258, 50259]], np.int64),
        "encoder_hidden_states": rng.standard_normal((1, 1500, 64)).astype(np.float32),
    }
    for name, shape in heads.items():
        if name.startswith("past_key_values"):
            length = 0 if "decoder" in name else 1500
            feeds[name] = rng.standard_normal((1, shape[1], length, shape[3])).astype(np.float32)
    first = dict(
        zip(
            [o.name for o in session.get_outputs()], session.run(None, {**feeds, "use_cache_branch": np.array([False])})
        )
    )
    cached = {
        **feeds,
        "use_cache_branch": np.array([True]),
        "encoder_hidden_states": np.zeros((1, 1500, 64), np.float32),
        **{k.replace("present", "past_key_values"): v for k, v in first.items() if "encoder" in k},
    }
    again = session.run(["logits"], cached)[0]
    np.testing.assert_allclose(again, first["logits"], rtol=1e-5, atol=1e-5)
    # and the cached branch really reads the past: other past keys, other logits (random ones:
    # a constant added to every key moves every score alike, which softmax does not see)
    cached["past_key_values.0.encoder.key"] = rng.standard_normal(
        cached["past_key_values.0.encoder.key"].shape, np.float32
    )
    assert np.abs(session.run(["logits"], cached)[0] - again).max() > 1e-3


@pytest.mark.slow
@pytest.mark.third_party
def test_whisper_folder_without_weights_is_refused(tmp_path):
    pytest.importorskip("mlx_whisper.load_models")
    folder = zoo.write_whisper_folder(tmp_path / "folder")
    (folder / "weights.safetensors").unlink()
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode == 2 and "weights.safetensors or weights.npz" in bad.stderr
    assert not (tmp_path / "package").exists()


@pytest.mark.slow
@pytest.mark.third_party
@pytest.mark.parametrize("layout", ["dimensions", "transformers-weights"])
def test_mlx_audio_whisper_folder_layouts_export(tmp_path, layout):
    """mlx-audio also reads Whisper's dimensions as config.json beside model.safetensors
    (where mlx-whisper reads weights.safetensors), and a Transformers checkpoint's names
    and convolution layout: mlx-audio loads the same model from each (every parameter
    equal to the MLX layout's), and the package is checked against it."""
    pytest.importorskip("mlx_audio.stt.models.whisper.decoding")
    from mlx.utils import tree_flatten

    from mlx2onnx.tasks import folder_kind
    from mlx2onnx.tasks.whisper_audio import load_mlx_audio_whisper

    folder = zoo.write_mlx_audio_whisper_folder(tmp_path / "folder", layout=layout)
    assert folder_kind(folder) == "mlx-audio whisper"
    same = zoo.write_mlx_audio_whisper_folder(tmp_path / "mlx-layout")
    loaded, reference = (dict(tree_flatten(load_mlx_audio_whisper(f).parameters())) for f in (folder, same))
    assert loaded.keys() == reference.keys()
    assert all(mx.array_equal(loaded[k], reference[k]) for k in reference)
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    assert _checked(tmp_path, folder, tmp_path / "package", ("encoder.onnx",))["rows"][0]["passed"]


@pytest.mark.slow
@pytest.mark.third_party
def test_mlx_audio_whisper_folder_without_its_processor_files_is_refused(tmp_path):
    """mlx-audio decodes with the folder's Transformers tokenizer: a folder without it is
    refused before anything is written, naming the files."""
    pytest.importorskip("mlx_audio.stt.models.whisper.decoding")
    folder = zoo.write_mlx_audio_whisper_folder(tmp_path / "folder")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode == 2 and "WhisperProcessor" in bad.stderr and "tokenizer.json" in bad.stderr, bad.stderr
    assert not (tmp_path / "package").exists()


@pytest.mark.genai
@pytest.mark.third_party
@pytest.mark.parametrize("architecture,variant", WHISPERS)
def test_whisper_package_transcribes_in_onnxruntime_genai(tmp_path, speech_packages, architecture, variant):
    pytest.importorskip("onnxruntime_genai")
    folder, package = speech_packages(variant, architecture)
    for graph in ("encoder", "decoder"):
        onnx.checker.check_model(onnx.load(str(package / f"{graph}.onnx")), full_check=True)
    samples = zoo.write_wav(tmp_path / "clip.wav", zoo.speech_clip(seed=11))
    tokens, model, prompt, _ = _mlx_decode(architecture, folder, samples, variant)
    got = zoo.genai_transcription(package, tmp_path / "clip.wav", len(prompt) + model.dims.n_text_ctx // 2)
    assert got[: len(prompt)] == prompt
    assert [t for t in got[len(prompt) :] if t != _eos(package)] == tokens


@pytest.mark.node
@pytest.mark.third_party
@pytest.mark.parametrize("variant", ["float32", "4-bit", "bfloat16"])
def test_moonshine_package_checks_and_transcribes_in_transformers_js(tmp_path, speech_packages, variant):
    """Moonshine reads raw samples of any length (its encoder's frame count floors the
    sample count three times); transformers.js allows 6 tokens per second of audio."""
    load = pytest.importorskip("mlx_audio.stt.utils").load
    from mlx2onnx.tasks.moonshine import mlx_moonshine_tokens

    folder, package = speech_packages(variant, "moonshine")
    _checked(tmp_path, folder, package, ("onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx"))
    config = json.loads((package / "config.json").read_text())
    assert "no type for Moonshine's encoder-decoder" in config["mlx2onnx"]["onnxruntime-genai"]
    assert not (package / "genai_config.json").exists()
    audio = zoo.speech_clip(seconds=2.7, seed=5)  # not a whole number of frames at any stride
    tokens = mlx_moonshine_tokens(load(str(folder)), audio, 12)
    assert len(set(tokens)) > 2
    heard = _asr(tmp_path, package, audio, 12)
    assert heard["tokens"][0] == config["decoder_start_token_id"]
    assert [t for t in heard["tokens"][1:] if t != config["eos_token_id"]] == tokens
