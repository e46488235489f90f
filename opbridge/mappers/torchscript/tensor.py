"""Joining, splitting, slicing and indexing: cat/stack/chunk/split/unbind, slice/select/narrow,
index/index_select/gather/embedding, pad, topk, cumsum, triu/tril, pixel (un)shuffle."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, as_0d, cast, ir_dtype, norm_axis, norm_index, static_shape, ts_mapping
from .elementwise import promote
from .shape import reshape_to


@ts_mapping("cat", "concat", "concatenate")
def cat(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    given = a.tensor_list(0, "tensors")
    # torch skips 1-d empty tensors (legacy), and the result takes the promoted dtype of all
    xs = [x for x in given if not (len(x.shape) == 1 and x.shape[0] == 0)] or given[:1]
    dtype = functools.reduce(promote, [x.dtype for x in given])
    xs = [cast(g, x, dtype) for x in xs]
    if len(xs) == 1:
        return xs[0]
    axis = norm_axis(g, a.int(1, 0), len(xs[0].shape))
    return g.op("Concat", xs, axis=axis)


@ts_mapping("stack")
def stack(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    xs = a.tensor_list(0, "tensors")
    axis = norm_axis(g, a.int(1, 0), len(xs[0].shape) + 1)
    parts = [g.op("Unsqueeze", [x], axes=[axis]) for x in xs]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=axis)


def _split(node: OriginNode, g: MapContext, x: Value, axis: int, sizes: list[int]) -> Any:
    if not node.attrs.get("unpacked") and len(sizes) != 1:
        raise g.unsupported(
            "the list of pieces is used other than by unpacking it (a, b = x.chunk(2))",
            hint="unpack the pieces in the model's code",
        )
    if len(sizes) != len(node.outputs):
        raise g.error(f"splits into {len(sizes)} pieces but unpacks {len(node.outputs)}")
    if len(sizes) == 1:
        return x
    return g.op("Split", [x], axis=axis, split=sizes, num_outputs=len(sizes))


@ts_mapping("chunk", "unsafe_chunk", "tensor_split")
def chunk(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(2, 0), len(shape))
    n, dim = a.py(1, what="sections"), shape[axis]
    if isinstance(n, np.ndarray):  # tensor_split(x, tensor_indices_or_sections): 0-d or 1-d
        n = n.tolist()
    if isinstance(n, list):  # tensor_split(x, indices): cut before each index (clamped to dim)
        cuts = [0, *(min(max(int(i) + dim if int(i) < 0 else int(i), 0), dim) for i in n), dim]
        sizes = [max(e - s, 0) for s, e in zip(cuts, cuts[1:])]
        return _split(node, g, x, axis, sizes)
    n = int(n)
    if n < 1:
        raise g.error(f"{n} pieces: the number of pieces must be >= 1", attr="chunks")
    if node.op_type in ("chunk", "unsafe_chunk"):
        step = -(-dim // n)  # torch.chunk: pieces of ceil(dim / n), maybe fewer pieces
        sizes = [min(step, dim - i) for i in range(0, dim, step)] if dim else [0]
    else:
        q, r = divmod(dim, n)
        sizes = [q + 1] * r + [q] * (n - r)
    return _split(node, g, x, axis, sizes)


@ts_mapping("split", "split_with_sizes", "unsafe_split")
def split(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(2, 0), len(shape))
    arg = a.py(1)
    if isinstance(arg, list):
        sizes = [int(s) for s in arg]
    else:
        step, dim = int(arg), shape[axis]
        if step < 1:
            raise g.error(f"split_size {step}: must be >= 1", attr="split_size")
        sizes = [min(step, dim - i) for i in range(0, dim, step)] or [0]
    return _split(node, g, x, axis, sizes)


@ts_mapping("unbind")
def unbind(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(1, 0), len(shape))
    pieces = _split(node, g, x, axis, [1] * shape[axis])
    pieces = pieces if isinstance(pieces, tuple) else (pieces,)
    return [g.op("Squeeze", [p], axes=[axis]) for p in pieces]


def _slice(g: MapContext, x: Value, axis: int, start: int | None, end: int | None, step: int) -> Value:
    dim = static_shape(g, x)[axis]
    if step < 1:
        raise g.error(f"slice step {step}: must be >= 1", attr="step")
    s, e, _ = slice(start, end, step).indices(dim)
    e = max(e, s)
    if s == 0 and e == dim and step == 1:
        return x
    return g.op("Slice", [x], starts=[s], ends=[e], axes=[axis], steps=[step])


def _list_slice(a: Args) -> Value:
    """``aten::slice.t(list, start=None, end=None, step=1)``: a list known while converting
    (a scripted ``x.shape[-2:]``, as torch.stft's ``center=True`` pads) sliced as Python does
    (torch's ``listSlice`` takes Python's slice rules)."""
    items, kind = a.known_list(0, "the sliced list")
    step = a.int(3, 1, what="step")
    if step == 0:
        raise a.g.error("slice step 0: must not be zero", attr="step")
    return a.list_value(items[a.int(1, None, what="start"):a.int(2, None, what="end"):step], kind)


@ts_mapping("slice")
def slice_(node: OriginNode, g: MapContext) -> Any:
    # (self, dim=0, start=None, end=None, step=1), or a list's (list, start, end, step)
    a = Args(node, g)
    if a.list_type(0) is not None:
        return _list_slice(a)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1, 0), len(x.shape))
    return _slice(g, x, axis, a.int(2), a.int(3), a.int(4, 1))


@ts_mapping("narrow")
def narrow(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    start = a.int(2)
    start = start + static_shape(g, x)[axis] if start < 0 else start
    return _slice(g, x, axis, start, start + a.int(3), 1)


@ts_mapping("select")
def select(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(1), len(shape))
    if not a.known(2):  # an index computed at run time (a loop's iteration): a 0-d Gather
        return g.op("Gather", [x, _indices(g, as_0d(g, a.tensor(2), "the index"), axis)], axis=axis)
    idx = norm_index(g, a.int(2), shape[axis], axis)
    piece = g.op("Slice", [x], starts=[idx], ends=[idx + 1], axes=[axis], steps=[1])
    return g.op("Squeeze", [piece], axes=[axis])


def _indices(g: MapContext, idx: Value, dim: int) -> Value:
    if idx.dtype == "bool":
        raise g.unsupported("indexing with a boolean mask computed at run time (data-dependent shape)",
                            hint="index with integer positions, or torch.where(mask, x, other)")
    return cast(g, idx, "i64")


@ts_mapping("index_select")
def index_select(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    return g.op("Gather", [x, _indices(g, a.tensor(2), axis)], axis=axis)


@ts_mapping("index", "_unsafe_index")
def index(node: OriginNode, g: MapContext) -> Any:
    """``x[..., i, j, ...]``: index tensors (or constant boolean masks), the other positions
    ``None``. The indexed dims merge into one, addressed by the linear index
    ``sum(i_k * stride_k)`` (index tensors broadcast together), so the result's index dims take
    the indexed dims' place when those are adjacent, and come first otherwise, as torch's
    advanced indexing does."""
    a = Args(node, g)
    x = a.tensor(0)
    spec = a.spec[1]
    if isinstance(spec, list):
        items: list[Any] = [a.consts[k] if k in a.consts else g.input(k) for k in spec]
    else:  # a constant list (freezing folded the index tensors into it)
        items = list(a.py(1, what="indices"))
    given = index_tensors(g, items)
    return gather_index(g, x, given) if given else x


def gather_index(g: MapContext, x: Value, given: list[tuple[int, Value]]) -> Value:
    """``x`` advanced-indexed by the int64 index tensors ``(dim, index)``, in dim order (the
    other dims taken whole), as torch's ``x[..., i, ..., j]``."""
    dims = [d for d, _ in given]
    if len(given) == 1:
        return g.op("Gather", [x, given[0][1]], axis=dims[0])
    shape = static_shape(g, x)
    if dims[-1] >= len(shape):
        raise g.error(f"{dims[-1] + 1} indexed dims for a tensor of rank {len(shape)}")
    if dims != list(range(dims[0], dims[0] + len(dims))):
        # indexed dims apart from each other: torch puts the index dims first, so the indexed
        # dims move to the front (in order) and are indexed there
        perm = dims + [d for d in range(len(shape)) if d not in dims]
        x = g.op("Transpose", [x], perm=perm)
        shape = [shape[d] for d in perm]
        given = [(k, idx) for k, (_, idx) in enumerate(given)]
        dims = list(range(len(given)))
    sizes = [shape[d] for d in dims]
    linear: Value | None = None
    for k, (_, idx) in enumerate(given):
        # a negative index counts from the end: idx mod size (Python sign) is its position
        pos = g.op("Mod", [idx, g.constant(np.asarray(sizes[k], np.int64))], fmod=0)
        stride = int(np.prod(sizes[k + 1:], dtype=np.int64))
        term = g.op("Mul", [pos, g.constant(np.asarray(stride, np.int64))]) if stride != 1 else pos
        linear = term if linear is None else g.op("Add", [linear, term])
    assert linear is not None
    merged = reshape_to(g, x, [*shape[:dims[0]], int(np.prod(sizes)), *shape[dims[-1] + 1:]])
    return g.op("Gather", [merged, linear], axis=dims[0])


def index_tensors(g: MapContext, items: list[Any]) -> list[tuple[int, Value]]:
    """(dim, i64 index Value) of each index tensor; a constant boolean mask over m dims becomes
    the m index tensors of its True entries (its nonzero), which are known while converting."""
    out: list[tuple[int, Value]] = []
    dim = 0
    for item in items:
        if item is None:
            dim += 1
            continue
        arr = item if not isinstance(item, Value) else item.data
        if arr is not None and np.asarray(arr).dtype == np.bool_:
            mask = np.asarray(arr)
            out += [(dim + k, g.constant(nz.astype(np.int64))) for k, nz in enumerate(np.nonzero(mask))]
            dim += max(mask.ndim, 1)
            continue
        idx = item if isinstance(item, Value) else g.constant(np.asarray(item))
        out.append((dim, _indices(g, idx, dim)))
        dim += 1
    return out


@ts_mapping("gather")
def gather(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    return g.op("GatherElements", [x, _indices(g, a.tensor(2), axis)], axis=axis)


@ts_mapping("embedding")
def embedding(node: OriginNode, g: MapContext) -> Any:
    # (weight, indices, padding_idx, scale_grad_by_freq, sparse)
    a = Args(node, g)
    return g.op("Gather", [a.tensor(0), _indices(g, a.tensor(1), 0)], axis=0)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad(g: MapContext, x: Value, pad: list[int], mode: str, value: float) -> Value:
    rank = len(x.shape)
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise g.error(f"pad = {pad}: needs pairs for at most {rank} dims", attr="pad")
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):  # torch lists the last dim first
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if not any(begins + ends):
        return x
    return g.op("Pad", [x], pads=begins + ends, mode=_PAD_MODES[mode], value=value)


@ts_mapping("constant_pad_nd")
def constant_pad(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return _pad(g, a.tensor(0), a.ints(1), "constant", float(a.py(2, 0.0)))


@ts_mapping("pad")
def pad(node: OriginNode, g: MapContext) -> Any:
    # (self, pad, mode="constant", value=None)
    a = Args(node, g)
    mode = a.py(2, "constant")
    if mode not in _PAD_MODES:
        raise g.error(f"mode = {mode!r}: must be one of {', '.join(_PAD_MODES)}", attr="mode")
    value = 0.0 if a.is_none(3) else float(a.py(3))
    return _pad(g, a.tensor(0), a.ints(1), mode, value)


@ts_mapping("reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
            "replication_pad2d", "replication_pad3d")
def mode_pad(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    mode = node.op_type.split("_pad")[0].replace("reflection", "reflect").replace("replication", "replicate")
    return _pad(g, a.tensor(0), a.ints(1), mode, 0.0)


@ts_mapping("topk")
def topk(node: OriginNode, g: MapContext) -> Any:
    # (self, k, dim=-1, largest=True, sorted=True) -> (values, indices)
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(2, -1), len(x.shape))
    return g.op("TopK", [x], k=a.int(1), axis=axis, largest=int(bool(a.py(3, True))),
                sorted=int(bool(a.py(4, True))))


@ts_mapping("sort", "argsort")
def sort(node: OriginNode, g: MapContext) -> Any:
    # sort(self, dim=-1, descending=False) -> (values, indices); argsort(self, dim, descending)
    # (ties may order differently from torch's unstable sort)
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    axis = norm_axis(g, a.int(1, -1), len(shape))
    values, indices = g.op("TopK", [x], k=shape[axis], axis=axis, largest=int(bool(a.py(2, False))),
                           sorted=1)
    return indices if node.op_type == "argsort" else (values, indices)


@ts_mapping("meshgrid")
def meshgrid(node: OriginNode, g: MapContext) -> Any:
    # meshgrid(tensors[, indexing="ij"]) -> tensors, each expanded to the grid's shape
    a = Args(node, g)
    xs = a.tensor_list(0, "tensors")
    if not node.attrs.get("unpacked") or len(node.outputs) != len(xs):
        raise g.unsupported("the grids are used other than by unpacking them (gy, gx = meshgrid(...))",
                            hint="unpack the grids where they are made (gy, gx = torch.meshgrid(y, x, "
                                 "indexing=\"ij\")) and use gy and gx")
    indexing = a.py(1, "ij")
    sizes = [int(np.prod(static_shape(g, x), dtype=np.int64)) for x in xs]
    pos = list(range(len(xs)))
    if indexing == "xy" and len(xs) >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * len(xs)
    for i, p in enumerate(pos):
        shape[p] = sizes[i]
    outs = []
    for i, x in enumerate(xs):
        view = [1] * len(xs)
        view[pos[i]] = sizes[i]
        y = reshape_to(g, x, view)
        outs.append(y if view == shape else g.op("Expand", [y], shape=shape))
    return outs


@ts_mapping("cumsum")
def cumsum(node: OriginNode, g: MapContext) -> Any:
    # (self, dim, dtype=None): integers and bools add up in int64 unless dtype says otherwise
    a = Args(node, g)
    x = a.tensor(0)
    dt = a.py(2)
    if dt is not None:
        x = cast(g, x, ir_dtype(g, dt))
    elif x.dtype in ("bool", "u8", "i8", "i16", "i32"):
        x = cast(g, x, "i64")
    return g.op("CumSum", [x], axis=norm_axis(g, a.int(1), len(x.shape)))


@ts_mapping("diff")
def diff(node: OriginNode, g: MapContext) -> Any:
    # (self, n=1, dim=-1, prepend=None, append=None): prepend/append join x along dim, then
    # x[1:] - x[:-1] n times (logical xor for bool, as torch does)
    a = Args(node, g)
    x = a.tensor(0)
    n = a.int(1, 1)
    axis = norm_axis(g, a.int(2, -1), len(x.shape))
    parts = [x]
    if not a.is_none(3):
        parts.insert(0, a.tensor(3, "prepend"))
    if not a.is_none(4):
        parts.append(a.tensor(4, "append"))
    dtype = functools.reduce(promote, [p.dtype for p in parts])
    y = g.op("Concat", [cast(g, p, dtype) for p in parts], axis=axis) if len(parts) > 1 else x
    for _ in range(n):
        hi, lo = _slice(g, y, axis, 1, None, 1), _slice(g, y, axis, None, -1, 1)
        y = g.op("Xor" if dtype == "bool" else "Sub", [hi, lo])
    return y


@ts_mapping("triu", "tril")
def trilu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("Trilu", [a.tensor(0)], upper=int(node.op_type == "triu"), k=a.int(1, 0))


@ts_mapping("pixel_shuffle", "pixel_unshuffle")
def pixel_shuffle(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    r = a.int(1)
    n, c, h, w = static_shape(g, x)
    if node.op_type == "pixel_shuffle":
        y = reshape_to(g, x, [n, c // (r * r), r, r, h, w])
        y = g.op("Transpose", [y], perm=[0, 1, 4, 2, 5, 3])
        return reshape_to(g, y, [n, c // (r * r), h * r, w * r])
    y = reshape_to(g, x, [n, c, h // r, r, w // r, r])
    y = g.op("Transpose", [y], perm=[0, 1, 3, 5, 2, 4])
    return reshape_to(g, y, [n, c * r * r, h // r, w // r])


@ts_mapping("channel_shuffle", "native_channel_shuffle")
def channel_shuffle(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    groups = a.int(1)
    shape = list(static_shape(g, x))
    y = reshape_to(g, x, [shape[0], groups, shape[1] // groups] + shape[2:])
    perm = [0, 2, 1] + list(range(3, len(shape) + 1))
    return reshape_to(g, g.op("Transpose", [y], perm=perm), shape)


@ts_mapping("flip")
def flip(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    rank = len(x.shape)
    axes = [norm_axis(g, d, rank) for d in a.ints(1)]
    big = -(2**63)
    return g.op("Slice", [x], starts=[-1] * len(axes), ends=[big] * len(axes), axes=axes,
                steps=[-1] * len(axes))
