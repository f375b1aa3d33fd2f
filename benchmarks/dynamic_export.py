"""Export wall time of a dynamic export against the static export of the same model.

    python benchmarks/dynamic_export.py [--repeats 3]

A dynamic export traces the function at several sizes and proves its rewrites (pooling
windows, reshapes) for every admitted size; this measures what that costs over the
static export, side by side in one run: ResNet-18 at 224 x 224 (``models.make_resnet18``,
random weights) exported static and with a dynamic batch (the image-classification
package's case, whose max-pool windows are proven at a symbolic batch), the median of
``--repeats`` exports each.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median_time  # noqa: E402

from models import make_resnet18  # noqa: E402


def main() -> int:
    import mlx2onnx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, fun, (x,) = make_resnet18(batch=2)

    def image(x):
        return fun(x)

    static = median_time(lambda: mlx2onnx.Exporter().to_ir(image, x), args.repeats, warmup=0)
    dynamic = median_time(
        lambda: mlx2onnx.Exporter(dynamic={"x": {0: "batch"}}).to_ir(image, x), args.repeats, warmup=0
    )
    print(
        f"ResNet-18 224x224: static export {static:.2f} s, dynamic batch {dynamic:.2f} s, "
        f"ratio {dynamic / static:.2f}x (median of {args.repeats})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
