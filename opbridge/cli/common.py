"""Options that several commands share, defined once so that they read and behave alike."""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable
from typing import Any

#: the most dims an array may have (numpy's limit, NPY_MAXDIMS)
MAX_RANK = 64


def _echo(text: str) -> str:
    """``text`` quoted for an error message, cut short (an argument can be megabytes long)."""
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def int_at_least(floor: int, note: str = "") -> Callable[[str], int]:
    """An ``argparse`` type: a whole number >= ``floor``; every refusal names that floor (and
    ``note``, what the floor value means, e.g. "0: BLAS's own setting")."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = floor - 1
        if n < floor:
            raise argparse.ArgumentTypeError(
                f"{_echo(text)}: give a whole number >= {floor}" + (f" ({note})" if note else ""))
        return n

    return parse


#: a whole number >= 0 (a seed, a count where 0 means all or none)
non_negative_int = int_at_least(0)
#: a whole number >= 1 (jobs, workers, sizes)
positive_int = int_at_least(1)


def input_shape_arg(text: str, scalar: bool = False) -> tuple[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` -> ("NAME", (1, 3, 224, 224)); the name may itself contain '='.
    With ``scalar``, ``NAME=`` is a 0-d tensor (an export's scalar tensor argument); a model's
    input given no dims is refused."""
    name, sep, dims = text.rpartition("=")
    if scalar and sep and name and not dims:
        return name, ()
    try:
        if not sep or not name or not dims:
            raise ValueError
        if dims.count(",") >= MAX_RANK:
            raise argparse.ArgumentTypeError(f"{_echo(text)}: more than {MAX_RANK} dims (numpy's limit); "
                                             "write NAME=DIMS, e.g. data=1,3,224,224")
        shape = tuple(int(d) for d in dims.split(","))
        if any(d < 0 for d in shape):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{_echo(text)}: write NAME=DIMS with non-negative integer dims, e.g. data=1,3,224,224"
        ) from None
    return name, shape


def add_input_shape_option(p: Any, help: str = "fix an input's dims (symbolic, or a Caffe net's "
                           "declared batch), e.g. data=1,3,224,224 (repeatable)") -> None:
    p.add_argument("--input-shape", action="append", default=[], type=input_shape_arg,
                   metavar="NAME=DIMS", help=help)


def input_value_arg(text: str) -> tuple[str, Any]:
    """``NAME=16000``, ``NAME=1,2,3``, ``NAME=0.5``, ``NAME=true`` or ``NAME=FILE.npy`` ->
    (name, a number, a list of numbers, or the .npy path, read by :func:`input_values_from_args`)."""
    name, sep, value = text.rpartition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"{_echo(text)}: write NAME=VALUE, e.g. sr=16000, or NAME=FILE.npy")
    if value.lower().endswith(".npy"):
        return name, value
    items: list[Any] = []
    for part in value.split(","):
        word = part.strip().lower()
        try:
            items.append(True if word == "true" else False if word == "false" else
                         int(word) if word.lstrip("+-").isdigit() else float(word))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{_echo(text)}: {_echo(part)} is not a number; write NAME=VALUE (numbers, comma-separated, "
                "or true/false) or NAME=FILE.npy") from None
        # float() reads 'nan', 'inf' and 1e999 (inf): no input is meant to be bound to those
        if isinstance(items[-1], float) and not math.isfinite(items[-1]):
            raise argparse.ArgumentTypeError(
                f"{_echo(text)}: {_echo(part)} is not a finite number; write NAME=VALUE with finite numbers, "
                "or NAME=FILE.npy")
    return name, items[0] if len(items) == 1 else items


def add_input_value_option(p: Any) -> None:
    p.add_argument("--input-value", action="append", default=[], type=input_value_arg,
                   metavar="NAME=VALUE",
                   help="bind input NAME to a constant and fold what it decides (a branch on it, "
                   "the shapes it gives), e.g. sr=16000, mask=1,0,1 or x=FILE.npy; NAME is then no "
                   "longer an input of the graph (repeatable)")


def input_values_from_args(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--input-value`` bindings (.npy files read), or None when there are none."""
    from ..errors import OpbridgeError

    out: dict[str, Any] = {}
    for name, value in getattr(args, "input_value", []) or []:
        if name in out:
            raise OpbridgeError(f"--input-value gives '{name}' twice", hint="give each input once")
        if isinstance(value, str):
            from ..arrayfile import ArrayFileError, ArrayTooLargeError, read_npy

            try:
                value = read_npy(value)
            except ArrayFileError as err:
                raise OpbridgeError(f"--input-value {name}={value}: cannot read it: it {err.reason}",
                                    hint=err.hint if isinstance(err, ArrayTooLargeError)
                                    else "give a .npy file written by numpy.save") from None
        out[name] = value
    return out or None


def add_model_options(p: Any, *, input_shape_help: str | None = None) -> None:
    """The options of every command that reads a model file (converting it first): --weights,
    --input-shape, --input-value and --plugin."""
    p.add_argument("--weights", metavar="W", help="weights file (Caffe .caffemodel)")
    if input_shape_help is None:
        add_input_shape_option(p)
    else:
        add_input_shape_option(p, help=input_shape_help)
    add_input_value_option(p)
    add_plugin_option(p)


def input_shapes_from_args(args: argparse.Namespace) -> dict[str, tuple[int, ...]] | None:
    """The ``--input-shape`` dims by input name, or None when there are none."""
    from ..errors import OpbridgeError

    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in getattr(args, "input_shape", []) or []:
        if name in shapes:
            raise OpbridgeError(f"--input-shape gives '{name}' twice", hint="give each input once")
        shapes[name] = shape
    return shapes or None


#: What a file with one of these endings is, when it is given where a model file is expected.
_NOT_A_MODEL = {
    ".caffemodel": "Caffe weights: give the net's deploy .prototxt as MODEL, with --weights {path}",
    ".pt": "a saved TorchScript module: write it as TorchScript-json first, with one --input-shape "
           "per forward() argument (opbridge export-torchscript {path} --input-shape x=1,3,224,224 "
           "-o model.ts.json)",
    ".pth": "PyTorch weights: export the model as TorchScript-json (opbridge export-torchscript) "
            "or ONNX (torch.onnx.export) first",
    ".npy": "an array, not a model: ",
    ".npz": "arrays, not a model: ",
}


def _arrays_hint(command: str, path: str) -> str:
    """What to do with arrays given as MODEL: validate takes them as --input (the only command
    of those that read a model which does), the rest are told which commands do."""
    if command == "validate":
        one = path.lower().endswith(".npy")
        return f"give {'it' if one else 'them'} to --input {'NAME=' if one else ''}{path}"
    return "arrays are inputs: opbridge validate MODEL --input ... or opbridge run PROG --input ..."


def model_endings() -> tuple[str, ...]:
    """The endings of the files a command reads as a model (:func:`opbridge.convert.model_endings`,
    imported on first use: that module pulls in numpy)."""
    from ..convert import model_endings as endings

    return endings()


def check_model_file(path: str, command: str) -> None:
    """Refuse, before any work, a MODEL that is a folder or a file of a kind that is no model
    (a .caffemodel, a .pt): the error names it and says what to give instead."""
    from pathlib import Path

    from ..errors import ModelFormatError

    p = Path(path)
    if p.is_dir():
        inside = sorted(str(f) for f in p.iterdir() if f.name.lower().endswith(model_endings()))[:3]
        raise ModelFormatError(
            f"'{path}' is a folder; opbridge {command} reads one model file",
            hint=(f"give a model file in it, e.g. {inside[0]}" if inside else
                  f"give a model file ({', '.join(model_endings())})")
            + ("; 'opbridge batch' takes folders" if command in ("validate", "convert", "compile") else ""))
    if p.name.lower().endswith(".obprog"):
        raise ModelFormatError(f"'{path}' is a compiled program; {command} reads a graph (.obir) or "
                               "a model file (.onnx, .prototxt, .ts.json)",
                               hint="give the .obir or the model it was compiled from; "
                               "'opbridge profile' and 'opbridge run' read programs")
    for ending, what in _NOT_A_MODEL.items():
        if p.name.lower().endswith(ending):
            what = what.format(path=path)
            if ending in (".npy", ".npz"):
                what += _arrays_hint(command, path)
            raise ModelFormatError(f"'{path}' is not a model file ({', '.join(model_endings())})",
                                   hint=f"it is {what}")


def check_program_file(path: str, command: str) -> None:
    """Refuse, before reading it, a PROGRAM that is a graph or a model file: read as a program,
    its bytes gave a 'truncated safetensors' error with a header length of 19 digits."""
    from pathlib import Path

    from ..errors import ModelFormatError

    name = Path(path).name.lower()
    ending = next((e for e in model_endings() if name.endswith(e)), None)
    if ending is None:
        return
    what = "a graph (.obir)" if ending == ".obir" else f"a model file ({ending})"
    stem = Path(path).name[: -len(ending)] or "model"
    raise ModelFormatError(f"'{path}' is {what}; opbridge {command} reads a compiled program (.obprog)",
                           hint=f"compile it first: opbridge compile {path}"
                           f"{' --weights NET.caffemodel' if ending == '.prototxt' else ''} -o {stem}.obprog")


def check_output(path: str | None, option: str, what: str, ending: str | None = None, *,
                 not_a_model: str | None = None, example: str | None = None) -> None:
    """Refuse, before any work, an output path that cannot be written: a folder, a file in a
    folder that does not exist, or a name opbridge would not read back as ``what``: with
    ``ending``, one without it (model files and graphs are told apart by their endings); with
    ``not_a_model`` (the usual ending, for the hint), one ending like a model or graph, which
    would be read back as that whatever was written. ``example``: the file name a hint suggests
    (default ``out`` with the ending)."""
    from pathlib import Path

    from ..errors import OpbridgeError

    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise OpbridgeError(f"{option} '{path}' is a folder; it takes the file to write ({what})",
                            hint=f"give a file name, e.g. {option} {p / (example or 'out' + (ending or not_a_model or ''))}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OpbridgeError(f"{option} '{path}': folder '{parent}' does not exist",
                            hint=f"create it first (mkdir -p {parent}), or write somewhere else")
    if ending and not p.name.lower().endswith(ending):
        stem = p.name.split(".")[0] or "out"
        raise OpbridgeError(f"{option} '{path}' does not end in {ending}, the ending of {what} "
                            "(opbridge tells a file's kind by its ending)",
                            hint=f"name it {p.with_name(stem + ending)}")
    model_ending = not_a_model and next((e for e in model_endings() if p.name.lower().endswith(e)), None)
    if not_a_model and model_ending:
        stem = p.name[: -len(model_ending)] or "out"
        raise OpbridgeError(f"{option} '{path}' ends in {model_ending}: opbridge would read it back as "
                            f"a model file of that kind, not as {what}",
                            hint=f"name it {p.with_name(stem + not_a_model)}")


def load_model(args: argparse.Namespace, *, input_shapes: bool = True) -> Any:
    """The IR graph of ``args.model``: a .obir read (with the ``--pass`` passes run on it), any
    other model file converted with the model options; None when ``--check-passes`` found a pass
    that changed a result. ``input_shapes=False`` leaves the symbolic dims unfixed."""
    from ..errors import OpbridgeError
    from ..ir.io import load
    from ..plugins_loader import load_plugins

    path = str(args.model)
    check_model_file(path, args.command)
    if not path.lower().endswith(".obir"):
        return convert_checked(path, args, weights=args.weights,
                               input_shapes=input_shapes_from_args(args) if input_shapes else None,
                               plugins=args.plugin, input_values=input_values_from_args(args))
    if getattr(args, "input_value", None):
        raise OpbridgeError(f"--input-value binds inputs while converting; '{path}' is already converted",
                            hint=f"{args.command} the model file itself, or convert it again with "
                            "--input-value")
    load_plugins(args.plugin)
    graph = load(path)
    extra = getattr(args, "extra_passes", [])
    return convert_checked(graph, args, passes=extra) if extra else graph


def static_program(prog: Any) -> Any:
    """The program of fixed shapes behind what ``load_program`` gave: itself, or for a program
    compiled with ``--dynamic`` the one for its largest shapes (what random inputs and the
    profile use)."""
    return getattr(prog, "program", prog)


def add_plugin_option(p: Any) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="FILE",
                   help="load a plugin first (repeatable); OPBRIDGE_PLUGIN_PATH is honoured too")


def add_pass_option(p: Any, *, check: bool = True) -> None:
    """``--pass NAME`` (repeatable) and, with ``check``, ``--check-passes``."""
    p.add_argument("--pass", dest="extra_passes", action="append", default=[], metavar="NAME",
                   help="also run the graph pass NAME, after constant folding and before the other "
                   "default passes (repeatable; in the order given): a fusion a plugin registers "
                   "with opbridge.register_pass, or a built-in one (fold_batchnorm)")
    if check:
        p.add_argument("--check-passes", action="store_true",
                       help="interpret the graph before the passes and after each one on the same "
                       "random inputs and compare every tensor they share; a pass that changes a "
                       "result fails the command (exit 1) and names the pass and the tensor")


def passes_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The passes a command runs: ``--passes`` (or the defaults), with each ``--pass`` added."""
    from ..ir.passes import DEFAULT_PASSES, with_passes

    text = getattr(args, "passes", None)
    if text is None:
        base: tuple[str, ...] = DEFAULT_PASSES
    elif text.strip().lower() == "none":
        base = ()
    else:
        base = tuple(p.strip() for p in text.split(",") if p.strip())
    return with_passes(getattr(args, "extra_passes", []), base)


def convert_checked(model: Any, args: argparse.Namespace, *, passes: Any = None, **kwargs: Any) -> Any:
    """``convert(model, ...)`` with the passes of ``args`` (or ``passes``); a Graph ``model``
    only gets the passes. With ``--check-passes`` the check's lines are printed and, when a pass
    changed a result, the error too: then None is returned (the command exits 1)."""
    import sys

    from ..convert import convert
    from ..ir.graph import Graph
    from ..ir.passes import optimize

    passes = passes_from_args(args) if passes is None else tuple(passes)
    if not getattr(args, "check_passes", False):
        if isinstance(model, Graph):
            return optimize(model, passes)
        return convert(model, passes=passes, **kwargs)
    from ..passcheck import PassCheckError, check_passes, require_passed

    unfused = model if isinstance(model, Graph) else convert(model, passes=(), **kwargs)
    graph, report = check_passes(unfused, passes)
    for line in report.lines():
        sys.stdout.write(f"check: {line}\n")
    try:
        require_passed(report)
    except PassCheckError as err:
        sys.stderr.write(f"error: {err.message}\n")
        if err.hint:
            sys.stderr.write(f"hint: {err.hint}\n")
        return None
    return graph


def add_threads_option(p: Any) -> None:
    """``--threads N``: the BLAS threads of every run the command makes (see opbridge.threads);
    the command's function must be wrapped in :func:`with_threads`."""
    p.add_argument("--threads", type=int_at_least(0, "0: BLAS's own setting"), default=None, metavar="N",
                   help="BLAS threads of the interpreter and the simulator (default: "
                   "OPBRIDGE_NUM_THREADS, else 1, which stays fast on a busy machine; 0: BLAS's "
                   "own setting, usually one per core)")


def with_threads(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func`` run with ``--threads`` as the default of every run inside it."""

    @functools.wraps(func)
    def wrapped(args: argparse.Namespace) -> int:
        from ..threads import threads_env

        with threads_env(args.threads):
            return func(args)

    return wrapped
