"""Shape-function helpers shared by the op families."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ..dims import equal as dims_equal
from ..dims import is_runtime
from ..opdef import ShapeContext
from ..types import Dim, Shape

FLOATS = ("f32", "f16", "bf16", "f64")
SIGNED = ("i8", "i16", "i32", "i64")
UNSIGNED = ("u8", "u16", "u32", "u64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
#: Low-precision storage types (float8, float4, int4, int2; see ir/types.py).
LOWP = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4", "u4", "i2", "u2")


def broadcast_shapes(shapes: Sequence[Shape], where: str = "") -> Shape:
    """numpy broadcasting of several shapes; a symbolic dim broadcasts with 1, itself and another
    symbol (the run checks that those agree), not with another int."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dim: Dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if dim == 1:
                dim = d
            elif isinstance(dim, str) and isinstance(d, str):
                # two different symbols: equal (or one of them 1) on every valid run, which the
                # run checks; a named dim says more than a run-time one
                if is_runtime(dim) and not is_runtime(d):
                    dim = d
            elif not dims_equal(dim, d):
                raise ShapeError(
                    f"{where}: shapes {' and '.join(str(list(x)) for x in shapes)} do not broadcast",
                    hint="numpy broadcasting rules apply",
                )
        out.append(dim)
    return tuple(out)


def same_shape(ctx: ShapeContext) -> Any:
    return ctx.same_as_input(0)


def broadcast_fn(out_dtype: str | None = None) -> Any:
    """A shape function: every input broadcast together; dtype of input 0 unless given."""

    def fn(ctx: ShapeContext) -> Any:
        shapes = [ctx.input_shape(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
        return broadcast_shapes(shapes, ctx.where), out_dtype or ctx.input_dtype(0)

    return fn
