"""A text-generation package's extra graph files, named as transformers.js names a dtype's
file (``{dtype: "q4"}`` loads ``onnx/model_q4.onnx``), as the hub's ONNX packages ship them.

Each is a graph of its own, traced from the folder's model made over in MLX: ``fp16``
its float weights and computation in float16, ``q8`` / ``q4`` its Linear and Embedding
weights quantized by MLX to 8 / 4 bits (groups of 32: onnxruntime's ``MatMulNBits``),
``q4f16`` both. They compute other numbers than the folder's model, so each is measured
by what its users see: teacher-forced greedy agreement with the folder's MLX model over
the check's prompts (the share of next tokens equal to MLX's along MLX's own greedy
continuation) and the largest logit gap there. The folder's own computation, MLX-exact,
is always written, named by what it holds (:func:`~..io.graph_files.graph_dtype`: a float32
folder's is ``model.onnx``, a 4-bit one's ``model_q4.onnx``); it is the package's default.
"""

from __future__ import annotations

import os
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..errors import ExportOptionError
from ..io.notes import read_notes
from .check import forward_logits

# the dtypes whose files a text-generation package can hold (their files: io.graph_files.dtype_file)
DTYPES = ("fp32", "fp16", "q8", "q4", "q4f16")
GROUP_SIZE = 32
NEW_TOKENS = 12


def check_dtypes(dtypes, bits: int | None) -> list[str]:
    """The requested dtypes, or ExportOptionError naming a dtype that is not one, or one a
    folder whose weights are quantized already (to ``bits``) cannot have without other
    weights: dequantized (fp32, fp16) or quantized again (another width)."""
    wanted = list(dict.fromkeys(dtypes))
    unknown = [d for d in wanted if d not in DTYPES]
    if unknown:
        raise ExportOptionError(
            f"dtype {unknown[0]!r} is not one of transformers.js's file dtypes mlx2onnx writes: {', '.join(DTYPES)}"
        )
    keeps = {None: set(DTYPES), 4: {"q4", "q4f16"}, 8: {"q8"}}.get(bits, set())
    other = [d for d in wanted if d not in keeps]
    if other:
        kept = f" (of the dtypes, {' and '.join(sorted(keeps))} keep them)" if keeps else ""
        raise ExportOptionError(
            f"dtype {other[0]!r}: the folder's weights are quantized already ({bits} bits), so its "
            "own graph holds them as they are; dequantizing or quantizing them again would not "
            f"be this model's weights{kept}; export the float folder with that dtype"
        )
    return wanted


def made_over(model: nn.Module, dtype: str) -> nn.Module:
    """``model`` (a fresh copy, changed in place) as ``dtype`` computes it: its floating
    parameters in float16 (``fp16``, ``q4f16``) or float32, its Linear and Embedding
    weights quantized by MLX unless they are already."""
    model.set_dtype(mx.float16 if dtype in ("fp16", "q4f16") else mx.float32)
    quantized = any(hasattr(m, "bits") for _, m in model.named_modules())
    if dtype.startswith("q") and not quantized:
        bits = 8 if dtype == "q8" else 4
        nn.quantize(
            model,
            group_size=GROUP_SIZE,
            bits=bits,
            class_predicate=lambda _, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % GROUP_SIZE == 0,
        )
    mx.eval(model.parameters())
    return model


def mlx_reference(model: nn.Module, prompts: list[list[int]], new_tokens: int = NEW_TOKENS) -> list[tuple]:
    """Per prompt: ``(prompt, MLX's greedy tokens, MLX's logits along them)`` [tokens, vocab],
    computed once for every file measured against ``model``."""
    from .greedy import mlx_generate, mlx_logits

    found = []
    for prompt in prompts:
        tokens = mlx_generate(model, mx.array([prompt]), new_tokens)[0].tolist()
        logits = mlx_logits(model, mx.array([prompt + tokens[:-1]]))[0, len(prompt) - 1 :].astype(mx.float32)
        found.append((prompt, tokens, np.array(logits)))
    return found


def teacher_forced(session, reference: list[tuple]) -> dict:
    """The graph in ``session`` along MLX's greedy continuation of each prompt
    (:func:`mlx_reference`): the share of its next tokens equal to MLX's, and the largest
    logit gap to MLX's there."""
    equal = total = 0
    gap = 0.0
    for prompt, tokens, want in reference:
        got = forward_logits(session, prompt + tokens[:-1])[len(prompt) - 1 :]
        equal += int((got.argmax(-1) == np.array(tokens)).sum())
        total += len(tokens)
        gap = max(gap, float(np.abs(got.astype(np.float64) - want).max()))
    return {"token_agreement": round(equal / total, 4), "max_logit_gap": round(gap, 4), "tokens": total}


def check_dtype_files(
    package: str | os.PathLike, folder: str | os.PathLike, prompts: list[list[int]], min_agreement: float
) -> list[dict]:
    """Each extra dtype file of the package (config.json's ``dtype_files``) measured again
    against the folder's MLX model (:func:`~.dtype_files.teacher_forced`); a row passes when
    its token agreement is at least ``min_agreement``."""
    from ..targets import load_model_folder
    from ..verify.session import open_session

    recorded = read_notes(Path(package)).dtype_files or {}
    if not recorded:
        return []
    reference = mlx_reference(load_model_folder(str(folder)).fun, prompts)
    rows = []
    for dtype, entry in recorded.items():
        found = teacher_forced(open_session(str(Path(package) / entry["file"]), "all"), reference)
        rows.append(
            {
                "dtype": dtype,
                "file": entry["file"],
                **found,
                "min_agreement": min_agreement,
                "passed": found["token_agreement"] >= min_agreement,
            }
        )
    return rows


def measured(graph, reference: list[tuple], made: nn.Module, prompts: list[list[int]]) -> dict:
    """``graph`` (an extra dtype's, onnx-ir) in a plain session: :func:`teacher_forced`
    against the folder's model (its ``reference``), and its largest logit error against the
    model it was traced from, ``made`` (:func:`made_over`), which shows the file computes
    what MLX computes for that dtype."""
    import onnx_ir as ir

    from ..verify.session import open_session

    session = open_session(ir.serde.serialize_model(graph).SerializeToString(), "all")
    own = teacher_forced(session, mlx_reference(made, prompts))
    return {**teacher_forced(session, reference), "max_logit_error_vs_mlx_same_dtype": own["max_logit_gap"]}
