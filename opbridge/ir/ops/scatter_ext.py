"""TensorScatter: a key/value cache with each batch row's update written at its own index
(ONNX TensorScatter-24, https://onnx.ai/onnx/operators/onnx__TensorScatter.html).

The cache and the update have the same shape except along ``axis`` (the sequence axis, past the
batch axis 0), where the update is no longer than the cache. Row ``b`` of the update lands at
``write_indices[b]`` (0 when absent) onwards; ``mode="circular"`` wraps it modulo the cache's
length, ``"linear"`` requires it to fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InterpretError
from ..opdef import ShapeContext, define_op
from .common import ALL, LOWP

MODES = ("linear", "circular")


def _tensor_scatter_shape(ctx: ShapeContext) -> Any:
    cache, upd = ctx.input_shape(0), ctx.input_shape(1)
    if len(cache) < 2:
        raise ctx.error(f"past_cache has rank {len(cache)}; it needs a batch axis and a sequence "
                        "axis", hint="give a cache of shape [batch, ..., max_sequence_length, ...]")
    axis = ctx.normalize_axis(ctx.attr("axis"), len(cache))
    if axis == 0:
        raise ctx.error("is the batch axis 0", attr="axis",
                        hint="axis names the sequence axis, one of 1 .. rank-1 (default -2)")
    same = len(upd) == len(cache) and all(
        ctx.dims_equal(a, b) for k, (a, b) in enumerate(zip(cache, upd)) if k != axis)
    if not same:
        raise ctx.error(f"update has shape {list(upd)}, past_cache {list(cache)}; they may differ "
                        f"only on axis {axis}", hint="the update must have the cache's shape "
                        "except for its sequence length")
    n, n_max = upd[axis], cache[axis]
    if isinstance(n, int) and isinstance(n_max, int) and n > n_max:
        raise ctx.error(f"the update's sequence length {n} exceeds the cache's {n_max} "
                        f"(axis {axis})", hint="the cache must hold the whole update")
    if ctx.has_input(2) and (ctx.input_rank(2) != 1 or not ctx.dims_equal(ctx.input_shape(2)[0], cache[0])):
        raise ctx.error(f"write_indices have shape {list(ctx.input_shape(2))}; they need one index "
                        f"per batch row, [{cache[0]}]",
                        hint="give write_indices one index per batch row of past_cache")
    if ctx.input_dtype(1) != ctx.input_dtype(0):
        raise ctx.error(f"update is {ctx.input_dtype(1)}, past_cache {ctx.input_dtype(0)}; they "
                        "must match",
                        hint="give update the dtype of past_cache")
    return cache, ctx.input_dtype(0)


def tensor_scatter(cache: np.ndarray, update: np.ndarray, write_indices: np.ndarray | None = None,
                   *, axis: int, mode: str) -> np.ndarray:
    """The cache with each batch row's update written from its write index along ``axis``."""
    axis %= cache.ndim
    n_max, n = cache.shape[axis], update.shape[axis]
    start = (np.zeros(cache.shape[0], np.int64) if write_indices is None
             else np.asarray(write_indices, np.int64).reshape(-1))
    pos = start[:, None] + np.arange(n, dtype=np.int64)[None, :]  # [batch, n]
    if mode == "circular":
        pos %= max(n_max, 1)
    elif pos.size and (pos.min() < 0 or pos.max() >= n_max):
        bad = int(np.flatnonzero((pos < 0).any(1) | (pos >= n_max).any(1))[0])
        raise InterpretError(f"batch row {bad}: write index {int(start[bad])} + sequence length {n} "
                             f"does not fit a cache of length {n_max} (mode linear)",
                             hint="keep write_indices[b] + the update's length <= the cache's "
                             "length, or use mode='circular'")
    shape = [1] * cache.ndim
    shape[0], shape[axis] = cache.shape[0], n
    out = cache.copy()
    np.put_along_axis(out, np.broadcast_to(pos.reshape(shape), update.shape), update, axis)
    return out


(
    define_op("TensorScatter")
    .doc("past_cache with update written along `axis` from write_indices[b] (0 when absent) "
         "in each batch row b; mode circular wraps modulo the cache length.")
    .input("past_cache", "T").input("update", "T")
    .input("write_indices", "i64", optional=True).output("present_cache", "T")
    .param("axis", "int", -2, doc="the sequence axis (not the batch axis 0)")
    .param("mode", "str", "linear", allowed=MODES)
    .type_param("T", ALL + LOWP)
    .shape_fn(_tensor_scatter_shape)
    .compute(tensor_scatter)
)
