"""RNN, GRU and LSTM (ONNX opset 7/14/22): unrolled over a static sequence into IR primitives;
over a sequence of symbolic length, one step of IR primitives is the body of a Scan node.

Ordinary versioned mappings (like decompose.py's), one per ONNX version whose semantics they
implement; opset 1 (GRU-3 too) had an ``output_sequence`` attribute and is not mapped.
Follows https://onnx.ai/onnx/operators/onnx__LSTM.html (and GRU, RNN): gate orders
``[i o f c]`` (LSTM), ``[z r h]`` (GRU); ``B`` is ``[Wb, Rb]``; peepholes ``[Pi Po Pf]``;
``activations`` per direction (f, g, h); ``clip`` bounds gate pre-activations;
``linear_before_reset`` (GRU); ``input_forget`` (LSTM); ``layout`` 0 (seq first) or 1.
``sequence_lens`` is supported when it is constant and every length is the full (static) sequence.
A symbolic batch needs no special case: the zero initial states are made at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..recurrent import STEPS, Cell, gate_rows, np_dtype, pick
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


@dataclass
class _Inputs:
    """The node's tensors, seq-first (``layout`` 1 transposed on the way in)."""

    x: Value
    w: Value
    r: Value
    bias: Value | None
    h0: Value | None
    c0: Value | None
    peep: Value | None


def _inputs(node: OriginNode, g: MapContext, layout: int) -> _Inputs:
    x, w, r = g.input(0), g.input(1), g.input(2)
    if x is None or w is None or r is None:
        raise g.error("inputs X, W and R are required")
    lstm = node.op_type == "LSTM"
    ins = _Inputs(x, w, r, g.input(3), g.input(5), g.input(6) if lstm else None,
                  g.input(7) if lstm else None)
    if g.input(4) is not None:
        lens, seq = g.const(4), x.shape[1 if layout else 0]
        if not isinstance(seq, int):
            raise g.unsupported(f"sequence_lens with a sequence of symbolic length {seq!r} is not supported",
                                hint="fix the sequence length with --input-shape (input_shapes=)")
        if lens is None or not np.all(np.asarray(lens) == seq):
            raise g.unsupported("sequence_lens shorter than the sequence are not supported")
    if layout == 1:
        ins.x = g.op("Transpose", [x], perm=[1, 0, 2])
        ins.h0 = g.op("Transpose", [ins.h0], perm=[1, 0, 2]) if ins.h0 is not None else None
        ins.c0 = g.op("Transpose", [ins.c0], perm=[1, 0, 2]) if ins.c0 is not None else None
    return ins


def _direction(node: OriginNode, g: MapContext, ins: _Inputs, d: int, reverse: bool,
               acts: list[Callable[[Value], Value]]) -> tuple[Value, Value, Value | None]:
    """One direction over the sequence: (Y [S, 1, B, H], last h, last c or None); unrolled
    when the sequence length is static, else a Scan node whose body is one step."""
    op, x = node.op_type, ins.x
    hidden = int(node.get_attr("hidden_size", ins.w.shape[1] // _GATES[op]))
    clip = node.get_attr("clip", None)
    lbr = op == "GRU" and bool(int(node.get_attr("linear_before_reset")))
    wt = g.op("Transpose", [pick(g, ins.w, d)], perm=[1, 0])  # [I, G*H]
    xw = g.op("MatMul", [x, wt])  # [S, B, G*H]
    rb_sep = None
    if ins.bias is not None:
        b = pick(g, ins.bias, d)
        size = _GATES[op] * hidden
        wb, rb = gate_rows(g, b, 0, size, 0), gate_rows(g, b, 1, size, 0)
        xw = g.op("Add", [xw, wb]) if lbr else g.op("Add", [xw, g.op("Add", [wb, rb])])
        rb_sep = rb if lbr else None
    input_forget = op == "LSTM" and bool(int(node.get_attr("input_forget")))  # an LSTM-only attribute
    cell = Cell(g, hidden, x.dtype, acts, clip, lbr, input_forget,
                 g.op("Transpose", [pick(g, ins.r, d)], perm=[1, 0]), rb_sep,
                 pick(g, ins.peep, d) if ins.peep is not None else None)
    zeros = _zeros(g, xw, hidden)
    h = pick(g, ins.h0, d) if ins.h0 is not None else zeros
    c = (pick(g, ins.c0, d) if ins.c0 is not None else zeros) if op == "LSTM" else None
    if not isinstance(x.shape[0], int):
        return _scanned(node, g, cell, xw, h, c, reverse)
    seq = x.shape[0]
    outs: list[Value | None] = [None] * seq
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        h, c = STEPS[op](cell, pick(g, xw, t), h, c)
        outs[t] = h
    steps = [g.op("Unsqueeze", [v], axes=[0, 1]) for v in outs if v is not None]
    y = steps[0] if len(steps) == 1 else g.op("Concat", steps, axis=0)
    return y, h, c


def _zeros(g: MapContext, xw: Value, hidden: int) -> Value:
    """The default initial state, [B, H] zeros (made at run time when the batch is symbolic)."""
    batch = xw.shape[1]
    if isinstance(batch, int):
        return g.constant(np.zeros((batch, hidden), np_dtype(xw.dtype)))
    first = g.op("Gather", [xw, g.constant(np.array(0, np.int64))], axis=0)  # [B, G*H]
    return g.full_like(gate_rows(g, first, 0, hidden, 1), 0)


def _scanned(node: OriginNode, g: MapContext, cell: Cell, xw: Value, h: Value, c: Value | None,
             reverse: bool) -> tuple[Value, Value, Value | None]:
    """The time loop as a Scan over ``xw`` (a sequence of run-time length): the states are h
    (and c), the scan output each step's h; the weights the step reads become captures."""
    states = [h] if c is None else [h, c]

    def step(*ins: Value) -> list[Value]:
        h_t, c_t = STEPS[node.op_type](cell, ins[-1], ins[0], ins[1] if c is not None else None)
        return [h_t, h_t] if c_t is None else [h_t, c_t, h_t]

    types = [(v.dtype, v.shape) for v in states] + [(xw.dtype, xw.shape[1:])]
    body, caps = g.build_graph(types, step, prefix=f"{node.name or node.op_type.lower()}/step/")
    outs = g.op("Scan", [*states, xw, *caps], body=body, num_scan_inputs=1, num_captures=len(caps),
                scan_input_directions=[int(reverse)], scan_output_directions=[int(reverse)],
                num_outputs=len(states) + 1)
    y = g.op("Unsqueeze", [outs[-1]], axes=[1])
    return y, outs[0], outs[1] if c is not None else None


@versions("RNN", 7, 14, 22)
@versions("GRU", 7, 14, 22)
@versions("LSTM", 7, 14, 22)
def recurrent(node: OriginNode, g: MapContext) -> Any:
    direction = node.get_attr("direction")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise g.error(f"{direction!r}: must be forward, reverse or bidirectional", attr="direction")
    ndir = 2 if direction == "bidirectional" else 1
    layout = int(node.get_attr("layout", 0))
    ins = _inputs(node, g, layout)
    acts = _acts(node, g, ndir)
    ys, hs, cs = [], [], []
    for d in range(ndir):
        y, h, c = _direction(node, g, ins, d, direction == "reverse" or d == 1, acts[d])
        ys.append(y)
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
    outs = (y, y_h, y_c) if node.op_type == "LSTM" else (y, y_h)
    return outs[: len(node.outputs)]

