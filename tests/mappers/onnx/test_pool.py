"""ONNX pooling mappings: converted one-node models against onnxruntime, across opsets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opbridge.errors import OpbridgeError
from tests.conftest import requires_ort

from .test_conv import check, convert_node, randn

pytestmark = requires_ort

WINDOW = {
    "attrs-absent": ((1, 3, 6, 7), {"kernel_shape": [2, 2]}),
    "pads-strides": ((1, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    "same-upper": ((1, 2, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    "same-lower": ((1, 2, 9, 8), {"kernel_shape": [4, 2], "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
    "valid": ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    "1d": ((2, 3, 11), {"kernel_shape": [3], "strides": [2]}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "pads": [0, 1, 1, 1, 0, 1]}),
}
CEIL = {
    "ceil": ((1, 3, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    "ceil-pads": ((1, 1, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                 "ceil_mode": 1}),
}


@pytest.mark.parametrize("opset", [8, 12, 22])
@pytest.mark.parametrize("case", list(WINDOW))
def test_maxpool(case: str, opset: int) -> None:
    xs, attrs = WINDOW[case]
    check("MaxPool", [randn(*xs)], opset=opset, **attrs)


@pytest.mark.parametrize("opset", [10, 22])
@pytest.mark.parametrize("case", list(CEIL) + ["dilations"])
def test_maxpool_v10_attrs(case: str, opset: int) -> None:
    xs, attrs = CEIL[case] if case in CEIL else ((1, 2, 9, 9), {"kernel_shape": [2, 3],
                                                                 "dilations": [2, 1]})
    check("MaxPool", [randn(*xs)], opset=opset, **attrs)


@pytest.mark.parametrize("storage_order", [None, 0, 1], ids=["storage_order=absent", "0", "1"])
@pytest.mark.parametrize("opset", [8, 12])
def test_maxpool_indices_output(opset: int, storage_order: int | None) -> None:
    attrs: dict[str, Any] = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}
    if storage_order is not None:
        attrs["storage_order"] = storage_order
    check("MaxPool", [randn(2, 3, 7, 8)], 2, opset=opset, **attrs)


# ceil_mode exists from AveragePool-10
_AVG_CASES = [(c, o) for c in list(WINDOW) + list(CEIL) for o in (7, 11, 19, 22)
              if not (c in CEIL and o < 10)]


@pytest.mark.parametrize("cip", [None, 0, 1], ids=["count_include_pad=absent", "cip=0", "cip=1"])
@pytest.mark.parametrize("case, opset", _AVG_CASES, ids=[f"{c}-{o}" for c, o in _AVG_CASES])
def test_averagepool(case: str, opset: int, cip: int | None) -> None:
    xs, attrs = {**WINDOW, **CEIL}[case]
    if cip is not None:
        attrs = {**attrs, "count_include_pad": cip}
    check("AveragePool", [randn(*xs)], opset=opset, **attrs)


def test_averagepool_v19_dilations() -> None:
    check("AveragePool", [randn(1, 2, 9, 9)], opset=19, kernel_shape=[2, 3], dilations=[2, 1],
          pads=[1, 1, 1, 1], count_include_pad=1)


@pytest.mark.parametrize("p", [None, 1, 3], ids=["p=absent", "p=1", "p=3"])
@pytest.mark.parametrize("opset", [2, 11, 18])
@pytest.mark.parametrize("case", ["attrs-absent", "pads-strides", "same-upper", "1d"])
def test_lppool(case: str, opset: int, p: int | None) -> None:
    xs, attrs = WINDOW[case]
    if p is not None:
        attrs = {**attrs, "p": p}
    check("LpPool", [randn(*xs)], opset=opset, rtol=1e-4, **attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 3, 4, 5)], ids=["1d", "2d", "3d"])
def test_global_pools(op: str, shape: tuple[int, ...]) -> None:
    check(op, [randn(*shape)], opset=13)


def test_global_lppool_p() -> None:
    check("GlobalLpPool", [randn(2, 3, 4, 5)], opset=13, p=3, rtol=1e-4)


@pytest.mark.parametrize("attrs, match", [
    ({}, r"attribute 'kernel_shape': required but absent"),
    ({"kernel_shape": [2, 2], "auto_pad": "FULL"}, r"attribute 'auto_pad'"),
    ({"kernel_shape": [2, 2], "pads": [1, 1]}, r"attribute 'pads'.*2 entries"),
    ({"kernel_shape": [2, 2], "dilations": [2, 2]}, r"attribute 'dilations': not an attribute"),
], ids=["kernel_shape-absent", "auto_pad-unknown", "pads-len", "dilations-before-opset-10"])
def test_pool_errors(attrs: dict[str, Any], match: str) -> None:
    with pytest.raises(OpbridgeError, match=match):
        convert_node("MaxPool", [randn(1, 2, 6, 6)], opset=8, **attrs)


def test_lppool_fractional_p_is_unsupported() -> None:
    with pytest.raises(OpbridgeError, match=r"'p' = 2.5"):
        convert_node("GlobalLpPool", [randn(1, 2, 3, 3)], opset=1, p=2.5)


def test_auto_pad_resolves_to_pads() -> None:
    g, _, _ = convert_node("AveragePool", [randn(1, 1, 5, 5)], opset=13, kernel_shape=[2, 2],
                           auto_pad="SAME_UPPER")
    (node,) = [n for n in g.nodes if n.op == "AveragePool"]
    assert node.attrs["pads"] == (0, 0, 1, 1)
    np.testing.assert_equal(node.attrs["ceil_mode"], 0)


ROIS = np.array([[0.0, 0.0, 9.0, 9.0], [1.5, 2.0, 6.2, 7.9], [-2.0, -1.0, 12.0, 11.0]], np.float32)


_ROI_ATTRS = {
    "attrs-absent": {},
    "max-2x3": {"mode": "max", "output_height": 2, "output_width": 3},
    "output_half_pixel-ratio-scale": {"coordinate_transformation_mode": "output_half_pixel",
                                      "sampling_ratio": 2, "spatial_scale": 0.5},
}
# coordinate_transformation_mode exists from RoiAlign-16
_ROI_CASES = [(c, o) for c in _ROI_ATTRS for o in (10, 16) if not (o < 16 and "output_half" in c)]


@pytest.mark.parametrize("case, opset", _ROI_CASES, ids=[f"{c}-{o}" for c, o in _ROI_CASES])
def test_roi_align(case: str, opset: int) -> None:
    attrs = _ROI_ATTRS[case]
    check("RoiAlign", [randn(2, 3, 10, 10), ROIS, np.array([0, 1, 1], np.int64)], opset=opset,
          initializers=[False, True, True], rtol=1e-4, atol=1e-5, **attrs)


@pytest.mark.parametrize("attrs", [{"pooled_shape": [2, 2]},
                                   {"pooled_shape": [3, 2], "spatial_scale": 0.5}],
                         ids=["spatial_scale=absent", "spatial_scale=0.5"])
def test_max_roi_pool(attrs: dict[str, Any]) -> None:
    rois = np.array([[0, 0, 0, 7, 7], [1, 2, 1, 6, 5], [0, 3, 3, 3, 3]], np.float32)
    check("MaxRoiPool", [randn(2, 3, 8, 8), rois], opset=1, initializers=[False, True], **attrs)


def test_maxunpool() -> None:
    # MaxPool's own Indices feed MaxUnpool (both from onnxruntime's MaxPool, run once here)
    import onnxruntime as ort

    from tests.ir.ops.onnx_ref import onnx_node_model

    x = randn(1, 2, 6, 6)
    model, feeds = onnx_node_model("MaxPool", [x], 2, opset=12, kernel_shape=[2, 2], strides=[2, 2])
    model = __import__("onnx").shape_inference.infer_shapes(model)
    model.ir_version = 10
    y, idx = ort.InferenceSession(model.SerializeToString(),
                                  providers=["CPUExecutionProvider"]).run(None, feeds)
    check("MaxUnpool", [y, idx], opset=11, kernel_shape=[2, 2], strides=[2, 2])
