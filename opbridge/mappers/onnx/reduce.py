"""ONNX mappings: ReduceX, ArgMax, ArgMin, CumSum, TopK.

Semantics: https://onnx.ai/onnx/operators/. The reduction axes are an attribute up to opset
12 (ReduceSum) or 17 (the others), then an optional input (with noop_with_empty_axes), which
must be constant here (the IR's ``axes`` is an attribute). ArgMax/ArgMin-12 add
select_last_index. CumSum's axis and TopK's k (opset 10+) are inputs read as constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .dynamic import dynamic, run_time_operands
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX

#: Reduce op -> the opset from which axes is an input.
AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
                    "ReduceProd": 18, "ReduceL1": 18, "ReduceL2": 18, "ReduceLogSum": 18,
                    "ReduceLogSumExp": 18, "ReduceSumSquare": 18}


def _axes_attr(op: str):  # noqa: ANN202 - a mapping function
    def map_reduce_axes_attr(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, ("axes", "keepdims"))
        axes = node.get_attr("axes", None)
        return g.op(op, [required_input(g, 0, "data")],
                    axes=() if axes is None else tuple(int(a) for a in axes),
                    keepdims=int(node.get_attr("keepdims")))

    map_reduce_axes_attr.__qualname__ = f"map_{op}_1"
    return map_reduce_axes_attr


def _axes_input(op: str):  # noqa: ANN202 - a mapping function
    def map_reduce_axes_input(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, ("keepdims", "noop_with_empty_axes"))
        axes: tuple[int, ...] = ()
        if g.has_input(1):
            axes = tuple(int(a) for a in g.require_const(1, "axes").reshape(-1))
        return g.op(op, [required_input(g, 0, "data")], axes=axes,
                    keepdims=int(node.get_attr("keepdims")),
                    noop_with_empty_axes=int(node.get_attr("noop_with_empty_axes")))

    map_reduce_axes_input.__qualname__ = f"map_{op}_{AXES_INPUT_SINCE[op]}"
    return map_reduce_axes_input


for _op, _since in AXES_INPUT_SINCE.items():
    mapping(ONNX, _op, since_opset=1)(_axes_attr(_op))
    mapping(ONNX, _op, since_opset=_since)(_axes_input(_op))


# -- ArgMax / ArgMin -------------------------------------------------------------------------
def _arg(op: str, known: tuple[str, ...]):  # noqa: ANN202 - a mapping function
    def map_arg(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, known)
        # select_last_index exists from opset 12; before it, the first index (the IR's default)
        return g.op(op, [required_input(g, 0, "data")], axis=int(node.get_attr("axis")),
                    keepdims=int(node.get_attr("keepdims")),
                    select_last_index=node.attrs.get("select_last_index"))

    map_arg.__qualname__ = f"map_{op}"
    return map_arg


for _op in ("ArgMax", "ArgMin"):
    mapping(ONNX, _op, since_opset=1)(_arg(_op, ("axis", "keepdims")))
    mapping(ONNX, _op, since_opset=12)(_arg(_op, ("axis", "keepdims", "select_last_index")))


# -- CumSum ----------------------------------------------------------------------------------
@mapping(ONNX, "CumSum", since_opset=11)
def cumsum(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("exclusive", "reverse"))
    axis = g.require_const(1, "axis")
    if axis.size != 1:
        raise g.error(f"input 1 (axis) must hold one value, it has shape {list(axis.shape)}")
    return g.op("CumSum", [required_input(g, 0, "x")], axis=int(axis.reshape(())),
                exclusive=int(node.get_attr("exclusive")), reverse=int(node.get_attr("reverse")))


# -- TopK ------------------------------------------------------------------------------------
def _topk(node: OriginNode, g: MapContext, k: Any) -> Any:
    k_arr = np.asarray(k)
    if k_arr.size != 1:
        raise g.error(f"k must be one value, got shape {list(k_arr.shape)}")
    return g.op("TopK", [required_input(g, 0, "X")], k=int(k_arr.reshape(())),
                # largest and sorted exist from opset 11; before, both meant 1 (the IR's defaults)
                axis=int(node.get_attr("axis")), largest=node.attrs.get("largest"),
                sorted=node.attrs.get("sorted"))


def _topk_dynamic(node: OriginNode, g: MapContext) -> Any:
    return dynamic(g, "TopK", [required_input(g, 0, "X")], [g.input(1)],
                   axis=int(node.get_attr("axis")), largest=node.attrs.get("largest"),
                   sorted=node.attrs.get("sorted"))


@mapping(ONNX, "TopK", since_opset=1)
def topk_v1(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis", "k"))
    if node.get_attr("k", None) is None:
        raise g.error("required but absent", attr="k")
    return _topk(node, g, node.get_attr("k"))


@mapping(ONNX, "TopK", since_opset=10)
def topk_v10(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis",))
    if run_time_operands(g, [1]):
        return _topk_dynamic(node, g)
    return _topk(node, g, g.require_const(1, "K"))


@mapping(ONNX, "TopK", since_opset=11)
def topk_v11(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis", "largest", "sorted"))
    if run_time_operands(g, [1]):
        return _topk_dynamic(node, g)
    return _topk(node, g, g.require_const(1, "K"))
