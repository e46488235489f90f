"""The ``opbridge`` command: a thin layer over the Python API.

Each subcommand lives in its own module of this package with ``add_parser(subparsers)``
(which sets ``func`` on its parser); :data:`COMMANDS` lists them by name, in ``--help`` order.
Exit codes: 0 success, 1 a validation that did not pass, 2 a user error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import OpbridgeError

COMMANDS = ("demo", "convert", "ops", "show", "export-torchscript", "calibrate", "quantize", "compile",
            "run", "profile", "validate", "plugin", "random-weights", "batch", "serve")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: as every other error, exit 2
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        sys.stderr.write(f"hint: '{self.prog} --help' lists the arguments and options\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="opbridge",
        description="Convert trained models (ONNX, Caffe, TorchScript-json) into one typed IR, "
        "compile it for a simulated TPU, run and validate it.",
        epilog="Run 'opbridge COMMAND --help' for a command's options. Exit codes: 0 success, "
        "1 a validation that did not pass, 2 a user error.",
    )
    parser.add_argument("--version", action="version", version=f"opbridge {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        mod = importlib.import_module(f".{name.replace('-', '_')}", __name__)
        mod.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        rc = args.func(args)
        return int(rc or 0)
    except OpbridgeError as err:
        if args.debug:
            raise
        # one `error:` line; a list the message carries (every unsupported op) stays one item
        # a line, indented under it
        first, *more = err.message.splitlines() or [""]
        sys.stderr.write(f"error: {first}\n")
        for line in more:
            if line.strip():
                sys.stderr.write(f"{line if line.startswith(' ') else '  ' + line}\n")
        if err.hint:
            sys.stderr.write(f"hint: {err.hint}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:
        if args.debug:
            raise
        sys.stderr.write(f"error: {err.strerror or err}: {err.filename or ''}\n")
        return EXIT_USAGE
    except Exception as err:  # a bug of ours: say so, one line, and how to see more
        if args.debug:
            raise
        sys.stderr.write(f"internal error: {type(err).__name__}: {err}\n")
        sys.stderr.write("hint: rerun with --debug for the traceback, and please report it\n")
        return 3
