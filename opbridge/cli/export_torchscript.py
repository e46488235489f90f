"""``opbridge export-torchscript``: write a saved TorchScript ``.pt`` as TorchScript-json (needs torch)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import AttrError, ModelFormatError

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
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   required=True,
                   help="shape of a forward() argument, in argument order (repeatable)")
    p.add_argument("--input-dtype", action="append", default=[], metavar="NAME=DTYPE",
                   help=f"dtype of an input (default float32; one of {', '.join(_DTYPES)})")
    p.add_argument("-o", "--output", required=True, metavar="OUT.ts.json", help="the JSON file to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the random example inputs")
    p.set_defaults(func=run)


def parse_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224"]`` -> ``{"x": (1, 3, 224, 224)}``, in the order given."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            shape = (-1,)
        if not sep or not name or any(d < 0 for d in shape):
            raise AttrError(
                f"--input-shape {item!r}: expected NAME=D0,D1,... with sizes >= 0",
                hint="e.g. --input-shape x=1,3,224,224",
            )
        out[name] = shape
    return out


def run(args: argparse.Namespace) -> int:
    from ..export.torchscript import export_torchscript, import_torch

    shapes = parse_shapes(args.input_shape)
    dtypes: dict[str, str] = {}
    for item in args.input_dtype:
        name, _, dt = item.partition("=")
        if name not in shapes or dt not in _DTYPES:
            raise AttrError(
                f"--input-dtype {item!r}: expected NAME=DTYPE for a NAME given to --input-shape",
                hint=f"DTYPE is one of {', '.join(_DTYPES)}",
            )
        dtypes[name] = dt
    path = Path(args.model)
    if not path.is_file():
        raise ModelFormatError(f"'{path}' does not exist or is not a file",
                               hint="give the .pt file torch.jit.save wrote")
    torch = import_torch()
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as err:  # torch raises RuntimeError and others for a bad archive
        raise ModelFormatError(
            f"'{path}' is not a TorchScript module: {str(err).splitlines()[0] if str(err) else err}",
            hint="save it with torch.jit.save(torch.jit.trace(model, example), PATH)",
        ) from None
    gen = torch.Generator().manual_seed(args.seed)
    example = []
    for name, shape in shapes.items():
        dt = getattr(torch, dtypes.get(name, "float32"))
        if dt.is_floating_point:
            example.append(torch.randn(shape, generator=gen).to(dt))
        elif dt == torch.bool:
            example.append(torch.randint(0, 2, shape, generator=gen).to(dt))
        else:
            example.append(torch.randint(0, 10, shape, generator=gen).to(dt))
    out = export_torchscript(module, tuple(example), args.output, input_names=list(shapes))
    print(f"wrote {out}")
    return 0
