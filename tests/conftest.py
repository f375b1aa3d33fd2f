import os
import sys

import mlx.core as mx

sys.path.insert(0, os.path.dirname(__file__))


def pytest_report_header(config):
    from harness import SEED

    from mlx2onnx.translate.opset import default_opset

    return f"mlx2onnx tests: MLX {mx.__version__} on {mx.default_device()}, default opset {default_opset()}, seed {SEED}"
