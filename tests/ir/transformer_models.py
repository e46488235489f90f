"""A BERT-style encoder built with onnx.helper, op by op as ``torch.onnx.export`` writes one.

The node sequence follows what torch.onnx (opset 14) exports for HuggingFace's BertLayer:
Linear as MatMul + Add (bias first or second, both occur), heads split by Reshape + Transpose,
K transposed to [B, heads, D, S], scores divided by sqrt(D), the additive mask
``(1 - mask) * -10000``, Softmax on the last axis, LayerNorm spelt out (ReduceMean, Sub, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Add: LayerNormalization only exists from opset 17), and GELU
as ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (nn.GELU's export: Div, Erf, Add, Mul, Mul).
Weights are random, N(0, 0.02) as BERT initialises them.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op: str, inputs: list[str], **attrs) -> str:
        self.n += 1
        out = f"{op.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{op}_{self.n}", **attrs))
        return out

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.02) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def linear(self, x: str, name: str, k: int, n: int, bias_first: bool) -> str:
        y = self.op("MatMul", [x, self.weight(f"{name}.weight", (k, n))])
        b = self.weight(f"{name}.bias", (n,))
        return self.op("Add", [b, y] if bias_first else [y, b])

    def layernorm(self, x: str, name: str, hidden: int) -> str:
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean])
        p = self.op("Pow", [d, self.const(f"{name}.two", np.array(2.0, np.float32))])
        var = self.op("ReduceMean", [p], axes=[-1], keepdims=1)
        ve = self.op("Add", [var, self.const(f"{name}.eps", np.array(1e-12, np.float32))])
        n = self.op("Div", [d, self.op("Sqrt", [ve])])
        gamma = (1.0 + 0.1 * self.rng.standard_normal(hidden)).astype(np.float32)
        m = self.op("Mul", [n, self.const(f"{name}.weight", gamma)])
        return self.op("Add", [m, self.weight(f"{name}.bias", (hidden,), 0.1)])

    def gelu(self, x: str, name: str) -> str:
        d = self.op("Div", [x, self.const(f"{name}.sqrt2", np.array(math.sqrt(2.0), np.float32))])
        a = self.op("Add", [self.op("Erf", [d]), self.const(f"{name}.one", np.array(1.0, np.float32))])
        m = self.op("Mul", [x, a])
        return self.op("Mul", [m, self.const(f"{name}.half", np.array(0.5, np.float32))])


def _attention(b: _Builder, x: str, mask: str, i: int, *, batch: int, seq: int, hidden: int,
               heads: int) -> str:
    d = hidden // heads
    split = b.const(f"l{i}.split", np.array([batch, seq, heads, d], np.int64))
    q = b.op("Transpose", [b.op("Reshape", [b.linear(x, f"l{i}.q", hidden, hidden, i % 2 == 0),
                                            split])], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [b.linear(x, f"l{i}.k", hidden, hidden, i % 2 == 1),
                                            split])], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [b.linear(x, f"l{i}.v", hidden, hidden, False),
                                            split])], perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]),
                     b.const(f"l{i}.scale", np.array(math.sqrt(d), np.float32))])
    p = b.op("Softmax", [b.op("Add", [s, mask])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const(f"l{i}.merge", np.array([batch, seq, hidden], np.int64))])
    return b.linear(merged, f"l{i}.o", hidden, hidden, True)


def bert_onnx(layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 16, batch: int = 1,
              intermediate: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """A BERT encoder of ``layers`` layers: inputs ``hidden_states`` f32 [batch, seq, hidden]
    (the embeddings) and ``attention_mask`` f32 [batch, seq] (1 keep, 0 pad); output
    ``last_hidden_state``."""
    inter = intermediate or 4 * hidden
    b = _Builder(seed)
    m4 = b.op("Unsqueeze", ["attention_mask", b.const("mask.axes", np.array([1, 2], np.int64))])
    inv = b.op("Sub", [b.const("mask.one", np.array(1.0, np.float32)), m4])
    mask = b.op("Mul", [inv, b.const("mask.neg", np.array(-10000.0, np.float32))])
    x = "hidden_states"
    for i in range(layers):
        a = _attention(b, x, mask, i, batch=batch, seq=seq, hidden=hidden, heads=heads)
        x = b.layernorm(b.op("Add", [a, x]), f"l{i}.ln1", hidden)
        f = b.linear(b.gelu(b.linear(x, f"l{i}.ffn1", hidden, inter, False), f"l{i}.gelu"),
                     f"l{i}.ffn2", inter, hidden, i % 2 == 1)
        x = b.layernorm(b.op("Add", [f, x]), f"l{i}.ln2", hidden)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/output"))
    graph = helper.make_graph(
        b.nodes, "bert_encoder",
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, [batch, seq, hidden]),
         helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, seq])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [batch, seq, hidden])],
        b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def bert_feeds(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Embeddings N(0, 1) and a mask that pads the last quarter of each sequence."""
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    mask = np.ones(shape[:2], np.float32)
    mask[:, shape[1] - shape[1] // 4:] = 0.0
    return {"hidden_states": rng.standard_normal(shape).astype(np.float32), "attention_mask": mask}
