"""The large-model export path: weights stream to the external data file without
intermediate copies, bfloat16 weights are written as MLX's own bytes, strided (folded
transpose) weights are written correctly in blocks."""

from __future__ import annotations

import tracemalloc

import ml_dtypes
import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import onnx_ir as ir
import pytest

import mlx2onnx
from mlx2onnx.io import saving
from tests.support.harness import ort_session


class Stack(nn.Module):
    def __init__(self, width: int, layers: int, vocab: int = 0):
        super().__init__()
        self.embed = nn.Embedding(vocab, width) if vocab else None
        self.layers = [nn.Linear(width, width, bias=k % 2 == 0) for k in range(layers)]

    def __call__(self, x):
        if self.embed is not None:
            x = self.embed(x)
        for layer in self.layers:
            x = nn.relu(layer(x))
        return x


def _weights(model: nn.Module) -> dict[str, mx.array]:
    from mlx.utils import tree_flatten

    return dict(tree_flatten(model.parameters()))


def _tensors(m: onnx.ModelProto) -> dict:
    return {
        t.name: (t.data_type, list(t.dims), t.raw_data, list(t.int32_data), list(t.int64_data), list(t.float_data))
        for t in m.graph.initializer
    }


def _bits(array: mx.array) -> np.ndarray:
    """MLX's own bytes of ``array`` as an unsigned integer array."""
    width = {2: mx.uint16, 4: mx.uint32}[array.dtype.size]
    return np.array(array.view(width))


def _warm_up(tmp_path, **options) -> None:
    """Export a tiny model first, so that first-use imports and caches are not counted."""
    tiny = Stack(8, 1)
    mx.eval(tiny.parameters())
    mlx2onnx.Exporter(path=tmp_path / "warm.onnx", **options).export(lambda x: tiny(x), mx.zeros((1, 8)))


def test_external_data_streams_without_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(saving, "EXTERNAL_DATA_THRESHOLD", 2**10)
    _warm_up(tmp_path)
    monkeypatch.setattr(saving, "EXTERNAL_DATA_THRESHOLD", 2**20)
    model = Stack(1024, 5)  # 5 x 4 MiB float32 weights, all transposed by the folding pass
    mx.eval(model.parameters())
    weight_bytes = sum(v.nbytes for v in _weights(model).values())
    assert weight_bytes > 20e6
    x = mx.random.normal((3, 1024))
    path = tmp_path / "stack.onnx"
    tracemalloc.start()
    try:
        proto = mlx2onnx.Exporter(path=path).export(lambda x: model(x), x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # one weight's block buffer and the graph, never a copy of all the weights
    assert peak < 0.4 * weight_bytes, f"export peaked at {peak / 2**20:.1f} MiB of Python/NumPy memory"
    data = tmp_path / "stack.onnx.data"
    assert data.exists() and data.stat().st_size >= weight_bytes
    assert proto.ByteSize() < 2**20  # the returned model refers to the data file
    got = ort_session(str(path)).run(None, {"x": np.array(x)})[0]
    np.testing.assert_allclose(got, np.array(model(x)), rtol=1e-5, atol=1e-5)


def test_bfloat16_kept_weights_are_mlx_bytes(tmp_path):
    model = Stack(1024, 2, vocab=2048)
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    weights = _weights(model)
    weight_bytes = sum(v.nbytes for v in weights.values())
    ids = mx.array([[1, 7, 300, 2047]], dtype=mx.int32)
    path = tmp_path / "bf16.onnx"
    _warm_up(tmp_path, bfloat16="keep", external_data=True)
    tracemalloc.start()
    try:
        mlx2onnx.Exporter(path=path, bfloat16="keep", external_data=True).export(lambda t: model(t), ids)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * weight_bytes  # a float32 round trip would need 2x the weights
    loaded = ir.load(path)
    written = {}
    for name, value in loaded.graph.initializers.items():
        array = value.const_value.numpy()
        if array.dtype == ml_dtypes.bfloat16 and array.size > 64:
            written[name] = array.view(np.uint16)
    compared = 0
    for name, weight in weights.items():
        if weight.ndim < 2:
            continue
        bits = _bits(weight)
        match = [n for n in written if n == name or n.endswith("." + name)]
        assert match, f"{name} was not written as a bfloat16 initializer ({sorted(written)})"
        got = written[match[0]]
        assert np.array_equal(got, bits) or np.array_equal(got, bits.T), name
        compared += 1
    assert compared == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8])
@pytest.mark.parametrize("shape", [(3, 5), (130, 70), (257, 1)])
def test_strided_tensor_writes_contiguous_bytes(tmp_path, monkeypatch, dtype, shape):
    monkeypatch.setattr(saving, "WRITE_CHUNK_BYTES", 97)  # many blocks, ragged last one
    rng = np.random.default_rng(sum(shape))
    base = rng.integers(-100, 100, size=shape).astype(np.float32).astype(dtype)
    view = base.T
    tensor = saving._StridedTensor(view)
    path = tmp_path / "t.bin"
    with open(path, "wb") as f:
        tensor.tofile(f)
    expected = np.ascontiguousarray(view).tobytes()
    assert path.read_bytes() == expected
    assert tensor.tobytes() == expected


def test_saved_file_is_the_returned_model(tmp_path):
    model = Stack(64, 2)
    mx.eval(model.parameters())
    x = mx.random.normal((2, 64))
    path = tmp_path / "small.onnx"
    proto = mlx2onnx.Exporter(path=path).export(lambda x: model(x), x)
    assert not (tmp_path / "small.onnx.data").exists()
    loaded = onnx.load(str(path))
    assert _tensors(loaded) == _tensors(proto) and loaded.graph.node == proto.graph.node


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16])
def test_single_file_streams_weights_and_matches_in_memory_export(tmp_path, dtype):
    model = Stack(512, 6, vocab=1024)
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    weight_bytes = sum(v.nbytes for v in _weights(model).values())
    ids = mx.array([[3, 1023, 0, 77, 5]], dtype=mx.int32)
    fn = lambda t: model(t).astype(mx.float32)  # noqa: E731  (onnxruntime returns no bfloat16 arrays)
    exporter = mlx2onnx.Exporter(bfloat16="keep")
    in_memory = exporter.export(fn, ids)
    path = tmp_path / "one.onnx"
    _warm_up(tmp_path, bfloat16="keep")
    tracemalloc.start()
    try:
        saved = exporter.with_options(path=path).export(fn, ids)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not (tmp_path / "one.onnx.data").exists()
    # the returned model is read back from the file; writing it made no copy of the weights
    assert peak < 0.4 * weight_bytes, f"{peak / 2**20:.1f} MiB for {weight_bytes / 2**20:.1f} MiB of weights"
    assert [(n.op_type, list(n.input), list(n.output)) for n in saved.graph.node] == [
        (n.op_type, list(n.input), list(n.output)) for n in in_memory.graph.node
    ]
    assert _tensors(saved) == _tensors(in_memory) == _tensors(onnx.load(str(path)))
    feeds = {"t": np.array(ids)}
    run = lambda m: ort_session(m).run(None, feeds)[0]  # noqa: E731
    np.testing.assert_array_equal(run(str(path)), run(in_memory.SerializeToString()))


def test_progress_line_while_writing_external_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(saving, "PROGRESS_MIN_BYTES", 1)
    monkeypatch.setenv("MLX2ONNX_PROGRESS", "1")
    model = Stack(128, 3)
    mx.eval(model.parameters())
    mlx2onnx.Exporter(path=tmp_path / "p.onnx", external_data=True).export(lambda x: model(x), mx.zeros((1, 128)))
    err = capsys.readouterr().err
    assert "mlx2onnx: writing weights" in err and "(100%)\n" in err
    monkeypatch.setenv("MLX2ONNX_PROGRESS", "0")
    mlx2onnx.Exporter(path=tmp_path / "q.onnx", external_data=True).export(lambda x: model(x), mx.zeros((1, 128)))
    assert "writing weights" not in capsys.readouterr().err
