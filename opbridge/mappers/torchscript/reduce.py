"""Reductions: mean/sum/prod/amax/amin/max/min/argmax/argmin/logsumexp/std/var with dims and keepdim."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, cast, ir_dtype, norm_axis, static_shape, ts_mapping
from .elementwise import operands
from .shape import reshape_to


def _axes(g: MapContext, dims: list[int] | None, rank: int) -> list[int]:
    if not dims:
        return list(range(rank))
    return sorted(norm_axis(g, d, rank) for d in dims)


def _reduce(g: MapContext, op: str, x: Value, dims: list[int] | None, keep: bool) -> Value:
    if not x.shape:
        return x
    return g.op(op, [x], axes=_axes(g, dims, len(x.shape)), keepdims=int(keep))


@ts_mapping("mean", "sum", "prod", "nansum")
def mean_sum(node: OriginNode, g: MapContext) -> Any:
    # mean(self, dtype=None) | mean(self, dim, keepdim=False, dtype=None); prod(self, dim: int, ...)
    a = Args(node, g)
    x = a.tensor(0)
    op = {"mean": "ReduceMean", "sum": "ReduceSum", "nansum": "ReduceSum", "prod": "ReduceProd"}[node.op_type]
    if len(a) <= 2:  # the whole-tensor overload: (self, dtype)
        dims, keep, dt = None, False, a.py(1)
    else:
        dims, keep, dt = a.ints(1), bool(a.py(2, False)), a.py(3)
    if dt is not None:
        x = cast(g, x, ir_dtype(g, dt))
    elif node.op_type != "mean" and x.dtype in ("bool", "u8", "i8", "i16", "i32"):
        x = cast(g, x, "i64")  # torch sums small ints as int64
    return _reduce(g, op, x, dims, keep)


@ts_mapping("amax", "amin")
def amax(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    op = "ReduceMax" if node.op_type == "amax" else "ReduceMin"
    return _reduce(g, op, a.tensor(0), a.ints(1), bool(a.py(2, False)))


def _arg(g: MapContext, op: str, x: Value, dim: int | None, keep: bool) -> Value:
    if dim is None:  # over the flattened tensor
        flat = reshape_to(g, x, [-1])
        y = g.op(op, [flat], axis=0, keepdims=0)
        return reshape_to(g, y, [1] * len(x.shape)) if keep else y
    return g.op(op, [x], axis=norm_axis(g, dim, len(x.shape)), keepdims=int(keep))


@ts_mapping("max", "min")
def max_min(node: OriginNode, g: MapContext) -> Any:
    # max(self) | max(self, dim, keepdim) -> (values, indices) | max(self, other)
    a = Args(node, g)
    big = node.op_type == "max"
    if len(a) == 1:
        return _reduce(g, "ReduceMax" if big else "ReduceMin", a.tensor(0), None, False)
    if a.is_tensor(1):
        return g.op("Max" if big else "Min", list(operands(a, 0, 1)))
    x = a.tensor(0)
    dim, keep = a.int(1), bool(a.py(2, False))
    values = _reduce(g, "ReduceMax" if big else "ReduceMin", x, [dim], keep)
    if len(node.outputs) == 1:
        return values
    return values, _arg(g, "ArgMax" if big else "ArgMin", x, dim, keep)


@ts_mapping("argmax", "argmin")
def argmax(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    op = "ArgMax" if node.op_type == "argmax" else "ArgMin"
    return _arg(g, op, a.tensor(0), a.int(1), bool(a.py(2, False)))


@ts_mapping("logsumexp")
def logsumexp(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return _reduce(g, "ReduceLogSumExp", a.tensor(0), a.ints(1), bool(a.py(2, False)))


def _var_args(a: Args) -> tuple[list[int] | None, float, bool]:
    """(dims, correction, keepdim) of var/std/var_mean/std_mean in any of their forms:
    (self, dim, *, correction, keepdim) (what TorchScript records), (self, dim, unbiased,
    keepdim), (self, unbiased)."""
    types = [a.types[k] if isinstance(k, int) else "List[int]" for k in a.spec]
    if len(a) <= 2 and (len(a) == 1 or types[1] == "bool"):
        return None, 1 if a.py(1, True) else 0, False
    third = a.py(2)
    if types[2] == "bool":
        correction: float = 1 if third else 0
    else:
        correction = 1 if third is None else float(third)
    return a.ints(1), correction, bool(a.py(3, False))


def _var(g: MapContext, a: Args, x: Value) -> tuple[Value, Value]:
    """(variance, mean) over the reduced dims, both with the keepdim of the call."""
    dims, correction, keep = _var_args(a)
    axes = _axes(g, dims, len(x.shape))
    shape = static_shape(g, x)
    n = 1
    for ax in axes:
        n *= shape[ax]
    mean = g.op("ReduceMean", [x], axes=axes, keepdims=1)
    d = g.op("Sub", [x, mean])
    y = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=axes, keepdims=int(keep))
    if correction:
        # torch divides the sum of squares by max(0, n - correction): 0/0 is nan, x/0 is inf
        with np.errstate(divide="ignore"):
            scale = np.float64(n) / np.float64(max(n - correction, 0))
        y = g.op("Mul", [y, a.scalar_value(scale, like=y)])
    return y, mean if keep else g.op("Squeeze", [mean], axes=axes)


@ts_mapping("var", "std", "var_mean", "std_mean")
def var_std(node: OriginNode, g: MapContext) -> Any:
    """var/std, and var_mean/std_mean -> (var or std, mean)."""
    a = Args(node, g)
    var, mean = _var(g, a, a.tensor(0))
    y = g.op("Sqrt", [var]) if node.op_type.startswith("std") else var
    return (y, mean) if node.op_type.endswith("_mean") else y


@ts_mapping("aminmax")
def aminmax(node: OriginNode, g: MapContext) -> Any:
    """aminmax(self, *, dim=None, keepdim=False) -> (min, max)."""
    a = Args(node, g)
    x, dim, keep = a.tensor(0), a.py(1), bool(a.py(2, False))
    dims = None if dim is None else [int(dim)]
    return _reduce(g, "ReduceMin", x, dims, keep), _reduce(g, "ReduceMax", x, dims, keep)
