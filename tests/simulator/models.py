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


def mobilenet_v2_onnx(image: int = 32, seed: int = 0) -> onnx.ModelProto:
    """Two MobileNetV2 inverted-residual blocks (1x1 expand, depthwise 3x3, 1x1 project,
    Clip as ReLU6, a residual Add), then GlobalAveragePool; opset 17."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(x: str, cin: int, cout: int, k: int, stride: int, group: int, act: bool, name: str) -> str:
        w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"{name}.w"))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}.b"))
        p = k // 2
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4,
                                      group=group))
        if not act:
            return name
        nodes.append(helper.make_node("Clip", [name, "zero", "six"], [name + ".relu6"], name=name + ".relu6"))
        return name + ".relu6"

    inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
    inits.append(numpy_helper.from_array(np.array(6.0, np.float32), "six"))
    x = conv("data", 3, 16, 3, 2, 1, True, "stem")
    y = conv(x, 16, 96, 1, 1, 1, True, "b1.expand")
    y = conv(y, 96, 96, 3, 1, 96, True, "b1.dw")
    y = conv(y, 96, 16, 1, 1, 1, False, "b1.project")
    nodes.append(helper.make_node("Add", [x, y], ["b1.add"], name="b1.add"))
    y = conv("b1.add", 16, 96, 1, 1, 1, True, "b2.expand")
    y = conv(y, 96, 96, 3, 2, 96, True, "b2.dw")
    y = conv(y, 96, 24, 1, 1, 1, False, "b2.project")
    nodes.append(helper.make_node("GlobalAveragePool", [y], ["pool"], name="pool"))
    graph = helper.make_graph(
        nodes, "mobilenet_v2_blocks",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, image, image])],
        [helper.make_tensor_value_info("pool", TensorProto.FLOAT, [1, 24, 1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def encoder_onnx(seq: int = 16, dim: int = 32, heads: int = 4, seed: int = 0) -> onnx.ModelProto:
    """One transformer encoder layer on [1, seq, dim]: multi-head self-attention (MatMul,
    Reshape, Transpose, Softmax), residuals, LayerNormalization, a GELU (Erf) MLP; opset 17."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def t(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32) if arr.dtype.kind == "f"
                                             else arr, name))
        return name

    def n(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    hd = dim // heads
    for nm in ("q", "k", "v", "o"):
        t(f"w{nm}", rng.standard_normal((dim, dim)) / np.sqrt(dim))
    t("w1", rng.standard_normal((dim, 2 * dim)) / np.sqrt(dim))
    t("w2", rng.standard_normal((2 * dim, dim)) / np.sqrt(2 * dim))
    t("g1", 1 + 0.1 * rng.standard_normal(dim))
    t("b1", 0.1 * rng.standard_normal(dim))
    t("g2", 1 + 0.1 * rng.standard_normal(dim))
    t("b2", 0.1 * rng.standard_normal(dim))
    t("heads_shape", np.array([1, seq, heads, hd], np.int64))
    t("flat_shape", np.array([1, seq, dim], np.int64))
    t("scale", np.array(1.0 / np.sqrt(hd)))
    t("half", np.array(0.5))
    t("one", np.array(1.0))
    t("rsqrt2", np.array(1.0 / np.sqrt(2.0)))
    proj = {}
    for nm in ("q", "k", "v"):
        m = n("MatMul", ["x", f"w{nm}"], f"{nm}_proj")
        r = n("Reshape", [m, "heads_shape"], f"{nm}_heads")
        proj[nm] = n("Transpose", [r], f"{nm}_t", perm=[0, 2, 1, 3] if nm != "k" else [0, 2, 3, 1])
    s = n("MatMul", [proj["q"], proj["k"]], "scores")
    s = n("Mul", [s, "scale"], "scores_scaled")
    a = n("Softmax", [s], "attn", axis=-1)
    c = n("MatMul", [a, proj["v"]], "context")
    c = n("Transpose", [c], "context_t", perm=[0, 2, 1, 3])
    c = n("Reshape", [c, "flat_shape"], "context_flat")
    o = n("MatMul", [c, "wo"], "attn_out")
    h = n("Add", ["x", o], "res1")
    h = n("LayerNormalization", [h, "g1", "b1"], "ln1", axis=-1, epsilon=1e-5)
    f = n("MatMul", [h, "w1"], "fc1")
    e = n("Erf", [n("Mul", [f, "rsqrt2"], "fc1_scaled")], "erf")
    f = n("Mul", [n("Mul", [f, "half"], "fc1_half"), n("Add", [e, "one"], "erf_1")], "gelu")
    f = n("MatMul", [f, "w2"], "fc2")
    h = n("Add", [h, f], "res2")
    n("LayerNormalization", [h, "g2", "b2"], "y", axis=-1, epsilon=1e-5)
    graph = helper.make_graph(
        nodes, "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, dim])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
