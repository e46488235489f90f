"""BitCast: a tensor's bits read as another dtype (ONNX BitCast-26; torch ``Tensor.view(dtype)``).

ONNX requires the two dtypes to have the same bit width, and the shape then stays. The IR op
also takes widths that differ, as torch's ``view(dtype)`` does: the last axis is multiplied (to
a narrower type) or divided (to a wider one) by the ratio of the widths. Sub-byte types (int4,
float4, int2, ...) sit one element per byte in memory (see ir/types.py), so they only bit-cast
to types of their own width. The bytes are read little endian, as ONNX requires. To bool,
every non-zero byte is true (numpy holds a bool as 0 / 1), so a u8 2 cast to bool and back is 1,
where ONNX's reference keeps the byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dims as _dims
from ..opdef import ShapeContext, define_op
from ..types import Dim, from_numpy_dtype, to_numpy_dtype
from .common import ALL, LOWP

#: The width in bits of every IR dtype a BitCast takes (bool is one byte).
BITS = {
    "f64": 64, "i64": 64, "u64": 64,
    "f32": 32, "i32": 32, "u32": 32,
    "f16": 16, "bf16": 16, "i16": 16, "u16": 16,
    "i8": 8, "u8": 8, "bool": 8,
    "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0": 8,
    "f4e2m1": 4, "i4": 4, "u4": 4,
    "i2": 2, "u2": 2,
}
#: Types narrower than their storage byte: their bits cannot be split or joined across elements.
SUB_BYTE = frozenset(k for k, b in BITS.items() if b < 8)


def bitcast_shape(shape: tuple[Dim, ...], src: str, dst: str) -> tuple[tuple[Dim, ...], str | None]:
    """The shape after bit-casting ``shape`` from ``src`` to ``dst`` (torch's rule: the last
    axis scales by the ratio of the widths), or (shape, reason) when it cannot be done."""
    a, b = BITS[src], BITS[dst]
    if a == b:
        return shape, None
    if src in SUB_BYTE or dst in SUB_BYTE:
        return shape, (f"{src} ({a} bits) and {dst} ({b} bits) differ in width and one of them is "
                       "narrower than a byte")
    if not shape:
        return shape, f"a {src} scalar has no last axis to rescale for {dst} ({a} -> {b} bits)"
    last = shape[-1]
    if a > b:
        return shape[:-1] + (_dims.mul(last, a // b),), None
    ratio = b // a
    if not isinstance(last, int) or last % ratio:
        return shape, (f"a {src} tensor of shape {list(shape)} bit-casts to {dst} only when its "
                       f"last dim is a multiple of {ratio} ({b} / {a} bits)")
    return shape[:-1] + (last // ratio,), None


def _bitcast_shape(ctx: ShapeContext) -> Any:
    src, dst = ctx.input_dtype(0), ctx.attr("to")
    shape, why = bitcast_shape(tuple(ctx.input_shape(0)), src, dst)
    if why is not None:
        raise ctx.error(why, attr="to", hint="bit-cast between types of the same width, or give "
                        "the input a last axis that is a multiple of the ratio of the widths")
    return shape, dst


def bitcast(x: np.ndarray, to: str) -> np.ndarray:
    """The bits of ``x`` as dtype ``to`` (see :func:`bitcast_shape` for the shape)."""
    src = np.ascontiguousarray(x)
    if src.dtype.byteorder == ">":  # ONNX reads the bytes little endian
        src = src.astype(src.dtype.newbyteorder("<"))
    out_shape, _ = bitcast_shape(tuple(x.shape), from_numpy_dtype(x.dtype), to)
    target = to_numpy_dtype(to)
    if to == "bool":  # a byte other than 0 or 1 is not a numpy bool: every non-zero byte is true
        return src.reshape(-1).view(np.uint8).reshape(out_shape) != 0
    # numpy's view rescales the last axis as torch does; a scalar (same width only) has none
    return src.reshape(src.shape or (1,)).view(target).reshape(out_shape)


(
    define_op("BitCast")
    .doc("The bits of x read as dtype `to`. Same width: the same shape; otherwise the last axis "
         "is multiplied (narrower `to`) or divided (wider) by the ratio of the widths, as "
         "torch's view(dtype). Sub-byte types bit-cast only to their own width.")
    .input("x", "T").output("y", "U")
    .param("to", "dtype", doc="the dtype to read the bits as")
    .type_param("T", ALL + LOWP).type_param("U", ALL + LOWP)
    .shape_fn(_bitcast_shape)
    .compute(bitcast)
)
