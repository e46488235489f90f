"""``opbridge export-torchscript``: write a saved TorchScript ``.pt`` as TorchScript-json (needs torch)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from ..errors import AttrError, ModelFormatError, first_line
from .common import (
    _echo,
    check_output,
    input_shape_arg,
    input_shapes_from_args,
    model_endings,
    non_negative_int,
)

_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64",
           "bool")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export-torchscript",
        help="write a saved TorchScript module (.pt) as TorchScript-json (needs torch)",
        description="Load a TorchScript module saved with torch.jit.save, freeze and inline it, and "
        "write MODEL.ts.json plus its tensors in MODEL.ts.safetensors (docs/torchscript-json.md). "
        "Converting the result needs no torch.",
    )
    p.add_argument("model", help="a TorchScript module saved with torch.jit.save (.pt)")
    p.add_argument("--input-shape", action=_InArgumentOrder, default=[],
                   type=functools.partial(input_shape_arg, scalar=True),
                   metavar="NAME=DIMS", help="shape of a tensor forward() argument, e.g. "
                   "x=1,3,224,224 (t= for a 0-d tensor); give every argument, in argument order, with this or "
                   "--example-value (repeatable)")
    p.add_argument("--example-value", action=_InArgumentOrder, default=[], metavar="NAME=VALUE",
                   help="example value of a forward() argument typed int, float, bool or a list of "
                   "them (e.g. sr=16000, shape=2,3, flag=true); it stays an input of the graph "
                   "(bind it while converting with --input-value) (repeatable)")
    p.add_argument("--input-dtype", action="append", default=[], metavar="NAME=DTYPE",
                   help=f"dtype of an input (default float32; one of {', '.join(_DTYPES)})")
    p.add_argument("-o", "--output", required=True, metavar="OUT.ts.json", help="the JSON file to write")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random example inputs")
    p.set_defaults(func=run, forward_args=[])


class _InArgumentOrder(argparse.Action):
    """Appends to its own list and to ``forward_args``, which keeps --input-shape (parsed by the
    shared :func:`~.common.input_shape_arg`: (name, dims)) and --example-value (the text) in
    the order given (the order of forward()'s arguments)."""

    def __call__(self, parser: Any, ns: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        setattr(ns, self.dest, [*getattr(ns, self.dest), values])
        ns.forward_args = [*ns.forward_args, (self.dest, values)]


def run(args: argparse.Namespace) -> int:
    from ..export.torchscript import export_torchscript, import_torch, weights_path_for

    shapes = input_shapes_from_args(args) or {}
    dtypes: dict[str, str] = {}
    for item in args.input_dtype:
        name, _, dt = item.partition("=")
        if name not in shapes or dt not in _DTYPES:
            raise AttrError(
                f"--input-dtype {item!r}: expected NAME=DTYPE for a NAME given to --input-shape",
                hint=f"DTYPE is one of {', '.join(_DTYPES)}",
            )
        dtypes[name] = dt
    check_output(args.output, "-o", "a TorchScript-json file", ".ts.json")
    path = Path(args.model)
    if path.name.lower().endswith(model_endings()):
        raise ModelFormatError(f"'{path}' is already a model file opbridge reads, not a saved TorchScript "
                               "module (.pt)", hint=f"convert it directly: opbridge convert {path} -o OUT.obir")
    if not path.is_file():
        raise ModelFormatError(f"'{path}' does not exist or is not a file",
                               hint="give the .pt file torch.jit.save wrote")
    torch = import_torch()
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as err:  # torch raises RuntimeError and others for a bad archive
        raise ModelFormatError(
            f"'{path}' is not a TorchScript module: {first_line(err)}",
            hint="save it with torch.jit.save(torch.jit.trace(model, example), PATH)",
        ) from None
    example = _examples(torch, module, args.forward_args, shapes, dtypes, args.seed)
    out = export_torchscript(module, tuple(example), args.output,
                             input_names=[_arg_name(item) for _, item in args.forward_args])
    weights = weights_path_for(out)
    print(f"wrote {out}" + (f" and its tensors {weights} (keep the two together)" if weights.is_file() else ""))
    print(f"next: opbridge convert {out} -o {Path(out).name[: -len('.ts.json')] or 'model'}.obir "
          "(no torch needed from here on)")
    return 0


def _arg_name(item: str | tuple[str, tuple[int, ...]]) -> str:
    """The argument an --input-shape (name, dims) or --example-value NAME=VALUE names."""
    if isinstance(item, tuple):
        return item[0]
    return item.rpartition("=")[0] or item  # as the value parsers split: a name may hold "="


def _examples(torch: Any, module: Any, forward_args: list[tuple[str, Any]],
              shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str], seed: int) -> list[Any]:
    """One example per forward() argument, in order: random tensors of the given shapes, and
    the --example-value numbers (a single number for a List argument is a one-element list)."""
    if not forward_args:
        raise AttrError("no forward() arguments given",
                        hint="give each one, in order, with --input-shape NAME=D0,D1,... (tensors) "
                        "or --example-value NAME=VALUE (int, float, bool, lists)")
    gen = torch.Generator().manual_seed(seed)
    types = _argument_types(module)
    _check_argument_names([_arg_name(item) for _, item in forward_args])
    example: list[Any] = []
    for kind, item in forward_args:
        name = _arg_name(item)
        if kind == "example_value":
            example.append(_example_value(item, types.get(name, "")))
            continue
        shape = shapes[name]
        dt = getattr(torch, dtypes.get(name, "float32"))
        if dt.is_floating_point:
            example.append(torch.randn(shape, generator=gen).to(dt))
        elif dt == torch.bool:
            example.append(torch.randint(0, 2, shape, generator=gen).to(dt))
        else:
            example.append(torch.randint(0, 10, shape, generator=gen).to(dt))
    return example


def _check_argument_names(names: list[str]) -> None:
    """Each forward() argument named once: the names become the exported graph's inputs (a
    traced module's own argument names need not match them), and two inputs cannot share one."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise AttrError(f"forward() argument {_echo(name)} is given twice (--input-shape / --example-value)",
                            hint="give each argument once, in forward()'s order")
        seen.add(name)


def _argument_types(module: Any) -> dict[str, str]:
    """forward()'s argument names -> TorchScript types (empty when the module has no schema)."""
    try:
        return {a.name: str(a.type) for a in module.forward.schema.arguments}
    except (AttributeError, RuntimeError):
        return {}


def _example_value(item: str, ts_type: str) -> Any:
    from .common import input_value_arg

    try:
        _, value = input_value_arg(item)
    except argparse.ArgumentTypeError:
        raise AttrError(f"--example-value {_echo(item)}: write NAME=VALUE with numbers (comma-separated "
                        "for a list) or true/false",
                        hint="e.g. --example-value sr=16000, shape=2,3 or flag=true") from None
    if isinstance(value, str):
        raise AttrError(f"--example-value {_echo(item)}: give the value itself, not a file",
                        hint="e.g. --example-value sr=16000 or --example-value shape=2,3")
    return [value] if ts_type.startswith("List[") and not isinstance(value, list) else value
