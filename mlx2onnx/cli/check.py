"""``mlx2onnx check MODEL.onnx TARGET``: parity of a written model with its callable."""

from __future__ import annotations

import json
import os

from ..errors import Mismatch
from .common import (
    EXIT_MISMATCH,
    EXIT_OK,
    error,
    runtime_options,
    target_and_inputs,
    tolerances,
    verify_against,
)
from .progress import Progress


# -- check ----------------------------------------------------------------------------------
def _load_model(path: str):
    import onnx

    from ..errors import UsageError

    if not os.path.isfile(path):
        raise UsageError(f"no such model file: {path}")
    try:
        return onnx.load(path, load_external_data=False)
    except Exception as exc:
        raise UsageError(f"{path} is not a readable ONNX model: {exc}") from None


def _check_interface(proto, fun, args, kwargs) -> None:
    """Raise Mismatch when the model's inputs cannot be fed from the callable's inputs."""
    import onnx_ir as ir

    from .. import dtypes
    from ..capture.inputs import normalize_inputs
    from ..io import metadata

    meta = metadata.read(proto)
    signature = normalize_inputs(args, kwargs)
    positional, keywords = signature.arrays()
    graph_inputs = {i.name: i for i in proto.graph.input}
    problems = []
    for binding in meta.inputs:
        problem = binding.missing(positional, keywords)
        if problem:
            problems.append(problem)
            continue
        array = binding.pick(positional, keywords)
        value = graph_inputs.get(binding.name)
        if value is None:
            continue
        tensor = value.type.tensor_type
        want_shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        got_shape = list(array.shape)
        want_dtype = dtypes.from_onnx(ir.DataType(tensor.elem_type))
        fixed = all(d is not None for d in want_shape)
        if (
            want_dtype != meta.carried(array.dtype)
            or (fixed and want_shape != got_shape)
            or len(want_shape) != len(got_shape)
        ):
            problems.append(
                f"input {binding.name!r}: the model takes {dtypes.name(want_dtype)}{want_shape}, "
                f"the callable gives {dtypes.name(array.dtype)}{got_shape}"
            )
    used = {b.slot for b in meta.inputs}
    extra = [f"positional array {i}" for i in range(len(positional)) if i not in used]
    extra += [f"keyword {k!r}" for k in keywords if k not in used]
    if extra:
        problems.append(f"the callable has inputs the model does not take: {', '.join(extra)}")
    if problems:
        raise Mismatch("the model does not match the callable: " + "; ".join(problems))


def check_package_folder(
    package, folder, progress: Progress, seed: int = 0, as_json: bool = False, min_agreement: float = 0.9
) -> int:
    """``mlx2onnx check PACKAGE/ MODEL_FOLDER`` (and ``export FOLDER -o PACKAGE/ --check``):
    for text generation, greedy tokens and logits of the package in onnxruntime (two
    prompts in one left-padded batch, or one at a time where the package does not serve
    padded batches) against mlx-lm's own forward; other tasks through their own check."""
    from pathlib import Path

    from ..errors import UsageError
    from ..llm.check import check_package, check_prompts
    from ..llm.dtype_files import check_dtype_files
    from ..tasks import package_task

    if package_task(package) != "text-generation":
        return _check_task_package(package, folder, progress, as_json)
    config = Path(folder) / "config.json"
    if not config.is_file():
        raise UsageError(f"{package} is a package: give the mlx-lm model folder it was exported from as TARGET")
    prompts = check_prompts(Path(package), seed)
    with progress.stage("generating with the package in onnxruntime and with mlx-lm"):
        result = check_package(package, folder, prompts)
        result["dtype_files"] = check_dtype_files(package, folder, prompts, min_agreement)
        result["passed"] = result["passed"] and all(row["passed"] for row in result["dtype_files"])
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{package} vs {folder}: 12 greedy tokens of two prompts ({result['batch']}), "
            "onnxruntime with its default options"
        )
        for trade in result["arithmetic"]:
            print(f"  onnxruntime computes with {trade}: logits compared at that arithmetic's tolerance")
        if result["reference"]["tf32"]:
            print(f"  MLX reference: {result['reference']['why']}: logits compared at TF32's tolerance")
        half = result.get("half_precision")
        if half:
            print(
                f"  a {half} folder: compared with MLX in {half} (the MLX package) and in float32 on the same "
                f"weights; MLX's own {half} logits are as far from float32 as the spread shown"
            )
        for row in result["rows"]:
            state = "PASS" if row["passed"] else "FAIL"
            print(
                f"  prompt of {len(row['prompt'])}: tokens {row['tokens']} (MLX{f' {half}' if half else ''} "
                f"{row['mlx_tokens']}), first logits abs {row['max_abs_logit_error']:.3g} (tolerance "
                f"{row['tolerance']:.3g})" + ("" if half else f"  {state}")
            )
            if half:
                print(_float32_line(row, half) + f"  {state}")
        for row in result["dtype_files"]:
            print(
                f"  {row['file']} ({row['dtype']}): {row['token_agreement']:.0%} of {row['tokens']} teacher-forced "
                f"tokens equal MLX's, largest logit gap {row['max_logit_gap']:.3g} (at least "
                f"{row['min_agreement']:.0%})  {'PASS' if row['passed'] else 'FAIL'}"
            )
        print(f"package parity {'PASSED' if result['passed'] else 'FAILED'}")
    return EXIT_OK if result["passed"] else EXIT_MISMATCH


def _float32_line(row: dict, half: str) -> str:
    """The float32 reference of a half-precision folder's check row, and where the
    package's tokens part from it, by how much float32 preferred its own token there."""
    line = (
        f"    MLX float32 {row['mlx_float32_tokens']}, first logits abs {row['max_abs_logit_error_vs_float32']:.3g} "
        f"(MLX {half} vs float32: {row['mlx_half_vs_float32']:.3g}; tolerance {row['tolerance_vs_float32']:.3g})"
    )
    split = row["first_divergence"]
    if split:
        line += (
            f"; parts from float32 at token {split['step']} ({split['token']} for {split['mlx_float32_token']}), "
            f"where float32's margin is {split['mlx_float32_margin']:.3g}: "
            + ("a near tie" if split["explained"] else "more than half precision moves a logit")
        )
    return line


def _check_task_package(package, folder, progress: Progress, as_json: bool) -> int:
    """``mlx2onnx check PACKAGE/ FOLDER`` for a package of another task than text generation."""
    from ..tasks import check_folder_package

    with progress.stage("running the package in onnxruntime and the folder in MLX"):
        result = check_folder_package(package, folder)
    if as_json:
        print(json.dumps(result, indent=2))
        return EXIT_OK if result["passed"] else EXIT_MISMATCH
    print(f"{package} vs {folder}: {result['task']}, onnxruntime with its default options")
    for trade in result["arithmetic"]:
        print(f"  onnxruntime computes with {trade}: compared at that arithmetic's tolerance")
    half = result.get("half_precision")
    if half:
        print(f"  a {half} folder: compared with MLX in {half} (the MLX package) and in float32 on the same weights")
    for row in result["rows"]:
        against = f" vs MLX {half}" if half else ""
        line = f"  {row['input']}: {row['detail']} abs{against} {row['max_abs_error']:.3g} (tolerance {row['tolerance']:.3g})"
        if half:
            line += (
                f", vs MLX float32 {row['max_abs_error_vs_float32']:.3g} (MLX {half} vs float32: "
                f"{row['mlx_half_vs_float32']:.3g}; tolerance {row['tolerance_vs_float32']:.3g})"
            )
        print(f"{line}  {'PASS' if row['passed'] else 'FAIL'}")
    print(f"package parity {'PASSED' if result['passed'] else 'FAILED'}")
    return EXIT_OK if result["passed"] else EXIT_MISMATCH


def cmd_check(ns, progress: Progress) -> int:
    from pathlib import Path

    if Path(ns.model).is_dir():
        return check_package_folder(ns.model, ns.target, progress, ns.seed, ns.json, ns.min_agreement)
    proto = _load_model(ns.model)
    fun, args, kwargs, label = target_and_inputs(ns)
    try:
        _check_interface(proto, fun, args, kwargs)
    except Mismatch as exc:
        if ns.json:
            print(json.dumps({"passed": False, "problem": str(exc)}, indent=2))
        else:
            error(str(exc))
        return EXIT_MISMATCH
    report = verify_against(ns.model, fun, args, kwargs, ns, progress)
    result = report.to_dict()
    located = None
    if ns.localize and not report.passed and not report.problems:
        from ..verify.localize import localize

        located = localize(
            ns.model,
            fun,
            args,
            kwargs,
            seed=ns.seed,
            random_inputs=not ns.example_inputs,
            tolerances=tolerances(ns),
            progress=progress,
            session_config=runtime_options(ns) if ns.runtime == "onnxruntime" else None,
        )
        result["localize"] = located.to_dict()
    if ns.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(f"{ns.model} vs {label}")
        print(report)
        if located is not None:
            print(located)
        elif ns.localize and report.problems:
            print("not localized: the problems above come before any primitive")
        elif ns.localize:
            print("every output matches; nothing to localize")
        elif not report.passed and not report.problems:
            print("run again with --localize to find the first MLX primitive whose ONNX translation diverges")
    return EXIT_OK if report.passed else EXIT_MISMATCH
