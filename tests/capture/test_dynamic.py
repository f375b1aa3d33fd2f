"""Dynamic dimensions (``Exporter(dynamic=...)``): one export, checked against MLX at
many sizes; the refusals name the input, the dimension and the primitive that fixes it."""

from __future__ import annotations

import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx import Dim, DynamicShapeError, DynamicSpecError, Exporter, Verifier
from mlx2onnx.io import metadata
from mlx2onnx.models import example

BATCH_SEQ = {"input_ids": {0: "batch", 1: "seq"}}


def export_dynamic(fun, *args, dynamic, opset=None, **kwargs):
    proto = Exporter(dynamic=dynamic, opset=opset).export(fun, *args, **kwargs)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def assert_passes(report):
    assert report.passed, str(report)
    assert len({o.at for o in report.outputs}) > 1, "the check ran at one size only"


# -- the reference models, at every size the issue names ------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "encoder"])
def test_reference_model_runs_at_every_batch_and_sequence_length(name):
    model, args, kwargs = example(name)
    dynamic = dict(BATCH_SEQ)
    if name == "encoder":
        dynamic["attention_mask"] = {0: "batch", 1: "seq"}
    proto = export_dynamic(model, *args, dynamic=dynamic, **kwargs)
    report = Verifier(sizes={"batch": [1, 3, 8], "seq": [1, 7, 64, 256]}).verify(proto, model, *args, **kwargs)
    assert_passes(report)
    assert len(report.outputs) == 12 * len(proto.graph.output)
    assert max(o.max_abs_error for o in report.outputs) < 1e-4


@pytest.mark.parametrize("name", ["llama", "encoder"])
def test_dynamic_export_is_as_lean_as_the_static_one(name):
    """The norms' element counts over the fixed hidden size are read from Shape at run
    time in a shapeless trace; those static reads fold, so the norms and the attention
    fuse as they do in the static export."""
    model, args, kwargs = example(name)
    dynamic = dict(BATCH_SEQ)
    if name == "encoder":
        dynamic["attention_mask"] = {0: "batch", 1: "seq"}
    static = Exporter(opset=24).export(model, *args, **kwargs)  # 24: onnxruntime runs all three fused ops
    proto = export_dynamic(model, *args, dynamic=dynamic, opset=24, **kwargs)
    fused = {"llama": ("RMSNormalization", "Attention", "RotaryEmbedding"), "encoder": ("LayerNormalization",)}[name]
    for op_type in fused:
        count = sum(n.op_type == op_type for n in static.graph.node)
        assert count > 0 and sum(n.op_type == op_type for n in proto.graph.node) == count, op_type
    assert not [n for n in proto.graph.node if n.op_type in ("ReduceProd", "Reciprocal")]
    assert len(proto.graph.node) <= 1.25 * len(static.graph.node), (len(proto.graph.node), len(static.graph.node))
    assert_passes(Verifier(sizes={"batch": [1, 3], "seq": [1, 9]}).verify(proto, model, *args, **kwargs))


def test_graph_inputs_and_outputs_carry_the_symbols():
    model, args, kwargs = example("encoder")
    proto = export_dynamic(
        model, *args, dynamic={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}, **kwargs
    )

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert [dims(v) for v in proto.graph.input] == [["batch", "seq"], ["batch", "seq"]]
    assert [dims(v) for v in proto.graph.output] == [["batch", "seq", 32], ["batch", 32]]
    meta = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(meta["mlx2onnx.dynamic"]) == {
        "symbols": {"batch": 2, "seq": 8},
        "multiple_of": {"batch": 1, "seq": 1},
        "range": {"batch": [1, None], "seq": [1, None]},
        "inputs": {"input_ids": {"0": "batch", "1": "seq"}, "attention_mask": {"0": "batch", "1": "seq"}},
    }


@pytest.mark.parametrize("name", ["llama", "encoder"])
def test_onnx_shape_inference_derives_symbolic_output_dimensions(name):
    """Clear every declared shape but the inputs', then let ONNX infer them (strict)."""
    model, args, kwargs = example(name)
    dynamic = {k: {0: "batch", 1: "seq"} for k in ["input_ids", *kwargs]}
    proto = export_dynamic(model, *args, dynamic=dynamic, **kwargs)
    del proto.graph.value_info[:]
    for out in proto.graph.output:
        out.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    first = inferred.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in first[:2]] == ["batch", "seq"], str(first)


# -- a conv net: dynamic batch and image size ---------------------------------------------
class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.norm = nn.BatchNorm(8)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.avg = nn.AvgPool2d(2, stride=2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Linear(16, 5)

    def __call__(self, x):
        x = self.pool(nn.relu(self.norm(self.conv1(x))))
        x = nn.relu(self.conv2(x))
        return self.head(x.mean(axis=(1, 2))), self.up(self.avg(x))


def conv_net():
    mx.random.seed(3)
    net = ConvNet()
    net.eval()
    mx.eval(net.parameters())
    return net, mx.random.normal((2, 32, 32, 3))


def test_conv_net_runs_at_every_batch_and_image_size():
    net, x = conv_net()
    dynamic = {"x": {0: "batch", 1: Dim("h", multiple_of=32), 2: Dim("w", multiple_of=32)}}
    proto = export_dynamic(net, x, dynamic=dynamic)
    sizes = [{"batch": 1, "h": 32, "w": 32}, {"batch": 3, "h": 64, "w": 96}, {"batch": 2, "h": 160, "w": 32}]
    assert_passes(Verifier(sizes=sizes).verify(proto, net, x))
    assert_passes(Verifier().verify(proto, net, x))  # default: example, smallest, beyond the traces


def test_conv_net_at_any_image_size_is_refused_where_pooling_crops_odd_sizes():
    net, x = conv_net()
    with pytest.raises(
        DynamicShapeError,
        match=r"dimension 1 \('h'\) of input 'x' cannot be dynamic.*"
        r"record \d+.*Reshape.*Flatten.*multiple_of",
    ):
        Exporter(dynamic={"x": {1: "h"}}).export(net, x)


class Stem(nn.Module):
    """A ResNet stem: its pooling window positions floor the image size twice over."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 7, stride=2, padding=3)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2, padding=1)

    def __call__(self, x):
        return self.conv2(self.pool(nn.relu(self.conv(x)))).mean(axis=(1, 2))


def test_floored_sizes_are_refused_not_fitted_from_nearby_traces():
    """At 64, 65 and 66 the stem's pooled sizes take two values only (16, 17), which any
    affine rule fits; the export once took such a fit and ran out of bounds at 97. A far
    trace and the three-distinct-values rule refuse it, naming multiple_of."""
    mx.random.seed(4)
    net = Stem()
    mx.eval(net.parameters())
    x = mx.random.normal((1, 64, 64, 3))
    with pytest.raises(
        DynamicShapeError,
        match=r"dimension 1 \('h'\) of input 'x' cannot be dynamic.*"
        r"AsStrided.*Dim\('h', multiple_of=N\)",
    ):
        Exporter(dynamic={"x": {1: "h", 2: "w"}}).export(net, x)
    proto = export_dynamic(net, x, dynamic={"x": {0: "batch", 1: Dim("h", 8), 2: Dim("w", 8)}})
    sizes = [{"batch": 1, "h": 8, "w": 8}, {"batch": 2, "h": 96, "w": 56}, {"batch": 1, "h": 200, "w": 64}]
    assert_passes(Verifier(sizes=sizes).verify(proto, net, x))


class Frames(nn.Module):
    """A speech encoder's front: strided convolutions that divide the samples by 384 and a
    GroupNorm over the frames (whose Reshape reads the frame count)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(1, 8, kernel_size=127, stride=64, bias=False)
        self.norm = nn.GroupNorm(1, 8)
        self.conv2 = nn.Conv1d(8, 8, kernel_size=7, stride=3)
        self.conv3 = nn.Conv1d(8, 8, kernel_size=3, stride=2)

    def __call__(self, samples):
        x = self.norm(mx.tanh(self.conv1(samples[:, :, None])))
        return self.conv3(nn.gelu(self.conv2(x)))


def test_a_size_floored_beyond_the_nearby_traces_is_not_taken_for_a_constant():
    """16000, 16001 and 16002 samples give 249 frames after a stride-64 convolution, and
    so did the far trace 37 samples on: the export took the frame count for a constant
    and its GroupNorm's Reshape failed at any other length. The far trace now moves by at
    least half the example, where the count changes."""
    mx.random.seed(7)
    net = Frames()
    mx.eval(net.parameters())
    samples = mx.random.normal((1, 16000)) * 0.1
    proto = export_dynamic(net, samples, dynamic={"samples": {0: "batch", 1: "n"}})
    sizes = [{"batch": 1, "n": 16000}, {"batch": 2, "n": 7777}, {"batch": 1, "n": 48000}, {"batch": 1, "n": 1024}]
    assert_passes(Verifier(sizes=sizes).verify(proto, net, samples))


class Pools(nn.Module):
    """A conv, then a pooling layer over dynamic image sizes."""

    def __init__(self, pool):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = pool

    def __call__(self, x):
        return self.pool(nn.relu(self.conv(x)))


POOLS = {  # name: (pool, ONNX op): Gather windows (overlapping) and Reshape-blocked ones
    "max_3_stride_2_pad_1": (nn.MaxPool2d(3, stride=2, padding=1), "MaxPool"),
    "max_2": (nn.MaxPool2d(2), "MaxPool"),
    "avg_2": (nn.AvgPool2d(2), "AveragePool"),
    "avg_3_stride_2_pad_1": (nn.AvgPool2d(3, stride=2, padding=1), "AveragePool"),
    "max_3_stride_2": (nn.MaxPool2d(3, stride=2), "MaxPool"),
}
IMAGE = {0: "batch", 1: Dim("h", multiple_of=32), 2: Dim("w", multiple_of=32)}
IMAGE_SIZES = [
    {"batch": 1, "h": 32, "w": 32},
    {"batch": 2, "h": 64, "w": 96},
    {"batch": 1, "h": 160, "w": 32},
    {"batch": 1, "h": 224, "w": 288},
]


def ops(proto) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for node in proto.graph.node:
        kinds[node.op_type] = kinds.get(node.op_type, 0) + 1
    return kinds


def pools(pool):
    mx.random.seed(6)
    net = Pools(pool)
    mx.eval(net.parameters())
    return net, mx.random.normal((2, 64, 64, 3))


@pytest.mark.parametrize("name", sorted(POOLS))
def test_dynamic_pools_are_fused_as_in_a_static_export(name):
    """MLX's pooling windows over a dynamic image (a Gather whose index is built from
    Shape, or a Reshape to Shape-computed blocks) are proven the same sliding windows at
    every size the Dims admit, and fused: the graph is the static export's."""
    pool, op_type = POOLS[name]
    net, x = pools(pool)
    proto = export_dynamic(net, x, dynamic={"x": IMAGE})
    static = Exporter().export(net, x)
    kinds = ops(proto)
    assert kinds == ops(static), (kinds, ops(static))
    assert kinds[op_type] == (2 if op_type == "MaxPool" else 1), kinds  # a MaxPool's NaN mask is one too
    assert not {"Gather", "Range", "Shape", "Pad", "ReduceMax", "ReduceSum"} & set(kinds), kinds
    assert_passes(Verifier(sizes=IMAGE_SIZES).verify(proto, net, x))


def test_the_small_conv_net_pools_are_fused_at_dynamic_sizes():
    """The conv net's max pool (3, stride 2, padding 1) and average pool (2) both fuse
    with a dynamic batch and image size; the global mean and Upsample stay as they are."""
    net, x = conv_net()
    proto = export_dynamic(net, x, dynamic={"x": IMAGE})
    kinds = ops(proto)
    assert kinds["MaxPool"] == 2 and kinds["AveragePool"] == 1, kinds
    assert not {"Range", "Pad", "ReduceMax"} & set(kinds), kinds
    assert_passes(Verifier(sizes=IMAGE_SIZES).verify(proto, net, x))


def test_dynamic_pools_are_fused_only_where_the_steps_prove_them():
    """The pool's output size is h/2 in the graph (Div, exact for even h): with a plan
    claiming any h (step 1), the pass cannot prove the windows and leaves them; with the
    export's own step 32 it fuses them."""
    from dataclasses import replace

    from mlx2onnx.capture import capture_dynamic
    from mlx2onnx.passes import optimize

    net, x = pools(nn.MaxPool2d(3, stride=2, padding=1))
    exporter = Exporter(dynamic={"x": IMAGE}, optimize=False)
    for step, fused in [(1, False), (32, True)]:
        trace, plan = capture_dynamic(net, (x,), {}, {"x": IMAGE})
        model = exporter.trace_to_ir(trace, plan)
        claimed = replace(
            plan,
            multiple_of={"batch": 1, "h": step, "w": step},
            bounds={"batch": (1, None), "h": (step, None), "w": (step, None)},
        )
        report = optimize(model, exporter.settings(claimed))
        kinds = [n.op_type for n in model.graph]
        assert report["fuse_pooling"] == int(fused) and ("MaxPool" in kinds) == fused, (report, kinds)


def test_a_dynamic_max_pool_over_zero_padding_is_left_alone():
    """The same windows over zero padding are no MaxPool (whose padding never wins)."""
    net, x = pools(nn.MaxPool2d(3, stride=2))

    def padded(x):
        return net.pool(mx.pad(nn.relu(net.conv(x)) - 1.0, [(0, 0), (1, 1), (1, 1), (0, 0)]))

    proto = export_dynamic(padded, x, dynamic={"x": IMAGE})
    kinds = ops(proto)
    assert "MaxPool" not in kinds and kinds["ReduceMax"] == 2, kinds
    assert_passes(Verifier(sizes=IMAGE_SIZES).verify(proto, padded, x))


@pytest.mark.parametrize(
    "pool, op_type",
    [(nn.MaxPool1d(3, stride=2, padding=1), "MaxPool"), (nn.AvgPool1d(2), "AveragePool")],
    ids=["max_padded", "avg_blocks"],
)
def test_dynamic_1d_pools_over_a_sequence_are_fused(pool, op_type):
    conv = nn.Conv1d(3, 4, 3, padding=1)
    mx.eval(conv.parameters())

    def net(x):
        return pool(conv(x))

    x = mx.random.normal((2, 16, 3))
    proto = export_dynamic(net, x, dynamic={"x": {0: "batch", 1: Dim("seq", multiple_of=2)}})
    kinds = ops(proto)
    assert op_type in kinds and not {"Gather", "Range", "Shape"} & set(kinds), kinds
    assert_passes(Verifier(sizes={"batch": [1, 3], "seq": [2, 10, 46]}).verify(proto, net, x))


def test_a_dynamic_pool_is_fused_only_where_every_admitted_size_has_a_window():
    """A window of 4 over sizes in steps of 2: at size 2 MLX has no window at all (and
    AveragePool would refuse), so it stays MLX's; from size 4 up it is AveragePool."""
    conv = nn.Conv1d(3, 4, 3, padding=1)
    pool = nn.AvgPool1d(4, stride=2)
    mx.eval(conv.parameters())

    def net(x):
        return pool(conv(x))

    x = mx.random.normal((2, 16, 3))
    for dim, fused in [(Dim("seq", multiple_of=2), False), (Dim("seq", multiple_of=2, min=4), True)]:
        proto = export_dynamic(net, x, dynamic={"x": {0: "batch", 1: dim}})
        assert ("AveragePool" in ops(proto)) == fused, (dim, ops(proto))
        assert_passes(Verifier(sizes={"batch": [1, 3], "seq": [4, 10, 46]}).verify(proto, net, x))


def test_dimension_names_read_back_as_the_sizes_they_name():
    """What the pooling pass reads (the plan's closed forms, mlx2onnx.passes.sizes) is
    what the export names (Plan.dim_name): every name's closed form gives its size in
    every trace."""
    from mlx2onnx.capture.symbolic import Plan
    from mlx2onnx.passes.sizes import Sizes

    h, w = (32, 64, 32, 96, 224), (32, 32, 64, 96, 256)
    plan = Plan(
        sizes={"h": h, "w": w},
        where={"h": ("x", 1), "w": ("x", 2)},
        spec={"x": {1: "h", 2: "w"}},
        multiple_of={"h": 32, "w": 32},
        bounds={"h": (32, None), "w": (32, None)},
    )
    sizes = Sizes(plan)
    rules = [
        lambda a, b: a,
        lambda a, b: a + 2,
        lambda a, b: a // 2 + 2,
        lambda a, b: a // 4 - 1,
        lambda a, b: 3 * a // 2,
        lambda a, b: 2 * b,
        lambda a, b: -a + 500,
        lambda a, b: a * b,
        lambda a, b: 3 * a * b,
        lambda a, b: b * b,
        lambda a, b: a // 32 * 5 - 7,
    ]
    forms = {}
    for rule in rules:
        values = tuple(rule(a, b) for a, b in zip(h, w))
        name = plan.dim_name(values)
        poly = plan.form(name)
        assert poly is not None, name
        assert tuple(poly.at({"h": a, "w": b}) for a, b in zip(h, w)) == values, (name, poly)
        forms[name] = poly
    assert plan.form("unk__3") is None and plan.form("dim_7") is None and plan.form("h/2_5") is None
    assert sizes.floor_div(forms["h+2"] - 3, 2) == forms["h/2+2"] - 3  # h is even: floor((h-1)/2) = h/2-1
    assert sizes.floor_div(forms["h+2"] - 3, 64) is None  # h/64 is not an integer at h = 32


# -- primitives whose numbers follow the size ---------------------------------------------
def _roll(x):
    return mx.roll(x, 2, axis=1)


FUNCTIONS = {
    "broadcast_add": lambda x: x + x[:, :1] * 2,
    "reshape_flatten_batch_and_seq": lambda x: x.reshape(x.shape[0] * x.shape[1], -1) * 3,
    "reshape_split_heads": lambda x: x.reshape(x.shape[0], x.shape[1], 2, 3).transpose(0, 2, 1, 3),
    "mean_and_var_over_seq": lambda x: (x.mean(axis=1), x.var(axis=1)),
    "softmax_over_seq": lambda x: mx.softmax(x, axis=1),
    "logsumexp": lambda x: mx.logsumexp(x, axis=1),
    "cumsum_over_seq": lambda x: mx.cumsum(x, axis=1),
    "sort_and_argsort": lambda x: (mx.sort(x, axis=1), mx.argsort(x, axis=1)),
    "last_token": lambda x: x[:, -1],
    "drop_first_and_last": lambda x: x[:, 1:-1],
    "every_other": lambda x: x[:, ::2],
    "reversed": lambda x: x[:, ::-1],
    "roll": _roll,
    "concatenate_on_seq": lambda x: mx.concatenate([x, x * 2], axis=1).reshape(x.shape[0], -1),
    "split_in_two": lambda x: mx.split(mx.concatenate([x, x], axis=1), 2, axis=1)[1] - x,
    "pad_seq": lambda x: mx.pad(x, [(0, 0), (1, 2), (0, 0)]),
    "arange_positions": lambda x: x + mx.arange(x.shape[1]).reshape(1, -1, 1).astype(x.dtype),
    "causal_mask": lambda x: mx.where(
        mx.tril(mx.ones((x.shape[1], x.shape[1]))).astype(mx.bool_), x @ x.transpose(0, 2, 1), -1e9
    ),
    "zeros_like_and_ones": lambda x: mx.zeros_like(x) + mx.ones(x.shape) * x,
    "matmul_batch_broadcast": lambda x: x @ mx.ones((6, 4)),
    "take_along_seq": lambda x: mx.take_along_axis(x, mx.argsort(x, axis=1), axis=1),
    "take_first_rows": lambda x: mx.take(x, mx.array([0, 1]), axis=1),
    "repeat_on_seq": lambda x: mx.repeat(x, 2, axis=1),
    "tile": lambda x: mx.tile(x, (1, 2, 1)),
    "expand_squeeze": lambda x: mx.squeeze(mx.expand_dims(x, 1), 1),
    "max_and_argmax": lambda x: (x.max(axis=1), mx.argmax(x, axis=1)),
    "topk": lambda x: mx.topk(x, 2, axis=1),
    "conv1d_over_seq": lambda x: mx.conv1d(x, mx.ones((4, 3, 6)) * 0.1, padding=1),
    "swapaxes_and_flatten": lambda x: mx.flatten(mx.swapaxes(x, 1, 2), 1),
    "scatter_add_first_row": lambda x: x.at[:, 0].add(1.0),
    "mean_of_everything": lambda x: x.mean(),
    "dynamic_slice_update": lambda x: mx.slice_update(x, x[:, :2] * 2, mx.array([1]), axes=(1,)),
    "dynamic_slice": lambda x: mx.slice(x, mx.array([1]), axes=(1,), slice_size=(x.shape[0], 2, 6)) * 3,
}


@pytest.mark.parametrize("opset", [None, 17], ids=["default_opset", "opset17"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_dynamic_primitive(name, opset):
    fun = FUNCTIONS[name]
    x = mx.random.normal((2, 5, 6))
    proto = export_dynamic(fun, x, dynamic={"x": {0: "batch", 1: "seq"}}, opset=opset)
    # seq >= 3: at seq == 2, MLX's topk(x, 2) returns x unsorted (a C++ special case no
    # trace at a generic size can see; the multi-size check is what finds such corners)
    report = Verifier(sizes={"batch": [1, 4], "seq": [3, 5, 9]}).verify(proto, fun, x)
    assert_passes(report)


# -- honest refusals: the dimension, the input and the record that fixes it ----------------
def _loop_over_half_the_rows(x):  # a Python loop the exporter recovers runs once per row (tests/capture/test_loops.py)
    out = x[0]
    for i in range(1, x.shape[0] // 2):
        out = out + x[i]
    return out


def _numpy_positions(x):  # (np.arange of a size would become Range in the graph)
    return x + mx.array(np.linspace(0, 1, x.shape[1], dtype=np.float32)).reshape(1, -1, 1)


def _python_scale(x):
    return x * (1.0 / x.shape[1])


def _fixed_reshape(x):
    return x.reshape(2, 5, 6) * 2


REFUSALS = {
    "python_loop_over_a_size": (
        _loop_over_half_the_rows,
        {0: "batch"},
        r"dimension 0 \('batch'\) of input 'x' cannot be dynamic: the traced program changes "
        r"with it.*records at the example sizes.*record \d+",
    ),
    "numpy_constant_from_a_size": (
        _numpy_positions,
        {1: "seq"},
        r"dimension 1 \('seq'\) of input 'x' cannot be dynamic: constant .* changes with it"
        r".*computed in Python \(or NumPy\).*mx.arange.*Line \d+ of .*test_dynamic\.py "
        r"\(`return x \+ mx\.array\(np\.linspace",
    ),
    "python_number_from_a_size": (
        _python_scale,
        {1: "seq"},
        r"dimension 1 \('seq'\) of input 'x' cannot be dynamic: a scalar constant .*a Python number.*"
        r"changes with it \(value 0.200.* at seq=5, 0.1666.* at seq=6\)",
    ),
    "reshape_to_fixed_numbers": (
        _fixed_reshape,
        {0: "batch"},
        r"dimension 0 \('batch'\) of input 'x' cannot be dynamic: the function fails at "
        r"batch=3.*reshape",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_size_fixed_in_python_is_refused_by_name(name, tmp_path):
    fun, axes, message = REFUSALS[name]
    x = mx.random.normal((2, 5, 6))
    path = tmp_path / "m.onnx"
    with pytest.raises(DynamicShapeError, match=message):
        Exporter(dynamic={"x": axes}, path=str(path)).export(fun, x)
    assert list(tmp_path.iterdir()) == []


SPEC_ERRORS = [
    ({"y": {0: "batch"}}, r"dynamic names input 'y', but the array inputs are \['x'\]"),
    ({"x": {3: "batch"}}, r"names axis 3, but input 'x' has shape \[2, 5, 6\] \(axes 0..2\)"),
    ({"x": {0: "not a name"}}, r"name the dimension with an identifier"),
    ({"x": {0: "n", 1: "n"}}, r"symbol 'n' names dimension 0 of input 'x' \(size 2\) and dimension 1 .*size 5"),
    ({"x": {1: Dim("seq", multiple_of=2)}}, r"dimension 1 of input 'x' is 5 in the example, not a multiple of 2"),
    ({"x": {}}, r"dynamic names no dimension"),
    (["x"], r"dynamic must be a mapping"),
]


@pytest.mark.parametrize("spec, message", SPEC_ERRORS)
def test_a_bad_dynamic_spec_is_a_spec_error(spec, message):
    with pytest.raises(DynamicSpecError, match=message):
        Exporter(dynamic=spec).export(lambda x: x * 2, mx.random.normal((2, 5, 6)))


def test_dim_checks_its_arguments():
    with pytest.raises(DynamicSpecError, match=r"Dim\('seq', min=8, max=4\): min is above max"):
        Dim("seq", min=8, max=4)
    with pytest.raises(DynamicSpecError, match=r"max=0\): a positive integer"):
        Dim("seq", max=0)
    with pytest.raises(DynamicSpecError, match="must be an identifier"):
        Dim("2x")
    with pytest.raises(DynamicSpecError, match="a positive integer is needed"):
        Dim("h", multiple_of=0)


def test_a_bounded_dim_is_traced_inside_its_range():
    """Learned positions take at most 16 tokens: the traces stay at or below 16 (the far
    trace falls back to the range's end) and the check's default sizes too."""
    table = mx.random.normal((16, 6))

    def add_positions(x):
        return x + table[: x.shape[1]]

    x = mx.random.normal((2, 5, 6))
    with pytest.raises(DynamicShapeError, match="the function fails at"):
        Exporter(dynamic={"x": {1: "seq"}}).export(add_positions, x)
    proto = export_dynamic(add_positions, x, dynamic={"x": {0: "batch", 1: Dim("seq", max=16)}})
    meta = json.loads({p.key: p.value for p in proto.metadata_props}["mlx2onnx.dynamic"])
    assert meta["range"] == {"batch": [1, None], "seq": [1, 16]}
    runs = Verifier().size_assignments(metadata.read(proto).dynamic)
    assert all(run["seq"] <= 16 for run in runs) and len({run["seq"] for run in runs}) == 3
    assert_passes(Verifier(sizes={"seq": [1, 9, 16]}).verify(proto, add_positions, x))


@pytest.mark.parametrize(
    "dim, example, message",
    [
        (Dim("seq", max=3), 2, "allows fewer than 4 sizes"),
        (Dim("seq", min=4), 2, "outside .*range"),
    ],
)
def test_a_range_too_narrow_to_trace_is_a_spec_error(dim, example, message):
    with pytest.raises(DynamicSpecError, match=message):
        Exporter(dynamic={"x": {1: dim}}).export(lambda x: x * 2, mx.random.normal((2, example)))


def test_dynamic_dims_are_read_before_the_layout_transposes():
    """A conv and a spatial mean: the mean counts its elements from ``Shape`` of the
    transposed conv output; the layout pass reads them off the conv output itself, so the
    layout Transposes still cancel (one is left, at the input). Matches at several sizes."""
    mx.random.seed(5)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    mx.eval(conv.parameters())

    def net(x):
        return nn.relu(conv(x)).mean(axis=(1, 2))

    x = mx.random.normal((2, 8, 8, 3))
    proto = export_dynamic(net, x, dynamic={"x": {0: "batch", 1: "h", 2: "w"}})
    kinds = [n.op_type for n in proto.graph.node]
    assert kinds.count("Transpose") == 1 and "Shape" in kinds, kinds
    assert_passes(Verifier(sizes=[{"batch": 1, "h": 5, "w": 9}, {"batch": 3, "h": 16, "w": 7}]).verify(proto, net, x))


def test_dynamic_scatter_of_fixed_columns():
    """``logits[..., banned] = -inf`` (mlx-lm's phi3small) at any batch and sequence: the
    Scatter's index grid, its wrap of negative indices and its last-write-wins keys are
    computed from Shape; duplicate targets still take the last write."""
    banned = mx.array([5, 2, 7, -1, 2])
    table = mx.arange(5, dtype=mx.float32) * 10.0

    def mask_logits(x):
        x = x * 2.0
        x[..., banned] = -float("inf")
        return x

    def last_write(x):
        x = x + 0.0
        x[..., banned] = table
        return x

    x = mx.random.normal((2, 8, 11))
    for fun in (mask_logits, last_write):
        proto = mlx2onnx.Exporter(dynamic={"x": {0: "batch", 1: "seq"}}).export(fun, x)
        assert "Scatter" in {p.name for p in mlx2onnx.capture(fun, (x,), {}).primitives}
        assert_passes(Verifier(sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 13}]).verify(proto, fun, x))


def test_positions_read_off_a_convolution_s_dynamic_grid():
    """A patch convolution's rows and columns numbered from its output's dynamic shape
    (as the Pixtral tower numbers its patches): the shape is read off the transposed output
    of a convolution without bias, which once made the transpose-sinking pass treat the
    shape vector as an image in the convolution's layout (an IndexError)."""
    mx.random.seed(11)
    conv = nn.Conv2d(3, 4, 4, stride=4, bias=False)
    mx.eval(conv.parameters())

    def fun(x):
        patches = conv(x)
        _, h, w, c = patches.shape
        rows, columns = mx.meshgrid(mx.arange(h), mx.arange(w), indexing="ij")
        positions = (rows * 8 + columns).reshape(-1).astype(mx.float32)
        return patches.reshape(1, h * w, c) * positions[None, :, None]

    x = mx.random.normal((1, 8, 12, 3))
    proto = export_dynamic(fun, x, dynamic={"x": {1: Dim("h", multiple_of=4), 2: Dim("w", multiple_of=4)}})
    sizes = [{"h": 8, "w": 12}, {"h": 16, "w": 4}, {"h": 28, "w": 20}]
    assert_passes(Verifier(sizes=sizes).verify(proto, fun, x))
