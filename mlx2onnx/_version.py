"""The package version, read by setuptools and `mlx2onnx --version`."""

__version__ = "0.1.0"
