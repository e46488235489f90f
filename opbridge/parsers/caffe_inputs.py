"""The inputs of a Caffe net and their shapes: net-level ``input`` + ``input_shape``/``input_dim``,
``Input``/data layers, and the caller's ``input_shapes`` (which replace a declared deploy batch).

Every shape is checked (integer dims >= 0, element count within the IR's limit) before any
later step sizes a buffer from it. ``where`` arguments are message prefixes such as
``"[caffe] deploy.prototxt"``.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ModelFormatError, ShapeError
from ..ir import types as ir_types

Inputs = dict[str, tuple[int, ...] | None]


def as_list(v: Any) -> list[Any]:
    """A repeated field's value as a list (a generic block gives a single value bare)."""
    return v if isinstance(v, list) else [v]


def shape_of(blob_shape: Any, where: str) -> tuple[int, ...]:
    """The dims of a BlobShape block (``shape { dim: 1 dim: 3 ... }``)."""
    dims = as_list(blob_shape.get("dim", [])) if isinstance(blob_shape, dict) else None
    if dims is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise ModelFormatError(f"{where}: shape {blob_shape!r}: expected a block shape {{ dim: N ... }} "
                               "of integer dims", hint="write shape { dim: 1 dim: 3 ... }")
    return tuple(dims)


def check_input_shape(name: str, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    """An input shape with dims >= 0 and no more elements than the IR allows."""
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"{where}: input '{name}' has a negative dim in {list(shape)}",
                               hint="input dims are sizes (>= 0); fix the declaration")
    count = math.prod(shape)
    if count > ir_types.MAX_ELEMENTS:
        raise ModelFormatError(
            f"{where}: input '{name}' of shape {list(shape)} has {count} elements, above the "
            f"limit of {ir_types.MAX_ELEMENTS}",
            hint="fix the declared dims (or give smaller ones with --input-shape)",
        )
    return shape


def given_shapes(input_shapes: dict[str, Any] | None, where: str) -> dict[str, tuple[int, ...]]:
    """The caller's ``input_shapes`` as int tuples."""
    out = {}
    for name, dims in (input_shapes or {}).items():
        try:
            out[name] = tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            raise ShapeError(f"{where}: input_shapes['{name}'] = {dims!r}: not a list of ints",
                             hint="give a shape such as (1, 3, 224, 224)") from None
    return out


def net_inputs(net: dict[str, Any], inputs: Inputs, where: str) -> None:
    """Add the net-level inputs (``input`` with ``input_shape`` or 4 ``input_dim`` each)."""
    names = list(net.get("input", []))
    shapes = [shape_of(s, f"{where}: input_shape") for s in net.get("input_shape", [])]
    dims = list(net.get("input_dim", []))
    if dims:
        if len(dims) != 4 * len(names):
            raise ModelFormatError(
                f"{where}: {len(dims)} input_dim values for {len(names)} input(s)",
                hint="give 4 input_dim values (N, C, H, W) per input",
            )
        shapes = [tuple(dims[4 * i: 4 * i + 4]) for i in range(len(names))]
    if shapes and len(shapes) != len(names):
        raise ModelFormatError(
            f"{where}: {len(shapes)} input_shape blocks for {len(names)} input(s)",
            hint="give one input_shape per input",
        )
    for i, n in enumerate(names):
        inputs[n] = shapes[i] if shapes else None


def data_layer_inputs(op_type: str, tops: list[str], attrs: dict[str, Any], inputs: Inputs,
                      where: str) -> None:
    """Add the tops of an ``Input`` or data layer (shape None where the layer cannot say)."""
    shapes: list[tuple[int, ...]] = []
    if op_type in ("Input", "DummyData"):
        shapes = [shape_of(s, where) for s in as_list(attrs.get("shape", []))]
        if op_type == "DummyData" and not shapes and "num" in attrs:
            shapes = _legacy_dummy_shapes(attrs, len(tops), where)
    elif op_type == "MemoryData" and "batch_size" in attrs:
        dims = [attrs.get(k, 0) for k in ("batch_size", "channels", "height", "width")]
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            raise ModelFormatError(f"{where}: memory_data_param sizes {dims} are not all integers",
                                   hint="give batch_size, channels, height and width as integers in memory_data_param")
        shapes = [tuple(dims)]
    elif op_type in ("ImageData", "WindowData"):
        shapes = _image_shape(op_type, attrs, where)
    if len(shapes) not in (0, 1, len(tops)) and op_type in ("Input", "DummyData"):
        raise ModelFormatError(
            f"{where}: {len(shapes)} shapes for {len(tops)} tops",
            hint="give one shape, or one per top",
        )
    for i, t in enumerate(tops):
        if t in inputs:
            raise ModelFormatError(f"{where}: input '{t}' is declared twice",
                                   hint="give each input blob one declaration: rename the second top, or drop the duplicate input/Input layer")
        if i < len(shapes):
            inputs[t] = shapes[i]
        elif len(shapes) == 1 and op_type in ("Input", "DummyData"):
            inputs[t] = shapes[0]
        else:
            inputs[t] = None


def _field(attrs: dict[str, Any], block: str, name: str) -> Any:
    """A field of a flattened parameter block (the parser prefixes a name that two of the
    layer's blocks share, such as crop_size in transform_param and image_data_param)."""
    for key in (f"{block}.{name}", name):
        if key in attrs:
            return attrs[key]
    return None


def _image_shape(op_type: str, attrs: dict[str, Any], where: str) -> list[tuple[int, ...]]:
    """The data top of ImageData/WindowData when the prototxt fixes it: (batch_size, 3 or 1,
    H, W) with H, W the crop_size, else ImageData's new_height/new_width (as
    ImageDataLayer::DataLayerSetUp and DataTransformer::InferBlobShape size it); [] when the
    size comes from the images."""
    crop = _field(attrs, "transform_param", "crop_size") or attrs.get("image_data_param.crop_size") \
        or (attrs.get("window_data_param.crop_size") if op_type == "WindowData" else None)
    block = "image_data_param" if op_type == "ImageData" else "window_data_param"
    batch = _field(attrs, block, "batch_size") or 1
    color = attrs.get("is_color", True) if op_type == "ImageData" else True
    h, w = (crop, crop) if crop else (attrs.get("new_height"), attrs.get("new_width"))
    if op_type == "WindowData" and not crop:
        return []
    dims = (batch, 3 if color else 1, h, w)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        return []
    return [dims]


def _legacy_dummy_shapes(attrs: dict[str, Any], ntops: int, where: str) -> list[tuple[int, ...]]:
    """DummyData's deprecated 4-D sizes: num/channels/height/width, one value for every top
    or one per top (as DummyDataLayer::LayerSetUp reads them)."""
    cols = [as_list(attrs.get(k, [])) for k in ("num", "channels", "height", "width")]
    if any(len(c) not in (1, ntops) for c in cols):
        raise ModelFormatError(f"{where}: dummy_data_param num/channels/height/width need 1 value "
                               f"or one per top ({ntops})",
                               hint="give num, channels, height and width once (for every top) or once per top, or use shape { dim: ... } instead")
    if not all(isinstance(d, int) and not isinstance(d, bool) for c in cols for d in c):
        raise ModelFormatError(f"{where}: dummy_data_param sizes {cols} are not all integers",
                               hint="give num, channels, height and width as integers, or use shape { dim: ... } instead")
    return [tuple(c[i] if len(c) > 1 else c[0] for c in cols) for i in range(ntops)]


def apply_input_shapes(inputs: Inputs, given: dict[str, tuple[int, ...]], where: str) -> None:
    """Replace declared shapes by the ``given`` ones (same rank; a deploy batch of 10 can
    become 1) and check every shape; a declared shape that is replaced is not checked."""
    for name, shape in inputs.items():
        if shape is not None and name not in given:
            check_input_shape(name, shape, where)
    for name, shape in given.items():
        if name not in inputs:
            known = ", ".join(inputs) or "none"
            raise ShapeError(f"{where}: input_shapes names '{name}', not an input of the net",
                             hint=f"the net's inputs are: {known}")
        declared = inputs[name]
        if declared is not None and len(declared) != len(shape):
            raise ShapeError(
                f"{where}: input '{name}' is declared with {len(declared)} dims "
                f"{list(declared)}; input_shapes gives {list(shape)}",
                hint=f"give {len(declared)} dims for '{name}'",
            )
        if any(d < 1 for d in shape):
            raise ShapeError(f"{where}: input_shapes['{name}'] = {list(shape)}: dims must be >= 1",
                             hint=f"give the size of every dim, e.g. --input-shape {name}=1,3,224,224")
        inputs[name] = check_input_shape(name, shape, f"{where}: input_shapes")
