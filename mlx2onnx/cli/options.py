"""The option groups the subcommands share (display, the target and its inputs, the check)
and the argument types that refuse a bad value with what would work."""

from __future__ import annotations

import argparse


def paragraph(text: str) -> str:
    import textwrap

    return textwrap.fill(text, width=88)


def seed_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; seeds are integers >= 0")
    return value


def tolerance_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a tolerance is a finite number >= 0 (NaN or inf would pass anything)"
        )
    return value


def fraction_number(text: str) -> float:
    value = tolerance_number(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a share is a number from 0 to 1")
    return value


def subcommand(
    sub, name: str, parents: list, run, *, help: str, description: str, epilog: str | None = None
) -> argparse.ArgumentParser:
    """Subcommand ``name``: its parser with the shared option groups ``parents``, its one-line
    help, its description (wrapped), its examples (``epilog``) and the function it runs."""
    parser = sub.add_parser(
        name,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help=help,
        description=paragraph(description),
        epilog=epilog,
    )
    parser.set_defaults(run=run)
    return parser


def shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The option groups subcommands share: display, the target's inputs and seeds, the check."""
    from ..specs import INPUT_SPEC_HELP

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="no progress display on stderr")

    target = argparse.ArgumentParser(add_help=False)
    target.add_argument(
        "--input",
        "-i",
        action="append",
        metavar="SPEC",
        help=f"an example input with random values, repeatable: {INPUT_SPEC_HELP}. "
        "Replaces the example inputs the callable returns",
    )
    target.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the random inputs: the --input values and the check's fresh inputs (default 0)",
    )
    target.add_argument(
        "--revision",
        metavar="REV",
        help="for a TARGET that is a Hugging Face hub id (ORG/NAME): the branch, tag or commit "
        "(default main); the model is read from huggingface_hub's cache, fetched when missing",
    )
    target.add_argument(
        "--model-seed",
        type=seed_number,
        default=0,
        help="passed as `seed` to a factory that takes one, e.g. the reference models' weights "
        "(default 0; check with the seed the model was exported with)",
    )

    checking = argparse.ArgumentParser(add_help=False)
    checking.add_argument(
        "--atol", type=tolerance_number, help="absolute tolerance for every float dtype (default per dtype)"
    )
    checking.add_argument(
        "--rtol", type=tolerance_number, help="relative tolerance for every float dtype (default per dtype)"
    )
    checking.add_argument(
        "--sizes",
        action="append",
        metavar="SYMBOL=N,N",
        help="for a model with dynamic dimensions, check it at these sizes of SYMBOL "
        "(repeatable; every combination; default: the example sizes, the smallest, and "
        "one beyond the traced sizes)",
    )
    checking.add_argument(
        "--runtime",
        default="onnxruntime",
        help="the runtime that runs the model: onnxruntime (default), onnxruntime-web (wasm, "
        "under Node), onnxruntime-node, openvino (CPU) or tract; it must be installed",
    )
    checking.add_argument(
        "--runtime-option",
        action="append",
        metavar="KEY=VALUE",
        help="run the runtime with this option, as your deployment sets it (repeatable): an "
        "onnxruntime session config entry or an OpenVINO compile property. Default: none, "
        "the runtime's own defaults; the report names any arithmetic that differs from MLX's",
    )
    checking.add_argument(
        "--reference",
        choices=("device", "float32"),
        default="device",
        help="what MLX computes the reference on: device (default) MLX's default device as it "
        "computes, which on CUDA and M5-class Metal GPUs is float32 products in TF32 "
        "(then compared at TF32's tolerance, and said), or float32: a full float32 "
        "reference (MLX's CPU stream where the device would use TF32)",
    )
    checking.add_argument(
        "--min-agreement",
        type=fraction_number,
        default=0.9,
        metavar="F",
        help="a package's extra dtype files (--dtype) pass when at least this share of their "
        "teacher-forced greedy tokens equals MLX's (default 0.9)",
    )
    checking.add_argument(
        "--example-inputs",
        action="store_true",
        help="compare on the example inputs themselves instead of fresh random ones",
    )

    return common, target, checking
