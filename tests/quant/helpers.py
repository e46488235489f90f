"""Models and references the quantization tests share."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from opbridge.examples.onnx_models import small_cnn_onnx


def cnn_model() -> onnx.ModelProto:
    """The bundled small CNN (Conv, LeakyRelu, MaxPool, Relu, Add, Concat, GAP, Gemm, Softmax)."""
    return small_cnn_onnx(0)


def feeds(n: int, seed: int = 1, shape: tuple[int, ...] = (1, 3, 16, 16)) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"image": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]


def ort_all_tensors(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of ``model`` as onnxruntime computes it (the outside reference)."""
    import onnxruntime as ort

    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for out in node.output:
            if out and out not in known:
                m.graph.output.append(onnx.ValueInfoProto(name=out))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return {**feed, **dict(zip(names, sess.run(names, feed)))}


def ort_outputs(model_bytes: bytes, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def cos(a: np.ndarray, b: np.ndarray) -> float:
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def scheme_weights(w: np.ndarray, b: np.ndarray, x_scale: float | np.ndarray, w_name: str, b_name: str,
                   sep: str = "__", dq: str = "dq", axis: int = 0,
                   ) -> tuple[list[onnx.TensorProto], list[onnx.NodeProto], list[str]]:
    """A layer's weights and bias as the int8 scheme defines them, written as ONNX for a QDQ
    reference model: symmetric int8 per output channel (axis 0) at ``max|W| / 127``, the bias
    int32 at ``x_scale * w_scale``. Returns the initializers (``NAME{sep}q``, ``NAME{sep}s``),
    the two DequantizeLinear nodes and their outputs (``NAME{sep}{dq}``, weight then bias)."""
    ws = (np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 127).astype(np.float32)
    wq = np.clip(np.round(w / ws.reshape(-1, *([1] * (w.ndim - 1)))), -127, 127).astype(np.int8)
    bs = (np.broadcast_to(x_scale, ws.shape) * ws).astype(np.float32)
    bq = np.round(b / bs).astype(np.int32)
    inits = [numpy_helper.from_array(wq, f"{w_name}{sep}q"), numpy_helper.from_array(ws, f"{w_name}{sep}s"),
             numpy_helper.from_array(bq, f"{b_name}{sep}q"), numpy_helper.from_array(bs, f"{b_name}{sep}s")]
    outs = [f"{w_name}{sep}{dq}", f"{b_name}{sep}{dq}"]
    nodes = [helper.make_node("DequantizeLinear", [f"{w_name}{sep}q", f"{w_name}{sep}s"], [outs[0]], axis=axis),
             helper.make_node("DequantizeLinear", [f"{b_name}{sep}q", f"{b_name}{sep}s"], [outs[1]], axis=0)]
    return inits, nodes, outs
