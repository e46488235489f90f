"""Small bundled example models: built in code, or shipped as package data (``fire_net.prototxt``).

- :func:`tiny_cnn`: an IR graph built with GraphBuilder;
- :func:`small_cnn_onnx` / :func:`write_small_cnn_onnx`: an ONNX model built with ``onnx.helper``;
- :func:`fire_net_prototxt`: a Caffe deploy prototxt in the style of SqueezeNet's fire modules
  (weights come from the Caffe random-weights generator with a fixed seed).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from ..ir import Graph, GraphBuilder
from .onnx_models import small_cnn_onnx, write_small_cnn_onnx

__all__ = ["fire_net_prototxt", "small_cnn_onnx", "tiny_cnn", "write_small_cnn_onnx"]


def tiny_cnn(seed: int = 0) -> Graph:
    """A few layers that exercise the core ops; weights from a fixed seed."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("tiny_cnn")
    x = b.input("data", "f32", (1, 3, 8, 8))
    bias = b.constant("bias", rng.standard_normal((1, 3, 1, 1)).astype(np.float32))
    y = b.op("Add", [x, bias], name="add_bias")
    b.output(b.op("Relu", [y], name="relu1", outputs=["prob"]))
    return b.build()


def fire_net_prototxt() -> Path:
    """The path of the bundled ``fire_net.prototxt`` (1x3x32x32 ``data`` -> 10-way ``prob``)."""
    return Path(str(resources.files(__name__).joinpath("fire_net.prototxt")))
