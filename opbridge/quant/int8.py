"""``ob.quantize(g, table, dtype="int8")``: a QDQ int8 graph.

The scheme (TPU-MLIR's symmetric int8, the one the BM1684 runs):

- weights of Conv, MatMul and Gemm: symmetric int8, per output channel (``per_channel``) or per
  tensor, ``scale = max|W| / 127``, values ``rint(W / scale)`` in [-127, 127];
- activations feeding or leaving those ops: per tensor, zero point 0, from the calibration
  table: symmetric int8, ``scale = threshold / 127``, or, for a tensor never negative (after
  Relu, Clip, HardSigmoid), uint8 at ``threshold / 255`` (see :func:`activation_params`);
  with ``per_channel`` and a table with channel ranges (``calibrate(...,
  channel_activations=True)``), one scale per channel where the chip takes it at no cost: a
  Conv's output read only by ops that run in float, a depthwise Conv's input (see
  :func:`channel_points`, :func:`channel_params`);
- biases: int32 with ``scale = scale_x * scale_w`` (per channel), so the int32 accumulator
  takes them as they are.

Each quantized tensor is a ``QuantizeLinear`` -> ``DequantizeLinear`` pair; the dequantized
tensor keeps the float tensor's name (the float value before it is renamed ``NAME/prequant``),
so validation compares the int8 graph with the float one layer by layer. An output whose only
reader is a ``Relu`` or ``Clip`` is quantized at that activation's scale, and so is the
activation's output (the chip fuses the two; the Relu then runs on the integers). An int8
op's input made from another quantized tensor by ops that only select or move values
(:data:`PASS_THROUGH`: MaxPool, Transpose, Reshape ...) takes that tensor's scale, so those ops
run on the 8-bit values (onnxruntime's QDQ propagation; TPU-MLIR runs them in int8 too). Other
ops stay float, reading dequantized values: the target has no int8 kernel for them. Then the
``fold_qdq`` pass, when the IR has it, turns DequantizeLinear -> op -> QuantizeLinear into
integer ops (ConvInteger / MatMulInteger + Requantize).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph, GraphBuilder, Node, Value
from ..ir.passes.fuse_chain import Uses
from ..ir.quantparams import QuantParams, depthwise, input_scale
from .table import MIN_THRESHOLD, CalibrationTable, QuantError, TensorRange

#: Ops the target runs as int8 x int8 -> int32.
INT8_OPS = ("Conv", "MatMul", "Gemm")
#: Single-reader activations the chip fuses into the int8 op before requantizing.
FUSED_ACTIVATIONS = ("Relu", "Clip")
#: Ops that only select or move their input's values: an 8-bit input stays 8-bit through them,
#: at its own scale (see :func:`quant_points`).
PASS_THROUGH = ("MaxPool", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze")


def quantizable(node: Node) -> bool:
    """Whether ``node`` gets int8 weights and activations: an INT8_OPS node with a float
    activation input and constant float weights."""
    if node.op not in INT8_OPS or len(node.inputs) < 2:
        return False
    x, w = node.inputs[0], node.inputs[1]
    if x is None or w is None or x.is_constant or not w.is_constant or x.dtype != "f32" or w.dtype != "f32":
        return False
    if node.op == "Gemm" and node.attrs.get("transA"):
        return False
    return not (node.op == "MatMul" and w.rank < 2)


def weight_axis(node: Node) -> int:
    """The output-channel axis of ``node``'s weights."""
    w = node.inputs[1]
    assert w is not None
    if node.op == "Conv":
        return 0
    if node.op == "Gemm":
        return 0 if node.attrs.get("transB") else 1
    return w.rank - 1


def quant_points(graph: Graph, nodes: Collection[str]) -> dict[str, str]:
    """The activation tensors quantized for the int8 nodes named ``nodes`` -> the table entry
    whose threshold they take: their inputs and outputs, each its own; an output whose only
    reader is a Relu or Clip takes that activation's threshold, and the activation's output is
    quantized too (at the same scale, so ``fold_qdq`` runs a Relu on the integers)."""
    uses = Uses.of(graph)
    points: dict[str, str] = {}
    for n in graph.nodes:
        if n.name not in nodes:
            continue
        x = n.inputs[0]
        assert x is not None
        points.setdefault(x.name, x.name)
        out = n.outputs[0].name
        reader = uses.only_reader(n.outputs[0])
        if reader is not None and reader.op in FUSED_ACTIVATIONS:
            act = reader.outputs[0].name
            points.setdefault(out, act)
            points.setdefault(act, act)
        else:
            points.setdefault(out, out)
    _pass_through(graph, nodes, points)
    return points


def _pass_through(graph: Graph, nodes: Collection[str], points: dict[str, str]) -> None:
    """An int8 node's input made from another quantization point by :data:`PASS_THROUGH` ops
    alone (a MaxPool, transposes, reshapes) takes that point's table entry, and so does every
    tensor between them: the ops then run on the 8-bit tensor (``fold_qdq`` turns DQ -> op -> Q
    with one scale into the op on the integers), where a threshold of the int8 node's own would
    round the pooled values a second time. A chain through a graph output is left as it was (the
    int8 node's input keeps its own threshold)."""
    outputs = {v.name for v in graph.outputs}
    for n in graph.nodes:
        x = n.inputs[0] if n.name in nodes and n.inputs else None
        chain: list[str] = []
        while x is not None and x.producer is not None and x.name not in outputs:
            p = x.producer
            src = p.inputs[0] if p.op in PASS_THROUGH and len(p.outputs) == 1 and p.inputs else None
            if src is None or src.is_constant:
                break
            chain.append(x.name)
            if src.name in points:
                points.update(dict.fromkeys(chain, points[src.name]))
                break
            x = src


def check_table(graph: Graph, table: CalibrationTable, names: Collection[str]) -> None:
    """Every tensor in ``names`` has a range in ``table``, or a QuantError saying which not."""
    missing = [n for n in names if n not in table]
    if missing:
        shown = ", ".join(f"'{n}'" for n in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise QuantError(
            f"the calibration table (of graph '{table.graph}') has no range for {len(missing)} "
            f"tensor(s) of graph '{graph.name}': {shown}",
            hint="calibrate this model (same --input-shape and passes) and use that table")


def to_int8(graph: Graph, table: CalibrationTable, *, per_channel: bool = True,
            keep_float: Collection[str] = (), fold_integer: bool = True,
            asymmetric: bool = False, biases: Mapping[str, np.ndarray] | None = None) -> Graph:
    """``graph`` in QDQ int8 (see the module); nodes named in ``keep_float`` stay float;
    ``fold_integer=False`` leaves the QDQ form as it is (no ``fold_qdq``); ``per_channel``
    quantizes weights per output channel and the :func:`channel_points` per channel (when
    the table has their channel ranges);
    ``asymmetric`` quantizes the other signed activations as asymmetric u8 (see
    :func:`activation_params`; the per-channel ones stay symmetric); ``biases``
    replaces the float bias of the int8 nodes it names (one value per output channel: the
    corrected biases of :func:`opbridge.quant.correct.bias_corrections`), adding one to a
    node that has none."""
    chosen = [n.name for n in graph.nodes if quantizable(n) and n.name not in keep_float
              and n.origin.name not in keep_float]
    points = quant_points(graph, set(chosen))
    check_table(graph, table, set(points.values()))
    params = point_params(graph, table, points, set(chosen), asymmetric, per_channel)
    b = _QdqBuilder(graph, params, per_channel, points, biases or {})
    for v in graph.inputs:
        b.env[v.name] = b.b.input(v.name, v.dtype, v.shape)
        if v.name in points:
            b.env[v.name] = b.qdq(b.env[v.name], v.name, f"{v.name}/dq")
    chosen_set = set(chosen)
    for node in graph.nodes:
        b.copy(node, node.name in chosen_set, points)
    for v in graph.outputs:
        b.b.output(b.env[v.name])
    b.b.metadata.update(graph.metadata)
    b.b.metadata["quant.dtype"] = "int8"
    b.b.metadata["quant.int8_layers"] = ",".join(chosen)
    kept = [n.name for n in graph.nodes if n.op in INT8_OPS and n.name not in chosen_set]
    if kept:
        b.b.metadata["quant.float_layers"] = ",".join(kept)
    return fold(b.b.build()) if fold_integer else b.b.build()


def fold(graph: Graph) -> Graph:
    """The ``fold_qdq`` pass (integer ops from DequantizeLinear -> op -> QuantizeLinear) when the
    IR has it, then dead code; else ``graph`` as it is."""
    from ..ir.passes import PASSES, optimize

    if "fold_qdq" not in PASSES:
        return graph
    return optimize(graph, ("fold_qdq", "dead_code"))


class _QdqBuilder:
    """Copies a float graph node by node into a GraphBuilder, adding the Q/DQ pairs."""

    def __init__(self, graph: Graph, params: Mapping[str, ActParams], per_channel: bool,
                 points: dict[str, str], biases: Mapping[str, np.ndarray] | None = None) -> None:
        self.b = GraphBuilder(graph.name, registry=graph.registry)
        self.biases = biases or {}
        self.point_params = params
        self.per_channel = per_channel
        self.points = points
        self.env: dict[str, Value] = {}

    def params(self, name: str) -> ActParams:
        """The activation quantization of point ``name``."""
        return self.point_params[name]

    def scale(self, name: str) -> float | np.ndarray:
        """The activation scale of quantization point ``name`` (one per channel, or one)."""
        return self.params(name).scale

    def qdq(self, x: Value, name: str, out: str) -> Value:
        """QuantizeLinear -> DequantizeLinear of ``x`` at point ``name``'s parameters; the
        dequantized value is called ``out``."""
        p = self.params(name)
        zp_data = np.asarray(p.zero_point, np.uint8 if p.dtype == "u8" else np.int8)
        if p.per_channel:
            zp_data = np.zeros(np.shape(p.scale), zp_data.dtype)
        scale = self.b.constant(f"{name}/scale", np.asarray(p.scale, np.float32))
        zp = self.b.constant(f"{name}/zero_point", zp_data)
        q = self.b.op("QuantizeLinear", [x, scale, zp], name=self.b.unique_name(f"{name}/quantize"),
                      outputs=[self.b.unique_name(f"{name}/{p.dtype}")], axis=1, block_size=0,
                      saturate=1, output_dtype=p.dtype)
        q.quant = QuantParams(np.asarray(p.scale, np.float32), zp_data, 1 if p.per_channel else None)
        return self.b.op("DequantizeLinear", [q, scale, zp], name=self.b.unique_name(f"{name}/dequantize"),
                         outputs=[out], axis=1, block_size=0)

    def const(self, v: Value) -> Value:
        if v.name not in self.env:
            assert v.data is not None
            self.env[v.name] = self.b.constant(v.name, v.data)
        return self.env[v.name]

    def copy(self, node: Node, int8: bool, points: Collection[str]) -> None:
        ins = [None if v is None else (self.const(v) if v.is_constant else self.env[v.name])
               for v in node.inputs]
        if int8:
            ins = self._int8_inputs(node, ins)
        names = [f"{v.name}/prequant" if v.name in points else v.name for v in node.outputs]
        outs = self.b.op(node.op, ins, name=node.name, outputs=names, origin=node.origin,
                         placement=node.placement,
                         **{k: a for k, a in node.attrs.items() if a is not None})
        for old, new in zip(node.outputs, outs if isinstance(outs, tuple) else (outs,)):
            self.env[old.name] = self.qdq(new, old.name, old.name) if old.name in points else new

    def _int8_inputs(self, node: Node, ins: list[Value | None]) -> list[Value | None]:
        w = node.inputs[1]
        assert w is not None and w.data is not None
        axis = weight_axis(node)
        wq, w_scale = quantized_weight(node, self.per_channel)
        ins[1] = self._dequantized(f"{w.name}/int8", wq, w_scale, axis)
        x = node.inputs[0]
        assert x is not None
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        data = self.biases.get(node.name)
        if data is not None and (bias is None or bias.is_constant):
            name = bias.name if bias is not None else f"{node.name}/bias"
            bias = Value(f"{name}/corrected", "f32", tuple(data.shape), data=np.asarray(data, np.float32))
            ins[2:3] = [None]
        if bias is not None and bias.is_constant and self._bias_fits(node, bias, w_scale):
            assert bias.data is not None
            b_scale = (input_scale(self.scale(x.name), w_scale.size) * w_scale).astype(np.float32)
            bq = np.clip(np.rint(bias.data.astype(np.float64) / b_scale), -(2**31), 2**31 - 1).astype(np.int32)
            ins[2:3] = [self._dequantized(f"{bias.name}/int32", bq, b_scale, 0)]
        return ins

    def _bias_fits(self, node: Node, bias: Value, w_scale: np.ndarray) -> bool:
        """Whether the bias is one value per output channel that the accumulator can take."""
        if node.op == "Gemm" and float(node.attrs.get("beta", 1.0)) != 1.0:
            return False
        return bias.rank == 1 and (w_scale.size == 1 or bias.shape[0] == w_scale.size)

    def _dequantized(self, name: str, data: np.ndarray, scale: np.ndarray, axis: int) -> Value:
        q = self.b.constant(name, data)
        q.quant = QuantParams(scale, np.zeros(scale.shape, np.int64), axis if scale.ndim else None)
        s = self.b.constant(f"{name}/scale", scale.astype(np.float32))
        zp = self.b.constant(f"{name}/zero_point", np.zeros(scale.shape, data.dtype))
        return self.b.op("DequantizeLinear", [q, s, zp], name=self.b.unique_name(f"{name}/dequantize"),
                         outputs=[self.b.unique_name(f"{name}/dq")], axis=axis, block_size=0)


@dataclass(frozen=True)
class ActParams:
    """How one activation tensor is quantized: ``q = saturate(rint(x / scale) + zero_point)``;
    ``scale`` is one number, or a 1-d array of one per channel (axis 1, zero point 0)."""

    scale: float | np.ndarray
    zero_point: int
    dtype: str  # "i8" or "u8"

    @property
    def per_channel(self) -> bool:
        return isinstance(self.scale, np.ndarray)

    def shaped(self, rank: int) -> float | np.ndarray:
        """``scale`` shaped to broadcast against a tensor of rank ``rank`` (channels on axis 1)."""
        return along_axis(self.scale, 1, rank) if isinstance(self.scale, np.ndarray) else self.scale


def activation_params(r: TensorRange, asymmetric: bool = False) -> ActParams:
    """The quantization of a tensor with calibrated range ``r``.

    A tensor never negative (after Relu, Clip(0, 6), HardSigmoid, Sigmoid) is unsigned: u8 with
    zero point 0, ``scale = threshold / 255`` (TPU-MLIR's UINT8 for such tensors: the symmetric
    scheme with the sign bit spent on one more bit of resolution). Otherwise symmetric i8,
    ``scale = threshold / 127``; or, with ``asymmetric``, u8 over ``[max(min, -threshold),
    min(max, threshold)]`` with the zero point that maps 0 exactly (onnxruntime's and
    TPU-MLIR's asymmetric scheme): a tensor such as a hardswish output, in [-0.375, 6], then
    gets 255 levels over its own span instead of 127 over [-6, 6].
    """
    if r.threshold < MIN_THRESHOLD:  # an all-zero (or all but zero) tensor: any scale keeps it 0
        return ActParams(1.0, 0, "i8")
    if r.min >= 0:
        return ActParams(r.threshold / 255.0, 0, "u8")
    lo, hi = max(r.min, -r.threshold), min(r.max, r.threshold)
    if not asymmetric or hi <= 0:
        return ActParams(r.threshold / 127.0, 0, "i8")
    scale = (hi - lo) / 255.0
    return ActParams(scale, int(np.clip(np.rint(-lo / scale), 0, 255)), "u8")


def channel_params(r: TensorRange) -> ActParams | None:
    """Symmetric per-channel quantization of a tensor with calibrated range ``r``: channel
    ``c``'s threshold is its own largest |x|, capped at the tensor's threshold (so a method
    that clips outliers still clips them), u8 for a never-negative tensor as in
    :func:`activation_params`; None when the table has no channel ranges for it."""
    if r.channels is None or r.threshold < MIN_THRESHOLD:
        return None
    t = np.minimum(np.asarray(r.channels, np.float64), r.threshold)
    # an all-zero channel (or one whose scale would not be a float32): any scale keeps it 0
    t = np.where(t >= MIN_THRESHOLD, t, r.threshold)
    levels = 255.0 if r.min >= 0 else 127.0
    return ActParams((t / levels).astype(np.float32), 0, "u8" if r.min >= 0 else "i8")


def channel_points(graph: Graph, points: Mapping[str, str], nodes: Collection[str]) -> set[str]:
    """The quantization points (of :func:`quant_points` for the int8 nodes ``nodes``) the chip
    can quantize with one scale per channel at no cost: a tensor made by a Conv (whose
    requantization is per channel already) or by an op the target runs in float, and read only
    by depthwise Convs (whose per-channel requantization takes the input's channel scales) and
    ops that run in float. After BatchNorm folding the channels of a MobileNet-style block
    differ by decades (0.1 against 30 in a PP-PicoDet stem): one scale per tensor rounds the
    narrow ones away, and cross-layer equalisation cannot even them out through a hard-swish."""
    uses = Uses.of(graph)
    producer = {v.name: n for n in graph.nodes for v in n.outputs}
    groups: dict[str, list[str]] = {}
    for name, entry in points.items():
        groups.setdefault(entry, []).append(name)
    values = graph.values()
    free: set[str] = set()
    for names in groups.values():
        if any(len(values[n].shape) < 3 for n in names if n in values):
            continue
        makers = [producer[n] for n in names if n in producer and producer[n].name in nodes]
        if all(_takes_channels(r, nodes, points) for n in names if n in values
               for r in uses.readers_of(values[n])) \
                and all(m.op == "Conv" for m in makers):
            free.update(names)
    return free


def _takes_channels(reader: Node, nodes: Collection[str], points: Mapping[str, str]) -> bool:
    """Whether ``reader`` can read a per-channel int8 tensor as it is: an int8 depthwise Conv,
    or an op that runs in float on the dequantized tensor. An op whose output is quantized
    too (a fused Relu, an Add or activation ``fold_qdq`` turns into an integer QAdd or Lut)
    needs one scale."""
    if reader.name in nodes:
        return depthwise(reader)
    return not any(v.name in points for v in reader.outputs)


def point_params(graph: Graph, table: CalibrationTable, points: Mapping[str, str], nodes: Collection[str],
                 asymmetric: bool = False, per_channel: bool = True) -> dict[str, ActParams]:
    """The quantization of every point of ``points`` (the int8 nodes ``nodes``): per channel
    (:func:`channel_params`) at the :func:`channel_points` when ``per_channel`` and the table
    has their channel ranges, else :func:`activation_params` of the point's table entry."""
    free = channel_points(graph, points, nodes) if per_channel else set()
    values = graph.values()
    out: dict[str, ActParams] = {}
    for name, entry in points.items():
        per = table[entry].channels
        if name in free and per is not None and len(per) != values[name].shape[1]:
            raise QuantError(
                f"calibration table: tensor '{entry}' has {len(per)} channel ranges, the graph's "
                f"'{name}' {values[name].shape[1]} channels",
                hint="calibrate this model (same --input-shape and passes) and use that table")
        p = channel_params(table[entry]) if name in free else None
        out[name] = p if p is not None else activation_params(table[entry], asymmetric)
    return out


def quantized_weight(node: Node, per_channel: bool) -> tuple[np.ndarray, np.ndarray]:
    """``node``'s weights in symmetric int8 (round half to even, [-127, 127]) and their scales
    (per output channel, or one with ``per_channel`` False)."""
    w = node.inputs[1]
    assert w is not None and w.data is not None
    axis = weight_axis(node)
    scale = weight_scale(w.data, axis if per_channel else None)
    return np.clip(np.rint(w.data / along_axis(scale, axis, w.rank)), -127, 127).astype(np.int8), scale


def weight_scale(w: np.ndarray, axis: int | None) -> np.ndarray:
    """Symmetric int8 scales of ``w``: ``max|w| / 127`` per slice along ``axis`` (a 1-d array),
    or over the whole tensor (``axis`` None: a scalar); an all-zero slice gets scale 1."""
    a = np.abs(w.astype(np.float64))
    amax = a.max() if axis is None else a.max(axis=tuple(i for i in range(w.ndim) if i != axis))
    return np.asarray(np.where(amax > 0, amax / 127.0, 1.0), np.float32)


def along_axis(scale: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """``scale`` (a scalar, or one value per slice along ``axis``) shaped to broadcast against a
    tensor of rank ``rank``."""
    if scale.ndim == 0:
        return scale
    shape = [1] * rank
    shape[axis] = -1
    return scale.reshape(shape)
