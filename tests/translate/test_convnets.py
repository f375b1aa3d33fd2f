"""Real convolutional networks, written with mlx.nn as model code would be, with random
weights: each is exported and checked against MLX with ``mlx2onnx.verify`` on fresh
random inputs. Kept tiny (few channels, small images) so each runs in about a second."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest
from mlx.utils import tree_flatten, tree_unflatten

import mlx2onnx


# -- models -----------------------------------------------------------------------------
class ConvBNReLU(nn.Module):
    def __init__(self, cin, cout, stride=1, groups=1, act=nn.relu):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn = nn.BatchNorm(cout)
        self.act = act

    def __call__(self, x):
        return self.act(self.bn(self.conv(x)))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = ConvBNReLU(cin, cout, stride)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm(cout))

    def __call__(self, x):
        y = self.bn2(self.conv2(self.conv1(x)))
        return nn.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.stem = ConvBNReLU(3, 8, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 12, 2)
        self.fc = nn.Linear(12, classes)

    def __call__(self, x):
        x = self.layer2(self.layer1(self.pool(self.stem(x))))
        return self.fc(mx.mean(x, axis=(1, 2)))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 project, residual."""

    def __init__(self, c, expand=3):
        super().__init__()
        hidden = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm(hidden), nn.ReLU6())
        self.depthwise = ConvBNReLU(hidden, hidden, groups=hidden, act=nn.relu6)
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm(c))

    def __call__(self, x):
        return x + self.project(self.depthwise(self.expand(x)))


class TinyMobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ConvBNReLU(3, 6, stride=2, act=nn.relu6)
        self.dw = nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)  # depthwise-separable pair
        self.pw = nn.Conv2d(6, 8, 1)
        self.block = InvertedResidual(8)
        self.head = nn.Linear(8, 4)

    def __call__(self, x):
        x = self.block(self.pw(nn.relu6(self.dw(self.stem(x)))))
        return self.head(mx.mean(x, axis=(1, 2)))


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb):
        super().__init__()
        self.norm1 = nn.GroupNorm(2, cin, pytorch_compatible=True)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(2, cout, pytorch_compatible=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def __call__(self, x, t):
        h = self.conv1(nn.silu(self.norm1(x)))
        h = h + self.temb(nn.silu(t))[:, None, None, :]
        h = self.conv2(nn.silu(self.norm2(h)))
        return h + (x if self.skip is None else self.skip(x))


class TinyUNet(nn.Module):
    """A diffusion UNet in miniature: time embedding, down by strided conv, up by
    ConvTranspose2d and by nearest Upsample, GroupNorm + SiLU, concatenated skips."""

    def __init__(self, c=4, temb=8):
        super().__init__()
        self.temb_dim = temb
        self.time = nn.Sequential(nn.Linear(temb, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inp = nn.Conv2d(3, c, 3, padding=1)
        self.down1 = ResBlock(c, c, temb)
        self.downsample1 = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.down2 = ResBlock(c, 2 * c, temb)
        self.downsample2 = nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1)
        self.mid = ResBlock(2 * c, 2 * c, temb)
        self.up_t = nn.ConvTranspose2d(2 * c, 2 * c, 4, stride=2, padding=1)
        self.up2 = ResBlock(4 * c, 2 * c, temb)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.up1 = ResBlock(3 * c, c, temb)
        self.out_norm = nn.GroupNorm(2, c, pytorch_compatible=True)
        self.out = nn.Conv2d(c, 3, 3, padding=1)

    def timestep_embedding(self, t):
        half = self.temb_dim // 2
        freqs = mx.exp(-mx.log(10000.0) * mx.arange(half, dtype=mx.float32) / half)
        args = t[:, None] * freqs[None]
        return mx.concatenate([mx.cos(args), mx.sin(args)], axis=-1)

    def __call__(self, x, t):
        temb = self.time(self.timestep_embedding(t))
        h0 = self.inp(x)
        h1 = self.down1(h0, temb)
        h2 = self.down2(self.downsample1(h1), temb)
        h = self.mid(self.downsample2(h2), temb)
        h = self.up2(mx.concatenate([self.up_t(h), h2], axis=-1), temb)
        h = self.up1(mx.concatenate([self.upsample(h), h1], axis=-1), temb)
        return self.out(nn.silu(self.out_norm(h)))


class TinyAudioEncoder(nn.Module):
    """Whisper's front end: two Conv1d + GELU (the second with stride 2) over mel frames,
    then sinusoidal positions and a LayerNorm."""

    def __init__(self, mels=6, width=8, frames=16):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, width, 3, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(width, width, 5, padding=4, dilation=2, groups=2)
        self.norm = nn.LayerNorm(width)
        pos = np.arange(frames // 2)[:, None] / (10000 ** (np.arange(width // 2)[None] / (width // 2)))
        self.positions = mx.array(np.concatenate([np.sin(pos), np.cos(pos)], axis=-1).astype(np.float32))

    def __call__(self, mel):
        x = nn.gelu(self.conv1(mel))
        x = nn.gelu(self.conv2(x))
        x = nn.gelu(self.conv3(x)) + self.positions
        return self.norm(x)


class TinyVideoNet(nn.Module):
    """Conv3d stem, AvgPool3d, ConvTranspose3d back up (3-D convolutions end to end)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, padding=1)
        self.pool = nn.AvgPool3d(2, stride=1)
        self.up = nn.ConvTranspose3d(4, 2, 2, stride=2)

    def __call__(self, x):
        return self.up(nn.relu(self.pool(self.conv(x))))


def randomise(model, seed):
    """Random, non-trivial weights (BatchNorm statistics included) and eval mode."""
    rng = np.random.default_rng(seed)
    params = {}
    for path, value in tree_flatten(model.parameters()):
        scale = 0.5 if value.ndim > 1 else 0.2
        params[path] = mx.array((rng.standard_normal(value.shape) * scale).astype(np.float32))
    model.update(tree_unflatten(list(params.items())))
    for module in model.modules():
        if isinstance(module, nn.BatchNorm):
            module.running_mean = mx.array(rng.standard_normal(module.running_mean.shape).astype(np.float32) * 0.1)
            module.running_var = mx.array(rng.uniform(0.5, 2.0, module.running_var.shape).astype(np.float32))
    model.eval()
    mx.eval(model.parameters(), model.state)
    return model


def export_and_verify(model, *args, opset=None, tolerances=None):
    model_proto = mlx2onnx.Exporter(opset=opset).export(model, *args)
    onnx.checker.check_model(model_proto, full_check=True)
    report = mlx2onnx.Verifier(tolerances=tolerances).verify(model_proto, model, *args)
    assert report.passed, str(report)
    return model_proto, report


def op_types(model_proto):
    return {n.op_type for n in model_proto.graph.node}


OPSETS = [28, 17]


# -- tests ------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", OPSETS)
def test_resnet(opset):
    model = randomise(TinyResNet(), 0)
    x = mx.random.normal((2, 16, 16, 3), key=mx.random.key(1))
    proto, _ = export_and_verify(model, x, opset=opset)
    assert {"Conv", "Gemm"} <= op_types(proto) or {"Conv", "MatMul"} <= op_types(proto)


@pytest.mark.parametrize("opset", OPSETS)
def test_mobilenet_block(opset):
    model = randomise(TinyMobileNet(), 1)
    x = mx.random.normal((1, 16, 16, 3), key=mx.random.key(2))
    proto, _ = export_and_verify(model, x, opset=opset)
    groups = [a.i for n in proto.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    assert 6 in groups and 24 in groups, groups  # both depthwise convolutions stay grouped


@pytest.mark.parametrize("opset", OPSETS)
def test_diffusion_unet(opset):
    model = randomise(TinyUNet(), 2)
    x = mx.random.normal((1, 8, 8, 3), key=mx.random.key(3))
    t = mx.array([3.0])
    proto, _ = export_and_verify(model, x, t, opset=opset)
    assert {"Conv", "ConvTranspose"} <= op_types(proto)


@pytest.mark.parametrize("opset", OPSETS)
def test_audio_conv1d_stack(opset):
    model = randomise(TinyAudioEncoder(), 3)
    mel = mx.random.normal((2, 16, 6), key=mx.random.key(4))
    export_and_verify(model, mel, opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_conv3d_net(opset):
    model = randomise(TinyVideoNet(), 4)
    x = mx.random.normal((1, 3, 4, 4, 2), key=mx.random.key(5))
    proto, _ = export_and_verify(model, x, opset=opset)
    assert {"Conv", "ConvTranspose"} <= op_types(proto)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_resnet_half_precision(dtype):
    model = randomise(TinyResNet(), 5)
    model.set_dtype(dtype)
    x = mx.random.normal((1, 16, 16, 3), key=mx.random.key(6)).astype(dtype)
    export_and_verify(model, x)


def test_constant_weight_is_folded_into_onnx_layout():
    """A module's weight becomes one OIHW initializer (no runtime Transpose of it, and
    the MLX-layout copy is not stored as well)."""
    conv = randomise(nn.Conv2d(3, 4, (3, 2), bias=False), 6)
    x = mx.random.normal((1, 6, 5, 3), key=mx.random.key(7))
    proto, _ = export_and_verify(conv, x)
    inits = {i.name: tuple(i.dims) for i in proto.graph.initializer}
    assert inits == {"weight_oihw": (4, 3, 3, 2)}, inits
    assert [n.op_type for n in proto.graph.node] == ["Transpose", "Conv", "Transpose"]
    stored = onnx.numpy_helper.to_array(next(i for i in proto.graph.initializer))
    np.testing.assert_array_equal(stored, np.array(conv.weight).transpose(0, 3, 1, 2))


def test_conv_transpose_weight_is_regrouped():
    ct = randomise(nn.ConvTranspose2d(4, 6, 3, stride=2, bias=False), 7)
    x = mx.random.normal((1, 3, 3, 4), key=mx.random.key(8))
    proto, _ = export_and_verify(ct, x)
    (init,) = proto.graph.initializer
    assert tuple(init.dims) == (4, 6, 3, 3)  # ONNX ConvTranspose: [C_in, C_out/group, *K]


def test_float64_net():
    """MLX computes float64 convolutions in float32; so does the export (onnxruntime has
    float32 Conv kernels only), and the rest of the net stays float64."""
    model = randomise(TinyResNet(), 8)
    model.set_dtype(mx.float64)
    x = mx.random.normal((1, 16, 16, 3), key=mx.random.key(9)).astype(mx.float64)
    proto, _ = export_and_verify(model, x, tolerances={"float64": (1e-4, 1e-4)})
    assert "Conv" in op_types(proto)


def test_pooling_index_stays_small():
    """A large overlapping pool's AsStrided index is built at runtime from one small
    constant per axis, and the optimiser does not fold it back into a full table."""
    pool = nn.MaxPool2d(3, stride=2, padding=1)
    x = mx.random.normal((1, 64, 64, 8), key=mx.random.key(10))
    proto, _ = export_and_verify(pool, x)
    assert proto.ByteSize() < 16_000, proto.ByteSize()  # the full int64 table is 590 kB
