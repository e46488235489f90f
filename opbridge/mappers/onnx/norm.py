"""ONNX mappings: BatchNormalization, LayerNormalization, InstanceNormalization,
GroupNormalization, LRN, LpNormalization, MeanVarianceNormalization.

Semantics: https://onnx.ai/onnx/operators/. BatchNormalization maps onto the IR's inference
form; training_mode=1 (opset 14+) becomes a subgraph computing the batch statistics and the
updated running statistics. The statistics outputs of opsets < 14 and opset < 7's spatial=0
(per-activation statistics) are reported as unsupported. GroupNormalization-18
takes scale and bias per group; from 21 per channel (the IR's form), so the 18 mapping
repeats them per channel. stash_type (the statistics' precision) has no IR attribute: the IR
always computes statistics in f32 or wider.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import LEGACY_HINTS, checked_attrs, one_to_one, required_input

ONNX = Framework.ONNX


def _extra_outputs(node: OriginNode) -> list[int]:
    return [i for i, name in enumerate(node.outputs) if i > 0 and name]


def _check_stash_type(node: OriginNode, g: MapContext) -> None:
    st = node.attrs.get("stash_type")  # not in GroupNormalization-18
    if st is not None and int(st) != 1:
        raise g.unsupported(f"attribute 'stash_type' = {st}: statistics are computed in f32 "
                            "(stash_type=1) only")


# -- BatchNormalization ----------------------------------------------------------------------
def _batchnorm(node: OriginNode, g: MapContext, known: tuple[str, ...]) -> Any:
    checked_attrs(node, g, known, LEGACY_HINTS + ("is_test", "momentum"))
    # training_mode exists from opset 14, spatial before 9: absent otherwise
    if int(node.attrs.get("training_mode") or 0):
        return _batchnorm_training(node, g)
    if node.attrs.get("spatial") is not None and int(node.attrs["spatial"]) != 1:
        raise g.unsupported("spatial=0 (per-activation statistics) is not supported")
    extra = _extra_outputs(node)
    if extra:
        raise g.unsupported(f"output(s) {extra} (running or saved statistics) are training "
                            "outputs; only Y is supported", hint="export the model in eval mode")
    ins = [required_input(g, i, what) for i, what in
           enumerate(("X", "scale", "B", "mean", "var"))]
    return g.op("BatchNormalization", ins, epsilon=float(node.get_attr("epsilon")))


def _batchnorm_training(node: OriginNode, g: MapContext) -> Any:
    """training_mode=1 (opset 14+): normalise with the batch's statistics and output the
    updated running statistics (input * momentum + batch * (1 - momentum)), as a subgraph."""
    x, scale, b, mean, var = (required_input(g, i, what) for i, what in
                              enumerate(("X", "scale", "B", "input_mean", "input_var")))
    axes = tuple(i for i in range(len(x.shape)) if i != 1)
    batch_mean = g.op("ReduceMean", [x], axes=axes, keepdims=0)
    d = g.op("Sub", [x, g.op("ReduceMean", [x], axes=axes, keepdims=1)])
    batch_var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=axes, keepdims=0)
    y = g.op("BatchNormalization", [x, scale, b, batch_mean, batch_var],
             epsilon=float(node.get_attr("epsilon")))
    if not _extra_outputs(node):
        return y
    momentum = float(node.get_attr("momentum"))
    keep = g.constant(momentum, dtype=x.dtype)
    new = g.constant(1.0 - momentum, dtype=x.dtype)

    def running(old: Value, batch: Value) -> Value:
        return g.op("Add", [g.op("Mul", [old, keep]), g.op("Mul", [batch, new])])

    return (y, running(mean, batch_mean), running(var, batch_var))[: len(node.outputs)]


@mapping(ONNX, "BatchNormalization", since_opset=1)
def batchnorm_v1(node: OriginNode, g: MapContext) -> Any:
    return _batchnorm(node, g, ("epsilon", "spatial"))


@mapping(ONNX, "BatchNormalization", since_opset=9)
def batchnorm_v9(node: OriginNode, g: MapContext) -> Any:
    return _batchnorm(node, g, ("epsilon",))


@mapping(ONNX, "BatchNormalization", since_opset=14)
def batchnorm_v14(node: OriginNode, g: MapContext) -> Any:
    return _batchnorm(node, g, ("epsilon", "training_mode"))


# -- LayerNormalization ----------------------------------------------------------------------
@mapping(ONNX, "LayerNormalization", since_opset=17)
def layernorm(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis", "epsilon", "stash_type"))
    _check_stash_type(node, g)
    stats = bool(_extra_outputs(node))
    return g.op("LayerNormalization",
                [required_input(g, 0, "X"), required_input(g, 1, "Scale"), g.input(2)],
                axis=int(node.get_attr("axis")), epsilon=float(node.get_attr("epsilon")),
                output_stats=stats, num_outputs=3 if stats else 1)


# -- InstanceNormalization / GroupNormalization ---------------------------------------------
one_to_one("InstanceNormalization", 1, attrs=("epsilon",), ignored=LEGACY_HINTS, num_inputs=3)


def _per_channel(g: MapContext, v: Value, groups: int, channels: int, what: str) -> Value:
    """A per-group vector (opset 18) repeated per channel (the IR's form)."""
    if tuple(v.shape) != (groups,):
        raise g.error(f"input '{what}' has shape {list(v.shape)}; GroupNormalization-18 takes "
                      f"one value per group ({groups})")
    data = g.const(1 if what == "scale" else 2)
    if data is not None:
        return g.constant(np.repeat(data, channels // groups))
    col = g.op("Reshape", [v], shape=(groups, 1))
    return g.op("Reshape", [g.op("Expand", [col], shape=(groups, channels // groups))],
                shape=(channels,))


def _groupnorm(node: OriginNode, g: MapContext, per_group: bool) -> Any:
    checked_attrs(node, g, ("epsilon", "num_groups", "stash_type"))
    _check_stash_type(node, g)
    x = required_input(g, 0, "X")
    scale, bias = required_input(g, 1, "scale"), required_input(g, 2, "bias")
    if node.get_attr("num_groups", None) is None:
        raise g.error("required but absent", attr="num_groups")
    groups = int(node.get_attr("num_groups"))
    if per_group and len(x.shape) >= 2 and isinstance(x.shape[1], int) and groups >= 1 \
            and x.shape[1] % groups == 0:
        scale = _per_channel(g, scale, groups, x.shape[1], "scale")
        bias = _per_channel(g, bias, groups, x.shape[1], "bias")
    return g.op("GroupNormalization", [x, scale, bias], num_groups=groups,
                epsilon=float(node.get_attr("epsilon")))


@mapping(ONNX, "GroupNormalization", since_opset=18)
def groupnorm_v18(node: OriginNode, g: MapContext) -> Any:
    return _groupnorm(node, g, per_group=True)


@mapping(ONNX, "GroupNormalization", since_opset=21)
def groupnorm_v21(node: OriginNode, g: MapContext) -> Any:
    return _groupnorm(node, g, per_group=False)


# -- LRN, LpNormalization, MeanVarianceNormalization ----------------------------------------
one_to_one("LRN", 1, attrs=("size", "alpha", "beta", "bias"))
one_to_one("LpNormalization", 1, attrs=("axis", "p"))


@mapping(ONNX, "MeanVarianceNormalization", since_opset=9)
def mvn(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axes",))
    axes = node.get_attr("axes", None)
    extra = {} if axes is None else {"axes": tuple(int(a) for a in axes)}
    return g.op("MeanVarianceNormalization", [required_input(g, 0, "X")], **extra)
