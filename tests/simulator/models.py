"""Test models for the simulator: ResNet-style networks built with ``onnx.helper``.

Random weights from a fixed seed (He-initialised convolutions, batch norms near identity),
so activations stay in a sane range through 50 layers and f32 comparisons are meaningful.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Net:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, base: str, arr: np.ndarray) -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), n))
        return n

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        w = self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        wn = self.const("w", w)
        y = self.name("conv")
        p = k // 2
        self.nodes.append(helper.make_node("Conv", [x, wn], [y], name=y, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[p, p, p, p]))
        scale = self.const("bn_s", 0.5 + 0.5 * self.rng.random(cout))
        bias = self.const("bn_b", 0.1 * self.rng.standard_normal(cout))
        mean = self.const("bn_m", 0.1 * self.rng.standard_normal(cout))
        var = self.const("bn_v", 0.5 + self.rng.random(cout))
        z = self.name("bn")
        self.nodes.append(helper.make_node("BatchNormalization", [y, scale, bias, mean, var], [z],
                                           name=z, epsilon=1e-5))
        if not relu:
            return z
        r = self.name("relu")
        self.nodes.append(helper.make_node("Relu", [z], [r], name=r))
        return r

    def bottleneck(self, x: str, cin: int, mid: int, stride: int) -> str:
        cout = mid * 4
        y = self.conv_bn(x, cin, mid, 1, 1, True)
        y = self.conv_bn(y, mid, mid, 3, stride, True)
        y = self.conv_bn(y, mid, cout, 1, 1, False)
        sc = x if (stride == 1 and cin == cout) else self.conv_bn(x, cin, cout, 1, stride, False)
        a = self.name("add")
        self.nodes.append(helper.make_node("Add", [y, sc], [a], name=a))
        r = self.name("relu")
        self.nodes.append(helper.make_node("Relu", [a], [r], name=r))
        return r


def resnet_onnx(depths=(3, 4, 6, 3), width: int = 64, image: int = 224, batch: int = 1,
                classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """A bottleneck ResNet (ResNet-50 with the defaults) as an ONNX model, opset 17."""
    net = _Net(seed)
    y = net.conv_bn("data", 3, width, 7, 2, True)
    p = net.name("pool")
    net.nodes.append(helper.make_node("MaxPool", [y], [p], name=p, kernel_shape=[3, 3],
                                      strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = p, width
    for stage, n in enumerate(depths):
        mid = width * 2**stage
        for i in range(n):
            x = net.bottleneck(x, cin, mid, 2 if (i == 0 and stage > 0) else 1)
            cin = mid * 4
    gap = net.name("gap")
    net.nodes.append(helper.make_node("GlobalAveragePool", [x], [gap], name=gap))
    fl = net.name("flatten")
    net.nodes.append(helper.make_node("Flatten", [gap], [fl], name=fl, axis=1))
    fw = net.const("fc_w", net.rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin))
    fb = net.const("fc_b", 0.01 * net.rng.standard_normal(classes))
    net.nodes.append(helper.make_node("Gemm", [fl, fw, fb], ["prob"], name="fc", transB=1))
    graph = helper.make_graph(
        net.nodes, "resnet",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, image, image])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [batch, classes])],
        net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _direct_ir(model: onnx.ModelProto):
    """The IR of a model using only the ops above, built node by node with GraphBuilder.

    Used while the ONNX frontend lacks a mapping for one of them; attribute names are ONNX's,
    which the IR shares (DESIGN.md).
    """
    import opbridge as ob

    b = ob.GraphBuilder(model.graph.name)
    vals = {}
    for t in model.graph.initializer:
        vals[t.name] = b.constant(t.name, numpy_helper.to_array(t))
    for i in model.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        vals[i.name] = b.input(i.name, "f32", dims)
    for n in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Gemm":
            attrs = {"transB": attrs.get("transB", 0)}
        y = b.op(n.op_type, [vals[x] for x in n.input], name=n.name, outputs=[n.output[0]], **attrs)
        vals[n.output[0]] = y
    b.output(*[vals[o.name] for o in model.graph.output])
    return b.build()


def to_ir(model: onnx.ModelProto):
    """``ob.convert(model)``, or the direct build while the frontend cannot map the model."""
    import opbridge as ob

    try:
        return ob.convert(model)
    except ob.UnsupportedOpError:
        return _direct_ir(model)
