"""Small bundled example models, built in code so they need no files."""

from __future__ import annotations

import numpy as np

from .ir import Graph, GraphBuilder


def tiny_cnn(seed: int = 0) -> Graph:
    """A few layers that exercise the core ops; weights from a fixed seed."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("tiny_cnn")
    x = b.input("data", "f32", (1, 3, 8, 8))
    bias = b.constant("bias", rng.standard_normal((1, 3, 1, 1)).astype(np.float32))
    y = b.op("Add", [x, bias], name="add_bias")
    b.output(b.op("Relu", [y], name="relu1", outputs=["prob"]))
    return b.build()
