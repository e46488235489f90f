"""``aten::gru`` and ``aten::gru_cell``, unrolled over the static sequence into IR primitives.

Follows torch.nn.GRU (https://pytorch.org/docs/stable/generated/torch.nn.GRU.html): gate rows
``[r z n]`` in ``weight_ih`` / ``weight_hh``, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
(ONNX's ``linear_before_reset=1``), ``h' = (1 - z) * n + z * h``. The flat parameter list holds,
per layer and direction (forward, then reverse), ``w_ih, w_hh`` and, with biases, ``b_ih, b_hh``.
Layer ``l > 0`` reads the concatenated directions of layer ``l - 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.types import to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, static_shape, ts_mapping


def _rows(g: MapContext, v: Value, k: int, size: int) -> Value:
    """Gate ``k`` of a [.., 3*size] value (along its last axis)."""
    return g.op("Slice", [v], starts=[k * size], ends=[(k + 1) * size], axes=[len(v.shape) - 1])


def _step(g: MapContext, x_proj: Value, h: Value, w_hh_t: Value, b_hh: Value | None,
          hidden: int) -> Value:
    """One GRU step: ``x_proj`` is W_ih x + b_ih [B, 3H], ``h`` the state [B, H]."""
    h_proj = g.op("MatMul", [h, w_hh_t])
    if b_hh is not None:
        h_proj = g.op("Add", [h_proj, b_hh])
    r = g.op("Sigmoid", [g.op("Add", [_rows(g, x_proj, 0, hidden), _rows(g, h_proj, 0, hidden)])])
    z = g.op("Sigmoid", [g.op("Add", [_rows(g, x_proj, 1, hidden), _rows(g, h_proj, 1, hidden)])])
    n = g.op("Tanh", [g.op("Add", [_rows(g, x_proj, 2, hidden),
                                   g.op("Mul", [r, _rows(g, h_proj, 2, hidden)])])])
    one = g.constant(np.ones((), dtype=to_numpy_dtype(h.dtype)))
    return g.op("Add", [g.op("Mul", [g.op("Sub", [one, z]), n]), g.op("Mul", [z, h])])


def _weights(g: MapContext, params: list[Any]) -> list[Value]:
    """The flat parameter list as Values (a frozen module's weights are one list constant)."""
    return [p if isinstance(p, Value) else g.constant(np.asarray(p)) for p in params]


def _direction(g: MapContext, x: Value, h: Value, w: list[Value], reverse: bool,
               hidden: int) -> tuple[Value, Value]:
    """One layer, one direction over x [T, B, I]: (outputs [T, B, H], last state [B, H])."""
    w_ih, w_hh = w[0], w[1]
    b_ih, b_hh = (w[2], w[3]) if len(w) == 4 else (None, None)
    x_proj = g.op("MatMul", [x, g.op("Transpose", [w_ih], perm=[1, 0])])  # [T, B, 3H]
    if b_ih is not None:
        x_proj = g.op("Add", [x_proj, b_ih])
    w_hh_t = g.op("Transpose", [w_hh], perm=[1, 0])
    steps = static_shape(g, x)[0]
    if steps == 0:
        raise g.error("the input sequence is empty", hint="feed at least one step")
    outs: list[Value | None] = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        xt = g.op("Squeeze", [g.op("Slice", [x_proj], starts=[t], ends=[t + 1], axes=[0])], axes=[0])
        h = _step(g, xt, h, w_hh_t, b_hh, hidden)
        outs[t] = h
    parts = [g.op("Unsqueeze", [v], axes=[0]) for v in outs if v is not None]
    return (parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0)), h


@ts_mapping("aten::gru")
def gru(node: OriginNode, g: MapContext) -> Any:
    """aten::gru.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first) -> (output, h_n)."""
    a = Args(node, g)
    x, hx = a.tensor(0, "input"), a.tensor(1, "hx")
    params = a.tensor_list(2, "params") if isinstance(a.spec[2], list) else a.py(2, what="params")
    has_biases, layers = bool(a.py(3)), a.int(4, what="num_layers")
    if bool(a.py(6)):
        raise g.unsupported("a GRU in training mode (dropout between layers) is not converted",
                            hint="export the module in eval() mode")
    ndir = 2 if bool(a.py(7)) else 1
    per = 4 if has_biases else 2
    if len(params) != layers * ndir * per:
        raise g.error(f"has {len(params)} weight tensors; {layers} layer(s) x {ndir} direction(s) "
                      f"take {layers * ndir * per}")
    w = _weights(g, list(params))
    hidden = static_shape(g, hx)[2]
    if bool(a.py(8)):  # batch_first
        x = g.op("Transpose", [x], perm=[1, 0, 2])
    last = []
    for layer in range(layers):
        ys = []
        for d in range(ndir):
            k = layer * ndir + d
            h0 = g.op("Squeeze", [g.op("Slice", [hx], starts=[k], ends=[k + 1], axes=[0])], axes=[0])
            y, h = _direction(g, x, h0, w[k * per:(k + 1) * per], d == 1, hidden)
            ys.append(y)
            last.append(g.op("Unsqueeze", [h], axes=[0]))
        x = ys[0] if ndir == 1 else g.op("Concat", ys, axis=2)
    y = g.op("Transpose", [x], perm=[1, 0, 2]) if bool(a.py(8)) else x
    h_n = last[0] if len(last) == 1 else g.op("Concat", last, axis=0)
    return [y, h_n]


@ts_mapping("aten::gru_cell")
def gru_cell(node: OriginNode, g: MapContext) -> Any:
    """aten::gru_cell(input [B, I], hx [B, H], w_ih, w_hh, b_ih?, b_hh?) -> h'."""
    a = Args(node, g)
    x, h = a.tensor(0, "input"), a.tensor(1, "hx")
    w_ih, w_hh = a.tensor(2, "w_ih"), a.tensor(3, "w_hh")
    b_ih, b_hh = a.optional_tensor(4), a.optional_tensor(5)
    x_proj = g.op("MatMul", [x, g.op("Transpose", [w_ih], perm=[1, 0])])
    if b_ih is not None:
        x_proj = g.op("Add", [x_proj, b_ih])
    return _step(g, x_proj, h, g.op("Transpose", [w_hh], perm=[1, 0]), b_hh, static_shape(g, h)[-1])
