"""Per-primitive handlers, one module per family (shipped as ``mlx2onnx.op_mappings``).

Each module is imported explicitly so that a broken handler file fails loudly here.
"""

from . import elementwise  # noqa: F401
from . import bitwise  # noqa: F401
from . import shape  # noqa: F401
from . import creation  # noqa: F401
from . import indexing  # noqa: F401
from . import matmul  # noqa: F401
from . import reduce  # noqa: F401
from . import sort  # noqa: F401
from . import conv  # noqa: F401
from . import fast  # noqa: F401
from . import quantized  # noqa: F401
from . import fft  # noqa: F401
from . import refusals  # noqa: F401
