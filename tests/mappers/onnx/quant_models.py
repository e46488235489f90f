"""Small float ONNX models built with onnx.helper, and their int8 versions written by
onnxruntime's own quantizer (``onnxruntime.quantization.quantize_static``, per channel), for the
quantized-import, fold_qdq and end-to-end tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

F32 = np.float32


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr.astype(F32), name)


def cnn(seed: int = 0) -> onnx.ModelProto:
    """Conv/Relu, a residual Add, MaxPool, a strided Conv with SiLU (Sigmoid * x), average pools,
    Concat, Flatten, Gemm: the ops onnxruntime's QDQ and QOperator formats cover."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w3", "b3"], ["c3"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c3"], ["s3"]),
        helper.make_node("Mul", ["c3", "s3"], ["m3"]),
        helper.make_node("AveragePool", ["m3"], ["ap"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Conv", ["ap", "w4", "b4"], ["c4"]),
        helper.make_node("LeakyRelu", ["c4"], ["l4"], alpha=0.1),
        helper.make_node("Concat", ["l4", "ap"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [_init("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3), _init("b1", rng.standard_normal(8) * 0.1),
             _init("w2", rng.standard_normal((8, 8, 3, 3)) * 0.2), _init("b2", rng.standard_normal(8) * 0.1),
             _init("w3", rng.standard_normal((16, 8, 3, 3)) * 0.2), _init("b3", rng.standard_normal(16) * 0.1),
             _init("w4", rng.standard_normal((8, 16, 1, 1)) * 0.3), _init("b4", rng.standard_normal(8) * 0.1),
             _init("wf", rng.standard_normal((10, 24)) * 0.3), _init("bf", rng.standard_normal(10) * 0.1)]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [1, 10])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def mlp(seed: int = 1) -> onnx.ModelProto:
    """MatMul + Add bias + Relu, twice, then MatMul: a batch of 4 rows of 32 features."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"]), helper.make_node("Add", ["h1", "b1"], ["h1b"]),
             helper.make_node("Relu", ["h1b"], ["r1"]), helper.make_node("MatMul", ["r1", "w2"], ["h2"]),
             helper.make_node("Add", ["h2", "b2"], ["h2b"]), helper.make_node("Relu", ["h2b"], ["r2"]),
             helper.make_node("MatMul", ["r2", "w3"], ["y"])]
    inits = [_init("w1", rng.standard_normal((32, 64)) * 0.2), _init("b1", rng.standard_normal(64) * 0.1),
             _init("w2", rng.standard_normal((64, 48)) * 0.15), _init("b2", rng.standard_normal(48) * 0.1),
             _init("w3", rng.standard_normal((48, 10)) * 0.2)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4, 10])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def samples(model: onnx.ModelProto, n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return [{inp.name: rng.standard_normal(shape).astype(F32)} for _ in range(n)]


def quantize_with_ort(model: onnx.ModelProto, folder: Path, fmt: str, *, name: str = "model",
                      calibration: int = 8) -> Path:
    """``model`` quantized by onnxruntime (uint8 activations, int8 weights per channel) in
    ``fmt`` "QDQ" or "QOperator"; returns the written file."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples(model, calibration, seed=100))

        def get_next(self) -> Any:
            return next(self.it, None)

    src, dst = folder / f"{name}.onnx", folder / f"{name}.{fmt}.onnx"
    onnx.save(model, src)
    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return dst


def run_ort(path: Path, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = outputs or [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
