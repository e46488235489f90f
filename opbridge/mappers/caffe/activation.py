"""Caffe activations and element-wise math layers (ReLU, PReLU, Power, Exp, Log, ...)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params

CAFFE = Framework.CAFFE


def _scalar(g: Any, v: float) -> Value:
    return g.constant(np.array(v, dtype=np.float32))


@mapping(CAFFE, "ReLU")
def relu(node: OriginNode, g: Any) -> Value:
    """max(x, 0) + negative_slope * min(x, 0)."""
    slope = float(Params(node, "relu_param").get("negative_slope"))
    if slope == 0.0:
        return g.op("Relu", [g.input(0)])
    return g.op("LeakyRelu", [g.input(0)], alpha=slope)


@mapping(CAFFE, "ReLU6")
def relu6(node: OriginNode, g: Any) -> Value:
    """min(max(x, 0), 6) (a fork layer)."""
    return g.op("Clip", [g.input(0)], min=0.0, max=6.0)


@mapping(CAFFE, "Clip")
def clip(node: OriginNode, g: Any) -> Value:
    p = Params(node, "clip_param")
    return g.op("Clip", [g.input(0)], min=float(p.get("min")), max=float(p.get("max")))


@mapping(CAFFE, "PReLU")
def prelu(node: OriginNode, g: Any) -> Value:
    """Per-channel slopes (axis 1), or one shared slope with channel_shared."""
    x = g.input(0)
    shared = bool(Params(node, "prelu_param").get("channel_shared"))
    c = 1 if shared or len(x.shape) < 2 else int(x.shape[1])
    slope = g.weight_array(0, (c,), kind="slope")
    shape = (c,) + (1,) * max(len(x.shape) - 2, 0) if not shared else (1,)
    return g.op("PRelu", [x, g.constant(slope.reshape(shape))])


@mapping(CAFFE, "ELU")
def elu(node: OriginNode, g: Any) -> Value:
    return g.op("Elu", [g.input(0)], alpha=float(Params(node, "elu_param").get("alpha")))


@mapping(CAFFE, "Sigmoid")
def sigmoid(node: OriginNode, g: Any) -> Value:
    return g.op("Sigmoid", [g.input(0)])


@mapping(CAFFE, "TanH")
def tanh(node: OriginNode, g: Any) -> Value:
    return g.op("Tanh", [g.input(0)])


@mapping(CAFFE, "AbsVal")
def absval(node: OriginNode, g: Any) -> Value:
    return g.op("Abs", [g.input(0)])


@mapping(CAFFE, "BNLL")
def bnll(node: OriginNode, g: Any) -> Value:
    """log(1 + exp(x))."""
    return g.op("Softplus", [g.input(0)])


@mapping(CAFFE, "Swish")
def swish(node: OriginNode, g: Any) -> Value:
    """x * sigmoid(beta * x)."""
    return g.op("Swish", [g.input(0)], alpha=float(Params(node, "swish_param").get("beta")))


@mapping(CAFFE, "Mish")
def mish(node: OriginNode, g: Any) -> Value:
    """x * tanh(softplus(x)) (a fork layer, YOLOv4)."""
    return g.op("Mish", [g.input(0)])


@mapping(CAFFE, "Threshold")
def threshold(node: OriginNode, g: Any) -> Value:
    """1 where x > threshold, else 0."""
    t = float(Params(node, "threshold_param").get("threshold"))
    gt = g.op("Greater", [g.input(0), _scalar(g, t)])
    return g.op("Cast", [gt], to="f32")


def _affine(g: Any, x: Value, scale: float, shift: float) -> Value:
    if scale != 1.0:
        x = g.op("Mul", [x, _scalar(g, scale)])
    if shift != 0.0:
        x = g.op("Add", [x, _scalar(g, shift)])
    return x


@mapping(CAFFE, "Power")
def power(node: OriginNode, g: Any) -> Value:
    """(shift + scale * x) ^ power."""
    p = Params(node, "power_param")
    y = _affine(g, g.input(0), float(p.get("scale")), float(p.get("shift")))
    pw = float(p.get("power"))
    if pw != 1.0:
        y = g.op("Pow", [y, _scalar(g, pw)])
    if y is g.input(0):
        y = g.op("Identity", [y])
    return y


@mapping(CAFFE, "Exp")
def exp(node: OriginNode, g: Any) -> Value:
    """base ^ (shift + scale * x); base -1 means e."""
    p = Params(node, "exp_param")
    base = float(p.get("base"))
    if base != -1.0 and base <= 0:
        raise p.error("base", base, "must be > 0 (or -1 for e)")
    ln_base = 1.0 if base == -1.0 else math.log(base)
    y = _affine(g, g.input(0), float(p.get("scale")) * ln_base, float(p.get("shift")) * ln_base)
    return g.op("Exp", [y])


@mapping(CAFFE, "Log")
def log(node: OriginNode, g: Any) -> Value:
    """log_base(shift + scale * x); base -1 means e."""
    p = Params(node, "log_param")
    base = float(p.get("base"))
    if base != -1.0 and (base <= 0 or base == 1.0):
        raise p.error("base", base, "must be > 0 and != 1 (or -1 for e)")
    y = g.op("Log", [_affine(g, g.input(0), float(p.get("scale")), float(p.get("shift")))])
    if base != -1.0:
        y = g.op("Mul", [y, _scalar(g, 1.0 / math.log(base))])
    return y


@mapping(CAFFE, "Dropout")
def dropout(node: OriginNode, g: Any) -> Value:
    """Identity at inference (Caffe scales at training time)."""
    return g.op("Identity", [g.input(0)])
