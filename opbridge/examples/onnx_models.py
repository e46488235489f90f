"""The bundled ONNX example: a small CNN built with ``onnx.helper``, weights from a fixed seed."""

from __future__ import annotations

import os

import numpy as np


def small_cnn_onnx(seed: int = 0):  # -> onnx.ModelProto (onnx is imported lazily)
    """A residual CNN on a 1x3x16x16 ``image``: Conv, LeakyRelu (alpha 0.2), MaxPool, Relu, Add,
    Concat, GlobalAveragePool, Flatten, Gemm, Softmax; opset 13."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        arr = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return numpy_helper.from_array(arr, name)

    inits = [
        w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8),
        w("conv2a.w", 8, 8, 1, 1), w("conv2a.b", 8),
        w("conv2b.w", 8, 8, 3, 3), w("conv2b.b", 8),
        w("fc.w", 10, 16), w("fc.b", 10),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "conv1.w", "conv1.b"], ["conv1_out"], name="conv1", pads=[1, 1, 1, 1]),
        n("LeakyRelu", ["conv1_out"], ["leaky1_out"], name="leaky1", alpha=0.2),
        n("MaxPool", ["leaky1_out"], ["pool1_out"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["pool1_out", "conv2a.w", "conv2a.b"], ["conv2a_out"], name="conv2a"),
        n("Relu", ["conv2a_out"], ["relu2a_out"], name="relu2a"),
        n("Conv", ["relu2a_out", "conv2b.w", "conv2b.b"], ["conv2b_out"], name="conv2b",
          pads=[1, 1, 1, 1]),
        n("Add", ["pool1_out", "conv2b_out"], ["res_out"], name="residual"),
        n("Relu", ["res_out"], ["relu2_out"], name="relu2"),
        n("Concat", ["relu2_out", "relu2a_out"], ["cat_out"], name="concat", axis=1),
        n("GlobalAveragePool", ["cat_out"], ["gap_out"], name="gap"),
        n("Flatten", ["gap_out"], ["flat_out"], name="flatten", axis=1),
        n("Gemm", ["flat_out", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        n("Softmax", ["logits"], ["prob"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    # IR version 8 (onnx 1.10+): readable by every onnxruntime the 'validate' extra allows.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8,
                              producer_name="opbridge.examples")
    onnx.checker.check_model(model)
    return model


def write_small_cnn_onnx(path: str | os.PathLike[str], seed: int = 0) -> str:
    """Write the example to ``path``; returns the path as a string."""
    import onnx

    onnx.save(small_cnn_onnx(seed), str(path))
    return str(path)
