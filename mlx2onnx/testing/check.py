"""Export-and-check assertions for users' own test suites.

    from mlx2onnx.testing.check import assert_exports

    def test_my_model_exports():
        assert_exports(model, x, mask=m)     # export, onnx.checker, parity vs MLX

Every keyword argument of :func:`assert_exports` is a keyword input of the function, as
in :func:`mlx2onnx.export`; options live on a :class:`Check`::

    Check(exporter=Exporter(opset=18), verifier=Verifier(seed=3), localize=True).assert_exports(fun, x)

A failure raises ``AssertionError`` whose message is the per-output report (max abs/rel
error, tolerance, dtype, shape, the worst element), so it reads the same in pytest,
unittest or a plain script. The pytest plugin (:mod:`mlx2onnx.testing.pytest_plugin`) offers the
same as the ``mlx2onnx_check`` fixture, recording each report in the JUnit XML.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import onnx

from ..errors import Mlx2OnnxError
from ..exporter import Exporter
from ..verify.parity import Verifier, VerifyReport
from ..verify.runtimes import RUNTIMES


@dataclass(frozen=True)
class CheckResult:
    """What one check found: the model (when it exported), a report per runtime, and the
    reason it failed (empty when it passed)."""

    model: onnx.ModelProto | None
    reports: dict[str, VerifyReport] = field(default_factory=dict)
    failure: str = ""
    located: str = ""

    @property
    def passed(self) -> bool:
        return not self.failure

    def message(self) -> str:
        parts = [self.failure] if self.failure else []
        for runtime, report in self.reports.items():
            parts.append(f"[{runtime}] {report}")
        if self.located:
            parts.append(self.located)
        return "\n".join(parts)


@dataclass(frozen=True)
class Check:
    """Options of :meth:`assert_exports` / :meth:`run`.

    Attributes:
        exporter: the export options (default :class:`~mlx2onnx.Exporter`'s).
        verifier: the parity check's options (seed, tolerances, sizes...).
        runtimes: the runtimes to check in (default onnxruntime; any of
            :data:`mlx2onnx.verify.runtimes.RUNTIMES` that is installed).
        runtime_options: per runtime, the options it runs with as the deployment sets them
            (``{"openvino": {"INFERENCE_PRECISION_HINT": "f32"}}``); a runtime not named
            runs with the verifier's ``runtime_options`` when it is the verifier's runtime,
            else with its defaults.
        localize: on a mismatch, name the first MLX primitive whose translation diverges.
        on_result: called with each :class:`CheckResult` (the pytest fixture records it).
    """

    exporter: Exporter = field(default_factory=Exporter)
    verifier: Verifier = field(default_factory=Verifier)
    runtimes: Sequence[str] = ("onnxruntime",)
    runtime_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    localize: bool = False
    on_result: Callable[[CheckResult], None] | None = None

    def __post_init__(self) -> None:
        unknown = [r for r in self.runtimes if r not in RUNTIMES]
        if unknown or not self.runtimes:
            raise ValueError(f"runtimes {list(self.runtimes)}: this version checks in {', '.join(RUNTIMES)}")

    def with_options(self, **changes: Any) -> "Check":
        return replace(self, **changes)

    def run(self, fun: Any, /, *args: Any, **kwargs: Any) -> CheckResult:
        """Export ``fun`` on the example inputs, check the model with ``onnx.checker``
        (full), run the parity check in every runtime; never raises for a failed check."""
        try:
            model = self.exporter.with_options(check=False).export(fun, *args, **kwargs)
        except Mlx2OnnxError as exc:
            return self._done(CheckResult(None, failure=f"{_name(fun)} could not be exported: {exc}"))
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:
            return self._done(CheckResult(model, failure=f"onnx.checker refused the export of {_name(fun)}: {exc}"))
        reports = {}
        for runtime in self.runtimes:
            try:
                reports[runtime] = self.verifier_for(runtime).verify(model, fun, *args, **kwargs)
            except Mlx2OnnxError as exc:
                return self._done(CheckResult(model, reports, f"[{runtime}] the check could not run: {exc}"))
        failing = [r for r, rep in reports.items() if not rep.passed]
        if not failing:
            return self._done(CheckResult(model, reports))
        located = ""
        if self.localize:
            located = _localize(model, fun, args, kwargs, self.verifier)
        bad = [f"{o.name}{f' [{o.at}]' if o.at else ''}" for r in failing for o in reports[r].outputs if not o.passed]
        problems = [p for r in failing for p in reports[r].problems]
        what = ", ".join(bad) if bad else "; ".join(problems)
        failure = f"the export of {_name(fun)} does not match MLX in {', '.join(failing)}: {what}"
        return self._done(CheckResult(model, reports, failure, located))

    def verifier_for(self, runtime: str) -> Verifier:
        """The verifier's options in ``runtime``, with that runtime's options."""
        if runtime == self.verifier.runtime and runtime not in self.runtime_options:
            return self.verifier
        return replace(self.verifier, runtime=runtime, runtime_options=self.runtime_options.get(runtime))

    def assert_exports(self, fun: Any, /, *args: Any, **kwargs: Any) -> CheckResult:
        """:meth:`run`, raising ``AssertionError`` with the report when the check fails."""
        result = self.run(fun, *args, **kwargs)
        if not result.passed:
            raise AssertionError(result.message())
        return result

    def _done(self, result: CheckResult) -> CheckResult:
        if self.on_result is not None:
            self.on_result(result)
        return result


def _name(fun: Any) -> str:
    return getattr(fun, "__qualname__", None) or type(fun).__name__


def _localize(model, fun, args, kwargs, verifier: Verifier) -> str:
    from ..verify.localize import localize

    try:
        return str(
            localize(
                model,
                fun,
                args,
                kwargs,
                seed=verifier.seed,
                random_inputs=verifier.random_inputs,
                tolerances=verifier.tolerances,
                session_config=verifier.options() if verifier.runtime == "onnxruntime" else None,
            )
        )
    except Exception:  # localizing is a diagnosis on top of a failure: never hide the failure
        return "localizing failed:\n" + traceback.format_exc(limit=3)


def assert_exports(fun: Any, /, *args: Any, **kwargs: Any) -> CheckResult:
    """Export ``fun(*args, **kwargs)``, check it with ``onnx.checker`` and against MLX in
    onnxruntime; ``AssertionError`` with the per-output report when anything fails.
    Use :class:`Check` for options."""
    return Check().assert_exports(fun, *args, **kwargs)
