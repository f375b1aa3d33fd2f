"""Running a package: greedy generation through its decoder graph in onnxruntime, and the
check of a package against the mlx-lm folder it was exported from (``mlx2onnx check
PACKAGE/ MODEL_FOLDER``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UsageError
from ..io.graph_files import graph_path
from ..io.notes import read_notes
from ..targets import load_model_folder
from ..verify.session import NUMPY_TYPES


def left_padded(prompts: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input_ids, attention_mask, position_ids) int64 for prompts of different lengths,
    padded on the left: positions count each row's own tokens from 0 (1 on padding, as
    Optimum and transformers.js write them)."""
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad, np.int64)
    mask = np.zeros((len(prompts), width), np.int64)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1)
    return ids, mask, positions


def package_generate(session, prompts: list[list[int]], new_tokens: int, pad: int = 0):
    """Greedy tokens [batch, new_tokens] from the package's decoder in ``session`` for a
    left-padded batch of ``prompts``, and the first step's logits of each row's last token."""
    ids, mask, positions = left_padded(prompts, pad)
    carried = session.get_inputs()[3:]  # keys, values and states, in the order of the outputs after the logits
    past = empty_past(session, len(prompts))
    tokens, first = [], None
    for step in range(new_tokens):
        outputs = session.run(None, {"input_ids": ids, "attention_mask": mask, "position_ids": positions, **past})
        logits = outputs[0][:, -1, :]
        first = logits if first is None else first
        token = logits.argmax(axis=-1).astype(np.int64)
        tokens.append(token)
        past = {value.name: array for value, array in zip(carried, outputs[1:])}
        ids = token[:, None]
        mask = np.concatenate([mask, np.ones((len(prompts), 1), np.int64)], axis=1)
        positions = positions[:, -1:] + 1
    return np.stack(tokens, axis=1), first


def empty_past(session, batch: int) -> dict[str, np.ndarray]:
    """The decoder's past before the first token: no keys and values, zero states."""
    return {
        value.name: np.zeros(
            [batch if i == 0 else d if isinstance(d, int) else 0 for i, d in enumerate(value.shape)],
            NUMPY_TYPES[value.type],
        )
        for value in session.get_inputs()[3:]
    }


def forward_logits(session, ids: list[int]) -> np.ndarray:
    """The decoder's logits [len(ids), vocab] for one sequence from an empty past."""
    batch = np.array([ids], np.int64)
    feeds = {
        "input_ids": batch,
        "attention_mask": np.ones_like(batch),
        "position_ids": np.arange(len(ids), dtype=np.int64)[None],
        **empty_past(session, 1),
    }
    return session.run(["logits"], feeds)[0][0].astype(np.float32)


def package_tokens(session, package: Path, prompts: list[list[int]], new_tokens: int):
    """:func:`package_generate` on ``prompts`` as the package serves them: one left-padded
    batch, or one prompt at a time where its config.json records that it does not serve
    padded batches; (tokens, first logits, that record or None)."""
    padding = read_notes(package).left_padded_batches if len({len(p) for p in prompts}) > 1 else None
    if not padding:
        return (*package_generate(session, prompts, new_tokens), None)
    runs = [package_generate(session, [prompt], new_tokens) for prompt in prompts]
    tokens, logits = (np.concatenate(parts) for parts in zip(*runs))
    return tokens, logits, padding


def check_prompts(package: Path, seed: int = 0) -> list[list[int]]:
    """The check's two prompts: random token ids of lengths 7 and 4 from the package's vocabulary."""
    return prompts_for(int(json.loads((Path(package) / "config.json").read_text()).get("vocab_size", 2)), seed)


def prompts_for(vocab: int, seed: int = 0) -> list[list[int]]:
    """Two prompts of random token ids, of lengths 7 and 4, below ``vocab``."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, n).tolist() for n in (7, 4)]


def check_package(
    package: str | os.PathLike,
    folder: str | os.PathLike,
    prompts: list[list[int]],
    new_tokens: int = 12,
    atol: float | None = None,
    rtol: float | None = None,
) -> dict:
    """Greedy tokens and first-step logits of the package in onnxruntime (the prompts in
    one left-padded batch, or one at a time where the package says it does not serve
    left-padded batches) against mlx-lm's own generation of each prompt alone (its first step's logits over a
    fresh cache, as its generation computes them). The session
    is a plain one, as onnxruntime-genai and transformers.js open it; where the package
    asks for int8 activations, or MLX's device computes float32 products in TF32, the
    result says so and the logits are compared at that arithmetic's tolerance (the tokens
    must still be MLX's).

    A float16 or bfloat16 folder has two references, and the result shows both: MLX at the
    folder's dtype (what the MLX package computes on this device) and MLX in float32 on the
    same weights (the function the half-precision arithmetic approximates); how far MLX's
    own half-precision logits are from float32 is measured on every prompt (:func:`half_row`)."""
    from ..verify.plain import half_precision, plain_session, reference
    from .greedy import mlx_generate, mlx_prompt_logits

    package, folder = Path(package), Path(folder)
    model_file = graph_path(package, "onnx/model.onnx")
    if not model_file.is_file():
        raise UsageError(
            f"{package} is not a package: it has no onnx/{model_file.name} (write one with "
            "`mlx2onnx export MODEL_FOLDER -o PACKAGE/`)"
        )
    model = load_model_folder(str(folder)).fun
    plain = plain_session(model_file, atol, rtol)  # a plain session, as the runtimes open one
    tokens, logits, padding = package_tokens(plain.session, package, prompts, new_tokens)
    half = half_precision(model)
    rows = []
    for row, prompt in enumerate(prompts):
        want_tokens = mlx_generate(model, mx.array([prompt]), new_tokens)[0]
        want_logits, held = reference(mlx_prompt_logits(model, mx.array([prompt]))[0])
        error, bound = plain.compare(logits[row], want_logits, held)
        found = {
            "prompt": list(map(int, prompt)),
            "tokens": tokens[row].tolist(),
            "mlx_tokens": want_tokens.tolist(),
            "max_abs_logit_error": error,
            "tolerance": bound,
            "passed": bool(np.array_equal(tokens[row], want_tokens) and error <= bound),
        }
        rows.append(
            found if half is None else half_row(found, model, plain, logits[row], want_logits, held, new_tokens)
        )
    return {
        "package": str(package),
        "folder": str(folder),
        **plain.describe(),
        "rows": rows,
        **({"half_precision": half} if half else {}),
        "batch": f"one prompt at a time: left-padded batches are {padding}" if padding else "one left-padded batch",
        "passed": all(r["passed"] for r in rows),
    }


def half_row(
    found: dict, model, plain, logits: np.ndarray, half_logits: np.ndarray, held: str | None, new_tokens: int
) -> dict:
    """A check row of a half-precision folder (``found``: against MLX at the folder's dtype,
    its logits held in ``held``) with MLX in float32 on the same weights beside it: a
    package never fails for being at least as close to float32 as MLX's half precision is
    (:meth:`~..verify.plain.PlainSession.half_compare`). It passes when its logits are that
    close, and its tokens are MLX's at either dtype, or part from float32's greedy path
    only where float32's margin between the two tokens is within MLX's spread (a near tie
    half precision may break either way; ``first_divergence`` says where and by how much)."""
    from ..verify.plain import in_float32
    from .greedy import mlx_generate, mlx_prompt_logits

    prompt, tokens = found["prompt"], found["tokens"]
    with in_float32(model):
        f32_tokens = mlx_generate(model, mx.array([prompt]), new_tokens)[0].tolist()
        f32_logits = np.array(mlx_prompt_logits(model, mx.array([prompt]))[0].astype(mx.float32))
        compared = plain.half_compare(logits, half_logits, f32_logits, held)
        spread = compared["mlx_half_vs_float32"]
        divergence = None
        if tokens not in (found["mlx_tokens"], f32_tokens):
            step = next(k for k, (a, b) in enumerate(zip(tokens, f32_tokens)) if a != b)
            there = np.array(mlx_prompt_logits(model, mx.array([prompt + tokens[:step]]))[0].astype(mx.float32))
            margin = float(there[f32_tokens[step]] - there[tokens[step]])
            divergence = {
                "step": step,
                "token": tokens[step],
                "mlx_float32_token": f32_tokens[step],
                "mlx_float32_margin": margin,
                "explained": margin <= spread,
            }
    close = compared.pop("close")
    compared["max_abs_logit_error_vs_float32"] = compared.pop("max_abs_error_vs_float32")
    return {
        **found,
        "mlx_float32_tokens": f32_tokens,
        **compared,
        "first_divergence": divergence,
        "passed": bool(close and (divergence is None or divergence["explained"])),
    }
