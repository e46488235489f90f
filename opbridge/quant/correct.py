"""Bias correction: the int8 model's mean output error per channel, removed through the bias.

Rounding weights to int8 and clipping activations at their thresholds move the *mean* of a
layer's output, channel by channel: ``E[W x] != E[W_q x_q]``. On networks built of many thin
layers (depthwise/pointwise MobileNet blocks) these shifts add up layer after layer. Empirical
bias correction (Nagel et al., "Data-Free Quantization Through Weight Equalization and Bias
Correction", ICCV 2019, section 4.2, the empirical variant; AIMET's ``bias_correction``)
measures, on calibration samples, each int8 layer's output in the int8 model (every layer
before it int8 and already corrected) against the float model's, and adds the mean difference
per output channel to the layer's bias. The layers are corrected in graph order in one pass:
the int8 model is simulated in numpy (fake quantization: quantize and dequantize each tensor
where the int8 graph does) over all samples, node by node, so each layer's correction sees
the corrected layers before it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.interpret import interpret, run_node
from .int8 import (
    ActParams,
    along_axis,
    point_params,
    quant_points,
    quantizable,
    quantized_weight,
    weight_axis,
)
from .table import CalibrationTable


def fake_quant(x: np.ndarray, p: ActParams) -> np.ndarray:
    """``x`` quantized with ``p`` and dequantized (numpy, round half to even, saturating)."""
    lo, hi = (0, 255) if p.dtype == "u8" else (-128, 127)
    x = np.asarray(x, np.float64)
    scale = p.shaped(x.ndim)
    q = np.clip(np.rint(x / scale) + p.zero_point, lo, hi)
    return ((q - p.zero_point) * scale).astype(np.float32)


def correctable(node: Node) -> bool:
    """Whether ``node``'s bias can take a correction: a Conv, or a Gemm whose C is absent or
    a constant vector with beta 1 (MatMul has no bias)."""
    if node.op == "Conv":
        return len(node.inputs) < 3 or node.inputs[2] is None or node.inputs[2].is_constant
    if node.op != "Gemm" or float(node.attrs.get("beta", 1.0)) != 1.0:
        return False
    c = node.inputs[2] if len(node.inputs) > 2 else None
    return c is None or (c.is_constant and c.rank == 1)


def bias_corrections(graph: Graph, table: CalibrationTable, feeds: Sequence[Mapping[str, np.ndarray]],
                     per_channel: bool = True, keep_float: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Per int8 node of ``graph`` whose bias can take it, the corrected float bias (see the
    module): its bias plus the mean, over ``feeds`` and every position, of the float model's
    output minus the int8 model's, per output channel (before a fused Relu/Clip)."""
    chosen = {n.name for n in graph.nodes if quantizable(n) and n.name not in keep_float
              and n.origin.name not in keep_float}
    points = quant_points(graph, chosen)
    params = point_params(graph, table, points, chosen, per_channel=per_channel)
    floats = [interpret(graph, f, keep_intermediates=True) for f in feeds]
    envs = [{v.name: (fake_quant(f[v.name], params[v.name]) if v.name in params else f[v.name])
             for v in graph.inputs} for f in feeds]
    out: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        int8 = node.name in chosen
        weights = _int8_weights(node, per_channel) if int8 else None
        results = []
        for env in envs:
            args = [None if v is None else (v.data if v.is_constant else env[v.name]) for v in node.inputs]
            if weights is not None:
                args[1] = weights
            results.append(run_node(graph, node, args))
        if int8 and correctable(node):
            shift = _mean_error(node, [f[node.outputs[0].name] for f in floats], [r[0] for r in results])
            out[node.name] = _bias(node) + shift
            axes = _channel_axis(node, results[0][0].ndim)
            for r in results:
                r[0] = r[0] + along_axis(shift.astype(np.float32), axes, r[0].ndim)
        for env, r in zip(envs, results):
            for v, a in zip(node.outputs, r):
                env[v.name] = fake_quant(a, params[v.name]) if v.name in params else a
    return out


def _int8_weights(node: Node, per_channel: bool) -> np.ndarray:
    """``node``'s weights rounded to int8 and back to float."""
    wq, scale = quantized_weight(node, per_channel)
    w = node.inputs[1]
    assert w is not None
    return (wq.astype(np.float32) * along_axis(scale, weight_axis(node), w.rank)).astype(np.float32)


def _channel_axis(node: Node, rank: int) -> int:
    """The output-channel axis of ``node``'s output: 1 for Conv, the last for Gemm."""
    return 1 if node.op == "Conv" else rank - 1


def _bias(node: Node) -> np.ndarray:
    """``node``'s float bias (zeros when it has none)."""
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if b is not None and b.data is not None:
        return b.data.astype(np.float64).reshape(-1)
    w = node.inputs[1]
    assert w is not None
    return np.zeros(int(w.shape[weight_axis(node)]), np.float64)


def _mean_error(node: Node, reference: Sequence[np.ndarray], got: Sequence[np.ndarray]) -> np.ndarray:
    """Per output channel, the mean of ``reference - got`` over every sample and position."""
    axis = _channel_axis(node, np.ndim(got[0]))
    total = sum(np.moveaxis(np.asarray(r, np.float64) - np.asarray(g, np.float64), axis, 0)
                .reshape(np.shape(g)[axis], -1).sum(axis=1) for r, g in zip(reference, got))
    count = sum(int(np.size(g)) // int(np.shape(g)[axis]) for g in got)
    return np.asarray(total, np.float64) / max(count, 1)
