"""Real architectures from the mlx-lm package (tiny configs, random weights, nothing
downloaded): float32, bfloat16 and 4-bit quantized exports match MLX, and greedy
decoding through the exported prefill and decode graphs reproduces MLX's tokens."""

from __future__ import annotations

import importlib
import json
import os

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest
from mlx.utils import tree_flatten

import mlx2onnx
from mlx2onnx.errors import ExportOptionError
from mlx2onnx.llm import decoder
from mlx2onnx.llm.decoder import export_decoder
from mlx2onnx.llm.greedy import generate, mlx_generate
from tests.capture.test_loops import loops_in
from tests.support import zoo
from tests.support.zoo import LM_CONFIGS as CONFIGS
from tests.support.zoo import lm_tokens as tokens
from tests.support.zoo import mlx_lm_model as build

pytestmark = pytest.mark.third_party

pytest.importorskip("mlx_lm")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_float32(name):
    model = build(name)
    ids = tokens((2, 7))
    proto = mlx2onnx.export(model, ids)
    onnx.checker.check_model(proto, full_check=True)
    report = mlx2onnx.verify(proto, model, ids)
    assert report.passed and report.outputs[0].max_abs_error < 1e-4, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_bfloat16(name):
    if name == "mixtral":
        pytest.skip("MLX 0.32's CPU GatherMM runs only float32: there is no bfloat16 MLX reference here")
    model = build(name)
    model.set_dtype(mx.bfloat16)
    ids = tokens((1, 7))
    proto = mlx2onnx.export(model, ids)
    report = mlx2onnx.verify(proto, model, ids)
    assert report.passed, str(report)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_4bit(name):
    model = build(name)
    nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    ids = tokens((1, 7))
    proto = mlx2onnx.export(model, ids)
    report = mlx2onnx.verify(proto, model, ids)
    assert report.passed, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("group_size", [None, 32, 64])
@pytest.mark.parametrize("name", ["llama", "qwen3", "gemma3_text", "mixtral"])
def test_greedy_decoding_matches_mlx(name, group_size, tmp_path):
    """Float32, and 4-bit (nn.quantize at group size 32 and 64: the Linear layers as 4-bit
    blocks, the experts and embeddings as packed bytes) greedy tokens through
    onnxruntime equal MLX's own."""
    model = build(name)
    if group_size is not None:
        nn.quantize(model, group_size=group_size, bits=4)
        mx.eval(model.parameters())
    exported = export_decoder(model, tmp_path, prompt_length=5, max_length=16)
    prompt = tokens((1, 5), seed=3)
    ours = generate(exported, np.array(prompt), max_new_tokens=8)
    reference = mlx_generate(model, prompt, max_new_tokens=8)
    np.testing.assert_array_equal(ours, reference)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["model.decode.onnx", "model.prefill.onnx", "model.weights"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "qwen3", "gemma3_text"])
def test_dynamic_decoder_serves_any_batch_and_prompt_length(name, tmp_path):
    """One export with dynamic=True: greedy tokens equal MLX's at batch 1 to 3 and prompts
    of 1 to 20 tokens (max_length 32); the graphs' inputs carry the symbols."""
    model = build(name)
    exported = export_decoder(model, tmp_path, prompt_length=5, max_length=32, dynamic=True)
    for batch, length in [(1, 1), (3, 9), (2, 20)]:
        prompt = tokens((batch, length), seed=batch * 100 + length)
        ours = generate(exported, np.array(prompt), max_new_tokens=6)
        np.testing.assert_array_equal(ours, mlx_generate(model, prompt, max_new_tokens=6))
    prefill = onnx.load(str(exported.prefill), load_external_data=False)
    decode = onnx.load(str(exported.decode), load_external_data=False)
    dims = [d.dim_param or d.dim_value for d in prefill.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "prompt"]
    assert [d.dim_param or d.dim_value for d in decode.graph.input[2].type.tensor_type.shape.dim][0] == "batch"
    with pytest.raises(ExportOptionError, match="do not fit max_length=32"):
        generate(exported, np.zeros((1, 30), np.int32), max_new_tokens=6)


def test_dynamic_mixtral_from_a_small_example_past_its_sorting_threshold():
    """mlx-lm's SwitchGLU sorts the routing indices when there are 64 or more: at 2 x 8
    tokens (32 indices) the example traces the unsorted program and the far traces the
    sorted one. The exporter traces again from its largest sizes, where every trace sorts;
    the sorted program is exact at every size, 1 x 1 and the example included."""
    model = build("mixtral")
    dynamic = {"inputs": {0: "batch", 1: "seq"}}
    proto = mlx2onnx.Exporter(dynamic=dynamic).export(model, tokens((2, 8)))
    report = mlx2onnx.Verifier(sizes={"batch": [1, 2, 3], "seq": [1, 8, 13, 40]}).verify(proto, model, tokens((2, 8)))
    assert report.passed, str(report)


@pytest.mark.parametrize("name", zoo.MOE_ARCHITECTURES)
def test_dynamic_mixture_of_experts_from_a_2x8_example(name):
    """Each MoE architecture exported once from a 2 x 8 example (32 routed indices, below
    mlx-lm's sorting threshold) with dynamic batch and sequence matches MLX at 1 x 1, at the
    example and past the threshold."""
    model = zoo.moe_model(name)
    dynamic = {"inputs": {0: "batch", 1: "seq"}}
    proto = mlx2onnx.Exporter(dynamic=dynamic).export(model, tokens((2, 8)))
    report = mlx2onnx.Verifier(sizes={"batch": [1, 3], "seq": [1, 13, 40]}).verify(proto, model, tokens((2, 8)))
    assert report.passed, str(report)


def test_a_program_that_truly_changes_with_a_size_is_still_refused():
    """A branch on the size whose programs never settle (here: odd and even lengths)
    is refused with the first difference, even after the retrace from larger sizes, and
    the refusal names the line that branches."""

    def branchy(x):
        if x.shape[1] % 2:
            return mx.exp(x)
        return mx.sin(x)

    with pytest.raises(
        mlx2onnx.DynamicShapeError,
        match=r"the traced program changes with it.* Line \d+ of .*test_mlx_lm\.py \(`if x\.shape\[1\] % 2:`\) branches",
    ):
        mlx2onnx.Exporter(dynamic={"x": {1: "n"}}).export(branchy, mx.ones((2, 8)))


def test_dynamic_gpt_bigcode_positions_made_with_numpy():
    """gpt_bigcode builds its positions in NumPy from the length
    (``mx.array(np.arange(L))``): a constant that is ``arange`` of a size at every traced
    size becomes ``Range`` in the graph, so the model exports from 2 x 8 and runs at 1 x 1."""
    model = zoo.moe_model("gpt_bigcode")
    proto = mlx2onnx.Exporter(dynamic={"inputs": {0: "batch", 1: "seq"}}).export(model, tokens((2, 8)))
    assert "Range" in {n.op_type for n in proto.graph.node}
    report = mlx2onnx.Verifier(sizes={"batch": [1, 3], "seq": [1, 13, 40]}).verify(proto, model, tokens((2, 8)))
    assert report.passed, str(report)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, loops",
    [
        ("mamba", 2),
        ("rwkv7", 2),
        ("recurrent_gemma", 1),
        ("qwen3_next", 3),
        ("qwen3_5", 3),
        ("kimi_linear", 1),
        ("olmo_hybrid", 3),
        ("bailing_moe_linear", 2),
    ],
)
def test_dynamic_recurrence_becomes_an_onnx_loop(name, loops):
    """Each layer of these loops over the sequence in Python (mamba's selective scan,
    rwkv7's state update, recurrent_gemma's linear recurrence written with slice updates,
    the gated delta rules of qwen3_next, qwen3_5, olmo_hybrid and kimi_linear, bailing's
    linear attention): exported once from a 2 x 8 example, every recurrent
    layer is one ONNX Loop (no unrolled steps), and the model matches MLX from 1 x 1 to
    3 x 13 (3 x 40 for the first three: past recurrent_gemma's attention window of 4)."""
    model = zoo.recurrent_model(name)
    key = "tokens" if name == "recurrent_gemma" else "inputs"
    proto = mlx2onnx.Exporter(dynamic={key: {0: "batch", 1: "seq"}}).export(model, tokens((2, 8)))
    onnx.checker.check_model(proto, full_check=True)
    assert len(loops_in(proto)) == loops
    seq = [1, 2, 13, 40] if name in ("mamba", "rwkv7", "recurrent_gemma") else [1, 13]
    report = mlx2onnx.Verifier(sizes={"batch": [1, 3], "seq": seq}).verify(proto, model, tokens((2, 8)))
    assert report.passed, str(report)
    assert len(report.outputs) == 2 * len(seq)


@pytest.mark.parametrize("variant", ["bfloat16", "4-bit"])
def test_dynamic_recurrence_in_narrow_weights(variant):
    """mamba with bfloat16 weights, or its Linear layers 4-bit: the loop body rounds like
    MLX, and the 4-bit weights' DequantizeLinear runs once before the loop (onnxruntime
    cannot fuse one inside a body that reads its weight from outside)."""
    model = zoo.recurrent_model("mamba")
    if variant == "bfloat16":
        model.set_dtype(mx.bfloat16)
    else:
        nn.quantize(
            model,
            group_size=32,
            bits=4,
            class_predicate=lambda _, m: isinstance(m, nn.Linear) and m.weight.shape[-1] % 32 == 0,
        )
    mx.eval(model.parameters())
    proto = mlx2onnx.Exporter(dynamic={"inputs": {0: "batch", 1: "seq"}}).export(model, tokens((2, 8)))
    assert len(loops_in(proto)) == 2
    report = mlx2onnx.Verifier(sizes={"batch": [1, 3], "seq": [1, 2, 13]}).verify(proto, model, tokens((2, 8)))
    assert report.passed, str(report)


def test_dynamic_jamba_scan_whose_last_step_skips_a_slice():
    """jamba's scan updates its state tensor in place and slices the state after each
    update but the last: the loop runs that last step whole (the skipped slice lies
    inside the tensor), so the one export from 2 x 8 also serves a single token."""
    model = zoo.recurrent_model("jamba")
    ids = tokens((2, 8))
    proto = mlx2onnx.Exporter(dynamic={"inputs": {0: "batch", 1: "seq"}}).export(model, ids)
    assert len(loops_in(proto)) == 1
    report = mlx2onnx.Verifier(sizes={"batch": [1, 3], "seq": [1, 2, 3, 40]}).verify(proto, model, ids)
    assert report.passed, str(report)


def test_decode_step_reads_only_the_filled_cache(tmp_path):
    """The decode graph's past has a dynamic length and each present is one longer: no
    tensor in it is max_length long, so a step costs what the tokens so far cost."""
    model = build("llama")
    exported = export_decoder(model, tmp_path, prompt_length=4, max_length=4096)
    decode = onnx.load(str(exported.decode), load_external_data=False)
    past = decode.graph.input[2].type.tensor_type.shape.dim
    present = decode.graph.output[1].type.tensor_type.shape.dim
    assert past[2].dim_param and present[2].dim_param, (past, present)
    floats = [v for v in decode.graph.value_info if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT]
    assert 4096 not in [d.dim_value for v in floats for d in v.type.tensor_type.shape.dim]
    prompt = tokens((1, 4), seed=2)
    np.testing.assert_array_equal(
        generate(exported, np.array(prompt), max_new_tokens=6), mlx_generate(model, prompt, max_new_tokens=6)
    )


def test_prefill_and_decode_share_one_weights_file(tmp_path):
    model = build("llama")
    exported = export_decoder(model, tmp_path, prompt_length=4, max_length=12)
    weight_bytes = sum(v.nbytes for _, v in tree_flatten(model.parameters()) if v.nbytes >= 1024)
    size = os.path.getsize(exported.weights)
    assert weight_bytes <= size < 1.2 * weight_bytes  # stored once, not once per graph
    for path in (exported.prefill, exported.decode):
        assert os.path.getsize(path) < 0.2 * weight_bytes
        proto = onnx.load(str(path), load_external_data=False)
        external = [t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
        assert {e.value for t in external for e in t.external_data if e.key == "location"} == {"model.weights"}
    decode = onnx.load(str(exported.decode), load_external_data=False)
    assert [i.name for i in decode.graph.input][:4] == [
        "input_ids",
        "position",
        "past_key_values.0.key",
        "past_key_values.0.value",
    ]
    assert [o.name for o in decode.graph.output][:3] == ["logits", "present.0.key", "present.0.value"]


def test_decoder_makes_its_directory_and_removes_it_when_it_fails(tmp_path, monkeypatch):
    model = build("llama")
    exported = export_decoder(model, tmp_path / "out", prompt_length=4, max_length=12)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "model.decode.onnx",
        "model.prefill.onnx",
        "model.weights",
    ]
    assert exported.decode.parent == tmp_path / "out"
    with pytest.raises(ExportOptionError, match="does not exist"):
        export_decoder(model, tmp_path / "no" / "out", prompt_length=4, max_length=12)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(decoder, "save_sharing_weights", fail)
    with pytest.raises(OSError, match="disk full"):
        export_decoder(model, tmp_path / "failed", prompt_length=4, max_length=12)
    assert not (tmp_path / "failed").exists() and not (tmp_path / "no").exists()


def test_model_directory_with_config_and_safetensors(tmp_path):
    """The documented flow for a model directory: mlx_lm.utils.load_model, then export."""
    from mlx_lm.utils import load_model

    model = build("qwen3")
    (tmp_path / "config.json").write_text(json.dumps(CONFIGS["qwen3"]))
    mx.save_safetensors(str(tmp_path / "model.safetensors"), dict(tree_flatten(model.parameters())))
    loaded, _config = load_model(tmp_path)
    ids = tokens((1, 6))
    proto = mlx2onnx.export(loaded, ids)
    assert mlx2onnx.verify(proto, loaded, ids)
    np.testing.assert_array_equal(np.array(loaded(ids)), np.array(model(ids)))


@pytest.mark.slow
def test_decoder_refuses_overwriting_bad_positions_and_token_ids(tmp_path):
    """export_decoder keeps existing files unless overwrite=True; the decode graph raises
    for a position outside 0..max_length-1 (MLX would write its cache out of bounds);
    generate refuses token ids outside the vocabulary."""
    model = build("llama")
    exported = export_decoder(model, tmp_path, prompt_length=4, max_length=12)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    with pytest.raises(ExportOptionError, match="already exists"):
        export_decoder(model, tmp_path, prompt_length=4, max_length=12)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
    exported = export_decoder(model, tmp_path, prompt_length=4, max_length=12, overwrite=True)
    _, decode = exported.sessions()
    feeds = {
        i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
        for i in decode.get_inputs()
        if i.name.startswith("past")
    }
    feeds["input_ids"] = np.array([[3]], np.int32)
    for position in (0, 11):
        decode.run(None, {**feeds, "position": np.array(position, np.int32)})
    for position in (-1, 12, 40):
        with pytest.raises(Exception, match="out of bounds|out of range|indices"):
            decode.run(None, {**feeds, "position": np.array(position, np.int32)})
    with pytest.raises(ExportOptionError, match="token ids"):
        generate(exported, np.array([[1, -1, 2, 3]], np.int32), max_new_tokens=2)
    with pytest.raises(ExportOptionError, match="token ids"):
        generate(exported, np.array([[1, 10**6, 2, 3]], np.int32), max_new_tokens=2)
    ours = generate(exported, np.array(tokens((1, 4), seed=5)), max_new_tokens=5)
    np.testing.assert_array_equal(ours, mlx_generate(model, tokens((1, 4), seed=5), max_new_tokens=5))


@pytest.mark.slow
def test_dynamic_phi3small_masks_its_logits_with_a_dynamic_scatter():
    """phi3small writes -inf into 91 fixed logit columns (``out[..., ids] = -inf``): the
    Scatter is exported with batch and sequence dynamic, and matches at 1 x 1 and 3 x 13."""
    module = importlib.import_module("mlx_lm.models.phi3small")
    args = module.ModelArgs.from_dict(
        dict(
            model_type="phi3small",
            hidden_size=64,
            dense_attention_every_n_layers=2,
            ff_intermediate_size=128,
            gegelu_limit=20.0,
            num_hidden_layers=2,
            num_attention_heads=4,
            layer_norm_epsilon=1e-5,
            vocab_size=100400,
            num_key_value_heads=2,
            mup_attn_multiplier=1.0,
            mup_use_scaling=True,
            mup_embedding_multiplier=10.0,
            mup_width_multiplier=8.0,
            rope_embedding_base=1e6,
            rope_position_scale=1.0,
            blocksparse_block_size=64,
            blocksparse_num_local_blocks=16,
            blocksparse_vert_stride=8,
        )
    )
    mx.random.seed(0)
    model = module.Model(args)
    mx.eval(model.parameters())
    ids = mx.array(np.random.default_rng(0).integers(0, 1000, (2, 8)).astype(np.int32))
    proto = mlx2onnx.Exporter(dynamic={"inputs": {0: "batch", 1: "seq"}}).export(model, ids)
    report = mlx2onnx.Verifier(sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 13}]).verify(proto, model, ids)
    assert report.passed, str(report)
