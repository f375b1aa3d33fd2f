"""Export-and-check assertions for users' test suites: :func:`assert_exports`, :class:`Check`,
the pytest plugin's ``mlx2onnx_check`` fixture and ``mlx2onnx check-suite``."""

from .check import RUNTIMES, Check, CheckResult, assert_exports

__all__ = ["RUNTIMES", "Check", "CheckResult", "assert_exports"]
