"""An opbridge plugin: two custom ONNX ops of the ``com.example`` domain.

Load it with ``opbridge convert model.onnx --plugin examples/plugins/onnx_custom_ops.py -o m.obir``,
``opbridge.convert(..., plugins=["examples/plugins/onnx_custom_ops.py"])`` or by putting its
folder on ``OPBRIDGE_PLUGIN_PATH``. Each op takes three registrations:

1. ``define_op``: the IR op's schema, shape function and reference compute (numpy);
2. ``register_custom_op``: the one-to-one mapping of the ONNX node's attributes onto it;
3. (optional) a simulator kernel; without one the op runs as a whole-tensor global layer.

- ``com.example::FooScale(x; scale=1.0, bias=0.0) -> x * scale + bias``
- ``com.example::BarShift(x; shift=0) -> x shifted by ``shift`` along the last axis (a roll)``
"""

from __future__ import annotations

import numpy as np

import opbridge as ob

FLOATS = ("f32", "f16", "f64")

(
    ob.define_op("FooScale")
    .doc("y = x * scale + bias (the com.example FooScale op)")
    .input("x", "T").output("y", "T")
    .param("scale", "float", default=1.0)
    .param("bias", "float", default=0.0)
    .type_param("T", FLOATS)
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(lambda x, scale, bias: (x * scale + bias).astype(x.dtype))
)

(
    ob.define_op("BarShift")
    .doc("roll x by 'shift' positions along its last axis (the com.example BarShift op)")
    .input("x", "T").output("y", "T")
    .param("shift", "int", default=0)
    .type_param("T", FLOATS)
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(lambda x, shift: np.roll(x, shift, axis=-1))
)


def parse_foo_scale(src: ob.OriginNode, dst) -> None:
    """ONNX attributes -> IR params; absent attributes take the op's defaults."""
    dst.set_attr("scale", float(src.get_attr("scale", 1.0)))
    dst.set_attr("bias", float(src.get_attr("bias", 0.0)))


def parse_bar_shift(src: ob.OriginNode, dst) -> None:
    dst.set_attr("shift", int(src.get_attr("shift", 0)))


(
    ob.register_custom_op("FooScale")
    .framework_type(ob.Framework.ONNX)
    .origin_op_type("com.example::FooScale")
    .parse_params_by_operator_fn(parse_foo_scale)
    .imply_type(ob.ImplyType.TPU)
)

(
    ob.register_custom_op("BarShift")
    .framework_type(ob.Framework.ONNX)
    .origin_op_type("com.example::BarShift")
    .parse_params_by_operator_fn(parse_bar_shift)
    .imply_type(ob.ImplyType.CPU)
)
