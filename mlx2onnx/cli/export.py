"""``mlx2onnx export TARGET -o FILE.onnx``."""

from __future__ import annotations

from .common import (
    EXIT_MISMATCH,
    EXIT_OK,
    capture_traced,
    fmt_bytes,
    names,
    run_user,
    target_and_inputs,
    value_text,
    verify_against,
)
from .progress import Progress


# -- export -------------------------------------------------------------------------------
def _is_package_export(ns) -> bool:
    """A model folder (one the registry of folder kinds exports, :mod:`mlx2onnx.tasks.kinds`)
    exported to a path that is not a .onnx file: a package folder."""
    from ..tasks.kinds import is_model_folder

    return is_model_folder(ns.target) and not str(ns.output).endswith(".onnx")


def _export_package(ns, progress: Progress) -> int:
    from pathlib import Path

    from ..exporter import Exporter
    from ..io.notes import read_notes
    from ..io.ownership import FOLDER_MARKER
    from ..llm.package import PACKAGE_BFLOAT16
    from ..tasks import export_folder

    exporter = Exporter(
        bfloat16=PACKAGE_BFLOAT16 if ns.bfloat16 == "auto" else ns.bfloat16,
        float16=ns.float16,
        optimize=not ns.no_optimize,
        quantized_weights=ns.quantized_weights,
        int8_activations=ns.int8_activations,
    )
    dtypes = [d.strip() for spec in ns.dtype or () for d in spec.split(",") if d.strip()]
    out = export_folder(
        ns.target, ns.output, overwrite=ns.overwrite, stage=progress.stage, exporter=exporter, dtypes=dtypes
    )
    files = sorted(str(p.relative_to(out)) for p in Path(out).rglob("*") if p.is_file() and p.name != FOLDER_MARKER)
    print(f"wrote package {out}: {', '.join(files)}")
    for key, note in read_notes(out).runtime_notes().items():  # what a runtime cannot do with the package
        print(f"  {key.replace('_', ' ')}: {note}")
    if not ns.check:
        return EXIT_OK
    from .check import check_package_folder

    return check_package_folder(out, ns.target, progress, ns.seed, min_agreement=ns.min_agreement)


def cmd_export(ns, progress: Progress) -> int:
    from ..exporter import Exporter
    from ..io.saving import initializer_bytes, save_model
    from ..specs import parse_dynamic_specs

    if _is_package_export(ns):
        return _export_package(ns, progress)

    fun, args, kwargs, label = target_and_inputs(ns)
    external = {"auto": None, "always": True, "never": False}[ns.external_data]
    exporter = Exporter(
        opset=ns.opset,
        input_names=names(ns.input_names),
        output_names=names(ns.output_names),
        path=ns.output,
        overwrite=ns.overwrite,
        external_data=external,
        bfloat16=ns.bfloat16,
        float16=ns.float16,
        optimize=not ns.no_optimize,
        quantized_weights=ns.quantized_weights,
        int8_activations=ns.int8_activations,
        dynamic=parse_dynamic_specs(ns.dynamic),
    )
    exporter.validate()  # opset and output path, before any work
    plan = None
    if exporter.dynamic:
        from ..capture.dynamic import capture_dynamic

        with progress.stage("tracing the function with MLX at several sizes"):
            trace, plan = run_user(lambda: capture_dynamic(fun, args, kwargs, exporter.dynamic), "the traced function")
    else:
        trace = capture_traced(fun, args, kwargs, progress)
    with progress.stage(f"translating {len(trace.primitives)} primitives"):
        model = exporter.trace_to_ir(trace, plan)
    with progress.stage(f"checking and saving {ns.output}"):
        save_model(model, ns.output, external_data=external, check=True, overwrite=ns.overwrite)
    nodes = len(model.graph)
    print(
        f"wrote {ns.output}: {label}, opset {exporter.resolved_opset()}, {len(trace.primitives)} MLX primitives "
        f"-> {nodes} ONNX nodes, {len(model.graph.initializers)} initializers "
        f"({fmt_bytes(initializer_bytes(model))})"
    )
    for value in model.graph.inputs:
        print(f"  input  {value.name}: {value_text(value)}")
    for value in model.graph.outputs:
        print(f"  output {value.name}: {value_text(value)}")
    if not ns.check:
        return EXIT_OK
    report = verify_against(ns.output, fun, args, kwargs, ns, progress)
    print(report)
    return EXIT_OK if report.passed else EXIT_MISMATCH
