"""Writes into tensors: ``fill_``/``copy_``/``zero_``/``index_put_``/``scatter_`` (and their
functional spellings), ``slice_scatter``/``select_scatter``, ``roll``, and the two kinds the
parser's functionalisation adds (``opbridge::positions``, ``opbridge::update_view``; see
docs/torchscript-json.md, "In-place writes and views").

Each in-place kind computes the new value of the tensor it writes, of that tensor's shape; the
parser has already arranged for the write to reach the base tensor and every other view of it.
A write into part of a tensor is one flat ``ScatterElements`` at the positions the part covers:
those positions are the view (or index) applied to ``arange(numel)`` in the tensor's shape,
a constant while converting.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, cast, norm_axis, norm_index, static_shape, ts_mapping


def positions_of(g: MapContext, x: Value) -> Value:
    """A constant int64 tensor of ``x``'s shape holding each element's flat position."""
    shape = static_shape(g, x)
    return g.constant(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape))


def broadcast_to(g: MapContext, v: Value, shape: tuple[int, ...], dtype: str) -> Value:
    """``v`` cast to ``dtype`` and broadcast to ``shape`` (an error if it does not broadcast)."""
    v = cast(g, v, dtype)
    have = static_shape(g, v)
    try:
        np.broadcast_shapes(have, shape)
    except ValueError:
        raise g.error(f"a value of shape {list(have)} cannot be written into a part of shape "
                      f"{list(shape)}") from None
    if len(have) > len(shape) and all(d == 1 for d in have[: len(have) - len(shape)]):
        v = g.op("Reshape", [v], shape=list(have[len(have) - len(shape):]))
        have = static_shape(g, v)
    return v if have == shape else g.op("Expand", [v], shape=list(shape))


def write_at(g: MapContext, base: Value, where: Value, src: Value, reduction: str = "none") -> Value:
    """``base`` with the elements at flat positions ``where`` set to (or, with ``reduction="add"``,
    increased by) ``src`` broadcast to ``where``'s shape."""
    shape = static_shape(g, base)
    src = broadcast_to(g, src, static_shape(g, where), base.dtype)
    if where.data is not None and np.array_equal(np.asarray(where.data).ravel(),
                                                  np.arange(int(np.prod(shape)))):
        if reduction == "add":
            return g.op("Add", [base, g.op("Reshape", [src], shape=list(shape))])
        return g.op("Reshape", [src], shape=list(shape))  # the whole tensor, in order
    flat = g.op("Reshape", [base], shape=[-1])
    y = g.op("ScatterElements", [flat, g.op("Reshape", [where], shape=[-1]),
                                 g.op("Reshape", [src], shape=[-1])], axis=0, reduction=reduction)
    return g.op("Reshape", [y], shape=list(shape))


@ts_mapping("opbridge::positions")
def positions(node: OriginNode, g: MapContext) -> Any:
    return positions_of(g, Args(node, g).tensor(0))


@ts_mapping("opbridge::update_view")
def update_view(node: OriginNode, g: MapContext) -> Any:
    # (base, positions the view covers, the view's new value)
    a = Args(node, g)
    return write_at(g, a.tensor(0), a.tensor(1), a.tensor(2))


@ts_mapping("fill", "fill_")
def fill(node: OriginNode, g: MapContext) -> Any:
    # (self, value: Scalar or 0-d Tensor)
    a = Args(node, g)
    x = a.tensor(0)
    value = a.tensor(1, what="value", like=None if a.is_tensor(1) else x)
    return broadcast_to(g, value, static_shape(g, x), x.dtype)


@ts_mapping("zero", "zero_")
def zero(node: OriginNode, g: MapContext) -> Any:
    x = Args(node, g).tensor(0)
    from ...ir.types import to_numpy_dtype

    return g.op("Expand", [g.constant(np.zeros((), to_numpy_dtype(x.dtype)))],
                shape=list(static_shape(g, x)))


@ts_mapping("copy", "copy_")
def copy(node: OriginNode, g: MapContext) -> Any:
    # (self, src, non_blocking): src cast to self's dtype and broadcast to self's shape
    a = Args(node, g)
    x = a.tensor(0)
    return broadcast_to(g, a.tensor(1, what="src"), static_shape(g, x), x.dtype)


def _index_items(a: Args, g: MapContext) -> list[Any]:
    """The ``indices`` argument of index_put: per dim a Value, a constant array, or None."""
    spec = a.spec[1]
    if not isinstance(spec, list):  # a constant list (freezing folded the index tensors into it)
        return list(a.py(1, what="indices"))
    items: list[Any] = []
    for k in spec:
        if k in a.consts:
            items.append(a.consts[k])
            continue
        v = g.input(k)
        items.append(np.asarray(v.data) if v is not None and v.data is not None else v)
    return items


@ts_mapping("index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put")
def index_put(node: OriginNode, g: MapContext) -> Any:
    """``x[indices] = values`` (``accumulate``: ``+=``) for constant indices of any kind, a
    run-time boolean mask, or run-time integer indices."""
    a = Args(node, g)
    x = a.tensor(0)
    items = _index_items(a, g)
    values = a.tensor(2, what="values", like=None if a.is_tensor(2) else x)
    reduction = "add" if a.py(3, False) else "none"
    given = [i for i, v in enumerate(items) if v is not None]
    if not given:
        raise g.error("index_put with no index tensor")
    if all(not isinstance(items[i], Value) for i in given):
        where = np.asarray(positions_of(g, x).data)[
            tuple(slice(None) if v is None else np.asarray(v) for v in items)]
        return write_at(g, x, g.constant(where), values, reduction)
    axis, mask = given[0], items[given[0]]
    if len(given) > 1 or mask.dtype != "bool":  # the positions the indices pick, at run time
        from .tensor import gather_index, index_tensors

        where = gather_index(g, positions_of(g, x), index_tensors(g, items))
        return write_at(g, x, where, values, reduction)
    # one boolean mask computed at run time
    if reduction == "add" or int(np.prod(static_shape(g, values))) != 1:
        raise g.unsupported("a boolean-mask write of several values (its count is only known at "
                            "run time)", hint="write one value: x[mask] = v")
    for _ in range(len(x.shape) - axis - len(mask.shape)):
        mask = g.op("Unsqueeze", [mask], axes=[len(mask.shape)])
    return g.op("Where", [mask, broadcast_to(g, values, (), x.dtype), x])


@ts_mapping("index_copy", "index_copy_", "index_add", "index_add_", "index_fill", "index_fill_")
def index_write(node: OriginNode, g: MapContext) -> Any:
    """``x.index_copy_(dim, index, source)`` (transformers' StaticCache writes its keys so),
    ``index_add_(dim, index, source, alpha)``, ``index_fill_(dim, index, value)``."""
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    index = cast(g, a.tensor(2, what="index"), "i64")
    if len(index.shape) == 0:
        index = g.op("Unsqueeze", [index], axes=[0])
    where = g.op("Gather", [positions_of(g, x), index], axis=axis)
    kind = node.op_type.rstrip("_")
    if kind == "index_fill":
        return write_at(g, x, where, a.tensor(3, what="value", like=None if a.is_tensor(3) else x))
    src = a.tensor(3, what="source")
    if kind == "index_add" and not a.is_none(4) and a.py(4) != 1:
        src = g.op("Mul", [cast(g, src, x.dtype), a.tensor(4, like=x)])
    return write_at(g, x, where, src, "add" if kind == "index_add" else "none")


@ts_mapping("slice_scatter")
def slice_scatter(node: OriginNode, g: MapContext) -> Any:
    # (self, src, dim=0, start=None, end=None, step=1)
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(2, 0), len(shape))
    step = a.int(5, 1)
    if step < 1:
        raise g.error(f"slice step {step}: must be >= 1", attr="step")
    pos = np.asarray(positions_of(g, x).data)
    cut = [slice(None)] * len(shape)
    cut[axis] = slice(a.int(3), a.int(4), step)
    return write_at(g, x, g.constant(pos[tuple(cut)]), a.tensor(1, what="src"))


@ts_mapping("select_scatter")
def select_scatter(node: OriginNode, g: MapContext) -> Any:
    # (self, src, dim, index)
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(2), len(shape))
    index = norm_index(g, a.int(3), shape[axis], axis)
    pos = np.take(np.asarray(positions_of(g, x).data), index, axis=axis)
    return write_at(g, x, g.constant(pos), a.tensor(1, what="src"))


@ts_mapping("scatter", "scatter_", "scatter_add", "scatter_add_")
def scatter(node: OriginNode, g: MapContext) -> Any:
    # (self, dim, index, src | value[, reduce]); scatter_add: (self, dim, index, src)
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    index = cast(g, a.tensor(2, what="index"), "i64")
    reduction = "add" if node.op_type.startswith("scatter_add") else "none"
    if not node.op_type.startswith("scatter_add") and not a.is_none(4):
        reduce = a.py(4, what="reduce")
        if reduce not in ("add", "multiply", "sum", "prod"):
            raise g.unsupported(f"scatter reduce={reduce!r}", hint="use add or multiply")
        reduction = "add" if reduce in ("add", "sum") else "mul"
    src = a.tensor(3, what="src", like=None if a.is_tensor(3) else x)
    src = broadcast_to(g, src, static_shape(g, index), x.dtype) if not a.is_tensor(3) \
        else _cut_to(g, cast(g, src, x.dtype), static_shape(g, index))
    return g.op("ScatterElements", [x, index, src], axis=axis, reduction=reduction)


def _cut_to(g: MapContext, src: Value, shape: tuple[int, ...]) -> Value:
    """torch's scatter reads ``src`` only where ``index`` reaches: its leading part."""
    have = static_shape(g, src)
    if have == shape:
        return src
    return g.op("Slice", [src], starts=[0] * len(shape), ends=list(shape),
                axes=list(range(len(shape))), steps=[1] * len(shape))


@ts_mapping("roll")
def roll(node: OriginNode, g: MapContext) -> Any:
    """``torch.roll(x, shifts, dims)``: element i moves to i + shift (mod size) along each dim;
    without dims, over the flattened tensor."""
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    shifts = a.ints(1, what="shifts")
    dims = a.ints(2, [], what="dims")
    if not dims:
        if len(shifts) != 1:
            raise g.error(f"shifts {shifts} without dims: give one shift", attr="shifts")
        flat = g.op("Reshape", [x], shape=[-1])
        return g.op("Reshape", [_roll_axis(g, flat, shifts[0], 0, int(np.prod(shape)))],
                    shape=list(shape))
    if len(shifts) != len(dims):
        raise g.error(f"shifts {shifts} and dims {dims} differ in length", attr="shifts")
    for s, d in zip(shifts, dims):
        axis = norm_axis(g, d, len(shape))
        x = _roll_axis(g, x, s, axis, shape[axis])
    return x


def _roll_axis(g: MapContext, x: Value, shift: int, axis: int, size: int) -> Value:
    shift = shift % size if size else 0
    if shift == 0:
        return x
    tail = g.op("Slice", [x], starts=[size - shift], ends=[size], axes=[axis], steps=[1])
    head = g.op("Slice", [x], starts=[0], ends=[size - shift], axes=[axis], steps=[1])
    return g.op("Concat", [tail, head], axis=axis)


def _written_into(fn: Any) -> Any:
    """The in-place form of mapping ``fn``: the same value, in the written tensor's dtype
    (``mask.eq_(y)`` keeps mask's dtype; the parser carries the write)."""

    def mapped(node: OriginNode, g: MapContext) -> Any:
        out = fn(replace(node, op_type=node.op_type[:-1]), g)
        return cast(g, out, Args(node, g).tensor(0).dtype)

    mapped.__doc__ = f"In-place form of {fn.__module__}.{fn.__name__}."
    return mapped


def _register_written_into() -> None:
    from . import elementwise, matmul, tensor

    forms = {elementwise.compare: ("eq", "ne", "lt", "le", "gt", "ge", "greater", "less"),
             elementwise.div: ("divide", "true_divide"), elementwise.mul: ("multiply",),
             elementwise.floor_divide: ("floor_divide",), elementwise.remainder: ("remainder", "fmod"),
             matmul.addmm: ("addmm", "baddbmm", "addbmm"), tensor.cumsum: ("cumsum",),
             tensor.trilu: ("tril", "triu")}
    for fn, kinds in forms.items():
        ts_mapping(*(k + "_" for k in kinds))(_written_into(fn))


_register_written_into()
