"""The pytest plugin (entry point ``pytest11``): the ``mlx2onnx_check`` fixture.

    def test_model_exports(mlx2onnx_check):
        mlx2onnx_check(model, x)                         # export + checker + parity, or fail
        mlx2onnx_check.with_options(localize=True)(model, x)

Each check's report is recorded in the test's ``user_properties`` (``mlx2onnx.passed``,
``mlx2onnx.report``), which ``pytest --junitxml`` writes as ``<property>`` elements.
"""

from __future__ import annotations

from typing import Any

import pytest


class CheckFixture:
    """Callable like :func:`mlx2onnx.testing.assert_exports`, recording into the test."""

    def __init__(self, node, check=None):
        from .check import Check

        self._node = node
        self._check = (check or Check()).with_options(on_result=self._record)
        self.results = []

    def _record(self, result) -> None:
        self.results.append(result)
        k = len(self.results)
        suffix = "" if k == 1 else f".{k}"
        self._node.user_properties.append((f"mlx2onnx.passed{suffix}", str(result.passed).lower()))
        self._node.user_properties.append((f"mlx2onnx.report{suffix}", result.message()))

    def with_options(self, **changes: Any) -> "CheckFixture":
        """The same fixture with other :class:`~mlx2onnx.testing.Check` options
        (``exporter=``, ``verifier=``, ``runtimes=``, ``localize=``)."""
        other = CheckFixture(self._node, self._check.with_options(**changes))
        other.results = self.results
        return other

    def __call__(self, fun: Any, /, *args: Any, **kwargs: Any):
        return self._check.assert_exports(fun, *args, **kwargs)


@pytest.fixture
def mlx2onnx_check(request) -> CheckFixture:
    """Export a function, check it with onnx.checker and against MLX, record the report."""
    return CheckFixture(request.node)
