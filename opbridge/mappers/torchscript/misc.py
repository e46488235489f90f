"""Casts (``to``, ``type_as``), tensor creation (``zeros_like``, ``full``, ``arange`` …) and
resizing (``upsample_*``, the ops ``F.interpolate`` records)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ShapeError
from ...ir.graph import Value
from ...ir.types import MAX_ELEMENTS, check_shape, to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, cast, ir_dtype, static_shape, ts_mapping


@ts_mapping("to", "_to_copy")
def to(node: OriginNode, g: MapContext) -> Any:
    """The overloads differ in argument 1: a tensor (to.other), a device (to.device: dtype
    follows), or the dtype itself (to.dtype, to.prim_dtype, to.dtype_layout, _to_copy)."""
    a = Args(node, g)
    x = a.tensor(0)
    if len(a) < 2:
        return x
    t1 = a.types[a.spec[1]] if isinstance(a.spec[1], int) else ""
    if t1 == "Tensor" and not a.known(1):
        return cast(g, x, a.tensor(1).dtype)
    code = a.py(2) if "Device" in t1 else a.py(1)
    if node.op_type == "_to_copy":
        code = a.py(1)
    if code is None or isinstance(code, str):
        return x
    return cast(g, x, ir_dtype(g, code))


@ts_mapping("type_as")
def type_as(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return cast(g, a.tensor(0), a.tensor(1).dtype)


def _filled(g: MapContext, shape: list[int], value: Any, dtype: str) -> Value:
    try:  # a negative or absurd size is refused before anything is allocated
        dims = check_shape(shape, "size")
    except ShapeError as err:
        raise g.error(err.detail, attr="size", hint="the JSON was edited or damaged; re-export the model") from None
    return g.constant(np.full(dims, value, dtype=to_numpy_dtype(dtype)))


def _dtype_or(a: Args, i: int, default: str) -> str:
    return default if a.is_none(i) else ir_dtype(a.g, a.py(i))


@ts_mapping("zeros_like", "ones_like", "full_like", "empty_like")
def like(node: OriginNode, g: MapContext) -> Any:
    # zeros_like(self, dtype, layout, device, pin_memory, memory_format); full_like(self, fill, dtype, ...)
    a = Args(node, g)
    x = a.tensor(0)
    full = node.op_type == "full_like"
    value = a.py(1) if full else (1 if node.op_type == "ones_like" else 0)
    dt = _dtype_or(a, 2 if full else 1, x.dtype)
    return _filled(g, list(static_shape(g, x)), value, dt)


@ts_mapping("new_zeros", "new_ones", "new_full", "new_empty")
def new_filled(node: OriginNode, g: MapContext) -> Any:
    # new_zeros(self, size, dtype, layout, device, pin); new_full(self, size, fill_value, dtype, ...)
    a = Args(node, g)
    x = a.tensor(0)
    full = node.op_type == "new_full"
    value = a.py(2) if full else (1 if node.op_type == "new_ones" else 0)
    return _filled(g, a.ints(1), value, _dtype_or(a, 3 if full else 2, x.dtype))


@ts_mapping("zeros", "ones", "full", "empty")
def filled(node: OriginNode, g: MapContext) -> Any:
    # zeros(size, dtype, layout, device, pin_memory); full(size, fill_value, dtype, ...)
    a = Args(node, g)
    full = node.op_type == "full"
    value = a.py(1) if full else (1 if node.op_type == "ones" else 0)
    default = "f32" if not full or isinstance(value, float) else ("bool" if isinstance(value, bool) else "i64")
    return _filled(g, a.ints(0), value, _dtype_or(a, 2 if full else 1, default))


@ts_mapping("arange")
def arange(node: OriginNode, g: MapContext) -> Any:
    # arange(end, dtype, ...) [5 args] | arange(start, end, dtype, ...) [6] | arange(start, end, step, dtype, ...) [7]
    a = Args(node, g)
    n = len(a)
    nums = {5: 1, 6: 2, 7: 3}.get(n, n)
    vals = [a.py(i) for i in range(nums)]
    dt_idx = nums
    start, end, step = ([0, *vals, 1] if nums == 1 else [*vals, 1])[:3]
    if not all(isinstance(v, (int, float)) for v in (start, end, step)) or step == 0:
        raise g.error(f"arange({start!r}, {end!r}, {step!r}): numbers with a non-zero step are needed",
                      hint="the JSON was edited or damaged; re-export the model")
    size = max(math.ceil((end - start) / step), 0) if math.isfinite((end - start) / step) else -1
    if size < 0 or size > MAX_ELEMENTS:
        raise g.error(f"arange({start!r}, {end!r}, {step!r}) has no finite size of at most {MAX_ELEMENTS}",
                      hint="the JSON was edited or damaged; re-export the model")
    arr = np.arange(*vals)
    if not a.is_none(dt_idx) and dt_idx < n:
        return g.constant(arr.astype(to_numpy_dtype(ir_dtype(g, a.py(dt_idx)))))
    floaty = any(isinstance(v, float) for v in vals)
    return g.constant(arr.astype(np.float32 if floaty else np.int64))


_RESIZE = {"nearest": ("nearest", "asymmetric", "floor"),
           "nearest_exact": ("nearest", "half_pixel", "round_prefer_ceil"),
           "linear": ("linear", None, "floor"), "bilinear": ("linear", None, "floor"),
           "trilinear": ("linear", None, "floor"), "bicubic": ("cubic", None, "floor")}


@ts_mapping("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
            "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
            "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d")
def upsample(node: OriginNode, g: MapContext) -> Any:
    # nearest: (input, output_size, scale_factors); others: (input, output_size, align_corners, scale_factors)
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    n = len(shape) - 2
    kind = node.op_type.lstrip("_")[len("upsample_"):-2]
    mode, coord, nearest = _RESIZE[kind]
    if mode == "nearest":
        align, scales_idx = False, 2
    else:
        align, scales_idx = bool(a.py(2, False)), 3
        coord = "align_corners" if align else "half_pixel"
    attrs: dict[str, Any] = dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest,
                                 axes=list(range(2, 2 + n)))
    if mode == "cubic":
        attrs.update(cubic_coeff_a=-0.75, exclude_outside=0)
    if not a.is_none(1):
        sizes = a.ints(1)
        if len(sizes) != n:
            raise g.error(f"output_size = {sizes}: needs {n} values", attr="output_size")
        attrs["sizes"] = sizes
    elif not a.is_none(scales_idx):
        scales = [float(s) for s in a.py(scales_idx)]
        scales = scales * n if len(scales) == 1 else scales
        if len(scales) != n:
            raise g.error(f"scale_factors = {scales}: needs {n} values", attr="scale_factors")
        if align:  # torch computes the output size, then aligns corners on it
            attrs["sizes"] = [int(np.floor(d * s)) for d, s in zip(shape[2:], scales)]
        else:
            attrs["scales"] = scales
    else:
        raise g.error("neither output_size nor scale_factors is given")
    return g.op("Resize", [x], **attrs)


@ts_mapping("tensor", "as_tensor", "scalar_tensor")
def tensor(node: OriginNode, g: MapContext) -> Any:
    """``torch.tensor(data, dtype, device, requires_grad)``; Python floats become float32
    (torch's default dtype), ints int64, bools bool, whether known while converting or given at
    run time (a float / List[float] forward() argument)."""
    a = Args(node, g)
    dt = ir_dtype(g, a.py(1)) if not a.is_none(1) else None
    if isinstance(a.spec[0], int) and not a.known(0):  # a run-time number or list (an argument)
        v = a.tensor(0, what="data")
        python_float = a.types[a.spec[0]] in ("float", "List[float]") and v.dtype == "f64"
        return cast(g, v, dt or ("f32" if python_float else v.dtype))
    data = a.py(0, what="data")
    arr = np.asarray(data)
    if arr.dtype.kind == "f" and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)
    out = g.constant(arr)
    return cast(g, out, dt) if dt is not None else out
