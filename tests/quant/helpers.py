"""Models and references the quantization tests share."""

from __future__ import annotations

import numpy as np
import onnx

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
