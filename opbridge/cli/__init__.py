"""The ``opbridge`` command: a thin layer over the Python API.

Each subcommand lives in its own module of this package with ``add_parser(subparsers)``
(which sets ``func`` on its parser); :data:`COMMANDS` lists them by name, in ``--help`` order.
Exit codes: 0 success, 1 a validation that did not pass, 2 a user error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Iterator, Sequence

from .. import __version__
from ..errors import OpbridgeError

COMMANDS = ("demo", "convert", "ops", "show", "export-torchscript", "calibrate", "quantize", "compile",
            "run", "profile", "validate", "plugin", "random-weights", "batch", "serve")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: The example commands each command's ``--help`` ends with (a test parses every one of them).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("opbridge demo --out-dir demo",
             "opbridge demo ../shared/models/caffe/squeezenet_v1.1 --target bm1684x"),
    "convert": ("opbridge convert model.onnx -o model.obir",
                "opbridge convert deploy.prototxt --weights net.caffemodel -o net.obir",
                "opbridge convert model.onnx --input-shape input=1,3,224,224 -o model.obir",
                "opbridge convert model.ts.json --plugin my_op.py -o model.obir"),
    "ops": ("opbridge ops", "opbridge ops --framework caffe"),
    "show": ("opbridge show model.obir", "opbridge show deploy.prototxt --weights net.caffemodel"),
    "export-torchscript": ("opbridge export-torchscript model.pt --input-shape x=1,3,224,224 "
                           "-o model.ts.json",),
    "calibrate": ("opbridge calibrate model.onnx --data calib/ -o table.json",
                  "opbridge calibrate model.onnx --data images/ --mean 104,117,123 --method percentile "
                  "-o table.json"),
    "quantize": ("opbridge quantize model.onnx --table table.json -o model.int8.obir",
                 "opbridge quantize model.onnx --dtype f16 -o model.f16.obir"),
    "compile": ("opbridge compile model.obir -o model.obprog",
                "opbridge compile model.onnx --target bm1684x -o model.obprog",
                "opbridge compile model.obir --lmem-kib 64 -o small.obprog"),
    "run": ("opbridge run model.obprog --random-input -o out.npz",
            "opbridge run model.obprog --input data=x.npy"),
    "profile": ("opbridge profile model.obprog", "opbridge profile model.obprog --trace trace.json"),
    "validate": ("opbridge validate model.onnx",
                 "opbridge validate deploy.prototxt --weights net.caffemodel --report report.json",
                 "opbridge validate model.onnx --per-layer --html report.html",
                 "opbridge validate model.onnx --quantize table.json"),
    "plugin": ("opbridge plugin new ScaleShift --framework caffe",),
    "plugin new": ("opbridge plugin new ScaleShift --framework caffe",
                   "opbridge plugin new MyUpsample --framework onnx -o plugins/my_upsample.py",
                   "opbridge plugin new Relu --framework onnx --override -o my_relu.py"),
    "random-weights": ("opbridge random-weights deploy.prototxt -o net.caffemodel --seed 0",),
    "batch": ("opbridge batch validate zoo/ --jobs 2 -o zoo-out",
              "opbridge batch compile a.onnx b.onnx --target bm1684x"),
    "serve": ("opbridge serve --data ./jobs", "opbridge serve --host 0.0.0.0 --port 8080 --workers 4"),
}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an indented line of a description or epilog (an
    example command) is kept as written instead of being run into the text around it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            out.append(indent + line if line.startswith("  ") else super()._fill_text(line, width, indent))
        return "\n".join(out)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._words: list[str] = []

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        # kept for error(): a typo'd required option (--outptu for --output) is reported as
        # the required option missing, before the unknown word is ever looked at
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> None:  # usage errors: as every other error, exit 2
        guess = self._close_match(message)
        typo = self._typo_of_option() if guess is None else None
        weights = self._weights_without_option(message)
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        if weights:
            rest = " ".join(w for w in self._words if w != weights)
            sys.stderr.write(f"hint: give the weights with --weights: {self.prog} {rest} --weights {weights}\n")
        elif typo:
            sys.stderr.write(f"hint: {typo[0]!r} is not an option: did you mean {typo[1]!r}? "
                             f"'{self.prog} --help' lists the arguments and options\n")
        else:
            sys.stderr.write(f"hint: {f'did you mean {guess!r}? ' if guess else ''}"
                             f"'{self.prog} --help' lists the arguments and options\n")
        sys.exit(EXIT_USAGE)

    def _weights_without_option(self, message: str) -> str | None:
        """A Caffe weights file given as a second positional argument (MODEL NET.caffemodel),
        when this command takes --weights."""
        if not message.startswith("unrecognized arguments: ") or "--weights" not in self._option_string_actions:
            return None
        return next((w for w in message.split()[2:] if w.lower().endswith(".caffemodel")), None)

    def _typo_of_option(self) -> tuple[str, str] | None:
        """The first word of the command line that looks like an option this parser does not
        know but is close to one it does, with that one, or None."""
        import difflib

        known = list(self._option_string_actions)
        for word in self._words:
            if word == "--":
                break
            name = word.partition("=")[0]
            # a prefix of a known option is argparse's abbreviation, not a typo
            if name.startswith("-") and len(name) > 2 and not any(k.startswith(name) for k in known):
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
                if close:
                    return name, close[0]
        return None

    def _close_match(self, message: str) -> str | None:
        """The command, choice or option the user probably meant by the word ``message``
        refuses (a typo), or None."""
        import difflib
        import re

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            word, known = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        elif message.startswith("unrecognized arguments: "):
            words = [w for w in message.split()[2:] if w.startswith("-")]
            word, known = (words[0].partition("=")[0] if words else ""), list(self._option_string_actions)
        else:
            return None
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.7) if word else []
        return close[0] if close else None


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
        _add_examples(sub.choices[name], name)
    return parser


def _add_examples(cmd: argparse.ArgumentParser, name: str) -> None:
    """End ``cmd``'s --help (and its sub-commands', as ``plugin new``) with its EXAMPLES."""
    if cmd.epilog is None and name in EXAMPLES:
        cmd.epilog = "examples:\n" + "\n".join(f"  {c}" for c in EXAMPLES[name])
    for action in cmd._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub_cmd in action.choices.items():
                _add_examples(sub_cmd, f"{name} {sub_name}")


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command ``args`` ran (``opbridge plugin new``'s for a sub-command),
    or ``parser`` itself."""
    found = parser
    while True:
        subs = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if not subs or name not in subs[0].choices:
            return found
        found = subs[0].choices[name]


def _stdout_is_devnull() -> bool:
    import os

    try:
        out, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture)
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def _os_error_hint(err: OSError) -> str:
    """What to do about a file the system would not read or write."""
    import errno

    hints = {
        errno.ENOENT: "check the path: the file, and every folder it names, must exist",
        errno.EISDIR: "give a file's path, not a folder's",
        errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
        errno.EACCES: "check the permissions of the file and its folder, or write somewhere else",
        errno.EPERM: "check the permissions of the file and its folder, or write somewhere else",
        errno.ENOSPC: "free some disk space, or write somewhere else",
        errno.EROFS: "the file system is read-only: write somewhere else",
    }
    return hints.get(err.errno or 0, "check the path and that the file can be read or written; "
                     "rerun with --debug for the traceback")


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C is a clean exit wherever it lands, building the parser included (the command
    # modules import for a noticeable moment before any command starts)
    try:
        with _one_line_warnings():
            return _main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Print a Python warning as one ``warning:`` line, as the CLI's own, instead of Python's
    two lines with the file, line number and source line of the code that raised it (the
    format only: where warnings go, and any filter or recorder, stay as they are)."""
    import warnings

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 line: str | None = None) -> str:
        return f"warning: {message}\n"

    saved = warnings.formatwarning
    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = saved


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["help"]:  # as git and pip take it: 'opbridge help convert' is 'opbridge convert --help'
        argv = [*argv[1:], "--help"]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # refused by the command's own parser, which knows its options
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        sys.stderr.write("error: opbridge: no COMMAND given\n")
        sys.stderr.write("hint: 'opbridge demo' runs the whole job on two bundled example models; "
                         "'opbridge COMMAND --help' shows a command's options and examples\n")
        return EXIT_USAGE
    # rich points stdout at /dev/null when the reader of a pipe goes away; one that was
    # /dev/null from the start (opbridge ... >/dev/null) keeps its exit status
    devnull_before = _stdout_is_devnull()
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
    except BrokenPipeError:
        return 0
    except SystemExit as err:
        # rich meets a closed pipe (opbridge validate ... | head) by pointing stdout at
        # /dev/null and exiting 1, which would read as "a validation did not pass"
        if err.code == 1 and not devnull_before and _stdout_is_devnull():
            return 0
        raise
    except OSError as err:
        if args.debug:
            raise
        sys.stderr.write(f"error: {err.strerror or err}: {err.filename or ''}\n")
        sys.stderr.write(f"hint: {_os_error_hint(err)}\n")
        return EXIT_USAGE
    except Exception as err:  # a bug of ours: say so, one line, and how to see more
        if args.debug:
            raise
        sys.stderr.write(f"internal error: {type(err).__name__}: {err}\n")
        sys.stderr.write("hint: rerun with --debug for the traceback, and please report it\n")
        return 3
