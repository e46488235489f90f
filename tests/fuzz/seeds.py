"""Small valid files of every input kind, written by the tests, that the fuzzer mutates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import opbridge as ob

PROTOTXT = b"""name: "fz"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


def onnx_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["y"], name="flat"),
    ]
    g = helper.make_graph(nodes, "fz", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 64])],
                          initializer=[w, shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def write_onnx(tmp: Path) -> Path:
    p = tmp / "seed.onnx"
    p.write_bytes(onnx_model().SerializeToString())
    return p


def write_caffe(tmp: Path) -> tuple[Path, Path]:
    from opbridge.tools.caffe_weights import write_random_weights

    proto = tmp / "seed.prototxt"
    proto.write_bytes(PROTOTXT)
    model = tmp / "seed.caffemodel"
    write_random_weights(proto, model, seed=0)
    return proto, model


def write_obprog(tmp: Path) -> Path:
    g = ob.convert(write_onnx(tmp))
    prog = ob.compile(g, target="bm1684")
    p = tmp / "seed.obprog"
    prog.save(p)
    return p


def write_ts_json(tmp: Path) -> Path:
    import torch

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    p = tmp / "seed.ts.json"
    ob.export_torchscript(net.eval(), (torch.zeros(1, 3, 8, 8),), p)
    return p
