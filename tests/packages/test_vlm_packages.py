"""mlx-vlm folders -> image-text-to-text packages, run by transformers.js and onnxruntime-genai.

gemma3, idefics3 (SmolVLM), qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, glm_ocr, llava, mistral3, pixtral and
paligemma, internvl_chat, llava_next, aya_vision and llava_bunny folders are
written by mlx-vlm's own save functions (tiny text and vision configs, a tokenizer trained
here with the architecture's image tokens), exported with ``mlx2onnx export``, checked with
``mlx2onnx check`` and run by transformers.js under Node (its processor expands the image
tokens and preprocesses the PNG; its model runs the three graphs and merges the image
features), and the gemma3 package by onnxruntime-genai's gemma3 type (its own processor on
the PNG, its embedding model merging inside the graph), the Qwen2-VL packages by its
qwen2_5_vl type, the Qwen3-VL packages by its qwen3_vl type and the Pixtral-tower packages by
its mistral3 type: the
greedy tokens are mlx-vlm's generation on the same ids and pixels (float32, 4-bit and
bfloat16 folders). A SmolVLM folder whose processor splits images into tiles runs split in
transformers.js.
"""

from __future__ import annotations

import importlib.util
import json

import mlx.core as mx
import numpy as np
import onnx
import pytest

from mlx2onnx.io.graph_files import graph_path
from tests.support import zoo
from tests.support.commands import cli

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

VARIANTS = {"float32": {}, "4-bit": {"bits": 4}, "bfloat16": {"dtype": mx.bfloat16}}
ARCHITECTURES = (
    "gemma3",
    "idefics3",
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen3_vl",
    "qwen3_vl_moe",
    "glm_ocr",
    "llava",
    "mistral3",
    "pixtral",
    "paligemma",
    "internvl_chat",
    "llava_next",
    "aya_vision",
    "llava_bunny",
)
QWEN = {
    "qwen2_vl": 14,
    "qwen2_5_vl": 14,
    "qwen3_vl": 16,
    "qwen3_vl_moe": 16,
    "glm_ocr": 14,
}  # the Qwen-VL patch folders' patch sizes
# bfloat16 folders mlx-vlm 0.7.10 cannot run here: MLX's CPU gather_mm multiplies float32 only
# ("[GatherMM::eval] Currently only supports float32": a mixture-of-experts text model), and llava_next
# turns its bfloat16 image_newline into a NumPy array, which has no bfloat16 (a ValueError)
NO_MLX_REFERENCE = {("qwen3_vl_moe", "bfloat16"), ("llava_next", "bfloat16")}
CASES = [
    (arch, variant) for arch in ARCHITECTURES for variant in sorted(VARIANTS) if (arch, variant) not in NO_MLX_REFERENCE
] + [("smolvlm", "float32")]  # SmolVLM: idefics3's layout and export under its own model_type (mlx-vlm's smolvlm)
GRAPHS = ("vision_encoder", "embed_tokens", "decoder_model_merged")


@pytest.fixture(scope="module")
def vlm_packages(tmp_path_factory):
    made = {}

    def make(architecture, variant):
        if (architecture, variant) not in made:
            where = tmp_path_factory.mktemp(architecture + variant.replace("-", ""))
            folder = zoo.write_vlm_folder(where / "folder", architecture, **VARIANTS[variant])
            cli("export", folder, "-o", where / "package", cwd=where, check_rc=0)
            made[architecture, variant] = folder, where / "package"
        return made[architecture, variant]

    return make


def _mlx_tokens(folder, ids, pixels):
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens

    return mlx_vlm_tokens(load_model(folder), architecture_of(folder), mx.array([ids]), pixels, 12)[0]


@pytest.mark.node
@pytest.mark.parametrize("architecture,variant", CASES)
def test_vlm_folder_generates_mlx_vlm_tokens_in_transformers_js(tmp_path, vlm_packages, architecture, variant):
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    folder, package = vlm_packages(architecture, variant)
    for graph in GRAPHS:
        onnx.checker.check_model(onnx.load(str(graph_path(package, f"onnx/{graph}.onnx"))), full_check=True)
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    result = json.loads(checked.stdout)
    assert checked.returncode == 0 and result["passed"], checked.stdout + checked.stderr
    if variant == "4-bit":
        ops = {n.op_type for n in onnx.load(str(graph_path(package, "onnx/decoder_model_merged.onnx"))).graph.node}
        assert "MatMulNBits" in ops, ops
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    size = (
        zoo.VLM_IMAGE_SIZES.get(architecture)
        or json.loads((folder / "config.json").read_text())["vision_config"]["image_size"]
    )
    image = zoo.generated_image(size, seed=4)
    Image.fromarray(image).save(tmp_path / "image.png")
    heard = json.loads(
        zoo._node(
            "transformers_vlm.mjs", str(package), str(tmp_path / "image.png"), "12", zoo.VLM_PROMPTS[architecture]
        )[-1]
    )
    want = _mlx_tokens(folder, heard["ids"], zoo.vlm_pixels(architecture, image))
    assert len(set(want)) > 1  # greedy tokens that tell a wrong logit from a right one
    assert heard["tokens"] == want
    if architecture == "llava":  # the processor's expansion: 4 x 4 patches, the class token dropped
        assert heard["ids"].count(json.loads((folder / "config.json").read_text())["image_token_index"]) == 16
    if architecture in (
        "llava",
        "llava_next",
        "llava_bunny",
        "mistral3",
        "pixtral",
        "paligemma",
        "internvl_chat",
        "aya_vision",
    ):
        assert "processor(await RawImage.read" in (package / "README.md").read_text()  # the images first
    if architecture == "llava_bunny":  # the package's own <image> token, past the embedding table, 27 x 27 patches
        token = json.loads((package / "config.json").read_text())["image_token_index"]
        assert token == json.loads((folder / "config.json").read_text())["vocab_size"]
        assert heard["ids"].count(token) == 729


@pytest.mark.node
@pytest.mark.parametrize("height,width", [(32, 64), (64, 64)])
def test_idefics3_splits_images_into_tiles_in_transformers_js(tmp_path_factory, tmp_path, height, width):
    """A SmolVLM folder whose processor splits images: transformers.js cuts the image
    (longest edge two tiles of the tower's 32 pixels) into 1 x 2 or 2 x 2 tiles, each
    exactly the image's pixels there, and adds a global image; the prompt names each
    tile's row and column; the package's greedy tokens are mlx-vlm's on the processor's ids
    and tiles. (The global image is resized by each library's own filter: measured in
    docs/packages.md.)"""
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    where = tmp_path_factory.mktemp("idefics3split")
    folder = zoo.write_vlm_folder(where / "folder", "idefics3", split=True)
    package = where / "package"
    cli("export", folder, "-o", package, cwd=where, check_rc=0)
    processor = json.loads((package / "preprocessor_config.json").read_text())
    assert processor["do_image_splitting"] and processor["size"] == {"longest_edge": 64}
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    assert checked.returncode == 0 and json.loads(checked.stdout)["passed"], checked.stdout + checked.stderr
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    image = zoo.generated_image(height, seed=4, width=width)
    Image.fromarray(image).save(tmp_path / "image.png")
    heard, inputs = zoo.transformers_vlm_tiles(package, tmp_path / "image.png", zoo.VLM_PROMPTS["idefics3"], tmp_path)
    rows, cols = height // 32, width // 32
    assert heard["pixel_dims"] == [1, rows * cols + 1, 3, 32, 32]
    pixels = inputs["pixel_values"]
    scaled = zoo.vlm_pixels("idefics3", image)["pixel_values"][0, 0]
    for k in range(rows * cols):
        r, c = divmod(k, cols)
        np.testing.assert_array_equal(pixels[0, k], scaled[:, 32 * r : 32 * r + 32, 32 * c : 32 * c + 32])
    tokens = json.loads((package / "tokenizer.json").read_text())["added_tokens"]
    named = {t["id"] for t in tokens if t["content"].startswith("<row_")}
    assert len(named & set(heard["ids"])) == rows * cols
    assert inputs["pixel_attention_mask"].all()
    want = _mlx_tokens(folder, heard["ids"], inputs)
    assert len(set(want)) > 1
    assert heard["tokens"] == want


GENAI_ARCHITECTURES = ("gemma3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "mistral3", "pixtral")
GENAI_CASES = [
    (arch, variant)
    for arch in GENAI_ARCHITECTURES
    for variant in sorted(VARIANTS)
    if (arch, variant) not in NO_MLX_REFERENCE
]


@pytest.mark.genai
@pytest.mark.parametrize("architecture,variant", GENAI_CASES)
def test_vlm_folder_generates_mlx_vlm_tokens_in_onnxruntime_genai(tmp_path, vlm_packages, architecture, variant):
    """onnxruntime-genai's gemma3 type, its qwen2_5_vl type for both Qwen2-VL folders,
    its qwen3_vl type for both Qwen3-VL folders and its mistral3 type for both Pixtral-tower folders (its own processor on the PNG, its
    embedding model merging the features, mRoPE positions computed by genai) give
    mlx-vlm's tokens."""
    from PIL import Image

    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("mlx_vlm.utils")
    folder, package = vlm_packages(architecture, variant)
    for graph in ("embedding", "genai_vision"):
        if graph_path(package, f"onnx/{graph}.onnx").is_file():
            onnx.checker.check_model(onnx.load(str(graph_path(package, f"onnx/{graph}.onnx"))), full_check=True)
    assert "onnxruntime-genai" not in json.loads((package / "config.json").read_text())["mlx2onnx"]
    image = zoo.generated_image(zoo.VLM_IMAGE_SIZES.get(architecture, 64), seed=4)
    Image.fromarray(image).save(tmp_path / "image.png")
    ids, got = zoo.genai_vlm_tokens(package, tmp_path / "image.png", zoo.VLM_PROMPTS[architecture], 12)
    want = _mlx_tokens(folder, ids, zoo.vlm_pixels(architecture, image))
    assert len(set(want)) > 1
    assert got == want


@pytest.mark.node
@pytest.mark.parametrize("architecture", sorted(QWEN))
def test_qwen_vision_graph_takes_every_image_size(tmp_path, vlm_packages, architecture):
    """The Qwen-VL vision encoders read the grid from the grid input: a wide image of
    other dimensions (6 x 10 patches; for qwen2_5_vl, merge windows 3 x 5 in two partial
    attention windows; for qwen3_vl, position embeddings interpolated at 6 x 10; for
    glm_ocr, merge windows through its convolution) gives mlx-vlm's tokens in
    transformers.js too."""
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    folder, package = vlm_packages(architecture, "float32")
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    image = zoo.generated_image(6 * QWEN[architecture], seed=7, width=10 * QWEN[architecture])
    Image.fromarray(image).save(tmp_path / "wide.png")
    heard = json.loads(
        zoo._node(
            "transformers_vlm.mjs", str(package), str(tmp_path / "wide.png"), "12", zoo.VLM_PROMPTS[architecture]
        )[-1]
    )
    assert heard["ids"].count(json.loads((folder / "config.json").read_text())["image_token_id"]) == 6 * 10 // 4
    assert heard["tokens"] == _mlx_tokens(folder, heard["ids"], zoo.vlm_pixels(architecture, image))


@pytest.mark.node
@pytest.mark.genai
@pytest.mark.parametrize("architecture", ["mistral3", "pixtral"])
@pytest.mark.parametrize("height,width", [(32, 48), (64, 32)])
def test_pixtral_towers_take_every_image_size(tmp_path, vlm_packages, architecture, height, width):
    """The Pixtral vision encoder numbers its patches from the image's own grid: wide and
    tall images (mistral3: 2 x 3 and 4 x 2 tokens of 2 x 2 patches; pixtral: 4 x 6 and
    8 x 4 patches), their rows of image tokens ended by [IMG_BREAK] and the last by
    [IMG_END] as both processors expand them, give mlx-vlm's tokens in transformers.js and
    in onnxruntime-genai's mistral3 type."""
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    folder, package = vlm_packages(architecture, "float32")
    image = zoo.generated_image(height, seed=7, width=width)
    Image.fromarray(image).save(tmp_path / "image.png")
    pixels = zoo.vlm_pixels(architecture, image)
    from tokenizers import Tokenizer

    step = 8 * json.loads((folder / "config.json").read_text()).get("spatial_merge_size", 1)
    token = Tokenizer.from_file(str(package / "tokenizer.json")).token_to_id
    row = [token("[IMG]")] * (width // step) + [token("[IMG_BREAK]")]
    expanded = (row * (height // step))[:-1] + [token("[IMG_END]")]
    ran = []
    if zoo.node_available():
        heard = json.loads(
            zoo._node(
                "transformers_vlm.mjs", str(package), str(tmp_path / "image.png"), "12", zoo.VLM_PROMPTS[architecture]
            )[-1]
        )
        ran.append((heard["ids"], heard["tokens"]))
    if importlib.util.find_spec("onnxruntime_genai") is not None:
        ran.append(zoo.genai_vlm_tokens(package, tmp_path / "image.png", zoo.VLM_PROMPTS[architecture], 12))
    if not ran:
        pytest.skip("neither transformers.js nor onnxruntime-genai is installed")
    eos = json.loads((folder / "generation_config.json").read_text())["eos_token_id"]
    for ids, tokens in ran:
        assert ids[: len(expanded)] == expanded
        want = _mlx_tokens(folder, ids, pixels)
        want = want[: want.index(eos)] if eos in want else want  # the runtimes stop at the end token
        assert len(set(want)) > 1 and [t for t in tokens if t != eos] == want


@pytest.mark.parametrize("architecture", sorted(QWEN))
def test_qwen_prompt_with_two_images_of_different_sizes(vlm_packages, architecture):
    """Two images of different sizes in one prompt: one patch list with a two-row grid.
    The vision graph keeps each patch's attention to its own image (and window), and the
    package's graphs in plain onnxruntime sessions (merged as transformers.js merges them,
    mlx-vlm's mRoPE positions) give mlx-vlm's tokens. (transformers.js 4.3's Qwen2-VL image
    processor stacks the images of one call as the frames of one, so its pipeline takes
    one image per prompt.)"""
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import package_vlm_tokens

    folder, package = vlm_packages(architecture, "float32")
    model, arch = load_model(folder), architecture_of(folder)
    p = QWEN[architecture]
    each = [
        zoo.vlm_pixels(architecture, zoo.generated_image(8 * p, seed=8)),
        zoo.vlm_pixels(architecture, zoo.generated_image(6 * p, seed=9, width=10 * p)),
    ]
    pixels = {name: np.concatenate([p[name] for p in each]) for name in each[0]}
    config = model.config
    image = [getattr(config, "vision_start_token_id", None) or config.image_start_token_id, config.image_token_id]
    ids = np.array([[40, 41] + image[:1] + image[1:] * 16 + [42, 43] + image[:1] + image[1:] * 15 + [44, 45]], np.int64)
    got, _, _ = package_vlm_tokens(package, ids, pixels, 12, config.image_token_id, arch.rope_index(model, ids, pixels))
    want = _mlx_tokens(folder, ids[0].tolist(), pixels)
    assert len(set(want)) > 1 and got == want


@pytest.mark.genai
@pytest.mark.parametrize("architecture", sorted(set(QWEN) & set(GENAI_ARCHITECTURES)))
def test_qwen_prompt_with_two_images_in_onnxruntime_genai(tmp_path, vlm_packages, architecture):
    """onnxruntime-genai's Qwen processor cuts two images of different sizes into one patch
    list with a two-row grid; the package gives mlx-vlm's tokens for its prompt ids."""
    from PIL import Image

    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("mlx_vlm.utils")
    folder, package = vlm_packages(architecture, "float32")
    p = QWEN[architecture]
    images = [zoo.generated_image(8 * p, seed=8), zoo.generated_image(6 * p, seed=9, width=10 * p)]
    for k, image in enumerate(images):
        Image.fromarray(image).save(tmp_path / f"image{k}.png")
    prompt = "<|vision_start|><|image_pad|><|vision_end|>"
    ids, got = zoo.genai_vlm_tokens(
        package, [tmp_path / "image0.png", tmp_path / "image1.png"], f"{prompt} first {prompt} second", 12
    )
    assert ids.count(json.loads((folder / "config.json").read_text())["image_token_id"]) == (8 * 8 + 6 * 10) // 4
    each = [zoo.vlm_pixels(architecture, image) for image in images]
    want = _mlx_tokens(folder, ids, {name: np.concatenate([p[name] for p in each]) for name in each[0]})
    assert len(set(want)) > 1 and got == want


def test_qwen3_vl_deepstack_features_reach_the_decoder(vlm_packages):
    """The package's Qwen3-VL graphs (plain onnxruntime sessions, merged as the runtimes
    merge them) give mlx-vlm's tokens, and mlx-vlm without its DeepStack features gives
    others: the features the wide embeddings carry are the ones that count."""
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import package_vlm_tokens

    folder, package = vlm_packages("qwen3_vl", "float32")
    model, arch = load_model(folder), architecture_of(folder)
    pixels = zoo.vlm_pixels("qwen3_vl", zoo.generated_image(128, seed=4))
    config = model.config
    ids = np.array([[7, 8, config.vision_start_token_id] + [config.image_token_id] * 16 + [9, 10, 11]], np.int64)
    got, _, _ = package_vlm_tokens(package, ids, pixels, 12, config.image_token_id, arch.rope_index(model, ids, pixels))
    assert got == _mlx_tokens(folder, ids[0].tolist(), pixels)
    embeds, first = arch.mlx_embeddings(model, mx.array(ids), pixels)
    del first["deepstack_visual_embeds"], first["visual_pos_masks"]
    assert _greedy(model, mx.array(ids), embeds, first) != got


def _greedy(model, ids: mx.array, embeds: mx.array, first: dict, count: int = 12) -> list[int]:
    """mlx-vlm's language model's greedy tokens from merged embeddings and its first step's arguments."""
    from mlx2onnx.tasks.vision_language import _Language

    cache = _Language(model).make_cache()
    logits = model.language_model(ids, inputs_embeds=embeds, cache=cache, **first).logits
    tokens = []
    for _ in range(count):
        tokens.append(int(logits[0, -1].argmax()))
        logits = model.language_model(mx.array([[tokens[-1]]]), cache=cache).logits
    return tokens


@pytest.mark.parametrize("architecture", ["internvl_chat", "aya_vision"])
def test_tile_vision_graphs_take_several_tiles(vlm_packages, architecture):
    """InternVL's and Aya Vision's tiles (their processors' ``max_num`` / ``max_patches``
    above 1; transformers.js's Llava processor makes one): two tiles' tokens in one
    prompt, the package's graphs in plain onnxruntime sessions give mlx-vlm's tokens."""
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks.vision_language import package_vlm_tokens

    folder, package = vlm_packages(architecture, "float32")
    model = load_model(folder)
    tiles = [zoo.vlm_pixels(architecture, zoo.generated_image(32, seed=seed))["pixel_values"] for seed in (4, 5)]
    pixels = {"pixel_values": np.concatenate(tiles)}
    image = model.config.image_token_index
    ids = np.array([[40, 41] + [image] * 8 + [42, 43, 44]], np.int64)
    got, _, _ = package_vlm_tokens(package, ids, pixels, 12, image)
    want = _mlx_tokens(folder, ids[0].tolist(), pixels)
    assert len(set(want)) > 1 and got == want


def test_bunny_tokenizer_without_a_free_id_is_refused(tmp_path):
    """A Bunny folder whose tokenizer already uses the first id past the embedding table
    (where the package puts its <image> token) is refused, nothing written."""
    pytest.importorskip("mlx_vlm.utils")
    folder = zoo.write_vlm_folder(tmp_path / "folder", "llava_bunny")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    extra = {"content": "<extra>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    tokenizer["added_tokens"].append({"id": vocab, **extra, "special": True})
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    done = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert done.returncode != 0 and f"uses id {vocab}" in done.stderr and "<image>" in done.stderr, done.stderr
    assert not (tmp_path / "package").exists()


def test_paligemma_prompt_attends_both_ways(vlm_packages):
    """The PaliGemma package's first decoder call (the prompt) attends both ways among its
    tokens and later calls see every key before them: its graphs in plain onnxruntime
    sessions give mlx-vlm's tokens, and mlx-vlm with a causal prompt gives others."""
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import package_vlm_tokens

    folder, package = vlm_packages("paligemma", "float32")
    model, arch = load_model(folder), architecture_of(folder)
    pixels = zoo.vlm_pixels("paligemma", zoo.generated_image(32, seed=4))
    image = model.config.image_token_index
    ids = np.array([[image] * 16 + [40, 41, 42, 43, 44]], np.int64)
    got, _, _ = package_vlm_tokens(package, ids, pixels, 12, image)
    assert got == _mlx_tokens(folder, ids[0].tolist(), pixels)
    embeds, _ = arch.mlx_embeddings(model, mx.array(ids), pixels)
    causal = mx.tril(mx.ones((ids.shape[1], ids.shape[1])))[None, None]
    assert _greedy(model, mx.array(ids), embeds, {"mask": causal}) != got


@pytest.mark.slow
def test_vlm_folder_kinds(tmp_path, vlm_packages):
    """A gemma3 folder without its vision tower's weights (as mlx-lm writes a VLM's text
    model) stays a text-generation folder; one without a chat template is exported with
    transformers.js declared unable (its Gemma3 processor loads the template); an
    idefics3 package says onnxruntime-genai has no such type."""
    pytest.importorskip("mlx_vlm.utils")
    from mlx2onnx.tasks import folder_task

    _, package = vlm_packages("idefics3", "float32")
    assert "no idefics3 type" in json.loads((package / "config.json").read_text())["mlx2onnx"]["onnxruntime-genai"]
    folder = zoo.write_vlm_folder(tmp_path / "folder")
    assert folder_task(folder) == "image-text-to-text"
    (folder / "chat_template.jinja").unlink()
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    notes = json.loads((tmp_path / "package" / "config.json").read_text())["mlx2onnx"]
    assert "chat_template.jinja" in notes["transformers.js"]
    weights = mx.load(str(folder / "model.safetensors"))
    mx.save_safetensors(
        str(folder / "model.safetensors"), {k: v for k, v in weights.items() if not k.startswith("vision_tower.")}
    )
    assert folder_task(folder) == "text-generation"


def test_every_vlm_architecture_has_a_test_folder():
    """Each architecture the registry gives the mlx-vlm kind is exported in this file's cases."""
    from mlx2onnx.tasks import VISION_LANGUAGE

    model_types = {"llava_bunny": "bunny-llama"}  # the mlx-vlm module's name -> its folders' model_type
    assert {id(a) for a in VISION_LANGUAGE.values()} == {
        id(VISION_LANGUAGE[model_types.get(name, name)]) for name in ARCHITECTURES
    }
