"""Comparisons, boolean logic, Where and float classification (ONNX semantics and names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .activation import widen
from .common import ALL, FLOATS, NUMERIC, broadcast_fn, broadcast_shapes


def _compare(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """A comparison compute: f16/bf16 compared in f32 (exact), result bool."""

    def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.asarray(fn(widen(a), widen(b)), dtype=np.bool_)

    return compute


# (op, numpy comparison, dtypes, doc)
_COMPARISONS: tuple[tuple[str, np.ufunc, tuple[str, ...], str], ...] = (
    ("Equal", np.equal, ALL, "a == b (nan != nan)"),
    ("Less", np.less, NUMERIC, "a < b"),
    ("LessOrEqual", np.less_equal, NUMERIC, "a <= b"),
    ("Greater", np.greater, NUMERIC, "a > b"),
    ("GreaterOrEqual", np.greater_equal, NUMERIC, "a >= b"),
)

for _name, _cmp, _types, _doc in _COMPARISONS:
    (
        define_op(_name)
        .doc(_doc + ", elementwise with numpy broadcasting; the result is bool")
        .input("a", "T").input("b", "T").output("c", "T1")
        .type_param("T", _types).type_param("T1", ("bool",))
        .shape_fn(broadcast_fn("bool"))
        .compute(_compare(_cmp))
    )

_LOGICAL: tuple[tuple[str, np.ufunc], ...] = (
    ("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor),
)

for _name, _logic in _LOGICAL:
    (
        define_op(_name)
        .doc(f"{_logic.__name__} of two bool tensors (numpy broadcasting)")
        .input("a", "T").input("b", "T").output("c", "T1")
        .type_param("T", ("bool",)).type_param("T1", ("bool",))
        .shape_fn(broadcast_fn("bool"))
        .compute(_logic)
    )

(
    define_op("Not")
    .doc("logical negation of a bool tensor")
    .input("x", "T").output("y", "T")
    .type_param("T", ("bool",))
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(np.logical_not)
)


def _where_shape(ctx: ShapeContext) -> Any:
    shapes = [ctx.input_shape(i) for i in range(3)]
    return broadcast_shapes(shapes, ctx.where), ctx.input_dtype(1)


(
    define_op("Where")
    .doc("x where condition else y (numpy broadcasting of all three)")
    .input("condition", "B").input("x", "T").input("y", "T").output("output", "T")
    .type_param("B", ("bool",)).type_param("T", ALL)
    .shape_fn(_where_shape)
    .compute(lambda c, x, y: np.where(c, x, y))
)

(
    define_op("IsNaN")
    .doc("true where x is nan")
    .input("x", "T1").output("y", "T2")
    .type_param("T1", FLOATS).type_param("T2", ("bool",))
    .shape_fn(lambda ctx: (ctx.input_shape(0), "bool"))
    .compute(lambda x: np.isnan(widen(x)))
)


def _isinf(x: np.ndarray, detect_negative: int, detect_positive: int) -> np.ndarray:
    w = widen(x)
    return (np.isneginf(w) & bool(detect_negative)) | (np.isposinf(w) & bool(detect_positive))


(
    define_op("IsInf")
    .doc("true where x is an infinity of a detected sign")
    .input("x", "T1").output("y", "T2")
    .param("detect_negative", "int", default=1, allowed=(0, 1))
    .param("detect_positive", "int", default=1, allowed=(0, 1))
    .type_param("T1", FLOATS).type_param("T2", ("bool",))
    .shape_fn(lambda ctx: (ctx.input_shape(0), "bool"))
    .compute(_isinf)
)
