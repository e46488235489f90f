"""A test plugin with two custom Caffe layers, for random weights through the mappings.

- ``DoubleUp``: nearest upsampling by 2. Its output shape comes only from its op's shape
  function, so a Convolution after it can be given weights only through the converter.
- ``ChannelGain``: x times a learned gain per channel, read as blob 0 with the shape the
  mapping expects (``g.weight(0, shape=(c, 1, 1), kind="scale")``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opbridge as ob
from opbridge.mappers import Framework, mapping

(
    ob.define_op("TestDoubleUp")
    .input("x", "T").output("y", "T")
    .type_param("T", ("f32",))
    .shape_fn(lambda ctx: ((*ctx.input_shape(0)[:2], ctx.input_shape(0)[2] * 2,
                            ctx.input_shape(0)[3] * 2), ctx.input_dtype(0)))
    .compute(lambda x: np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))
)


@mapping(Framework.CAFFE, "DoubleUp")
def double_up(node: ob.OriginNode, g: Any) -> Any:
    return g.op("TestDoubleUp", [g.input(0)])


@mapping(Framework.CAFFE, "ChannelGain")
def channel_gain(node: ob.OriginNode, g: Any) -> Any:
    x = g.input(0)
    return g.op("Mul", [x, g.weight(0, shape=(int(x.shape[1]), 1, 1), kind="scale")])
