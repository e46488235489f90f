"""ONNX ReduceX / ArgMax / ArgMin / CumSum / TopK mappings against onnxruntime: axes as an
attribute (old opsets) and as a constant input (13 / 18+)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opbridge.errors import OpbridgeError
from opbridge.mappers.onnx.reduce import AXES_INPUT_SINCE
from tests.conftest import requires_ort

from .test_conv import check, convert_node, randn

pytestmark = requires_ort

CASES = {
    "axes=absent": (None, {}),
    "axes=1": ([1], {}),
    "axes=0,-1-keepdims=0": ([0, -1], {"keepdims": 0}),
}


def _data(op: str) -> np.ndarray:
    x = randn(2, 3, 4)
    if op in ("ReduceLogSum", "ReduceProd"):
        x = np.abs(x) + 0.5
    return x


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_reduce_axes_attribute(op: str, case: str) -> None:
    axes, attrs = CASES[case]
    opset = AXES_INPUT_SINCE[op] - 1
    extra = {} if axes is None else {"axes": axes}
    check(op, [_data(op)], opset=opset, rtol=1e-4, **attrs, **extra)


@pytest.mark.parametrize("case", list(CASES) + ["noop"])
@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_reduce_axes_input(op: str, case: str) -> None:
    axes, attrs = CASES.get(case, (None, {"noop_with_empty_axes": 1}))
    ins = [_data(op)] + ([] if axes is None else [np.array(axes, np.int64)])
    check(op, ins, opset=max(AXES_INPUT_SINCE[op], 18), initializers=[False, True][: len(ins)],
          rtol=1e-4, **attrs)


def test_reduce_axes_fed_at_run_time_is_reported() -> None:
    with pytest.raises(OpbridgeError, match=r"input 1 \(axes\).*computed at run time"):
        convert_node("ReduceSum", [randn(2, 3), np.array([1], np.int64)], opset=13)


@pytest.mark.parametrize("attrs", [{}, {"axis": 1, "keepdims": 0}, {"axis": -1, "select_last_index": 1}],
                         ids=["absent", "axis=1-keepdims=0", "select_last_index=1"])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(op: str, attrs: dict[str, Any]) -> None:
    x = np.random.default_rng(0).integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties
    check(op, [x], opset=13, **attrs)


@pytest.mark.parametrize("flags", [{}, {"exclusive": 1, "reverse": 1}], ids=["absent", "exclusive+reverse"])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum(axis: int, flags: dict[str, int]) -> None:
    check("CumSum", [randn(3, 4), np.array(axis, np.int64)], opset=14, initializers=[False, True],
          **flags)


@pytest.mark.parametrize("attrs, opset", [({}, 10), ({}, 11), ({"axis": 0}, 10), ({"axis": 0}, 11),
                                          ({"largest": 0, "sorted": 1}, 11)],
                         ids=["absent-10", "absent-11", "axis=0-10", "axis=0-11", "smallest-11"])
def test_topk(opset: int, attrs: dict[str, Any]) -> None:
    # largest/sorted exist from TopK-11
    x = np.random.default_rng(1).permutation(20).reshape(4, 5).astype(np.float32)
    check("TopK", [x, np.array([2], np.int64)], 2, opset=opset, initializers=[False, True], **attrs)


def test_topk_v1_k_attribute() -> None:
    import opbridge as ob

    x = np.random.default_rng(1).permutation(12).reshape(3, 4).astype(np.float32)
    g, _, feeds = convert_node("TopK", [x], 2, opset=1, k=2)
    out = ob.interpret(g, feeds)
    want = -np.sort(-x, axis=-1)[:, :2]
    np.testing.assert_array_equal(out["out0"], want)
    np.testing.assert_array_equal(np.take_along_axis(x, out["out1"], -1), want)
