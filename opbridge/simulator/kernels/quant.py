"""Kernels of the integer ops: ConvInteger, MatMulInteger, Requantize, QuantizeLinear and
DequantizeLinear, tiled in layer groups like their float counterparts.

- ConvInteger takes Conv's tiling hints (halo rows and columns, pads at the tile edges,
  chunks of output channels when streamed); its tile kernel multiplies the 8-bit operands
  with their zero points subtracted and accumulates in i32, as the chip's fix8b convolution
  does. The accumulation runs through an f64 matrix product: every partial sum is an integer
  below 2**53, so it is exact, and the i32 result is the same as an integer loop's.
- MatMulInteger takes MatMul's hints (rows of A tile; B whole), keeping A's rows whole when
  its zero point is given per row.
- Requantize is element by element with its multiplier, shift and zero point per channel (axis
  1, the axis tiles never cut) or per tensor; its kernel is the chip's fixed-point rescale,
  ``round_half_away_from_zero(acc * multiplier / 2**(31 + shift)) + y_zero_point`` saturated,
  computed exactly in int64.
- QAdd (two 8-bit tensors of their own scales added, the residual Add of an int8 network) is
  element by element on N, H and W: each input's zero point subtracted, shifted left,
  rescaled to the common scale with its multiplier and shift, the two added and the sum
  rescaled to the output's, ReLU and saturation last, all in int64 with the same rounding as
  Requantize; one vector instruction per tile as the chip's int8 Add.
- Lut (a 256-entry table read by each 8-bit value) is element by element on N, H and W, its
  table held whole in local memory.
- QuantizeLinear and DequantizeLinear are element by element and run the op's own compute.

A tile never cuts the axis of a per-axis parameter other than the channels: the parameter
is held whole and must line up with the tile. Blocked quantization runs as a global layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Node
from ...ir.opdef import DEFAULT_OPS
from ...ir.ops.quant import INT_RANGES, fixed_point_rescale
from .conv import conv_tiling
from .matmul import matmul_cost, matmul_rows, matmul_split
from .registry import register_kernel, static_shape

#: NCHW axis index -> the tiling axis it names (channels are never cut by a layer group).
_TILE_AXES = {0: "N", 2: "H", 3: "W"}


# -- ConvInteger --------------------------------------------------------------------------
def conv_integer_channels(node: Node, i: int, c0: int, c1: int) -> tuple[int, int, int] | None:
    """Output channels [c0, c1) read all of X and x_zero_point, and rows [c0, c1) of W and of a
    per-channel w_zero_point (a scalar one whole)."""
    if i in (0, 2):
        return None
    if i == 3 and int(np.prod(static_shape(node.inputs[3]))) == 1:
        return None
    return (0, c0, c1)


def _reference(op: str) -> Callable[..., Any]:
    fn = DEFAULT_OPS.get(op).compute_function
    assert fn is not None  # the built-in integer ops all have one
    return fn


def conv_integer_into(out: np.ndarray, x: np.ndarray, w: np.ndarray,
                      x_zero_point: np.ndarray | None = None,
                      w_zero_point: np.ndarray | None = None, *, group: int,
                      kernel_shape: tuple[int, ...], strides: tuple[int, ...],
                      dilations: tuple[int, ...], pads: tuple[int, ...]) -> None:
    """ConvInteger on a tile, into its i32 output: zero points subtracted first (so padding
    contributes 0, as the spec's ``(X - x_zero_point) conv (W - w_zero_point)``), then im2col
    and one product accumulated exactly (see the module doc)."""
    if group != 1 or x.ndim != 4:
        out[...] = _reference("ConvInteger")(
            x, w, x_zero_point, w_zero_point, group=group, kernel_shape=kernel_shape,
            strides=strides, dilations=dilations, pads=pads)
        return
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if out.shape != (n, m, oh, ow):
        raise ValueError(f"output tile {out.shape} != computed {(n, m, oh, ow)}")
    xs = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.float64)
    xs[:, :, pt:pt + h, pl:pl + wd] = x
    if x_zero_point is not None:
        xs[:, :, pt:pt + h, pl:pl + wd] -= float(x_zero_point.reshape(-1)[0])
    ws = w.astype(np.float64)
    if w_zero_point is not None:
        ws -= w_zero_point.astype(np.float64).reshape(-1, 1, 1, 1)
    cols = np.empty((c, kh, kw, n, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = xs[:, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                               j * dw: j * dw + (ow - 1) * sw + 1: sw].transpose(1, 0, 2, 3)
    acc = ws.reshape(m, c * kh * kw) @ cols.reshape(c * kh * kw, n * oh * ow)
    out[...] = acc.reshape(m, n, oh, ow).transpose(1, 0, 2, 3)


# -- Requantize ---------------------------------------------------------------------------
def _along(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scalar or per-axis parameter as int64, shaped to broadcast along ``axis``."""
    q = p.astype(np.int64)
    if q.size == 1:
        return q.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = q.size
    return q.reshape(shape)


def requantize_into(out: np.ndarray, acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                    y_zero_point: np.ndarray | None = None, *, axis: int,
                    output_dtype: str) -> None:
    """The fixed-point rescale of an i32 tile (see the module doc; the interpreter's own arithmetic, :func:`opbridge.ir.ops.quant.fixed_point_rescale`)."""
    q = fixed_point_rescale(acc.astype(np.int64), _along(multiplier, acc.ndim, axis),
                 _along(shift, acc.ndim, axis))
    if y_zero_point is not None:
        q = q + _along(y_zero_point, acc.ndim, axis)
    lo, hi = INT_RANGES[output_dtype]
    np.clip(q, lo, hi, out=q)
    out[...] = q


# -- QAdd -----------------------------------------------------------------------------------
def qadd_into(out: np.ndarray, a: np.ndarray, b: np.ndarray, *, a_zero_point: int,
              b_zero_point: int, y_zero_point: int, multipliers: tuple[int, ...],
              shifts: tuple[int, ...], lshift: int, relu: int, output_dtype: str) -> None:
    """The chip's int8 Add of two tiles (see the module doc), into the output tile."""
    sa = (a.astype(np.int64) - a_zero_point) * (np.int64(1) << lshift)
    sb = (b.astype(np.int64) - b_zero_point) * (np.int64(1) << lshift)
    acc = (fixed_point_rescale(sa, multipliers[0], shifts[0])
           + fixed_point_rescale(sb, multipliers[1], shifts[1]))
    q = fixed_point_rescale(acc, multipliers[2], shifts[2]) + y_zero_point
    lo, hi = INT_RANGES[output_dtype]
    np.clip(q, y_zero_point if relu else lo, hi, out=q)
    out[...] = q


def qadd_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """Three operations per element: two inputs rescaled and added (the sum's requantization,
    ReLU and saturation belong to the same instruction)."""
    return 3.0 * float(np.prod(out_shape))


# -- Lut ------------------------------------------------------------------------------------
def lut_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Rows (or columns) of x map one to one; the table is read whole."""
    return (lo, hi) if i == 0 else None


def lut_into(out: np.ndarray, x: np.ndarray, table: np.ndarray) -> None:
    """Each byte of the tile indexes the table."""
    np.take(table, x.view(np.uint8), out=out)


# -- tiling of per-axis parameters ------------------------------------------------------------
def per_axis_split(first_param: int) -> Callable[[Node], tuple[str, ...]]:
    """The tiling axes of an element-wise op whose inputs from ``first_param`` on are scalars
    or per-axis parameters: N, H and W, less the axis such a parameter runs along; none for a
    blocked one (its layout follows the data's)."""

    def split(node: Node) -> tuple[str, ...]:
        if node.attrs.get("block_size"):
            return ()
        rank = len(static_shape(node.inputs[0]))
        axis = int(node.attrs.get("axis", 1)) % max(rank, 1)
        per_axis = any(v is not None and int(np.prod(static_shape(v))) > 1
                       for v in node.inputs[first_param:])
        return tuple(a for i, a in _TILE_AXES.items() if not (per_axis and i == axis))

    return split


def matmul_integer_split(node: Node) -> tuple[str, ...] | None:
    """MatMul's axes on rank-4 operands (other ranks run as global layers: their zero points
    would need chunking with the row layout's weight columns), but rows of A stay whole when
    a_zero_point has one entry per row (it is held whole and must line up with them)."""
    axes = matmul_split(node) if len(static_shape(node.inputs[0])) == 4 else None
    if axes is None:
        return None
    zp = node.inputs[2] if len(node.inputs) > 2 else None
    if zp is not None and int(np.prod(static_shape(zp))) > 1:
        return tuple(a for a in axes if a != "H")
    return axes


def matmul_integer_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """Two operations (multiply, add) per multiply-accumulate, as for MatMul."""
    return matmul_cost(node, out_shape)


(
    conv_tiling(register_kernel("ConvInteger"))
    .channel_slice(conv_integer_channels)
    .compute_into(conv_integer_into, dtype=("i8", "u8"))
)
register_kernel("MatMulInteger").split_when(matmul_integer_split).input_slice(matmul_rows).cost(
    matmul_integer_cost)
(
    register_kernel("Requantize")
    .split_when(per_axis_split(1))
    .cost(lambda node, shape: 2.0 * float(np.prod(shape)))  # a multiply and a shift
    .volumes()
    .compute_into(requantize_into, dtype="i32")
)
register_kernel("QAdd").split("N", "H", "W").row_layout().volumes().cost(qadd_cost).compute_into(
    qadd_into, dtype=("i8", "u8"))
(
    register_kernel("Lut").split("N", "H", "W").input_slice(lut_rows).input_slice(lut_rows, axis="W")
    .volumes()
    .compute_into(lut_into, dtype=("i8", "u8"))
)
for _op in ("QuantizeLinear", "DequantizeLinear"):
    register_kernel(_op).split_when(per_axis_split(1)).volumes()
