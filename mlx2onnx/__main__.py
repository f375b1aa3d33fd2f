"""``python -m mlx2onnx``: the same as the ``mlx2onnx`` console script."""

import sys

from .cli import main

sys.exit(main())
