"""Kernel of Conv (2-D): tiled on N, H and W, with the halo of its window.

Output rows ``[lo, hi)`` read input rows ``[lo*s - pad_top, (hi-1)*s - pad_top + (k-1)*d + 1)``
(bmcompiler's ``backward_hslice`` / ``backward_hidx``); rows outside the input are padding,
so a tile at the top or bottom edge keeps that padding and an inner tile has none. Columns
likewise, with the kernel's width, stride, dilation and left pad (``backward_wslice``).

A 3-D convolution (rank-5 input, a volume) is a local layer too, cut along N, its depth D
(the group's H axis: the rows of the view (N, C, D, H*W)) and its rows H (the group's W axis,
whole rows of W elements): output depth slices ``[lo, hi)`` read the input slices the kernel's
depth window covers, with its depth stride, dilation and front pad, so the same formula gives
the depth halo, and its rows likewise; a tile at an edge keeps that edge's padding. TPU-MLIR
tiles its Conv3D local layer along N, D and H the same way (the ``nsecs``, ``dsecs`` and
``hsecs`` of ``lib/Dialect/Tpu/Transforms/LayerGroup/GroupMethod.cpp``), each tile holding whole
rows of W.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import winograd
from ...ir.graph import Node
from ...ir.opdef import DEFAULT_OPS
from ...ir.winograd import filter_transform, transformed_weights, winograd_conv2d
from .registry import (
    Kernel,
    WeightMemo,
    register_kernel,
    static_shape,
    tile_pads_axis,
    window_rows,
)


def _conv2d_params(node: Node, axis: int = 0) -> tuple[int, int, int, tuple[int, ...]]:
    # every Conv node holds its per-axis parameters explicitly (the IR fills and verifies them)
    a = node.attrs
    return (int(a["kernel_shape"][axis]), int(a["strides"][axis]), int(a["dilations"][axis]),
            tuple(a["pads"]))


def conv_split(node: Node) -> tuple[str, ...]:
    """2-D convolutions (rank-4 input) are local layers, ungrouped ones may also be computed in
    chunks of output channels; 3-D ones (rank 5) are cut along N, their depth and their rows."""
    rank = len(static_shape(node.inputs[0]))
    if rank == 5:
        return ("N", "H", "W")
    if rank != 4:
        return ()
    return ("N", "C", "H", "W") if node.attrs["group"] == 1 else ("N", "H", "W")


def conv_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    if i != 0:
        return None
    kh, sh, dh, pads = _conv2d_params(node)
    return window_rows(lo, hi, kh, sh, dh, pads[0])


def conv_cols(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    if i != 0:
        return None
    kw, sw, dw, pads = _conv2d_params(node, 1)
    return window_rows(lo, hi, kw, sw, dw, pads[1])


def conv_channels(node: Node, i: int, c0: int, c1: int) -> tuple[int, int, int] | None:
    """Output channels [c0, c1) of an ungrouped conv read every input channel, and rows
    [c0, c1) of the weights and the bias."""
    return None if i == 0 else (0, c0, c1)


def conv_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """The pads of a tile of rows (a volume's depth slices: its front and back pads)."""
    return {**node.attrs, "pads": tile_pads_axis(node.attrs["pads"], 0, needed[0], clipped[0])}


def conv_tile_attrs_w(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """The pads of a tile of columns (a volume's rows, the group's W axis: top and bottom)."""
    return {**node.attrs, "pads": tile_pads_axis(node.attrs["pads"], 1, needed[0], clipped[0])}


def conv_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """Two FLOPs (multiply, add) per weight tap per output element."""
    w = static_shape(node.inputs[1])
    return 2.0 * math.prod(out_shape) * math.prod(w[1:])


#: Output channels up to which a tile is computed tap by tap rather than by im2col.
FEW_CHANNELS = 8


def _padded(x: np.ndarray, pt: int, pl: int, pb: int, pr: int) -> np.ndarray:
    """``x`` with zero rows/columns around it (``x`` itself when there are none)."""
    if not (pt or pl or pb or pr):
        return x
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), x.dtype)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    return xp


def _winograd_into(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                   strides: tuple[int, ...], dilations: tuple[int, ...], pads: tuple[int, ...],
                   memo: WeightMemo | None) -> bool:
    """The tile by Winograd's minimal filtering where ``winograd_tile`` chooses it (as the
    interpreter's Conv does); False where it does not. The filters' transform comes from the
    program's ``memo`` (once per weight constant and chunk), or without one (a kernel called
    outside a program) from the interpreter's cache kept per weight array."""
    r = winograd.winograd_tile(x.shape[1], w.shape[0], w.shape[2:], strides, dilations, 1,
                               out.shape[2:], x.dtype)
    if r is None:
        return False
    if memo is not None:
        u: np.ndarray | None = memo.get(1, ("winograd", r), lambda: filter_transform(w, r))
    else:
        u = transformed_weights(w, r)
    if u is None:
        return False
    winograd_conv2d(x, u, r, tuple(pads), out=out, bias=b)
    return True


def conv2d_into(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                group: int, kernel_shape: tuple[int, ...], strides: tuple[int, ...],
                dilations: tuple[int, ...], pads: tuple[int, ...], memo: WeightMemo | None = None
                ) -> None:
    """Conv on a tile, written into ``out``: im2col by one strided copy per kernel tap, then
    one matmul straight into the output tile.

    The tile kernel for f32 2-D convolutions without groups (the common case, and the bulk of
    a CNN's time); anything else runs the op's own compute.
    """
    if (group != 1 or x.ndim != 4 or x.dtype != np.float32 or w.dtype != np.float32
            or x.shape[0] != 1 or not out.flags.c_contiguous):
        reference = DEFAULT_OPS.get("Conv").compute_function
        assert reference is not None  # the built-in Conv always has one
        out[...] = reference(x, w, b, group=group, kernel_shape=kernel_shape, strides=strides,
                             dilations=dilations, pads=pads)
        return
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if out.shape != (n, m, oh, ow):
        raise ValueError(f"output tile {out.shape} != computed {(n, m, oh, ow)}")
    y = out.reshape(m, oh * ow)
    if m <= FEW_CHANNELS and kh * kw > 1:
        # a streamed chunk of a few output channels: one product per tap costs less than
        # building the im2col matrix for so few rows of weights
        xp = _padded(x, pt, pl, pb, pr)
        y3 = out.reshape(m, oh, ow)
        y3[...] = 0
        for i in range(kh):
            for j in range(kw):
                y3 += np.tensordot(w[:, :, i, j], xp[0, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                                                    j * dw: j * dw + (ow - 1) * sw + 1: sw],
                                   axes=(1, 0))
    elif _winograd_into(out, x, w, b, strides, dilations, pads, memo):
        return  # the bias is in already
    elif kh == kw == 1 and not (pt or pl or pb or pr):
        xs = x[:, :, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
        np.matmul(w.reshape(m, c), xs.reshape(c, oh * ow), out=y)
    else:
        xp = _padded(x, pt, pl, pb, pr)
        cols = np.empty((c, kh, kw, n, oh, ow), x.dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, i, j] = xp[:, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                                   j * dw: j * dw + (ow - 1) * sw + 1: sw].transpose(1, 0, 2, 3)
        np.matmul(w.reshape(m, c * kh * kw), cols.reshape(c * kh * kw, oh * ow), out=y)
    if b is not None:
        y += b.reshape(m, 1)


def conv_tiling(k: Kernel) -> Kernel:
    """The tiling a 2-D convolution's kernel has whatever its dtypes (Conv, ConvInteger): split
    on N/H/W, input rows and columns with the window's halo, the tile's pads, the cost."""
    return (k.split_when(conv_split).input_slice(conv_rows).input_slice(conv_cols, axis="W")
            .tile_attrs(conv_tile_attrs).tile_attrs(conv_tile_attrs_w, axis="W").cost(conv_cost)
            .volumes())


(conv_tiling(register_kernel("Conv")).channel_slice(conv_channels).compute_into(conv2d_into)
 .weight_memo())
