"""ONNX mappings: Softmax, LogSoftmax, Hardmax.

Semantics: https://onnx.ai/onnx/operators/. Before opset 13 these ops flattened the input to
2-D at 'axis' (default 1) and normalised over the whole second part: that maps to Reshape +
the op along axis 1 + Reshape (or the op alone when axis is the last one, where both meanings
agree). From 13 they run along one axis (default -1), which is the IR's meaning.
"""

from __future__ import annotations

import math
from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX


def _flattened(op: str):  # noqa: ANN202 - a mapping function
    def map_flattened(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, ("axis",))
        x = required_input(g, 0, "input")
        rank = len(x.shape)
        axis = int(node.get_attr("axis"))
        if not -rank <= axis < max(rank, 1):
            raise g.error(f"= {axis} is out of range for an input of rank {rank}", attr="axis")
        axis = axis % rank if rank else 0
        if axis >= rank - 1:
            return g.op(op, [x], axis=-1)
        if not all(isinstance(d, int) for d in x.shape):
            raise g.unsupported(f"opset < 13 {op} over axes {axis}.. needs a static shape, got "
                                f"{list(x.shape)}")
        flat = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
        y = g.op(op, [g.op("Reshape", [x], shape=flat)], axis=1)
        return g.op("Reshape", [y], shape=tuple(x.shape))

    map_flattened.__qualname__ = f"map_{op}_1"
    return map_flattened


def _one_axis(op: str):  # noqa: ANN202 - a mapping function
    def map_one_axis(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, ("axis",))
        return g.op(op, [required_input(g, 0, "input")], axis=int(node.get_attr("axis")))

    map_one_axis.__qualname__ = f"map_{op}_13"
    return map_one_axis


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    mapping(ONNX, _op, since_opset=1)(_flattened(_op))
    mapping(ONNX, _op, since_opset=13)(_one_axis(_op))
