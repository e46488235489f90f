"""RNN, GRU and LSTM (ONNX opset 7/14/22), unrolled over the static sequence into IR primitives.

Ordinary versioned mappings (like decompose.py's), one per ONNX version whose semantics they
implement; opset 1 (GRU-3 too) had an ``output_sequence`` attribute and is not mapped.
Follows https://onnx.ai/onnx/operators/onnx__LSTM.html (and GRU, RNN): gate orders
``[i o f c]`` (LSTM), ``[z r h]`` (GRU); ``B`` is ``[Wb, Rb]``; peepholes ``[Pi Po Pf]``;
``activations`` per direction (f, g, h); ``clip`` bounds gate pre-activations;
``linear_before_reset`` (GRU); ``input_forget`` (LSTM); ``layout`` 0 (seq first) or 1.
``sequence_lens`` is supported when it is constant and every length is the full sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .decompose import versions

#: gates per op, and default activations (one list per direction)
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _activation(g: MapContext, name: str, alpha: float | None, beta: float | None) -> Callable[[Value], Value]:
    key = name.lower()
    simple = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "softsign": "Softsign",
              "softplus": "Softplus"}
    if key in simple:
        return lambda v: g.op(simple[key], [v])
    with_alpha = {"leakyrelu": ("LeakyRelu", 0.01), "thresholdedrelu": ("ThresholdedRelu", 1.0),
                  "elu": ("Elu", 1.0)}
    if key in with_alpha:
        op, default = with_alpha[key]
        return lambda v: g.op(op, [v], alpha=default if alpha is None else alpha)
    if key == "hardsigmoid":
        return lambda v: g.op("HardSigmoid", [v], alpha=0.2 if alpha is None else alpha,
                              beta=0.5 if beta is None else beta)
    if key in ("affine", "scaledtanh"):
        a = np.float32(1.0 if alpha is None else alpha)
        b = np.float32(0.0 if beta is None else beta)

        def affine(v: Value, a: Any = a, b: Any = b) -> Value:
            if key == "affine":
                return g.op("Add", [g.op("Mul", [v, g.constant(a.astype(v.dtype))]), g.constant(b.astype(v.dtype))])
            inner = g.op("Tanh", [g.op("Mul", [v, g.constant(b.astype(v.dtype))])])
            return g.op("Mul", [inner, g.constant(a.astype(v.dtype))])

        return affine
    raise g.error(f"activation {name!r} is not supported", attr="activations")


def _acts(node: OriginNode, g: MapContext, ndir: int) -> list[list[Callable[[Value], Value]]]:
    per = len(_DEFAULT_ACTS[node.op_type])
    names = list(node.get_attr("activations", [])) or _DEFAULT_ACTS[node.op_type] * ndir
    if len(names) != per * ndir:
        raise g.error(f"{len(names)} activations given; {node.op_type} with {ndir} direction(s) takes "
                      f"{per * ndir}", attr="activations")
    alphas = list(node.get_attr("activation_alpha", []))
    betas = list(node.get_attr("activation_beta", []))
    fns = [_activation(g, n, alphas[i] if i < len(alphas) else None, betas[i] if i < len(betas) else None)
           for i, n in enumerate(names)]
    return [fns[d * per:(d + 1) * per] for d in range(ndir)]


def _pick(g: MapContext, v: Value, index: int, axis: int = 0) -> Value:
    """v[index] along ``axis`` (that axis removed)."""
    return g.op("Squeeze", [g.op("Slice", [v], starts=[index], ends=[index + 1], axes=[axis])], axes=[axis])


def _part(g: MapContext, v: Value, k: int, size: int, axis: int) -> Value:
    return g.op("Slice", [v], starts=[k * size], ends=[(k + 1) * size], axes=[axis])


@versions("RNN", 7, 14, 22)
@versions("GRU", 7, 14, 22)
@versions("LSTM", 7, 14, 22)
def recurrent(node: OriginNode, g: MapContext) -> Any:
    op = node.op_type
    x, w, r = g.input(0), g.input(1), g.input(2)
    if x is None or w is None or r is None:
        raise g.error("inputs X, W and R are required")
    bias, seq_lens, h0 = g.input(3), g.input(4), g.input(5)
    c0 = g.input(6) if op == "LSTM" else None
    peep = g.input(7) if op == "LSTM" else None
    hidden = int(node.get_attr("hidden_size", w.shape[1] // _GATES[op]))
    direction = node.get_attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise g.error(f"{direction!r}: must be forward, reverse or bidirectional", attr="direction")
    ndir = 2 if direction == "bidirectional" else 1
    layout = int(node.get_attr("layout", 0))
    clip = node.get_attr("clip", None)
    if layout == 1:
        x = g.op("Transpose", [x], perm=[1, 0, 2])
        h0 = g.op("Transpose", [h0], perm=[1, 0, 2]) if h0 is not None else None
        c0 = g.op("Transpose", [c0], perm=[1, 0, 2]) if c0 is not None else None
    seq, batch = int(x.shape[0]), int(x.shape[1])
    if seq_lens is not None:
        lens = g.const(4)
        if lens is None or not np.all(np.asarray(lens) == seq):
            raise g.unsupported("sequence_lens shorter than the sequence are not supported")
    acts = _acts(node, g, ndir)
    ngates = _GATES[op]
    dt = x.dtype

    def gate_clip(v: Value) -> Value:
        return g.op("Clip", [v], min=-float(clip), max=float(clip)) if clip is not None else v

    ys, hs, cs = [], [], []
    for d in range(ndir):
        reverse = direction == "reverse" or d == 1
        wt = g.op("Transpose", [_pick(g, w, d)], perm=[1, 0])  # [I, G*H]
        rt = g.op("Transpose", [_pick(g, r, d)], perm=[1, 0])  # [H, G*H]
        xw = g.op("MatMul", [x, wt])  # [S, B, G*H]
        rb_sep = None  # GRU with linear_before_reset keeps Rb inside the reset product
        if bias is not None:
            b = _pick(g, bias, d)
            wb, rb = _part(g, b, 0, ngates * hidden, 0), _part(g, b, 1, ngates * hidden, 0)
            if op == "GRU" and int(node.get_attr("linear_before_reset", 0)):
                xw = g.op("Add", [xw, wb])
                rb_sep = rb
            else:
                xw = g.op("Add", [xw, g.op("Add", [wb, rb])])
        zeros = g.constant(np.zeros((batch, hidden), _np(dt)))
        h = _pick(g, h0, d) if h0 is not None else zeros
        c = (_pick(g, c0, d) if c0 is not None else zeros) if op == "LSTM" else None
        p = _pick(g, peep, d) if peep is not None else None
        f_act = acts[d]
        outs: list[Value | None] = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            xt = _pick(g, xw, t)  # [B, G*H]
            if op == "RNN":
                h = f_act[0](gate_clip(g.op("Add", [xt, g.op("MatMul", [h, rt])])))
            elif op == "GRU":
                hr = g.op("MatMul", [h, rt])
                if rb_sep is not None:
                    hr = g.op("Add", [hr, rb_sep])
                z = f_act[0](gate_clip(g.op("Add", [_part(g, xt, 0, hidden, 1), _part(g, hr, 0, hidden, 1)])))
                rr = f_act[0](gate_clip(g.op("Add", [_part(g, xt, 1, hidden, 1), _part(g, hr, 1, hidden, 1)])))
                if int(node.get_attr("linear_before_reset", 0)):
                    pre = g.op("Add", [_part(g, xt, 2, hidden, 1), g.op("Mul", [rr, _part(g, hr, 2, hidden, 1)])])
                else:
                    rh = g.op("MatMul", [g.op("Mul", [rr, h]), _part(g, rt, 2, hidden, 1)])
                    pre = g.op("Add", [_part(g, xt, 2, hidden, 1), rh])
                hh = f_act[1](gate_clip(pre))
                one = g.constant(np.ones((), _np(dt)))
                h = g.op("Add", [g.op("Mul", [g.op("Sub", [one, z]), hh]), g.op("Mul", [z, h])])
            else:
                gates = g.op("Add", [xt, g.op("MatMul", [h, rt])])
                gi, go, gf, gc = (_part(g, gates, k, hidden, 1) for k in range(4))
                assert c is not None
                if p is not None:
                    gi = g.op("Add", [gi, g.op("Mul", [_part(g, p, 0, hidden, 0), c])])
                    gf = g.op("Add", [gf, g.op("Mul", [_part(g, p, 2, hidden, 0), c])])
                i_t = f_act[0](gate_clip(gi))
                if int(node.get_attr("input_forget", 0)):
                    f_t = g.op("Sub", [g.constant(np.ones((), _np(dt))), i_t])
                else:
                    f_t = f_act[0](gate_clip(gf))
                c_t = f_act[1](gate_clip(gc))
                c = g.op("Add", [g.op("Mul", [f_t, c]), g.op("Mul", [i_t, c_t])])
                if p is not None:
                    go = g.op("Add", [go, g.op("Mul", [_part(g, p, 1, hidden, 0), c])])
                o_t = f_act[0](gate_clip(go))
                h = g.op("Mul", [o_t, f_act[2](c)])
            outs[t] = h
        steps = [g.op("Unsqueeze", [v], axes=[0, 1]) for v in outs if v is not None]
        ys.append(steps[0] if len(steps) == 1 else g.op("Concat", steps, axis=0))  # [S, 1, B, H]
        hs.append(g.op("Unsqueeze", [h], axes=[0]))
        if c is not None:
            cs.append(g.op("Unsqueeze", [c], axes=[0]))
    y = ys[0] if ndir == 1 else g.op("Concat", ys, axis=1)
    y_h = hs[0] if ndir == 1 else g.op("Concat", hs, axis=0)
    y_c = (cs[0] if ndir == 1 else g.op("Concat", cs, axis=0)) if cs else None
    if layout == 1:
        y = g.op("Transpose", [y], perm=[2, 0, 1, 3])
        y_h = g.op("Transpose", [y_h], perm=[1, 0, 2])
        y_c = g.op("Transpose", [y_c], perm=[1, 0, 2]) if y_c is not None else None
    outs = (y, y_h, y_c) if op == "LSTM" else (y, y_h)
    return outs[: len(node.outputs)]


def _np(dtype: str) -> np.dtype:
    from ...ir.types import to_numpy_dtype

    return to_numpy_dtype(dtype)

