"""ONNX mappings: shape ops and constant generators.

Semantics: https://onnx.ai/onnx/operators/. Shape-like inputs become IR attributes and must
be constant (``g.require_const`` says so, naming the input, when one is computed at run time).
Versions whose meaning differs get their own mapping: Reshape-1 (attribute) / -5 (input) /
-14 (allowzero); Squeeze and Unsqueeze -1 (axes attribute) / -13 (axes input); Shape-15
(start/end); DepthToSpace-11 (mode); SpaceToDepth-28 (mode); Tile-1 (tiles+axis inputs) /
-6 (repeats). Shape and Size of a static tensor, and the generators (ConstantOfShape, Range,
EyeLike), become constants so that shape-computing chains fold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.ops.generate import range_len, range_values
from ...ir.ops.shape import shape_range
from ...ir.types import check_shape, from_numpy_dtype, is_static, numel, to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .dynamic import dynamic, run_time_operands
from .elementwise import LEGACY_HINTS, ONNX, checked_attrs, ir_dtype, one_to_one, required_input

#: A generator whose result is at most this many elements becomes a constant; a larger one
#: stays an op, so that the model file does not carry it.
CONST_LIMIT = 1 << 16


def const_ints(g: MapContext, i: int, what: str) -> tuple[int, ...]:
    """Input ``i`` (constant, integer) as a tuple of ints."""
    data = g.require_const(i, what)
    if data.dtype.kind not in "iu":
        raise g.error(f"input {i} ({what}) has dtype {data.dtype}; it must hold integers")
    return tuple(int(v) for v in data.reshape(-1))


def const_scalar(g: MapContext, i: int, what: str) -> Any:
    """Input ``i`` (constant, one element) as a Python number."""
    data = g.require_const(i, what)
    if data.size != 1:
        raise g.error(f"input {i} ({what}) must hold one value; it has shape {list(data.shape)}")
    return data.reshape(()).item()


# -- Reshape -------------------------------------------------------------------------------
@mapping(ONNX, "Reshape", since_opset=1)
def reshape_v1(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("shape",), LEGACY_HINTS)
    if "shape" not in node.attrs:
        raise g.error("required but absent", attr="shape")
    return g.op("Reshape", [required_input(g, 0, "data")], shape=node.attrs["shape"])


@mapping(ONNX, "Reshape", since_opset=5)
def reshape_v5(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    if run_time_operands(g, [1]):
        return dynamic(g, "Reshape", [required_input(g, 0, "data")], [g.input(1)])
    return g.op("Reshape", [required_input(g, 0, "data")], shape=const_ints(g, 1, "shape"))


@mapping(ONNX, "Reshape", since_opset=14)
def reshape_v14(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("allowzero",))
    if run_time_operands(g, [1]):
        return dynamic(g, "Reshape", [required_input(g, 0, "data")], [g.input(1)], **a)
    return g.op("Reshape", [required_input(g, 0, "data")], shape=const_ints(g, 1, "shape"), **a)


one_to_one("Flatten", 1, attrs=("axis",))
one_to_one("Transpose", 1, attrs=("perm",))
one_to_one("Size", 1)
one_to_one("DepthToSpace", 1, attrs=("blocksize",))
one_to_one("DepthToSpace", 11, attrs=("blocksize", "mode"))
one_to_one("SpaceToDepth", 1, attrs=("blocksize",))
one_to_one("SpaceToDepth", 28, attrs=("blocksize", "mode"))
one_to_one("ReverseSequence", 10, attrs=("batch_axis", "time_axis"), num_inputs=2)


# -- Squeeze / Unsqueeze -------------------------------------------------------------------
@mapping(ONNX, "Squeeze", since_opset=1)
def squeeze_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axes",))
    return g.op("Squeeze", [required_input(g, 0, "data")], **a)


@mapping(ONNX, "Squeeze", since_opset=13)
def squeeze_v13(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    axes = const_ints(g, 1, "axes") if g.has_input(1) else ()
    return g.op("Squeeze", [required_input(g, 0, "data")], axes=axes)


@mapping(ONNX, "Unsqueeze", since_opset=1)
def unsqueeze_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axes",))
    return g.op("Unsqueeze", [required_input(g, 0, "data")], **a)


@mapping(ONNX, "Unsqueeze", since_opset=13)
def unsqueeze_v13(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    return g.op("Unsqueeze", [required_input(g, 0, "data")], axes=const_ints(g, 1, "axes"))


# -- Expand, Tile --------------------------------------------------------------------------
@mapping(ONNX, "Expand", since_opset=8)
def expand(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    if run_time_operands(g, [1]):
        return dynamic(g, "Expand", [required_input(g, 0, "input")], [g.input(1)])
    return g.op("Expand", [required_input(g, 0, "input")], shape=const_ints(g, 1, "shape"))


@mapping(ONNX, "Tile", since_opset=1)
def tile_v1(node: OriginNode, g: MapContext) -> Any:
    # Tile-1: 'tiles' copies along the one axis named by the 'axis' input
    checked_attrs(node, g, ())
    x = required_input(g, 0, "input")
    tiles, axis = int(const_scalar(g, 1, "tiles")), int(const_scalar(g, 2, "axis"))
    if not 0 <= axis < len(x.shape):
        raise g.error(f"input 2 (axis) = {axis} is out of range for rank {len(x.shape)}")
    return g.op("Tile", [x], repeats=tuple(tiles if i == axis else 1 for i in range(len(x.shape))))


@mapping(ONNX, "Tile", since_opset=6)
def tile_v6(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    if run_time_operands(g, [1]):
        return dynamic(g, "Tile", [required_input(g, 0, "input")], [g.input(1)])
    return g.op("Tile", [required_input(g, 0, "input")], repeats=const_ints(g, 1, "repeats"))


# -- Shape ---------------------------------------------------------------------------------
def _shape(node: OriginNode, g: MapContext, attrs: dict[str, Any]) -> Any:
    x = required_input(g, 0, "data")
    if is_static(x.shape):  # known now: a constant, so Shape -> Gather -> Reshape chains fold
        s, e = shape_range(len(x.shape), int(attrs["start"]), attrs.get("end"))
        return g.constant(np.array(x.shape[s:e], dtype=np.int64))
    return g.op("Shape", [x], **attrs)


@mapping(ONNX, "Shape", since_opset=1)
def shape_v1(node: OriginNode, g: MapContext) -> Any:
    return _shape(node, g, {"start": 0, **checked_attrs(node, g, ())})  # Shape-1: the whole shape


@mapping(ONNX, "Shape", since_opset=15)
def shape_v15(node: OriginNode, g: MapContext) -> Any:
    return _shape(node, g, checked_attrs(node, g, ("start", "end")))


# -- generators ----------------------------------------------------------------------------
@mapping(ONNX, "ConstantOfShape", since_opset=9)
def constant_of_shape(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("value",))
    value = np.asarray(a.get("value", np.zeros(1, np.float32)))
    if value.size != 1:
        raise g.error(f"has {value.size} elements; it must hold one", attr="value")
    if run_time_operands(g, [0]):
        return dynamic(g, "ConstantOfShape", [], [g.input(0)], value=value.reshape(1))
    shape = const_ints(g, 0, "input")
    if all(d >= 0 for d in shape):
        check_shape(shape, "output")  # before numpy sees it (the converter adds the node)
        if numel(shape) <= CONST_LIMIT:
            return g.constant(np.full(shape, value.reshape(()), dtype=value.dtype))
    return g.op("ConstantOfShape", [], shape=shape, value=value.reshape(1))


@mapping(ONNX, "Range", since_opset=11)
def range_v11(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    if run_time_operands(g, [0, 1, 2]):
        ins = [required_input(g, i, w) for i, w in enumerate(("start", "limit", "delta"))]
        if len({v.dtype for v in ins}) != 1:
            raise g.error(f"start, limit and delta have dtypes {[v.dtype for v in ins]}; they must match")
        return dynamic(g, "Range", [], ins, dtype=ins[0].dtype)
    arrays = [g.require_const(i, w) for i, w in enumerate(("start", "limit", "delta"))]
    dtypes = sorted({str(a.dtype) for a in arrays})
    if len(dtypes) != 1:
        raise g.error(f"start, limit and delta have dtypes {dtypes}; they must match")
    start, limit, delta = (a.reshape(()).item() for a in arrays)
    if delta == 0:
        raise g.error("input 2 (delta) is 0", hint="Range needs a non-zero step")
    dtype = from_numpy_dtype(arrays[0].dtype)
    if range_len(start, limit, delta) <= CONST_LIMIT:
        return g.constant(range_values(start, limit, delta, dtype))
    return g.op("Range", [], start=start, limit=limit, delta=delta, dtype=dtype)


@mapping(ONNX, "EyeLike", since_opset=9)
def eye_like(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("k", "dtype"))
    x = required_input(g, 0, "input")
    attrs: dict[str, Any] = {"k": int(a["k"])}
    if "dtype" in a:
        attrs["dtype"] = ir_dtype(g, a["dtype"])
    if len(x.shape) == 2 and is_static(x.shape) and numel(x.shape) <= CONST_LIMIT:
        dt = to_numpy_dtype(attrs.get("dtype", x.dtype))
        return g.constant(np.eye(*x.shape, k=attrs["k"], dtype=dt))
    return g.op("EyeLike", [x], **attrs)


@mapping(ONNX, "OneHot", since_opset=9)
def one_hot(node: OriginNode, g: MapContext) -> Any:
    # OneHot-9 leaves negative indices unspecified; -11 counts them from the end, as the IR does
    a = checked_attrs(node, g, ("axis",))
    depth = const_scalar(g, 1, "depth")
    values = g.require_const(2, "values")
    if values.size != 2:
        raise g.error(f"input 2 (values) has {values.size} elements; it must be [off, on]")
    return g.op("OneHot", [required_input(g, 0, "indices")], depth=int(depth),
                values=values.reshape(2), **a)


@mapping(ONNX, "Trilu", since_opset=14)
def trilu(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("upper",))
    k = int(const_scalar(g, 1, "k")) if g.has_input(1) else 0
    return g.op("Trilu", [required_input(g, 0, "input")], k=k, **a)
