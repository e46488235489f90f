"""CTPN's ``Lstm`` layer (tianzhi0549/CTPN caffe/src/caffe/layers/lstm_layer.cpp), unrolled
over time into IR ops. Unlike BVLC's ``LSTM`` it takes no ``cont`` bottom: every sequence
starts from zero state at t = 0."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params

#: Unrolling emits about a dozen IR ops per step; a longer sequence is refused up front.
MAX_STEPS = 4096


def _step(g: Any, pre: Value, h: Value | None, c: Value | None, wh_t: Value,
          hidden: int) -> tuple[Value, Value]:
    """One step: gates i, f, o (sigmoid), g (tanh) in that order along the 4H axis; with no
    previous state (t = 0) Caffe skips h_{t-1} W_h and zeroes the forget gate."""
    if h is not None:
        pre = g.op("Add", [pre, g.op("MatMul", [h, wh_t])])
    gi, gf, go, gg = g.op("Split", [pre], axis=1, split=[hidden] * 4, num_outputs=4)
    i, o, cand = g.op("Sigmoid", [gi]), g.op("Sigmoid", [go]), g.op("Tanh", [gg])
    c_new = g.op("Mul", [i, cand])
    if c is not None:
        c_new = g.op("Add", [g.op("Mul", [g.op("Sigmoid", [gf]), c]), c_new])
    return g.op("Mul", [o, g.op("Tanh", [c_new])]), c_new


@mapping(Framework.CAFFE, "Lstm")
def lstm(node: OriginNode, g: Any) -> Value:
    """Input (T, N, ...) read as (T, N, I); output (T, N, num_output). Blobs: W_x (4H, I),
    W_h (4H, H), b (4H,)."""
    p = Params(node, "lstm_param")
    x = g.input(0)
    if g.num_inputs > 1:
        raise g.unsupported("with a clip bottom (truncated back-propagation state carried over "
                            "between forward passes): only the single-bottom form is built in")
    if len(x.shape) < 3:
        raise g.error(f"input of rank {len(x.shape)}: expected (T, N, ...)")
    t, n = int(x.shape[0]), int(x.shape[1])
    i_dim = int(np.prod(x.shape[2:]))
    if not p.has("num_output"):
        raise p.error("num_output", None, "required")
    hidden = int(p.get("num_output"))
    if hidden < 1:
        raise p.error("num_output", hidden, "must be >= 1")
    if t > MAX_STEPS:
        raise g.unsupported(f"a sequence of {t} steps (more than {MAX_STEPS} unrolled)")
    wx = g.weight_array(0, (4 * hidden, i_dim), kind="linear", fan_in=i_dim)
    wh = g.weight_array(1, (4 * hidden, hidden), kind="linear", fan_in=hidden)
    b = g.weight_array(2, (4 * hidden,), kind="bias")
    flat = g.op("Reshape", [x], shape=(t * n, i_dim))
    pre_all = g.op("Gemm", [flat, g.constant(wx), g.constant(b)], transB=1)
    pre_all = g.op("Reshape", [pre_all], shape=(t, n, 4 * hidden))
    steps = g.op("Split", [pre_all], axis=0, split=[1] * t, num_outputs=t) if t > 1 else (pre_all,)
    wh_t = g.constant(np.ascontiguousarray(wh.T))
    h: Value | None = None
    c: Value | None = None
    outs = []
    for s in steps:
        h, c = _step(g, g.op("Reshape", [s], shape=(n, 4 * hidden)), h, c, wh_t, hidden)
        outs.append(g.op("Reshape", [h], shape=(1, n, hidden)))
    return outs[0] if t == 1 else g.op("Concat", outs, axis=0)
