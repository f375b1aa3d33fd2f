"""The suite's shared setup: its report header, and the marker a runtime-parametrised test
gets from the runtime it runs (the markers are registered in pyproject.toml; README "Tests")."""

import mlx.core as mx
import pytest

NODE_RUNTIMES = ("onnxruntime-node", "onnxruntime-web")  # run under Node (verify/runtimes)


def pytest_report_header(config):
    from mlx2onnx.translate.opset import default_opset
    from tests.support.harness import SEED

    return (
        f"mlx2onnx tests: MLX {mx.__version__} on {mx.default_device()}, default opset {default_opset()}, seed {SEED}"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test parametrised over ``runtime`` with a Node runtime is a ``node`` test."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("runtime") in NODE_RUNTIMES:
            item.add_marker(pytest.mark.node)
