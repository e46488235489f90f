"""Softmax, LogSoftmax, Hardmax along one axis (ONNX-13 semantics; older opsets' flatten-to-2-D
behaviour is the mapper's job)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def _axis_shape(ctx: ShapeContext) -> Any:
    ctx.normalize_axis(ctx.attr("axis"), ctx.input_rank(0))
    return ctx.same_as_input(0)


def _wdt(x: np.ndarray) -> np.dtype:
    # f16 is computed in f16, as the onnx reference does (the conformance suite's expected
    # values round every step); bf16, which numpy cannot compute in, goes through f32
    return x.dtype if x.dtype in (np.float16, np.float64) else np.dtype(np.float32)


def _softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    xw = x.astype(_wdt(x), copy=False)
    e = np.exp(xw - np.max(xw, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype, copy=False)


def _log_softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    xw = x.astype(_wdt(x), copy=False)
    s = xw - np.max(xw, axis=axis, keepdims=True)
    return (s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))).astype(x.dtype, copy=False)


def _hardmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    arg = np.expand_dims(np.argmax(x, axis=axis), axis)  # first maximum wins, as in ONNX
    y = np.zeros_like(x)
    np.put_along_axis(y, arg, np.ones((), x.dtype), axis=axis)
    return y


for _name, _fn, _doc in (
    ("Softmax", _softmax, "exp(x) / sum(exp(x)) along `axis`"),
    ("LogSoftmax", _log_softmax, "x - log(sum(exp(x))) along `axis`"),
    ("Hardmax", _hardmax, "1 at the first maximum along `axis`, 0 elsewhere"),
):
    (
        define_op(_name)
        .doc(_doc)
        .input("input", "T").output("output", "T")
        .param("axis", "int", default=-1, doc="the axis the op runs along")
        .type_param("T", FLOATS)
        .shape_fn(_axis_shape)
        .compute(_fn)
    )
