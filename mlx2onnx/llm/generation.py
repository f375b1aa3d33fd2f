"""``mlx2onnx.llm.generate``: greedy tokens from any export of a decoder LLM in onnxruntime.

An export is either a :class:`~.decoder.DecoderExport` (the prefill and decode graphs of
``export_decoder``) or a package folder (``mlx2onnx export MODEL_FOLDER -o PACKAGE/``),
whatever its caches carry: attention keys and values, recurrent states, both.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ExportOptionError
from ..io.graph_files import graph_path
from ..verify.session import open_session
from .check import package_tokens
from .decoder import DecoderExport
from .greedy import generate as generate_with_graphs


def generate(export: DecoderExport | str | os.PathLike, prompt, max_new_tokens: int, sessions=None) -> np.ndarray:
    """Greedy decoding: ``prompt`` (token ids [batch, length]; for a package also a list of
    prompts of different lengths) -> the ``max_new_tokens`` generated ids [batch,
    max_new_tokens]. A package's prompts of different lengths run as one left-padded batch,
    or one at a time where the package records that it does not serve padded batches."""
    if isinstance(export, DecoderExport):
        return generate_with_graphs(export, prompt, max_new_tokens, sessions)
    package = Path(export)
    model_file = graph_path(package, "onnx/model.onnx")
    if not model_file.is_file():
        raise ExportOptionError(
            f"{str(package)!r} is neither a DecoderExport nor a package folder (it has no "
            f"onnx/{model_file.name}): pass what export_decoder returned or a package's folder"
        )
    prompts = [list(map(int, row)) for row in prompt]
    if not prompts or not all(prompts):
        raise ExportOptionError("give at least one prompt of at least one token")
    return package_tokens(sessions or open_session(str(model_file)), package, prompts, max_new_tokens)[0]
