"""Package discovery for mlx2onnx (the rest of the metadata is in pyproject.toml).

Three source folders make one import package: ``mlx2onnx/`` itself, ``op_mappings/``
(shipped as ``mlx2onnx.op_mappings``) and ``models/`` (``mlx2onnx.models``). Every
subpackage below them is found, never listed by hand, so a new subpackage ships with the
wheel; ``tests/project/test_packaging.py`` builds the wheel and checks that it holds every file.
"""

from setuptools import find_packages, setup

FOLDERS = {"mlx2onnx": "mlx2onnx", "mlx2onnx.op_mappings": "op_mappings", "mlx2onnx.models": "models"}

setup(
    package_dir=FOLDERS,
    packages=[
        f"{name}{'.' + sub if sub else ''}" for name, folder in FOLDERS.items() for sub in ["", *find_packages(folder)]
    ],
)
