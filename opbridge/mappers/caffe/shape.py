"""Caffe layers that move data: Concat, Slice, Split, Silence, Flatten, Reshape, Permute, Crop,
Tile, ShuffleChannel, Interp (bilinear), Reduction, ArgMax, Embed, Parameter,
BatchReindex."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, norm_axis
from .forks_coord_map import coord_map_offsets

CAFFE = Framework.CAFFE


def _legacy_axis(p: Params, name: str, legacy: str, rank: int) -> int:
    """``axis``, or the deprecated non-negative ``concat_dim``/``slice_dim`` when only it is set."""
    if p.has(name) or not p.has(legacy):
        return norm_axis(p, name, int(p.get(name)), rank)
    return norm_axis(p, legacy, int(p.get(legacy)), rank)


@mapping(CAFFE, "Concat")
def concat(node: OriginNode, g: Any) -> Value:
    xs = g.inputs()
    axis = _legacy_axis(Params(node, "concat_param"), "axis", "concat_dim", len(xs[0].shape))
    if len(xs) == 1:
        return g.op("Identity", xs)
    return g.op("Concat", xs, axis=axis)


@mapping(CAFFE, "Slice")
def slice_(node: OriginNode, g: Any) -> Any:
    """Split along ``axis`` at slice_point s (or into equal parts, one per top)."""
    p = Params(node, "slice_param")
    x = g.input(0)
    axis = _legacy_axis(p, "axis", "slice_dim", len(x.shape))
    dim = int(x.shape[axis])
    n = len(node.outputs)
    pts = p.ints("slice_point")
    if pts:
        if len(pts) != n - 1 or sorted(pts) != pts or pts[0] <= 0 or pts[-1] >= dim:
            raise p.error("slice_point", pts, f"need {n - 1} increasing points inside (0, {dim})")
        bounds = [0, *pts, dim]
        sizes = [bounds[i + 1] - bounds[i] for i in range(n)]
    else:
        if dim % n:
            raise g.error(f"axis {axis} ({dim}) does not split into {n} equal parts",
                          hint="give slice_point values")
        sizes = [dim // n] * n
    if n == 1:
        return g.op("Identity", [x])
    return g.op("Split", [x], axis=axis, split=sizes, num_outputs=n)


@mapping(CAFFE, "Split")
def split(node: OriginNode, g: Any) -> Any:
    """Copies of the bottom, one per top (the parser resolves these itself; kept for graphs
    built by hand)."""
    outs = tuple(g.op("Identity", [g.input(0)]) for _ in node.outputs)
    return outs if len(outs) != 1 else outs[0]


@mapping(CAFFE, "Silence")
def silence(node: OriginNode, g: Any) -> None:
    """Consumes its bottoms, produces nothing."""
    return None


@mapping(CAFFE, "Flatten")
def flatten(node: OriginNode, g: Any) -> Value:
    """Merge axes axis..end_axis into one."""
    p = Params(node, "flatten_param")
    x = g.input(0)
    rank = len(x.shape)
    a = norm_axis(p, "axis", int(p.get("axis")), rank)
    e = norm_axis(p, "end_axis", int(p.get("end_axis")), rank)
    if e < a:
        raise p.error("end_axis", p.get("end_axis"), f"comes before axis {a}")
    shape = (*x.shape[:a], int(np.prod(x.shape[a:e + 1])), *x.shape[e + 1:])
    return g.op("Reshape", [x], shape=tuple(int(d) for d in shape))


@mapping(CAFFE, "Reshape")
def reshape(node: OriginNode, g: Any) -> Value:
    """Replace axes axis..axis+num_axes by shape.dim; 0 copies the input dim, -1 is inferred."""
    p = Params(node, "reshape_param")
    x = g.input(0)
    rank = len(x.shape)
    dims = [int(d) for d in _as_list(p.get("shape", {}).get("dim", []))]
    axis = int(p.get("axis"))
    start = axis + rank + 1 if axis < 0 else axis
    num_axes = int(p.get("num_axes"))
    end = rank if num_axes == -1 else start + num_axes
    if not 0 <= start <= rank or end > rank or num_axes < -1:
        raise p.error("axis", axis, f"axis/num_axes out of range for a rank-{rank} input")
    if dims.count(-1) > 1:
        raise p.error("shape", dims, "at most one -1")
    mid = []
    for i, d in enumerate(dims):
        if d == 0:
            if start + i >= rank:
                raise p.error("shape", dims, f"0 at position {i} copies a dim the input lacks")
            mid.append(int(x.shape[start + i]))
        else:
            mid.append(d)
    out = [*(int(d) for d in x.shape[:start]), *mid, *(int(d) for d in x.shape[end:])]
    total = int(np.prod(x.shape))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1]))
        if rest == 0 or total % rest:
            raise p.error("shape", dims, f"cannot infer -1 for {total} elements")
        out[out.index(-1)] = total // rest
    if int(np.prod(out)) != total:
        raise p.error("shape", dims, f"gives {out} ({int(np.prod(out))} elements) for input "
                      f"{tuple(x.shape)} ({total})")
    return g.op("Reshape", [x], shape=tuple(out))


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


@mapping(CAFFE, "Permute")
def permute(node: OriginNode, g: Any) -> Value:
    """SSD's Permute: the listed axes first, the others after in order."""
    p = Params(node, "permute_param")
    x = g.input(0)
    rank = len(x.shape)
    order = p.ints("order")
    if len(set(order)) != len(order) or any(not 0 <= o < rank for o in order):
        raise p.error("order", order, f"must be distinct axes of a rank-{rank} input")
    perm = order + [i for i in range(rank) if i not in order]
    if perm == list(range(rank)):
        return g.op("Identity", [x])
    return g.op("Transpose", [x], perm=tuple(perm))


@mapping(CAFFE, "Crop")
def crop(node: OriginNode, g: Any) -> Value:
    """Crop bottom 0 to the shape of bottom 1 from ``axis`` on, at the given offsets.
    ``mode: "coord_map"`` (not BVLC's) computes the offsets as the FCN-era Crop does
    (forks_coord_map.py)."""
    p = Params(node, "crop_param")
    x, ref = g.input(0), g.input(1)
    if ref is None:
        raise g.error("takes 2 bottoms (the blob and the reference blob)")
    rank = len(x.shape)
    axis = norm_axis(p, "axis", int(p.get("axis")), rank)
    offs = p.ints("offset")
    mode = str(p.get("mode", ""))
    if mode == "coord_map":
        if rank != 4 or offs or p.has("axis"):
            raise p.error("mode", mode, "the coord_map crop is 2-D (N, C, H, W), without axis or offset")
        offs = coord_map_offsets(g.origin_graph, node)
    elif mode:
        raise p.error("mode", mode, 'unknown: "coord_map" (the FCN-era crop) or leave it out')
    n = rank - axis
    if len(offs) not in (0, 1, n):
        raise p.error("offset", offs, f"give 0, 1 or {n} offsets")
    offs = offs * n if len(offs) == 1 else (offs or [0] * n)
    axes, starts, ends = [], [], []
    for i in range(n):
        a = axis + i
        size = int(ref.shape[a])
        if offs[i] + size > int(x.shape[a]):
            raise p.error("offset", offs, f"axis {a}: offset {offs[i]} + {size} exceeds {x.shape[a]}")
        axes.append(a)
        starts.append(offs[i])
        ends.append(offs[i] + size)
    return g.op("Slice", [x], starts=starts, ends=ends, axes=axes)


@mapping(CAFFE, "Tile")
def tile(node: OriginNode, g: Any) -> Value:
    p = Params(node, "tile_param")
    x = g.input(0)
    axis = norm_axis(p, "axis", int(p.get("axis")), len(x.shape))
    tiles = int(p.get("tiles", 0))
    if tiles < 1:
        raise p.error("tiles", tiles, "required, >= 1")
    reps = [1] * len(x.shape)
    reps[axis] = tiles
    return g.op("Tile", [x], repeats=tuple(reps))


@mapping(CAFFE, "ShuffleChannel")
def shuffle_channel(node: OriginNode, g: Any) -> Value:
    """ShuffleNet's channel shuffle: (N, g, C/g, ...) transposed to (N, C/g, g, ...)."""
    p = Params(node, "shuffle_channel_param")
    x = g.input(0)
    grp = int(p.get("group"))
    n, c, *rest = (int(d) for d in x.shape)
    if grp < 1 or c % grp:
        raise p.error("group", grp, f"must divide the channels ({c})")
    y = g.op("Reshape", [x], shape=(n, grp, c // grp, *rest))
    y = g.op("Transpose", [y], perm=(0, 2, 1, *range(3, 3 + len(rest))))
    return g.op("Reshape", [y], shape=(n, c, *rest))


_REDUCE = {"SUM": "ReduceSum", "ASUM": "ReduceL1", "SUMSQ": "ReduceSumSquare", "MEAN": "ReduceMean"}


@mapping(CAFFE, "Reduction")
def reduction(node: OriginNode, g: Any) -> Value:
    """SUM/ASUM/SUMSQ/MEAN over all axes from ``axis`` on, times ``coeff``."""
    p = Params(node, "reduction_param")
    x = g.input(0)
    rank = len(x.shape)
    axis = norm_axis(p, "axis", int(p.get("axis")), rank)
    y = g.op(_REDUCE[p.get("operation")], [x], axes=tuple(range(axis, rank)), keepdims=0)
    coeff = float(p.get("coeff"))
    if coeff != 1.0:
        y = g.op("Mul", [y, g.constant(np.array(coeff, np.float32))])
    return y


def _caffe_topk(g: Any, x: Value, k: int, axis: int) -> tuple[Value, Value]:
    """(values, indices) of the k largest along ``axis`` in Caffe's order: partial_sort of
    (value, index) pairs with std::greater, so equal values give the higher index first. TopK
    gives the lower index first: it runs on the reversed axis, whose indices are mapped back."""
    dim = int(x.shape[axis])
    rev = g.op("Gather", [x, g.constant(np.arange(dim - 1, -1, -1, dtype=np.int64))], axis=axis)
    vals, idx = g.op("TopK", [rev], k=k, axis=axis)
    back = g.op("Sub", [g.constant(np.array(dim - 1, np.int64)), idx])
    return vals, g.op("Cast", [back], to="f32")


@mapping(CAFFE, "ArgMax")
def argmax(node: OriginNode, g: Any) -> Value:
    """Indices (as floats) of the top_k values along ``axis``, or with out_max_val the values
    (BVLC argmax_layer.cpp). Without an axis, over each sample's flattened values: the top is
    (N, 1, top_k) — (N, 2, top_k) [indices, values] with out_max_val — padded with trailing
    ones to the bottom's rank when that is above 3."""
    p = Params(node, "argmax_param")
    x = g.input(0)
    k = int(p.get("top_k"))
    if p.has("axis"):
        axis = norm_axis(p, "axis", int(p.get("axis")), len(x.shape))
        if not 1 <= k <= int(x.shape[axis]):
            raise p.error("top_k", k, f"must be in [1, {int(x.shape[axis])}] (the axis' size)")
        vals, idx = _caffe_topk(g, x, k, axis)
        return vals if p.get("out_max_val") else idx
    n = int(x.shape[0])
    count = int(np.prod(x.shape[1:]))
    if not 1 <= k <= count:
        raise p.error("top_k", k, f"must be in [1, {count}] (the values per sample)")
    vals, idx = _caffe_topk(g, g.op("Reshape", [x], shape=(n, count)), k, 1)
    ones = (1,) * max(len(x.shape) - 3, 0)
    if not p.get("out_max_val"):
        return g.op("Reshape", [idx], shape=(n, 1, k, *ones))
    both = g.op("Concat", [g.op("Reshape", [idx], shape=(n, 1, k)), g.op("Reshape", [vals], shape=(n, 1, k))],
                axis=1)
    return g.op("Reshape", [both], shape=(n, 2, k, *ones)) if ones else both


@mapping(CAFFE, "Embed")
def embed(node: OriginNode, g: Any) -> Value:
    """Rows of the (input_dim, num_output) weight picked by the integer-valued input."""
    p = Params(node, "embed_param")
    n, k = int(p.get("num_output")), int(p.get("input_dim"))
    w = g.constant(g.weight_array(0, (k, n), kind="value"))
    idx = g.op("Cast", [g.input(0)], to="i64")
    y = g.op("Gather", [w, idx], axis=0)
    if p.get("bias_term"):
        y = g.op("Add", [y, g.constant(g.weight_array(1, (n,), kind="bias"))])
    return y


@mapping(CAFFE, "Parameter")
def parameter(node: OriginNode, g: Any) -> Value:
    """Outputs its blob (a learned tensor), shaped as parameter_param.shape."""
    dims = tuple(int(d) for d in _as_list(Params(node, "parameter_param").get("shape", {}).get("dim", [])))
    return g.constant(g.weight_array(0, dims, kind="value"))


def interp_size(p: Params, h_in: int, w_in: int) -> tuple[int, int]:
    """Interp's output (H, W) from the (cropped) input size, as PSPNet's InterpLayer::Reshape."""
    zoom, shrink = p.has("zoom_factor"), p.has("shrink_factor")
    if zoom or shrink:
        zf, sf = int(p.get("zoom_factor")), int(p.get("shrink_factor"))
        if zf < 1 or sf < 1:
            raise p.error("zoom_factor" if zf < 1 else "shrink_factor", min(zf, sf), "must be >= 1")
        h_out = (h_in - 1) // sf + 1 if shrink else h_in
        w_out = (w_in - 1) // sf + 1 if shrink else w_in
        if zoom:
            h_out, w_out = h_out + (h_out - 1) * (zf - 1), w_out + (w_out - 1) * (zf - 1)
    elif p.has("height") and p.has("width"):
        h_out, w_out = int(p.get("height")), int(p.get("width"))
    else:
        raise p.error("height", None, "give height and width, zoom_factor, or shrink_factor")
    if h_out < 1 or w_out < 1:
        raise p.error("height", (h_out, w_out), "output size must be >= 1")
    return h_out, w_out


@mapping(CAFFE, "Interp")
def interp(node: OriginNode, g: Any) -> Value:
    """DeepLab/PSPNet's bilinear Interp (corners aligned), sized by height/width, zoom_factor
    and/or shrink_factor, after cropping by negative pad_beg/pad_end."""
    p = Params(node, "interp_param")
    x = g.input(0)
    n, c, h, w = (int(d) for d in x.shape)
    beg, end = int(p.get("pad_beg")), int(p.get("pad_end"))
    if beg > 0 or end > 0:
        raise g.unsupported("positive pad_beg/pad_end (Caffe supports only cropping, <= 0)")
    if beg or end:
        x = g.op("Slice", [x], starts=(-beg, -beg), ends=(h + end, w + end), axes=(2, 3))
    h_out, w_out = interp_size(p, h + beg + end, w + beg + end)
    return g.op("Resize", [x], mode="linear", coordinate_transformation_mode="align_corners",
                sizes=(n, c, h_out, w_out))


@mapping(CAFFE, "BatchReindex")
def batch_reindex(node: OriginNode, g: Any) -> Value:
    """Rows of bottom 0 picked along axis 0 by the (float-valued) indices of bottom 1."""
    if g.num_inputs != 2:
        raise g.error(f"takes 2 bottoms (data, indices), got {g.num_inputs}")
    idx = g.op("Cast", [g.input(1)], to="i64")
    return g.op("Gather", [g.input(0), idx], axis=0)
