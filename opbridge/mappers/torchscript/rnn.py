"""``aten::lstm``, ``aten::gru``, ``aten::rnn_tanh``/``rnn_relu`` and the ``*_cell`` ops, unrolled
over the static sequence into IR primitives by the shared cell steps (``mappers/recurrent.py``).

Follows torch.nn.LSTM/GRU/RNN (https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html):
gate rows ``[i f g o]`` (LSTM) and ``[r z n]`` (GRU) in ``weight_ih``/``weight_hh``, reordered
here into ONNX's ``[i o f c]`` and ``[z r h]`` for the shared steps; a GRU keeps ``b_hn`` inside
the reset product (ONNX's ``linear_before_reset=1``). The flat parameter list holds, per layer and
direction (forward, then reverse), ``w_ih, w_hh``, with biases ``b_ih, b_hh``, and with an LSTM's
``proj_size`` ``w_hr`` (h = (o * tanh(c)) @ w_hr^T). Layer ``l > 0`` reads the concatenated
directions of layer ``l - 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..recurrent import STEPS, Cell, pick
from .common import Args, static_shape, ts_mapping

#: per kind: (the shared step, torch's gate k -> the ONNX gate at position k, activations)
_KINDS = {"lstm": ("LSTM", (0, 3, 1, 2), ("Sigmoid", "Tanh", "Tanh")),
          "gru": ("GRU", (1, 0, 2), ("Sigmoid", "Tanh")),
          "rnn_tanh": ("RNN", (0,), ("Tanh",)), "rnn_relu": ("RNN", (0,), ("Relu",))}


def _onnx_gates(g: MapContext, v: Value | None, kind: str) -> Value | None:
    """Rows (axis 0) of a weight or bias reordered from torch's gate order into ONNX's."""
    order = _KINDS[kind][1]
    if v is None or len(order) == 1:
        return v
    size = static_shape(g, v)[0] // len(order)
    if v.data is not None:  # a frozen module's weight: reorder the constant
        arr = np.asarray(v.data)
        return g.constant(np.concatenate([arr[k * size:(k + 1) * size] for k in order]))
    parts = [g.op("Slice", [v], starts=[k * size], ends=[(k + 1) * size], axes=[0]) for k in order]
    return g.op("Concat", parts, axis=0)


def _cell(g: MapContext, kind: str, w: list[Value | None], hidden: int, x: Value) -> tuple[Cell, Value]:
    """The shared cell for weights ``[w_ih, w_hh, b_ih, b_hh]`` (biases may be None), and the
    input projection x @ w_ih^T + bias [.., G*H] its steps read."""
    op, _, act_names = _KINDS[kind]
    w_ih, w_hh, b_ih, b_hh = (_onnx_gates(g, v, kind) for v in w)
    assert w_ih is not None and w_hh is not None
    rt = g.op("Transpose", [w_hh], perm=[1, 0])
    acts = [lambda v, name=name: g.op(name, [v]) for name in act_names]
    gru = op == "GRU"
    cell = Cell(g, hidden, rt.dtype, acts, None, gru, False, rt, b_hh if gru else None, None)
    xw = g.op("MatMul", [x, g.op("Transpose", [w_ih], perm=[1, 0])])
    # a GRU adds b_hh inside the reset product (the cell's rb_sep); the others add both here
    biases = [b for b in ((b_ih,) if gru else (b_ih, b_hh)) if b is not None]
    for b in biases:
        xw = g.op("Add", [xw, b])
    return cell, xw


def _direction(g: MapContext, kind: str, x: Value, state: tuple[Value, Value | None],
               w: list[Value | None], w_hr: Value | None, reverse: bool) -> tuple[Value, Value, Value | None]:
    """One layer, one direction over x [T, B, I]: (outputs [T, B, H'], last h, last c or None)."""
    hidden = static_shape(g, w[1])[0] // len(_KINDS[kind][1])  # type: ignore[arg-type]
    cell, xw = _cell(g, kind, w, hidden, x)  # xw: [T, B, G*H]
    proj = g.op("Transpose", [w_hr], perm=[1, 0]) if w_hr is not None else None
    steps = static_shape(g, x)[0]
    if steps == 0:
        raise g.error("the input sequence is empty", hint="feed at least one step")
    h, c = state
    outs: list[Value] = []
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        h, c = STEPS[_KINDS[kind][0]](cell, pick(g, xw, t), h, c)
        h = g.op("MatMul", [h, proj]) if proj is not None else h
        outs.append(g.op("Unsqueeze", [h], axes=[0]))
    outs = outs[::-1] if reverse else outs
    return (outs[0] if len(outs) == 1 else g.op("Concat", outs, axis=0)), h, c


def _params(g: MapContext, a: Args, k: int) -> list[Value]:
    """The flat parameter list as Values (a frozen module's weights may be one list constant)."""
    params = a.tensor_list(k, "params") if isinstance(a.spec[k], list) else a.py(k, what="params")
    return [p if isinstance(p, Value) else g.constant(np.asarray(p)) for p in params]


def _recurrent(node: OriginNode, g: MapContext, kind: str, x: Value, hx: list[Value],
               params: list[Value], a: Args) -> list[Value]:
    """The layers of an ``aten::lstm``/``gru``/``rnn_*`` call (``input`` overload), arguments
    from 3 on: has_biases, num_layers, dropout, train, bidirectional, batch_first."""
    has_biases, layers = bool(a.py(3)), a.int(4, what="num_layers")
    if bool(a.py(6)):
        raise g.unsupported(f"a {kind.upper()} in training mode (dropout between layers) is not converted",
                            hint="export the module in eval() mode")
    ndir, batch_first = 2 if bool(a.py(7)) else 1, bool(a.py(8))
    proj = kind == "lstm" and len(params) == layers * ndir * (5 if has_biases else 3)
    per = (4 if has_biases else 2) + int(proj)
    if len(params) != layers * ndir * per:
        raise g.error(f"has {len(params)} weight tensors; {layers} layer(s) x {ndir} direction(s) "
                      f"take {layers * ndir * per}", hint="re-export the model")
    if batch_first:
        x = g.op("Transpose", [x], perm=[1, 0, 2])
    last: list[list[Value]] = [[] for _ in hx]
    for layer in range(layers):
        ys = []
        for d in range(ndir):
            k = layer * ndir + d
            w = params[k * per:(k + 1) * per]
            weights: list[Value | None] = list(w[:4]) if has_biases else [w[0], w[1], None, None]
            state = [pick(g, s, k) for s in hx]
            y, *out = _direction(g, kind, x, (state[0], state[1] if len(state) > 1 else None),
                                 weights, w[-1] if proj else None, d == 1)
            ys.append(y)
            for i in range(len(hx)):
                last[i].append(g.op("Unsqueeze", [out[i]], axes=[0]))
        x = ys[0] if ndir == 1 else g.op("Concat", ys, axis=2)
    y = g.op("Transpose", [x], perm=[1, 0, 2]) if batch_first else x
    return [y, *(s[0] if len(s) == 1 else g.op("Concat", s, axis=0) for s in last)]


def _packed(g: MapContext, a: Args, kind: str) -> None:
    """The ``data`` overload (a PackedSequence: data, batch_sizes, hx, params, ...) is refused."""
    if a.is_tensor(1) and (kind == "lstm" or not isinstance(a.spec[3], int) or a.types[a.spec[3]] != "bool"):
        raise g.unsupported(f"a {kind.upper()} over a PackedSequence is not converted",
                            hint="pad the sequences (torch.nn.utils.rnn.pad_packed_sequence) before the "
                                 "layer")


def _lstm_state(g: MapContext, a: Args) -> list[Value]:
    """An LSTM's (or LSTM cell's) ``hx`` argument: the list [h, c], checked to hold two tensors."""
    hx = a.tensor_list(1, "hx")
    if len(hx) != 2:
        raise g.error(f"argument 'hx' holds {len(hx)} tensor(s); an LSTM takes two, (h, c)",
                      hint="torch gives an LSTM its state as the list [h, c]: the file "
                      "was edited or damaged, re-export the model")
    return hx


@ts_mapping("aten::lstm")
def lstm(node: OriginNode, g: MapContext) -> Any:
    """aten::lstm.input(input, hx: [h0, c0], params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) -> (output, h_n, c_n)."""
    a = Args(node, g)
    _packed(g, a, "lstm")
    return _recurrent(node, g, "lstm", a.tensor(0, "input"), _lstm_state(g, a), _params(g, a, 2), a)


@ts_mapping("aten::gru", "aten::rnn_tanh", "aten::rnn_relu")
def gru(node: OriginNode, g: MapContext) -> Any:
    """aten::gru.input / rnn_tanh.input / rnn_relu.input(input, hx, params, has_biases,
    num_layers, dropout, train, bidirectional, batch_first) -> (output, h_n)."""
    a = Args(node, g)
    _packed(g, a, node.op_type)
    return _recurrent(node, g, node.op_type, a.tensor(0, "input"), [a.tensor(1, "hx")], _params(g, a, 2), a)


@ts_mapping("aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell")
def cell(node: OriginNode, g: MapContext) -> Any:
    """``*_cell(input [B, I], hx, w_ih, w_hh, b_ih?, b_hh?)``: one step; an LSTM's hx is
    [h, c] and it returns (h', c')."""
    a = Args(node, g)
    kind = node.op_type[:-len("_cell")]
    lstm_cell = kind == "lstm"
    x = a.tensor(0, "input")
    hx = _lstm_state(g, a) if lstm_cell else [a.tensor(1, "hx")]
    w = [a.tensor(2, "w_ih"), a.tensor(3, "w_hh"), a.optional_tensor(4), a.optional_tensor(5)]
    hidden = static_shape(g, hx[0])[-1]
    cell_, xw = _cell(g, kind, w, hidden, x)
    h, c = STEPS[_KINDS[kind][0]](cell_, xw, hx[0], hx[1] if lstm_cell else None)
    return (h, c) if lstm_cell else h
