"""Spatial sampling: grid_sample (aten::grid_sampler*) and fold (aten::col2im).

``F.grid_sample`` traces to ``aten::grid_sampler(input, grid, interpolation_mode,
padding_mode, align_corners)`` with the modes as ints (ATen's GridSamplerInterpolation and
GridSamplerPadding enums); the IR's GridSample means the same (ONNX took the op from PyTorch).
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, ts_mapping

#: ATen's GridSamplerInterpolation and GridSamplerPadding (aten/src/ATen/native/GridSampler.h).
INTERPOLATION = {0: "linear", 1: "nearest", 2: "cubic"}
PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _enum(g: MapContext, value: int, table: dict[int, str], what: str) -> str:
    if value not in table:
        raise g.error(f"= {value}: not one of {', '.join(f'{k} ({v})' for k, v in table.items())}",
                      attr=what, hint="export the model again with a mode torch documents")
    return table[value]


@ts_mapping("grid_sampler", "grid_sampler_2d", "grid_sampler_3d")
def grid_sampler(node: OriginNode, g: MapContext) -> Any:
    # (input, grid, interpolation_mode, padding_mode, align_corners)
    a = Args(node, g)
    x, grid = a.tensor(0, "input"), a.tensor(1, "grid")
    mode = _enum(g, a.int(2, what="interpolation_mode"), INTERPOLATION, "interpolation_mode")
    padding = _enum(g, a.int(3, what="padding_mode"), PADDING, "padding_mode")
    align = int(bool(a.py(4, False, "align_corners")))
    return g.op("GridSample", [x, grid], mode=mode, padding_mode=padding, align_corners=align)
