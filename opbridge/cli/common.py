"""Options that several commands share, defined once so that they read and behave alike."""

from __future__ import annotations

import argparse
from typing import Any


def input_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` -> ("NAME", (1, 3, 224, 224)); the name may itself contain '='."""
    name, sep, dims = text.rpartition("=")
    try:
        if not sep or not name or not dims:
            raise ValueError
        shape = tuple(int(d) for d in dims.split(","))
        if any(d < 0 for d in shape):
            raise ValueError
        return name, shape
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}': write NAME=DIMS with non-negative integer dims, e.g. data=1,3,224,224"
        ) from None


def add_input_shape_option(p: Any, help: str = "fix an input's dims (symbolic, or a Caffe net's "
                           "declared batch), e.g. data=1,3,224,224 (repeatable)") -> None:
    p.add_argument("--input-shape", action="append", default=[], type=input_shape_arg,
                   metavar="NAME=DIMS", help=help)


def add_plugin_option(p: Any) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="FILE",
                   help="load a plugin first (repeatable); OPBRIDGE_PLUGIN_PATH is honoured too")
