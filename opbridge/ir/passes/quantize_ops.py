"""``fold_qdq``: dequantize -> op -> quantize chains (the QDQ format) become integer ops.

- ``DequantizeLinear(a) -> Conv / MatMul / Gemm (+ bias) -> QuantizeLinear`` with constant
  scales and zero points, a constant integer weight (a DequantizeLinear of a constant, per tensor
  or per output channel) and a bias quantized at ``a_scale * w_scale`` (an i32 DequantizeLinear,
  or a float constant, rounded to it) becomes ``ConvInteger / MatMulInteger -> Add(i32 bias) ->
  Requantize`` with the fixed-point multiplier and shift of ``a_scale * w_scale / y_scale``.
- ``DequantizeLinear(i32 accumulator) -> QuantizeLinear`` (onnxruntime's requantization, as the
  QLinearConv / QLinearMatMul / QGemm mappings emit it) becomes Requantize.
- ``DequantizeLinear -> Relu / MaxPool / Reshape / Flatten / Concat / Transpose / Squeeze /
  Unsqueeze -> QuantizeLinear`` with the same scale and zero point on both sides becomes the op
  on the integers (Relu as ``Max(q, zero_point)``): exact, since these ops commute with a
  monotonic affine map.

- ``DequantizeLinear(a), DequantizeLinear(b) -> Add (-> Relu) -> QuantizeLinear`` on 8-bit
  per-tensor values of one shape (a residual Add) becomes QAdd: each input rescaled to a common
  scale by a fixed-point multiplier and shift, added in int32 and requantized, as the chip
  runs it, instead of an f32 Add between dequantized tensors.
- ``DequantizeLinear -> Sigmoid / Tanh / LeakyRelu / ... -> QuantizeLinear`` on 8-bit values
  becomes Lut, a 256-entry table read by each value (each entry computed by the ops it
  replaces), the chip's lookup-table instruction.

The QuantizeLinear's output Value is kept (same name, now produced by the integer op) and gets
its :class:`~opbridge.ir.quantparams.QuantParams`. Requantize rounds half away from zero in
fixed point where onnxruntime rounds ``float(acc) * scale`` half to even: the two can differ by
one step on rare values (the tests count them). Dequantize nodes left without users are removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import Graph, Node, Value
from ..ops.quant import qadd_params, quantize_multiplier
from ..quantparams import QuantParams, depthwise, input_scale
from .base import PassResult
from .dce import EliminateDeadCode

_INT8 = ("i8", "u8")
_EXACT = ("Relu", "MaxPool", "Reshape", "Flatten", "Concat", "Transpose", "Squeeze", "Unsqueeze")
#: Element-wise ops whose DQ -> op -> Q chain on 8-bit values is a 256-entry table.
_TABLE = ("Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus",
          "Gelu", "Swish", "Mish", "Erf", "Exp", "Abs", "Neg", "Sqrt", "Reciprocal")


@dataclass
class _Q:
    """A per-tensor or per-axis Quantize/DequantizeLinear with constant parameters."""

    node: Node
    q: Value  # the integer tensor (DQ's input or Q's output)
    scale: np.ndarray
    zp: np.ndarray
    axis: int | None  # None: per tensor

    def same_params(self, other: _Q) -> bool:
        return (self.axis is None and other.axis is None and self.q.dtype == other.q.dtype
                and float(self.scale) == float(other.scale) and int(self.zp) == int(other.zp))


def _params(node: Node | None, integer_side: int) -> _Q | None:
    """The constant parameters of a Q/DQ node (``integer_side``: 0 for DQ's input, -1 for Q's
    output), or None (blocked, computed scales, or not a Q/DQ)."""
    if node is None or node.attrs.get("block_size") or len(node.inputs) < 2:
        return None
    scale = node.inputs[1]
    zp = node.inputs[2] if len(node.inputs) > 2 else None
    if scale is None or scale.data is None or (zp is not None and zp.data is None):
        return None
    q = node.inputs[0] if integer_side == 0 else node.outputs[0]
    assert q is not None
    s = np.asarray(scale.data, np.float64)
    z = np.zeros(s.shape, np.int64) if zp is None else np.asarray(zp.data).astype(np.int64)
    if s.size == 1:
        return _Q(node, q, s.reshape(()), z.reshape(()), None)
    return _Q(node, q, s.reshape(-1), z.reshape(-1), int(node.attrs["axis"]) % len(q.shape))


def _dq_of(v: Value | None, dtypes: tuple[str, ...] = _INT8) -> _Q | None:
    if v is None or v.producer is None or v.producer.op != "DequantizeLinear":
        return None
    p = _params(v.producer, 0)
    return p if p is not None and p.q.dtype in dtypes else None


class _Edit:
    """New nodes and constants for one graph, named uniquely, shapes inferred by the registry."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.names = set(graph.values()) | {n.name for n in graph.nodes}
        self.constants = dict(graph.constants)
        self.replace: dict[int, list[Node]] = {}  # id(Q node) -> nodes that take its place

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name

    def constant(self, base: str, data: np.ndarray) -> Value:
        from ..types import from_numpy_dtype

        v = Value(self.fresh(base), from_numpy_dtype(data.dtype), data.shape, data=data)
        self.constants[v.name] = v
        return v

    def node(self, like: Node, op: str, inputs: list[Value | None], attrs: dict[str, Any],
             out: Value | None = None) -> tuple[Node, Value]:
        opdef = self.graph.registry.get(op)
        name = self.fresh(f"{like.name}/{op}")
        norm = opdef.normalize_attrs(attrs, name)
        (shape, dtype), = opdef.infer(name, [(v.shape, v.dtype) if v is not None else None
                                             for v in inputs], norm)
        if out is None:
            out = Value(self.fresh(name), dtype, shape)
        node = Node(op, name, inputs, [out], norm, like.origin, like.placement)
        out.producer = node
        return node, out


def _weight(p: Node, dq: _Q, transposed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Integer weight, its scales and zero points per output channel (or scalars), with W laid
    out as the integer op takes it; None when its quantization axis is not the output axis."""
    w = np.asarray(dq.q.data)
    out_axis = 0 if p.op == "Conv" or transposed else w.ndim - 1
    if dq.axis is not None and dq.axis != out_axis:
        return None
    if transposed:
        w = np.ascontiguousarray(w.T)
    return w, dq.scale, dq.zp


def _bias(e: _Edit, p: Node, acc_scale: np.ndarray, m: int) -> np.ndarray | None:
    """The i32 bias at ``acc_scale`` (an i32 DequantizeLinear at that scale, or a float constant
    rounded to it), or None when there is none or it does not fit."""
    b = p.inputs[2] if len(p.inputs) > 2 else None
    if b is None:
        return np.zeros(m, np.int32)
    dq = _dq_of(b, ("i32",))
    if dq is not None and dq.q.data is not None:
        if not np.allclose(dq.scale, acc_scale, rtol=1e-6, atol=0) or np.any(dq.zp):
            return None
        return np.broadcast_to(np.asarray(dq.q.data, np.int32).reshape(-1), (m,)).copy()
    if b.data is None:
        return None
    real = np.broadcast_to(np.asarray(b.data, np.float64).reshape(-1), (m,))
    q = np.rint(real / np.broadcast_to(acc_scale, (m,)))
    return q.astype(np.int32) if np.all(np.abs(q) < 2**31) else None


def _linear(e: _Edit, qn: _Q) -> bool:
    """Rewrite DQ -> Conv/MatMul/Gemm (+bias) -> Q; True when done."""
    p = qn.node.inputs[0].producer if qn.node.inputs[0] is not None else None
    if p is None or p.op not in ("Conv", "MatMul", "Gemm") or not _channel_axis_ok(qn, p, out=True):
        return False
    if len(p.outputs[0].users) != 1 or p.outputs[0] in e.graph.outputs or qn.q.dtype not in _INT8:
        return False
    if p.op == "Gemm" and (p.attrs["transA"] or p.attrs["alpha"] != 1.0 or p.attrs["beta"] != 1.0):
        return False
    a, wdq = _dq_of(p.inputs[0]), _dq_of(p.inputs[1])
    if a is None or not _channel_axis_ok(a, p, out=False) or wdq is None or wdq.q.data is None:
        return False
    got = _weight(p, wdq, p.op == "Gemm" and bool(p.attrs["transB"]))
    if got is None:
        return False
    w, ws, wz = got
    m = int(w.shape[0] if p.op == "Conv" else w.shape[-1])
    # a per-channel input (a depthwise Conv's): output channel o reads input channel o // (m / C)
    a_scale = a.scale if a.axis is None else input_scale(a.scale, m)
    acc_scale = np.broadcast_to(a_scale * ws, (m,))
    if a.axis is not None:
        a = _Q(a.node, a.q, a_scale, np.zeros((), np.int64), None)
    bias = _bias(e, p, np.asarray(acc_scale), m)
    if bias is None or (p.op == "MatMul" and len(p.inputs) > 2):
        return False
    _emit_linear(e, qn, p, a, w, ws, wz, bias)
    return True


def _channel_axis_ok(q: _Q, p: Node, out: bool) -> bool:
    """Whether ``_linear`` takes the activation ``q`` of Conv/MatMul/Gemm ``p``: per tensor,
    or per channel (axis 1, zero points 0) as the output of a Conv (its requantization is per
    channel) or the input of a depthwise Conv (its channels meet only their own weights)."""
    if q.axis is None:
        return True
    if p.op != "Conv" or q.axis != 1 or np.any(q.zp):
        return False
    if out:
        return True
    x = p.inputs[0]
    return depthwise(p) and x is not None and x.shape[1] == q.scale.size


def _emit_linear(e: _Edit, qn: _Q, p: Node, a: _Q, w: np.ndarray, ws: np.ndarray, wz: np.ndarray,
                 bias: np.ndarray) -> None:
    wv = e.constant(f"{p.name}/W_int", w)
    az = e.constant(f"{p.name}/x_zero_point", a.zp.astype(np.dtype(a.q.data.dtype if a.q.data is not None
                                                                    else _np(a.q.dtype))))
    wzv = e.constant(f"{p.name}/w_zero_point", wz.astype(w.dtype))
    nodes = []
    if p.op == "Conv":
        attrs = {k: p.attrs[k] for k in ("group", "kernel_shape", "strides", "dilations", "pads")}
        n1, acc = e.node(p, "ConvInteger", [a.q, wv, az, wzv], attrs)
        bshape: tuple[int, ...] = (1, bias.size) + (1,) * (len(acc.shape) - 2)
        axis = 1
    else:
        n1, acc = e.node(p, "MatMulInteger", [a.q, wv, az, wzv], {})
        bshape, axis = (bias.size,), len(acc.shape) - 1
    nodes.append(n1)
    if np.any(bias):
        n2, acc = e.node(p, "Add", [acc, e.constant(f"{p.name}/B_int", bias.reshape(bshape))], {})
        nodes.append(n2)
    mult, shift = quantize_multiplier(np.broadcast_to(a.scale * ws / qn.scale, (bias.size,))
                                      if qn.axis is not None or a.scale.ndim else a.scale * ws / qn.scale)
    y_zp = e.constant(f"{qn.node.name}/y_zero_point",
                      (qn.zp if qn.axis is None else qn.zp.reshape(-1)[:1].reshape(())).astype(_np(qn.q.dtype)))
    n3, _ = e.node(qn.node, "Requantize", [acc, e.constant(f"{qn.node.name}/multiplier", mult),
                                           e.constant(f"{qn.node.name}/shift", shift), y_zp],
                   {"axis": axis, "output_dtype": qn.q.dtype}, out=qn.q)
    nodes.append(n3)
    e.replace[id(qn.node)] = nodes


def _requantize(e: _Edit, qn: _Q) -> bool:
    """Rewrite DequantizeLinear(i32 acc, s) -> QuantizeLinear(s_y, z_y) (how onnxruntime's
    QLinearConv/QLinearMatMul/QGemm requantize, as the ONNX mappings emit it) into Requantize."""
    dq = _dq_of(qn.node.inputs[0], ("i32",))
    if dq is None or dq.q.data is not None or np.any(dq.zp) or qn.axis is not None:
        return False
    if len(dq.node.outputs[0].users) != 1 or dq.node.outputs[0] in e.graph.outputs:
        return False
    mult, shift = quantize_multiplier(dq.scale / qn.scale)
    y_zp = e.constant(f"{qn.node.name}/y_zero_point", qn.zp.astype(_np(qn.q.dtype)))
    node, _ = e.node(qn.node, "Requantize", [dq.q, e.constant(f"{qn.node.name}/multiplier", mult),
                                             e.constant(f"{qn.node.name}/shift", shift), y_zp],
                     {"axis": dq.axis if dq.axis is not None else 1, "output_dtype": qn.q.dtype},
                     out=qn.q)
    e.replace[id(qn.node)] = [node]
    return True


def _table(e: _Edit, qn: _Q) -> bool:
    """Rewrite DQ -> element-wise op -> Q on 8-bit values into Lut, a 256-entry table read by
    the integer's byte, each entry computed by the very ops it replaces: exact."""
    p = qn.node.inputs[0].producer if qn.node.inputs[0] is not None else None
    if p is None or p.op not in _TABLE or len(p.inputs) != 1 or len(p.outputs[0].users) != 1:
        return False
    a = _dq_of(p.inputs[0])
    if a is None or a.axis is not None or qn.axis is not None or p.outputs[0] in e.graph.outputs:
        return False
    info = np.iinfo(_np(a.q.dtype))
    # entry i is for the integer whose byte is i (negative ones from 128 on)
    q = np.roll(np.arange(int(info.min), int(info.max) + 1), -int(info.min)).astype(_np(a.q.dtype))
    reg = e.graph.registry
    computes = [(n, reg.get(n.op).compute_function) for n in (a.node, p, qn.node)]
    if any(fn is None for _, fn in computes):
        return False
    v: Any = q
    for n, fn in computes:
        assert fn is not None
        v = fn(v, *[x.data if x is not None else None for x in n.inputs[1:]], **n.attrs)
    node, _ = e.node(qn.node, "Lut", [a.q, e.constant(f"{p.name}/table", np.asarray(v))], {},
                     out=qn.q)
    e.replace[id(qn.node)] = [node]
    return True


def _np(dtype: str) -> Any:
    from ..types import to_numpy_dtype

    return to_numpy_dtype(dtype)


def _exact(e: _Edit, qn: _Q) -> bool:
    """Rewrite DQ -> one of :data:`_EXACT` -> Q with one scale and zero point."""
    p = qn.node.inputs[0].producer if qn.node.inputs[0] is not None else None
    if p is None or p.op not in _EXACT or len(p.outputs) != 1 or len(p.outputs[0].users) != 1:
        return False
    if p.outputs[0] in e.graph.outputs:
        return False
    data_inputs = p.inputs if p.op == "Concat" else p.inputs[:1]
    dqs = [_dq_of(v) for v in data_inputs]
    if not dqs or any(d is None or not d.same_params(qn) for d in dqs):
        return False
    ints = [d.q for d in dqs if d is not None] + list(p.inputs[len(data_inputs):])
    if p.op == "Relu":
        zp = e.constant(f"{p.name}/zero_point", qn.zp.astype(_np(qn.q.dtype)))
        node, _ = e.node(p, "Max", [ints[0], zp], {}, out=qn.q)
    else:
        node, _ = e.node(p, p.op, ints, dict(p.attrs), out=qn.q)
    e.replace[id(qn.node)] = [node]
    return True


def _add(e: _Edit, qn: _Q) -> bool:
    """Rewrite DQ(a), DQ(b) -> Add (-> Relu) -> Q, all per tensor, 8-bit, a and b of one
    shape, into QAdd (the Relu as its ``relu`` flag)."""
    p = qn.node.inputs[0].producer if qn.node.inputs[0] is not None else None
    relu = p is not None and p.op == "Relu"
    if relu:
        assert p is not None
        if len(p.outputs[0].users) != 1 or p.outputs[0] in e.graph.outputs or p.inputs[0] is None:
            return False
        p = p.inputs[0].producer
    if p is None or p.op != "Add" or len(p.inputs) != 2 or len(p.outputs[0].users) != 1:
        return False
    if p.outputs[0] in e.graph.outputs or qn.axis is not None:
        return False
    a, b = _dq_of(p.inputs[0]), _dq_of(p.inputs[1])
    if a is None or b is None or a.axis is not None or b.axis is not None or a.q.shape != b.q.shape:
        return False
    if min(float(a.scale), float(b.scale), float(qn.scale)) <= 0:
        return False
    mult, shift = qadd_params(float(a.scale), float(b.scale), float(qn.scale))
    node, _ = e.node(p, "QAdd", [a.q, b.q], {
        "a_zero_point": int(a.zp), "b_zero_point": int(b.zp), "y_zero_point": int(qn.zp),
        "multipliers": mult, "shifts": shift, "relu": int(relu), "output_dtype": qn.q.dtype},
        out=qn.q)
    e.replace[id(qn.node)] = [node]
    return True


class FoldQDQ:
    """Turn QDQ chains into integer ops (see the module docstring)."""

    name = "fold_qdq"

    def __call__(self, graph: Graph) -> PassResult:
        graph.rebuild_uses()
        e = _Edit(graph)
        done = 0
        for node in graph.nodes:
            if node.op != "QuantizeLinear":
                continue
            qn = _params(node, -1)
            if qn is None or qn.q.dtype not in _INT8:
                continue
            if (_linear(e, qn) or _exact(e, qn) or _add(e, qn) or _requantize(e, qn)
                    or _table(e, qn)):
                qn.q.quant = QuantParams(qn.scale.astype(np.float32), qn.zp, qn.axis)
                done += 1
        if not done:
            return PassResult(graph, False)
        nodes: list[Node] = []
        for node in graph.nodes:
            nodes.extend(e.replace.get(id(node), [node]))
        g = Graph(graph.name, graph.inputs, graph.outputs, nodes, e.constants.values(),
                  graph.registry, graph.metadata)
        g.rebuild_uses()
        g = EliminateDeadCode()(g).graph
        g.rebuild_uses()
        return PassResult(g, True, f"fold_qdq: {done} chain(s) now integer ops")
