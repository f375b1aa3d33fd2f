"""The parser of the ``mlx2onnx`` command: each subcommand, its options and the function it runs."""

from __future__ import annotations

import argparse

from .check import cmd_check
from .export import cmd_export
from .inspect import cmd_inspect
from .options import shared_options, subcommand
from .primitives import cmd_primitives
from .suite import cmd_check_suite

_EPILOG = """exit codes:
  0  success
  1  parity mismatch (or the model does not fit the callable)
  2  usage error: bad arguments, bad --input spec, unknown module or callable
  3  cannot export: unsupported/refused primitive, conversion or verification error
  4  the user's code raised (its traceback is shown)
  5  the file system refused a write or a read (disk full, permission): output as it was

targets:
  mlp | encoder | llama          a bundled reference model
  package.module:callable        importable from the current directory
  path/to/file.py:callable       loaded from that file
  ORG/NAME                       a Hugging Face hub id of such a folder (--revision REV)
  path/to/model_folder           an MLX model folder (mlx-lm, mlx-vlm, mlx-embeddings, mlx-whisper,
                                 mlx-audio, mlx-image); with -o FOLDER/ its task's package
The callable is a factory returning a function or mlx.nn.Module, or a (function, args)
or (function, args, kwargs) tuple; a factory that takes `seed` gets --model-seed. A callable
with required parameters (or an nn.Module object) is itself the function to export.
"""


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="mlx2onnx",
        description="Export Apple MLX functions and models to ONNX, and check the result against MLX.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlx2onnx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    common, target, checking = shared_options()
    _add_export(sub, common, target, checking)
    _add_check(sub, common, target, checking)
    _add_inspect(sub, common, target)
    _add_primitives(sub, common)
    _add_check_suite(sub, common)
    return parser


def _add_export(sub, common, target, checking) -> None:
    """`mlx2onnx export`: trace, translate, write, optionally check."""
    from ..specs import DYNAMIC_SPEC_HELP

    p = subcommand(
        sub,
        "export",
        [common, target, checking],
        cmd_export,
        help="export a function or model to an ONNX file",
        description="Trace TARGET with MLX on its example inputs, translate every primitive to ONNX, "
        "run onnx.checker and write the model atomically (nothing is written on failure).",
        epilog="example:\n  mlx2onnx export mlp -o mlp.onnx --check\n"
        "  mlx2onnx export mymodel.py:build -i x=1x16:float32 -o m.onnx --opset 18\n\n" + _EPILOG,
    )
    p.add_argument(
        "target", metavar="TARGET", help="mlp | encoder | llama | MODULE:CALLABLE | path.py:CALLABLE | MODEL_FOLDER"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.onnx|PACKAGE/",
        help="where to write the model: a .onnx file, or for a model folder a package folder",
    )
    p.add_argument(
        "--opset",
        type=int,
        help="target ONNX opset, 17 to 28 (default 24: the portable target's, which every "
        "runtime in docs/runtimes.md runs)",
    )
    p.add_argument(
        "--input-names",
        metavar="NAMES",
        help="graph input names: a,b in input order, or old=new pairs (default: parameter names)",
    )
    p.add_argument("--output-names", metavar="NAMES", help="graph output names a,b in output order")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output if it exists and mlx2onnx wrote it (a package folder holding only "
        "its files, a model it wrote); anything else is refused",
    )
    p.add_argument(
        "--external-data",
        choices=("auto", "always", "never"),
        default="auto",
        help="weights in FILE.onnx.data: above 2 GB (auto, default), always or never",
    )
    p.add_argument(
        "--bfloat16",
        choices=("auto", "keep", "float16", "float32", "emulate"),
        default="auto",
        help="dtype policy: how bfloat16 values are carried in the graph (default auto: keep when "
        "onnxruntime has bfloat16 kernels, else float32); emulate: float32 rounded after "
        "every op, MLX's numbers bit for bit",
    )
    p.add_argument(
        "--float16",
        choices=("keep", "float32", "emulate"),
        default="keep",
        help="dtype policy: carry float16 values as float16 (default) or float32 (emulate: rounded after every op)",
    )
    p.add_argument(
        "--quantized-weights",
        choices=("packed", "bytes", "dequantize", "dequantizelinear"),
        default=None,
        help="quantized weights: 4-bit blocks the runtime keeps packed where they fit, computed in "
        "float32 (default), MLX's bytes unpacked in the graph (every runtime, tract included), "
        "dequantized at export time, or the blocks as standard DequantizeLinear + MatMul "
        "(onnxruntime then computes them at its session's accuracy level: int8 activations by default)",
    )
    p.add_argument(
        "--int8-activations",
        action="store_true",
        help="let the runtime quantize the activations of the 4-bit blocks to int8 (faster prefill, "
        "about 1e-2 relative off MLX; on a trained SmolLM2-135M, 1 of 12 chat prompts keeps MLX's "
        "48 greedy tokens, 97%% teacher-forced agreement, logit gap 1.8: docs/runtimes.md; the check "
        "reports it)",
    )
    p.add_argument(
        "--dynamic",
        action="append",
        metavar="SPEC",
        help=f"dimensions that may change size, repeatable: {DYNAMIC_SPEC_HELP.replace('%', '%%')}. The function is "
        "traced at several sizes; a dimension it fixes is refused with the primitive that fixes it",
    )
    p.add_argument(
        "--dtype",
        action="append",
        metavar="DTYPES",
        help="for a text-generation package: graph files beside the folder's own (always written, named "
        "by what it holds: model.onnx, a 4-bit folder's model_q4.onnx), by transformers.js's dtype "
        "names, comma-separated: fp32, fp16, q8 (model_quantized.onnx), q4, q4f16; each is traced "
        "from the model made over in MLX and measured against the folder's (recorded in config.json "
        "and README.md)",
    )
    p.add_argument(
        "--no-optimize",
        action="store_true",
        help="skip the optimisation passes (broadcast dropping, constant folding, fusions, CSE); "
        "keeps every MLX intermediate as a named ONNX value, which helps check --localize",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="after writing, compare onnxruntime with MLX on random inputs (a package: its greedy "
        "tokens or task outputs against the MLX package's, as `mlx2onnx check` does; exit 1 on "
        "mismatch)",
    )


def _add_check(sub, common, target, checking) -> None:
    """`mlx2onnx check`: compare an ONNX model with its MLX callable."""
    p = subcommand(
        sub,
        "check",
        [common, target, checking],
        cmd_check,
        help="compare an ONNX model with the MLX function it came from",
        description="Run MODEL in onnxruntime and TARGET in MLX on the same seeded random inputs "
        "(shaped like the example inputs) and report, per output, the max absolute and "
        "relative error against the tolerance. Exit 1 when any output differs.",
        epilog="example:\n  mlx2onnx check mlp.onnx mlp\n  mlx2onnx check m.onnx mymodel.py:build --localize\n\n"
        + _EPILOG,
    )
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("target", metavar="TARGET", help="the callable MODEL was exported from")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--localize",
        action="store_true",
        help="on a mismatch, expose intermediate values and name the first MLX primitive "
        "whose ONNX translation diverges (each primitive is evaluated in MLX on the "
        "ONNX side's own inputs)",
    )


def _add_inspect(sub, common, target) -> None:
    """`mlx2onnx inspect`: what an export would contain."""
    p = subcommand(
        sub,
        "inspect",
        [common, target],
        cmd_inspect,
        help="show what an export would contain, without exporting",
        description="Trace TARGET and show its inputs, outputs, constants, a histogram of MLX "
        "primitives and which have no handler. Exit 3 when some primitive cannot be exported.",
        epilog="example:\n  mlx2onnx inspect llama --records\n\n" + _EPILOG,
    )
    p.add_argument("target", metavar="TARGET")
    p.add_argument(
        "--records",
        action="store_true",
        help="list every primitive record with its arguments decoded (type=Sum axes=[1])",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")


def _add_primitives(sub, common) -> None:
    """`mlx2onnx primitives`: the table of supported and refused primitives."""
    p = subcommand(
        sub,
        "primitives",
        [common],
        cmd_primitives,
        help="the table of MLX primitives mlx2onnx supports or refuses",
        description="List every MLX primitive the export callback can report: handled (with the "
        "handler's restrictions), refused (with the reason and what to do instead), not emitted "
        "(MLX removes it before export) or missing.",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument(
        "--status",
        choices=("handled", "refused", "missing", "not emitted"),
        help="only the primitives with this status",
    )


def _add_check_suite(sub, common) -> None:
    """`mlx2onnx check-suite`: every target of a suite file, with reports."""
    p = subcommand(
        sub,
        "check-suite",
        [common],
        cmd_check_suite,
        help="export and check every target of a suite file; JSON, JUnit XML and HTML reports",
        description="Read SUITE.toml (a list of targets with their inputs, dynamic dimensions, sizes, "
        "runtimes and tolerances; see docs/check-suite.md), export and check each one (a "
        "failing target does not stop the others), and write report.json, junit.xml and "
        "report.html into the output folder. Exit 1 when any check fails, 2 for a bad suite file.",
        epilog="example:\n  mlx2onnx check-suite models.toml -o reports/\n",
    )
    p.add_argument("suite", metavar="SUITE.toml")
    p.add_argument(
        "-o",
        "--output",
        default="check-suite-report",
        metavar="DIR",
        help="folder for report.json, junit.xml and report.html (default: check-suite-report)",
    )
