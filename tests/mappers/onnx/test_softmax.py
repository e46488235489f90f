"""ONNX Softmax / LogSoftmax / Hardmax mappings: opset < 13 (flatten to 2-D at axis) and >= 13
(one axis), against onnxruntime."""

from __future__ import annotations

import pytest

from tests.conftest import requires_ort

from .test_conv import check, convert_node, randn

pytestmark = requires_ort
OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3], ids=["axis=absent", "0", "1", "2", "-1", "-3"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", OPS)
def test_softmax_family(op: str, opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    check(op, [randn(2, 3, 4)], opset=opset, rtol=1e-5, atol=1e-6, **attrs)


def test_opset11_flattens_with_reshapes() -> None:
    g, _, _ = convert_node("Softmax", [randn(2, 3, 4)], opset=11, axis=1)
    assert [n.op for n in g.nodes] == ["Reshape", "Softmax", "Reshape"]
    assert g.nodes[0].attrs["shape"] == (2, 12)


def test_opset11_last_axis_is_one_op() -> None:
    g, _, _ = convert_node("LogSoftmax", [randn(2, 3, 4)], opset=11, axis=2)
    assert [n.op for n in g.nodes] == ["LogSoftmax"]
