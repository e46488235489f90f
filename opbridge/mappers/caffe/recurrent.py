"""Caffe's recurrent layers (BVLC master): LSTM, RNN and LSTMUnit, unrolled over the static
number of timesteps into plain IR ops.

Caffe builds each recurrent layer as an unrolled net (src/caffe/layers/recurrent_layer.cpp,
lstm_layer.cpp, rnn_layer.cpp); the mappings below emit the same computation:

* bottoms ``x`` (T, N, ...), ``cont`` (T, N) — the sequence-continuation flags: a 0 at step
  t starts a new sequence, zeroing the state carried from step t-1 —, an optional static
  input ``x_static`` (N, ...) added at every step, and with ``expose_hidden`` the initial
  state (h_0 for RNN; h_0, c_0 for LSTM, each (1, N, num_output));
* tops the per-step output (T, N, num_output) and, with ``expose_hidden``, the final state.

Without ``expose_hidden`` Caffe starts a freshly loaded net from a zero state and, on later
forward calls, from the previous call's final state; a converted graph is one stateless
forward, so it always starts from zeros (pass the state explicitly with expose_hidden to
carry it between runs).
"""

from __future__ import annotations

import math
from typing import Any

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params

CAFFE = Framework.CAFFE


class _Recurrent:
    """The bottoms, sizes and state inputs of an LSTM/RNN layer, as RecurrentLayer::LayerSetUp
    reads them (``states``: how many state blobs the layer's kind has)."""

    def __init__(self, node: OriginNode, g: Any, states: int) -> None:
        self.g = g
        p = Params(node, "recurrent_param")
        self.hidden = int(p.get("num_output"))
        if self.hidden < 1:
            raise p.error("num_output", self.hidden, "required, >= 1")
        self.expose = bool(p.get("expose_hidden"))
        exposed = states if self.expose else 0
        if g.num_inputs not in (2 + exposed, 3 + exposed):
            want = f"{2 + exposed} or {3 + exposed}"
            raise g.error(f"takes {want} bottoms (x, cont[, x_static]{', hidden state' * bool(exposed)}), "
                          f"got {g.num_inputs}")
        self.x, self.cont = g.input(0), g.input(1)
        if len(self.x.shape) < 2:
            raise g.error(f"bottom 0 (x) has shape {list(self.x.shape)}: needs (T, N, ...)")
        self.steps, self.batch = int(self.x.shape[0]), int(self.x.shape[1])
        if tuple(self.cont.shape) != (self.steps, self.batch):
            raise g.error(f"bottom 1 (cont) has shape {list(self.cont.shape)}: needs (T, N) = "
                          f"{[self.steps, self.batch]}")
        self.static = g.input(2) if g.num_inputs == 3 + exposed else None
        if self.static is not None and (not self.static.shape or int(self.static.shape[0]) != self.batch):
            raise g.error(f"bottom 2 (x_static) has shape {list(self.static.shape)}: needs (N, ...) "
                          f"with N = {self.batch}")
        first = 3 if self.static is not None else 2
        state_shape = (1, self.batch, self.hidden)
        #: The state before step 1, (N, hidden) each; None for a zero state (the terms it
        #: feeds are left out).
        self.initial: list[Value | None] = []
        for i in range(states):
            if self.expose:
                v = g.input(first + i)
                if tuple(v.shape) != state_shape:
                    raise g.error(f"bottom {first + i} (initial state) has shape {list(v.shape)}: "
                                  f"needs {list(state_shape)}")
                self.initial.append(g.op("Reshape", [v], shape=(self.batch, self.hidden)))
            else:
                self.initial.append(None)

    def input_transform(self, gates: int, w: Value, b: Value, w_static: Value | None) -> list[Value]:
        """W * x_t + b (+ W_static * x_static) for every step, each (N, gates * hidden)."""
        g, t, n = self.g, self.steps, self.batch
        k = math.prod(int(d) for d in self.x.shape[2:])
        flat = g.op("Reshape", [self.x], shape=(t * n, k))
        y = g.op("Gemm", [flat, w, b], transB=1)
        if w_static is not None and self.static is not None:
            ks = math.prod(int(d) for d in self.static.shape[1:])
            s = g.op("Gemm", [g.op("Reshape", [self.static], shape=(n, ks)), w_static], transB=1)
            y = g.op("Add", [g.op("Reshape", [y], shape=(t, n, gates * self.hidden)), s])
        y = g.op("Reshape", [y], shape=(t, n * gates * self.hidden))
        parts = self.split_steps(y)
        return [g.op("Reshape", [v], shape=(n, gates * self.hidden)) for v in parts]

    def split_steps(self, v: Value) -> list[Value]:
        """``v`` (T, ...) as T values (1, ...)."""
        if self.steps == 1:
            return [v]
        return list(self.g.op("Split", [v], axis=0, split=[1] * self.steps, num_outputs=self.steps))

    def conts(self) -> list[Value]:
        """cont_t as (N, 1) per step, to scale a (N, hidden) state."""
        return [self.g.op("Reshape", [c], shape=(self.batch, 1)) for c in self.split_steps(self.cont)]

    def sizes(self) -> tuple[int, int | None]:
        """The input size per step and the static input's size (None without one)."""
        k = math.prod(int(d) for d in self.x.shape[2:])
        ks = None if self.static is None else math.prod(int(d) for d in self.static.shape[1:])
        return k, ks

    def sequence(self, outs: list[Value]) -> Value:
        """Per-step (N, hidden) values stacked into (T, N, hidden)."""
        g = self.g
        steps = [g.op("Reshape", [o], shape=(1, self.batch, self.hidden)) for o in outs]
        return steps[0] if len(steps) == 1 else g.op("Concat", steps, axis=0)

    def final(self, v: Value) -> Value:
        return self.g.op("Reshape", [v], shape=(1, self.batch, self.hidden))


@mapping(CAFFE, "LSTM")
def lstm(node: OriginNode, g: Any) -> Any:
    """Caffe's LSTM (lstm_layer.cpp): gates (i, f, o, g) = W_xc x_t + b_c [+ W_xc_static
    x_static] + W_hc (cont_t * h_{t-1}); c_t = cont_t * f * c_{t-1} + i * g; h_t = o * tanh(c_t).
    Blobs W_xc (4H, K), b_c (4H), [W_xc_static (4H, K_static)], W_hc (4H, H)."""
    r = _Recurrent(node, g, states=2)
    hid = r.hidden
    k, ks = r.sizes()
    w_x = g.weight(0, (4 * hid, k), kind="linear", fan_in=k)
    b = g.weight(1, (4 * hid,), kind="bias")
    w_s = g.weight(2, (4 * hid, ks), kind="linear", fan_in=ks) if ks is not None else None
    w_h = g.weight(3 if ks is not None else 2, (4 * hid, hid), kind="linear", fan_in=hid)
    h, c = r.initial
    outs: list[Value] = []
    for gx, cont in zip(r.input_transform(4, w_x, b, w_s), r.conts()):
        pre = gx if h is None else g.op("Add", [gx, g.op("Gemm", [g.op("Mul", [h, cont]), w_h], transB=1)])
        i, f, o, gg = g.op("Split", [pre], axis=1, split=[hid] * 4, num_outputs=4)
        c_new = g.op("Mul", [g.op("Sigmoid", [i]), g.op("Tanh", [gg])])
        if c is not None:
            c_new = g.op("Add", [g.op("Mul", [g.op("Mul", [g.op("Sigmoid", [f]), cont]), c]), c_new])
        c = c_new
        h = g.op("Mul", [g.op("Sigmoid", [o]), g.op("Tanh", [c])])
        outs.append(h)
    seq = r.sequence(outs)
    return (seq, r.final(h), r.final(c)) if r.expose else seq


@mapping(CAFFE, "RNN")
def rnn(node: OriginNode, g: Any) -> Any:
    """Caffe's RNN (rnn_layer.cpp): h_t = tanh(W_xh x_t + b_h [+ W_xh_static x_static] +
    W_hh (cont_t * h_{t-1})); o_t = tanh(W_ho h_t + b_o). Blobs W_xh (H, K), b_h (H),
    [W_xh_static (H, K_static)], W_hh (H, H), W_ho (H, H), b_o (H)."""
    r = _Recurrent(node, g, states=1)
    hid = r.hidden
    k, ks = r.sizes()
    w_x = g.weight(0, (hid, k), kind="linear", fan_in=k)
    b_h = g.weight(1, (hid,), kind="bias")
    nxt = 2
    w_s = None
    if ks is not None:
        w_s = g.weight(2, (hid, ks), kind="linear", fan_in=ks)
        nxt = 3
    w_hh = g.weight(nxt, (hid, hid), kind="linear", fan_in=hid)
    w_ho = g.weight(nxt + 1, (hid, hid), kind="linear", fan_in=hid)
    b_o = g.weight(nxt + 2, (hid,), kind="bias")
    (h,) = r.initial
    outs: list[Value] = []
    for gx, cont in zip(r.input_transform(1, w_x, b_h, w_s), r.conts()):
        pre = gx if h is None else g.op("Add", [gx, g.op("Gemm", [g.op("Mul", [h, cont]), w_hh], transB=1)])
        h = g.op("Tanh", [pre])
        outs.append(g.op("Tanh", [g.op("Gemm", [h, w_ho, b_o], transB=1)]))
    seq = r.sequence(outs)
    return (seq, r.final(h)) if r.expose else seq


@mapping(CAFFE, "LSTMUnit")
def lstm_unit(node: OriginNode, g: Any) -> Any:
    """One LSTM step (lstm_unit_layer.cpp): bottoms c_{t-1} (1, N, D), the gate inputs
    (1, N, 4D) in the order i, f, o, g, and cont (1, N); tops c_t and h_t, each (1, N, D)."""
    if g.num_inputs != 3:
        raise g.error(f"takes 3 bottoms (c_prev, gate input, cont), got {g.num_inputs}")
    c_prev, x, cont = g.inputs()
    if len(c_prev.shape) != 3 or int(c_prev.shape[0]) != 1:
        raise g.error(f"bottom 0 (c_prev) has shape {list(c_prev.shape)}: needs (1, N, D)")
    n, d = int(c_prev.shape[1]), int(c_prev.shape[2])
    if tuple(x.shape) != (1, n, 4 * d) or tuple(cont.shape) != (1, n):
        raise g.error(f"bottoms have shapes {list(x.shape)} and {list(cont.shape)}: need "
                      f"{[1, n, 4 * d]} (gate input) and {[1, n]} (cont)")
    i, f, o, gg = g.op("Split", [x], axis=2, split=[d] * 4, num_outputs=4)
    f = g.op("Mul", [g.op("Sigmoid", [f]), g.op("Reshape", [cont], shape=(1, n, 1))])
    c = g.op("Add", [g.op("Mul", [f, c_prev]), g.op("Mul", [g.op("Sigmoid", [i]), g.op("Tanh", [gg])])])
    h = g.op("Mul", [g.op("Sigmoid", [o]), g.op("Tanh", [c])])
    return c, h
