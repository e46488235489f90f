"""An opbridge plugin whose kernel tiles along W and uses a scratch buffer.

``com.example::RowBoxFilter(x; width=3)``: the mean of ``width`` neighbouring columns (odd
``width``, zero padding, the output as wide as the input), as in a horizontal box blur or a
1-D smoothing of long signals laid out as one row per channel. Such tensors can be a single
row thousands of columns wide: no cut along H makes them fit local memory, so the kernel
declares the bmcompiler local-layer contract along W:

- ``split("N", "H", "W")`` (``can_split_local_h_w``);
- ``input_slice(fn, axis="W")``: output columns ``[lo, hi)`` read input columns
  ``[lo - pad, hi - pad + width - 1)`` (``backward_wslice`` / ``backward_widx``); columns
  outside the input are padding;
- ``tile_attrs(fn, axis="W")``: a tile keeps the left / right padding only at the edges of
  the row (``tile_pads_w``);
- ``scratch(fn, per="tile")``: the tile kernel keeps the running (prefix) sum of its padded
  input in a scratch buffer (``get_local_buffer_size``; as a global layer, in DDR:
  ``get_global_buffer_size``), handed to it as the ``scratch`` keyword argument.

Load it with ``--plugin examples/plugins/row_box_filter.py`` (or ``plugins=[...]``).
"""

from __future__ import annotations

import math

import numpy as np

import opbridge as ob
from opbridge.simulator import tile_pads_w, window_rows


def row_box_filter(x: np.ndarray, *, width: int, pads: tuple[int, ...]) -> np.ndarray:
    """Reference semantics over whole tensors: pad the columns, average each window."""
    left, right = pads
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(left, right)])
    out_w = xp.shape[-1] - width + 1
    acc = np.zeros(x.shape[:-1] + (out_w,), np.float64)
    for i in range(width):
        acc += xp[..., i:i + out_w]
    return (acc / width).astype(x.dtype)


def _shape(ctx):
    shape = ctx.input_shape(0)
    left, right = ctx.attr("pads")
    return (*shape[:-1], shape[-1] + left + right - ctx.attr("width") + 1), ctx.input_dtype(0)


(
    ob.define_op("RowBoxFilter")
    .doc("mean of 'width' neighbouring columns, zero padding 'pads' (left, right)")
    .input("x", "T").output("y", "T")
    .param("width", "int", default=3, minimum=1)
    .param("pads", "ints", default=(1, 1))
    .type_param("T", ("f32",))
    .shape_fn(_shape)
    .compute(row_box_filter)
)


def parse_row_box_filter(src: ob.OriginNode, dst) -> None:
    width = int(src.get_attr("width", 3))
    if width < 1 or width % 2 == 0:
        raise ob.AttrError(f"RowBoxFilter '{src.name}' attribute 'width' = {width}: must be odd and >= 1")
    dst.set_attr("width", width)
    dst.set_attr("pads", (width // 2, width // 2))


(
    ob.register_custom_op("RowBoxFilter")
    .framework_type(ob.Framework.ONNX)
    .origin_op_type("com.example::RowBoxFilter")
    .parse_params_by_operator_fn(parse_row_box_filter)
    .imply_type(ob.ImplyType.TPU)
)


# -- the simulator kernel -------------------------------------------------------------------

def filter_cols(node, i: int, lo: int, hi: int) -> tuple[int, int]:
    """Input columns that output columns [lo, hi) read (a window of stride 1)."""
    return window_rows(lo, hi, node.attrs["width"], 1, 1, node.attrs["pads"][0])


def filter_tile_pads(node, lo: int, hi: int, needed, clipped) -> dict:
    """A tile's padding: only the columns its window reads outside the input."""
    _, left, _, right = tile_pads_w((0, *node.attrs["pads"], 0), needed[0], clipped[0])
    return {**node.attrs, "pads": (left, right)}


def scratch_bytes(node, out_shape: tuple[int, ...]) -> int:
    """The prefix sums of a tile's padded input: one f64 more per row than its width."""
    n, c, h, w = out_shape
    return n * c * h * (w + node.attrs["width"]) * 8


def row_box_filter_tile(x: np.ndarray, *, width: int, pads: tuple[int, ...],
                        scratch: np.ndarray) -> np.ndarray:
    """The tile kernel: window sums as differences of prefix sums kept in ``scratch``."""
    left, right = pads
    n, c, h, w = x.shape
    out_w = w + left + right - width + 1
    cs = scratch[: n * c * h * (out_w + width) * 8].view(np.float64).reshape(n, c, h, out_w + width)
    cs[..., 0] = 0.0
    cs[..., 1:1 + left] = 0.0
    np.cumsum(x, axis=-1, dtype=np.float64, out=cs[..., 1 + left:1 + left + w])
    cs[..., 1 + left + w:] = cs[..., left + w:left + w + 1]  # right padding: the sum stays
    return ((cs[..., width:width + out_w] - cs[..., :out_w]) / width).astype(x.dtype)


(
    ob.register_kernel("RowBoxFilter")
    .split("N", "H", "W")
    .input_slice(filter_cols, axis="W")
    .tile_attrs(filter_tile_pads, axis="W")
    .scratch(scratch_bytes, per="tile")
    .compute(row_box_filter_tile)
    .cost(lambda node, out_shape: float(math.prod(out_shape)) * 3.0)
)
