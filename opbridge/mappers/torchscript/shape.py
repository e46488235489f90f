"""Views and layout: view/reshape/flatten/unflatten, permute/transpose, squeeze/unsqueeze,
expand/repeat, and the ops that are the identity in a frozen inference graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, norm_axis, static_shape, ts_mapping


def reshape_to(g: MapContext, x: Value, shape: list[int]) -> Value:
    """Reshape with torch's rules (one -1 inferred; 0 is a real size), as a static shape; an
    input with symbolic dims (an If's output whose branches differ) keeps the -1 for the IR's
    shape function, which works the dims out and the run checks."""
    shape = [int(d) for d in shape]
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise g.error(f"shape {shape}: at most one -1 and no other negative size", attr="shape")
    if not all(isinstance(d, int) for d in x.shape):
        return g.op("Reshape", [x], shape=shape, allowzero=1)
    src = static_shape(g, x)
    total = int(np.prod(src, dtype=np.int64))
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if rest == 0 or total % rest:
            raise g.error(f"shape {shape} is invalid for an input of {total} elements", attr="shape")
        shape[shape.index(-1)] = total // rest
    if int(np.prod(shape, dtype=np.int64)) != total:
        raise g.error(f"shape {shape} is invalid for an input of shape {list(src)}", attr="shape")
    if tuple(shape) == src:
        return x
    return g.op("Reshape", [x], shape=shape, allowzero=1)


@ts_mapping("view", "reshape", "_reshape_alias", "_unsafe_view")
def view(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return reshape_to(g, a.tensor(0), a.ints(1, what="shape"))


@ts_mapping("view_as", "reshape_as")
def view_as(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return reshape_to(g, a.tensor(0), list(static_shape(g, a.tensor(1))))


@ts_mapping("flatten")
def flatten(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = list(static_shape(g, x))
    if not shape:
        return reshape_to(g, x, [1])
    s = norm_axis(g, a.int(1, 0), len(shape), "start_dim")
    e = norm_axis(g, a.int(2, -1), len(shape), "end_dim")
    merged = int(np.prod(shape[s:e + 1], dtype=np.int64))
    return reshape_to(g, x, shape[:s] + [merged] + shape[e + 1:])


@ts_mapping("unflatten")
def unflatten(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = list(static_shape(g, x))
    d = norm_axis(g, a.int(1), len(shape))
    sizes = a.ints(2, what="sizes")
    if -1 in sizes:
        rest = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
        sizes[sizes.index(-1)] = shape[d] // rest
    return reshape_to(g, x, shape[:d] + sizes + shape[d + 1:])


@ts_mapping("permute")
def permute(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    perm = [norm_axis(g, p, len(x.shape)) for p in a.ints(1, what="dims")]
    return x if perm == list(range(len(perm))) else g.op("Transpose", [x], perm=perm)


@ts_mapping("transpose", "swapaxes", "t", "numpy_T")
def transpose(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    rank = len(x.shape)
    if node.op_type in ("t", "numpy_T"):
        if rank < 2:
            return x
        return g.op("Transpose", [x], perm=list(range(rank))[::-1])
    d0, d1 = norm_axis(g, a.int(1), rank), norm_axis(g, a.int(2), rank)
    if d0 == d1:
        return x
    perm = list(range(rank))
    perm[d0], perm[d1] = d1, d0
    return g.op("Transpose", [x], perm=perm)


@ts_mapping("squeeze", "squeeze_")
def squeeze(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    if len(a) > 1:
        dims = [norm_axis(g, d, len(shape)) for d in a.ints(1)]
    else:
        dims = list(range(len(shape)))
    axes = [d for d in dims if shape[d] == 1]  # torch leaves dims of size != 1 alone
    return g.op("Squeeze", [x], axes=axes) if axes else x


@ts_mapping("unsqueeze", "unsqueeze_")
def unsqueeze(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape) + 1)
    return g.op("Unsqueeze", [x], axes=[axis])


@ts_mapping("expand", "broadcast_to")
def expand(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    src = static_shape(g, x)
    sizes = a.ints(1, what="size")
    lead = len(sizes) - len(src)
    if lead < 0:
        raise g.error(f"size {sizes} has fewer dims than the input {list(src)}", attr="size")
    shape = [src[i - lead] if s == -1 else s for i, s in enumerate(sizes)]
    return x if tuple(shape) == src else g.op("Expand", [x], shape=shape)


@ts_mapping("expand_as")
def expand_as(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = list(static_shape(g, a.tensor(1)))
    return x if tuple(shape) == static_shape(g, x) else g.op("Expand", [x], shape=shape)


@ts_mapping("repeat", "tile")
def repeat(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    reps = a.ints(1, what="repeats")
    rank = len(x.shape)
    if len(reps) < rank:  # tile: leading ones; repeat requires len >= rank
        reps = [1] * (rank - len(reps)) + reps
    if len(reps) > rank:
        x = g.op("Reshape", [x], shape=[1] * (len(reps) - rank) + list(static_shape(g, x)))
    return g.op("Tile", [x], repeats=reps) if any(r != 1 for r in reps) else x


_IDENTITY = ("contiguous", "clone", "detach", "detach_", "alias", "lift_fresh", "dropout",
             "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
             "feature_alpha_dropout", "feature_alpha_dropout_", "resolve_conj", "resolve_neg")


@ts_mapping(*_IDENTITY)
def identity(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if "dropout" in node.op_type and a.py(2, False):
        raise g.unsupported("dropout with train=True", hint="export the module in eval()")
    return a.tensor(0)
