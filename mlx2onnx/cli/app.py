"""The ``mlx2onnx`` command line: export, check, inspect, primitives.

Exit codes (also in ``docs/cli.md``):

    0  success (and, for check, every output within tolerance)
    1  parity mismatch: an output differs, or the model does not fit the callable
    2  usage error: bad arguments, bad --input spec, unknown module or callable
    3  cannot export: unsupported or refused primitive, conversion or verification error
    4  the user's code raised (importing the module, the factory, or the traced function)
    5  the file system refused a write or a read (disk full, permission): the output is as it was
  130  interrupted (Ctrl-C): the output is as it was, or complete
"""

from __future__ import annotations

import os
import sys
import traceback

from .common import EXIT_EXPORT, EXIT_OK, EXIT_USAGE, EXIT_USER, EXIT_WRITE, error, exit_code, user_traceback
from .parser import build_parser
from .progress import Progress


def _hub_target(ns, progress: Progress) -> None:
    """A TARGET that is a hub id becomes its folder in huggingface_hub's cache."""
    from ..io.folders import hub_folder, is_hub_id

    if getattr(ns, "target", None) and is_hub_id(ns.target):
        with progress.stage(f"fetching {ns.target} from the Hugging Face hub (or its cache)"):
            ns.target = str(hub_folder(ns.target, ns.revision))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help/--version, 2 for bad arguments
        return int(exc.code or 0)
    if getattr(ns, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from ..errors import Mlx2OnnxError, UserFunctionError

    progress = Progress(quiet=ns.quiet)
    try:
        _hub_target(ns, progress)
        return ns.run(ns, progress)
    except UserFunctionError as exc:
        progress.close()
        sys.stderr.write(f"mlx2onnx: {exc.where} raised an exception:\n")
        sys.stderr.write(user_traceback(exc.error))
        return EXIT_USER
    except Mlx2OnnxError as exc:
        progress.close()
        code, prefix = exit_code(exc)
        error(prefix + str(exc))
        return code
    except KeyboardInterrupt:
        progress.close()
        sys.stderr.write("mlx2onnx: interrupted\n")
        return 130
    except BrokenPipeError:  # e.g. `mlx2onnx primitives | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # the file system refused: the writers left the output as it was
        progress.close()
        where = f" ({exc.filename})" if exc.filename else ""
        error(f"the file system refused: {exc.strerror or exc}{where}; the output is as it was before this command")
        return EXIT_WRITE
    except Exception:  # a bug in mlx2onnx itself: show our traceback, exit as a failed export
        progress.close()
        sys.stderr.write("mlx2onnx: internal error (please report it):\n" + traceback.format_exc())
        return EXIT_EXPORT
    finally:
        progress.close()


if __name__ == "__main__":
    sys.exit(main())
