"""A package's model in a plain onnxruntime session, as the runtimes' pipelines open it,
with the tolerance that session's arithmetic and MLX's device call for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import reference as references
from .parity import Verifier
from .runtimes import arithmetic
from .session import open_session


@dataclass
class PlainSession:
    """``session``: onnxruntime with its default options; ``trades``: what it computes
    other than exactly (int8 activations where the model asks for them); ``reference``:
    MLX's device (TF32 products on a GPU); ``atol``/``rtol``: float32 outputs compared at
    those arithmetics' tolerance."""

    session: object
    trades: list
    reference: references.Reference
    atol: float
    rtol: float

    def bound(self, want) -> float:
        """The largest error allowed against the reference values ``want``."""
        return self.atol + self.rtol * float(abs(want).max()) if want.size else self.atol

    def describe(self) -> dict:
        return {"arithmetic": [str(t) for t in self.trades], "reference": self.reference.to_dict()}


def plain_session(model_file: Path, atol: float | None = None, rtol: float | None = None) -> PlainSession:
    import onnx

    session = open_session(str(model_file))
    trades = arithmetic.onnxruntime(onnx.load(str(model_file), load_external_data=False), {}, "all")
    verifier, reference = Verifier(), references.current()
    default_atol, default_rtol = verifier.tolerance(verifier.compared_as("float32", None, [*trades, *reference.arithmetic()]))
    return PlainSession(session, trades, reference, default_atol if atol is None else atol,
                        default_rtol if rtol is None else rtol)
