"""The time step of the recurrent cells (RNN, GRU, LSTM) in IR primitives, in ONNX's gate
orders, shared by every framework's recurrent mappings (a framework with other gate orders
reorders its weights first).

Follows https://onnx.ai/onnx/operators/onnx__LSTM.html (and GRU, RNN): gate orders ``[i o f c]``
(LSTM), ``[z r h]`` (GRU); peepholes ``[Pi Po Pf]``; ``clip`` bounds gate pre-activations;
``linear_before_reset`` (GRU); ``input_forget`` (LSTM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir.graph import Value
from .context import MapContext


def pick(g: MapContext, v: Value, index: int, axis: int = 0) -> Value:
    """v[index] along ``axis`` (that axis removed)."""
    return g.op("Squeeze", [g.op("Slice", [v], starts=[index], ends=[index + 1], axes=[axis])], axes=[axis])


def gate_rows(g: MapContext, v: Value, k: int, size: int, axis: int) -> Value:
    """Gate ``k`` of ``v``: the ``size`` entries from ``k * size`` along ``axis``."""
    return g.op("Slice", [v], starts=[k * size], ends=[(k + 1) * size], axes=[axis])


@dataclass
class Cell:
    """What one direction's time loop needs: its sizes, activations and per-direction weights."""

    g: MapContext
    hidden: int
    dtype: str
    acts: list[Callable[[Value], Value]]
    clip: float | None
    linear_before_reset: bool
    input_forget: bool
    rt: Value                  # R of this direction, transposed: [H, G*H]
    rb_sep: Value | None       # GRU with linear_before_reset keeps Rb inside the reset product
    peep: Value | None

    def gate(self, v: Value) -> Value:
        """``clip`` bounds every gate pre-activation."""
        g = self.g
        return g.op("Clip", [v], min=-float(self.clip), max=float(self.clip)) if self.clip is not None else v

    def part(self, v: Value, k: int) -> Value:
        return gate_rows(self.g, v, k, self.hidden, 1)

    def one(self) -> Value:
        return self.g.constant(np.ones((), np_dtype(self.dtype)))


def rnn_step(cell: Cell, xt: Value, h: Value, c: Value | None) -> tuple[Value, Value | None]:
    g = cell.g
    return cell.acts[0](cell.gate(g.op("Add", [xt, g.op("MatMul", [h, cell.rt])]))), None


def gru_step(cell: Cell, xt: Value, h: Value, c: Value | None) -> tuple[Value, Value | None]:
    g, f, part = cell.g, cell.acts, cell.part
    hr = g.op("MatMul", [h, cell.rt])
    if cell.rb_sep is not None:
        hr = g.op("Add", [hr, cell.rb_sep])
    z = f[0](cell.gate(g.op("Add", [part(xt, 0), part(hr, 0)])))
    rr = f[0](cell.gate(g.op("Add", [part(xt, 1), part(hr, 1)])))
    if cell.linear_before_reset:
        pre = g.op("Add", [part(xt, 2), g.op("Mul", [rr, part(hr, 2)])])
    else:
        rh = g.op("MatMul", [g.op("Mul", [rr, h]), gate_rows(g, cell.rt, 2, cell.hidden, 1)])
        pre = g.op("Add", [part(xt, 2), rh])
    hh = f[1](cell.gate(pre))
    return g.op("Add", [g.op("Mul", [g.op("Sub", [cell.one(), z]), hh]), g.op("Mul", [z, h])]), None


def lstm_step(cell: Cell, xt: Value, h: Value, c: Value | None) -> tuple[Value, Value | None]:
    g, f, p = cell.g, cell.acts, cell.peep
    assert c is not None  # the caller always gives an LSTM its cell state
    gates = g.op("Add", [xt, g.op("MatMul", [h, cell.rt])])
    gi, go, gf, gc = (cell.part(gates, k) for k in range(4))

    def peephole(k: int, v: Value, state: Value) -> Value:
        return v if p is None else g.op("Add", [v, g.op("Mul", [gate_rows(g, p, k, cell.hidden, 0), state])])

    i_t = f[0](cell.gate(peephole(0, gi, c)))
    f_t = g.op("Sub", [cell.one(), i_t]) if cell.input_forget else f[0](cell.gate(peephole(2, gf, c)))
    c = g.op("Add", [g.op("Mul", [f_t, c]), g.op("Mul", [i_t, f[1](cell.gate(gc))])])
    o_t = f[0](cell.gate(peephole(1, go, c)))
    return g.op("Mul", [o_t, f[2](c)]), c


#: One time step of each cell: ``(cell, x_t projected, h, c) -> (h', c' or None)``.
STEPS = {"RNN": rnn_step, "GRU": gru_step, "LSTM": lstm_step}


def np_dtype(dtype: str) -> np.dtype:
    from ..ir.types import to_numpy_dtype

    return to_numpy_dtype(dtype)
