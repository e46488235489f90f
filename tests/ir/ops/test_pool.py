"""Pooling ops against the onnx reference and onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError

from .onnx_ref import assert_close, run_ir, run_onnx_reference
from .test_conv import run_ort

RNG = np.random.default_rng(7)

WINDOW_CASES = {
    "2d-attrs-absent": ((1, 3, 6, 7), {"kernel_shape": [2, 2]}),
    "2d-stride-pads": ((2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "2d-asym-pads": ((1, 2, 8, 7), {"kernel_shape": [3, 2], "pads": [0, 1, 2, 0]}),
    "2d-ceil": ((1, 3, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    "2d-ceil-pads": ((1, 3, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 0, 1],
                                     "ceil_mode": 1}),
    "2d-ceil-drops-last": ((1, 1, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                          "ceil_mode": 1}),
    "2d-floor-explicit": ((1, 3, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 0}),
    "1d-dilation": ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "dilations": [2], "pads": [1, 1]}),
    "1d-dilation-ceil": ((1, 3, 10), {"kernel_shape": [3], "strides": [3], "dilations": [2], "ceil_mode": 1}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 2], "strides": [1, 2, 2]}),
}


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", list(WINDOW_CASES))
def test_maxpool(case: str) -> None:
    xs, attrs = WINDOW_CASES[case]
    x = _x(xs)
    # onnx.reference's MaxPool crashes on asymmetric pads with stride 1; onnxruntime is the
    # reference there, and for every case as a second opinion
    got = run_ir("MaxPool", [x], **attrs)[0]
    if case != "2d-asym-pads":
        assert_close(got, run_onnx_reference("MaxPool", [x], **attrs)[0])
    assert_close(got, run_ort("MaxPool", [x], **attrs)[0])


@pytest.mark.parametrize("cip", [None, 0, 1], ids=["count_include_pad=absent", "cip=0", "cip=1"])
@pytest.mark.parametrize("case", list(WINDOW_CASES))
def test_averagepool(case: str, cip: int | None) -> None:
    xs, attrs = WINDOW_CASES[case]
    if cip is not None:
        attrs = {**attrs, "count_include_pad": cip}
    x = _x(xs)
    got = run_ir("AveragePool", [x], **attrs)[0]
    assert_close(got, run_onnx_reference("AveragePool", [x], **attrs)[0], rtol=1e-5, atol=1e-6)
    assert_close(got, run_ort("AveragePool", [x], **attrs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [None, 1, 3], ids=["p=absent", "p=1", "p=3"])
@pytest.mark.parametrize("case", ["2d-attrs-absent", "2d-stride-pads", "1d-dilation", "3d"])
def test_lppool(case: str, p: int | None) -> None:
    xs, attrs = WINDOW_CASES[case]
    if p is not None:
        attrs = {**attrs, "p": p}
    x = _x(xs)
    assert_close(run_ir("LpPool", [x], **attrs)[0], run_onnx_reference("LpPool", [x], **attrs)[0],
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("storage_order", [0, 1], ids=["storage_order=0", "storage_order=1"])
@pytest.mark.parametrize("case", ["2d-stride-pads", "2d-ceil-pads", "2d-asym-pads", "1d-dilation", "3d"])
def test_maxpool_indices(case: str, storage_order: int) -> None:
    xs, attrs = WINDOW_CASES[case]
    attrs = {**attrs, "storage_order": storage_order}
    x = _x(xs)
    y, idx = run_ir("MaxPool", [x], output_indices=True, **attrs)
    ry, ridx = run_ort("MaxPool", [x], 2, out_types=[np.float32, np.int64], **attrs)
    assert_close(y, ry)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ridx)


def test_maxpool_int8() -> None:
    x = RNG.integers(-128, 127, (1, 2, 6, 6)).astype(np.int8)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    got = run_ir("MaxPool", [x], **attrs)[0]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, run_ort("MaxPool", [x], **attrs)[0])


@pytest.mark.parametrize("op, attrs", [
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
], ids=["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 3, 4, 5)], ids=["1d", "2d", "3d"])
def test_global_pools(op: str, attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    # onnx.reference's GlobalMaxPool only handles 2-D images; onnxruntime handles every rank
    x = _x(shape)
    assert_close(run_ir(op, [x], **attrs)[0], run_ort(op, [x], **attrs)[0], rtol=1e-5)


@pytest.mark.parametrize("p", [None, 1, 3], ids=["p=absent", "p=1", "p=3"])
def test_global_lp_pool(p: int | None) -> None:
    # onnx.reference has no GlobalLpPool; onnxruntime does
    attrs = {} if p is None else {"p": p}
    x = _x((2, 3, 4, 5))
    assert_close(run_ir("GlobalLpPool", [x], **attrs)[0], run_ort("GlobalLpPool", [x], **attrs)[0],
                 rtol=1e-5, atol=1e-6)


# -- errors --------------------------------------------------------------------------------
def _build(op: str, xs: tuple[int, ...], **attrs: Any) -> None:
    b = ob.GraphBuilder("bad")
    x = b.input("x", "f32", xs)
    b.output(b.op(op, [x], name="pool1", **attrs))
    b.build()


@pytest.mark.parametrize("attrs, attr", [
    ({}, "kernel_shape"),
    ({"kernel_shape": [2]}, "kernel_shape"),
    ({"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]}, "pads"),
    ({"kernel_shape": [2, 2], "strides": [1, 1, 1]}, "strides"),
    ({"kernel_shape": [2, 2], "ceil_mode": 2}, "ceil_mode"),
], ids=["kernel_shape-absent", "kernel_shape-len", "pads-too-large", "strides-len", "ceil_mode=2"])
def test_pool_attr_errors(attrs: dict[str, Any], attr: str) -> None:
    with pytest.raises(AttrError, match=rf"node 'pool1' \(MaxPool\) param '{attr}'"):
        _build("MaxPool", (1, 2, 6, 6), **attrs)


ROIS = np.array([[0.0, 0.0, 9.0, 9.0], [1.5, 2.0, 6.2, 7.9], [4.0, 3.0, 4.5, 3.2],
                 [-2.0, -1.0, 12.0, 11.0]], np.float32)


@pytest.mark.parametrize("attrs", [
    {},
    {"mode": "max"},
    {"coordinate_transformation_mode": "output_half_pixel"},
    {"output_height": 3, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.5},
    {"output_height": 2, "output_width": 4, "mode": "max", "sampling_ratio": 0},
], ids=["attrs-absent", "mode=max", "output_half_pixel", "sizes-ratio-scale", "max-adaptive"])
def test_roi_align(attrs: dict[str, Any]) -> None:
    x = _x((2, 3, 10, 10))
    batch = np.array([0, 1, 1, 0], np.int64)
    args = [x, ROIS, batch]
    assert_close(run_ir("RoiAlign", args, **attrs)[0],
                 run_onnx_reference("RoiAlign", args, **attrs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs, out_shape", [
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, None),
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}, None),
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, (2, 3, 9, 8)),
    ({"kernel_shape": [2], "strides": [2]}, None),
], ids=["2d-attrs", "2d-pads", "2d-output_shape-larger", "1d"])
def test_maxunpool_inverts_maxpool(attrs: dict[str, Any], out_shape: tuple[int, ...] | None) -> None:
    spatial = (8, 6) if len(attrs["kernel_shape"]) == 2 else (8,)
    x = _x((2, 3, *spatial))
    y, idx = run_onnx_reference("MaxPool", [x], 2, **attrs)
    ref_in: list[Any] = [y, idx] + ([np.array(out_shape, np.int64)] if out_shape else [])
    extra = {"output_shape": out_shape} if out_shape else {}
    assert_close(run_ir("MaxUnpool", [y, idx], **attrs, **extra)[0],
                 run_onnx_reference("MaxUnpool", ref_in, **attrs)[0])


def test_maxunpool_output_shape_too_small() -> None:
    b = ob.GraphBuilder("bad")
    x = b.input("x", "f32", (1, 1, 2, 2))
    i = b.input("i", "i64", (1, 1, 2, 2))
    with pytest.raises(AttrError, match=r"\(MaxUnpool\) param 'output_shape'"):
        b.op("MaxUnpool", [x, i], name="u", kernel_shape=[2, 2], strides=[2, 2],
             output_shape=(1, 1, 3, 3))


def test_maxunpool_index_out_of_range_is_an_error() -> None:
    x = np.ones((1, 1, 2, 2), np.float32)
    idx = np.array([0, 1, 2, 99], np.int64).reshape(1, 1, 2, 2)
    with pytest.raises(ob.InterpretError, match=r"MaxUnpool: index 99 is outside"):
        run_ir("MaxUnpool", [x, idx], kernel_shape=[2, 2], strides=[2, 2])


def _random_pool_case(seed: int, op: str) -> tuple[np.ndarray, dict[str, Any]]:
    """A random valid pooling configuration: rank, kernel, strides, dilations, asymmetric pads
    (smaller than the kernel), ceil mode, count_include_pad / p."""
    rng = np.random.default_rng(seed)
    nsp = int(rng.integers(1, 4))
    k = [int(rng.integers(1, 4)) for _ in range(nsp)]
    attrs: dict[str, Any] = {
        "kernel_shape": k,
        "strides": [int(rng.integers(1, 4)) for _ in range(nsp)],
        "pads": [int(rng.integers(0, k[i % nsp])) for i in range(2 * nsp)],
        "ceil_mode": int(rng.integers(0, 2)),
    }
    d = [int(rng.integers(1, 3)) for _ in range(nsp)]
    if op != "LpPool":
        attrs["dilations"] = d
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    if op == "LpPool":
        attrs["p"] = int(rng.integers(1, 4))
        d = [1] * nsp
    size = [int(rng.integers((k[i] - 1) * d[i] + 1, 10)) for i in range(nsp)]
    return rng.standard_normal([2, 3] + size).astype(np.float32), attrs


@pytest.mark.parametrize("seed", range(25), ids=[f"seed={i}" for i in range(25)])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_random_configurations_match_onnxruntime(op: str, seed: int) -> None:
    x, attrs = _random_pool_case(seed, op)
    assert_close(run_ir(op, [x], **attrs)[0], run_ort(op, [x], **attrs)[0], rtol=1e-5, atol=1e-5)
