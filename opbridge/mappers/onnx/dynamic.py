"""ONNX mappings: data-dependent ops, and shape-like operands computed at run time.

NonZero-9, NonMaxSuppression-10, Unique-11 map to the IR ops of the same names (outputs whose
size the run decides). The static mappings of Reshape, Expand, Tile, Slice, Range,
ConstantOfShape, Resize, TopK and Compress call :func:`run_time_operands` first: when an operand
they would make an attribute is computed at run time (from data, or from a symbolic dim's
``Shape``), they emit the IR op's ``Dynamic*`` form, which takes it as an input.
Semantics: https://onnx.ai/onnx/operators/.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.graph import Value
from ...ir.shape_values import shape_value
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import ONNX, checked_attrs, required_input


def run_time_operands(g: MapContext, indices: Sequence[int]) -> bool:
    """Whether any of the node's inputs ``indices`` (present ones) is computed at run time."""
    for i in indices:
        v = g.input(i)
        if v is not None and v.data is None:
            return True
    return False


#: The Dynamic* ops that declare their shape operand's value as dims where the graph says it.
HINTED = ("Reshape", "Expand", "ConstantOfShape", "Range")


def dynamic(g: MapContext, static: str, data: Sequence[Value | None],
            operands: Sequence[Value | None], **attrs: Any) -> Any:
    """``Dynamic<static>`` over ``data`` with the run-time ``operands`` (None where absent)."""
    if static in HINTED:
        # Range's three scalars, the others' one shape operand
        values = [shape_value(v) for v in (operands if static == "Range" else operands[:1])]
        dims = [d for v in values if v is not None for d in v]
        if all(v is not None for v in values) and (static != "Range" or len(dims) == 3):
            attrs["hint"] = tuple(str(d) for d in dims)
    return g.op(f"Dynamic{static}", [*data, *operands], **attrs)


@mapping(ONNX, "NonZero", since_opset=9)
def nonzero(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    return g.op("NonZero", [required_input(g, 0, "X")])


@mapping(ONNX, "NonMaxSuppression", since_opset=10)
def non_max_suppression(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("center_point_box",))
    ins = [required_input(g, 0, "boxes"), required_input(g, 1, "scores")]
    ins += [g.input(i) for i in range(2, 5)]
    return g.op("NonMaxSuppression", ins, center_point_box=int(a.get("center_point_box", 0)))


@mapping(ONNX, "Unique", since_opset=11)
def unique(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axis", "sorted"))
    x = required_input(g, 0, "X")
    axis = a.get("axis")
    if axis is not None and not -len(x.shape) <= int(axis) < len(x.shape):
        raise g.error(f"= {axis} is out of range for rank {len(x.shape)}", attr="axis")
    outs = g.op("Unique", [x], num_outputs=4, axis=None if axis is None else int(axis),
                sorted=int(a.get("sorted", 1)))
    return list(outs)[:len(node.outputs)]
