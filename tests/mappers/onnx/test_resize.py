"""ONNX Resize (10/11/13/18/19) and Upsample (7/9) mappings against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.errors import OpbridgeError, UnsupportedOpError
from tests.conftest import requires_ort

from .test_shape import check, convert, i64, randn, run_converted

pytestmark = requires_ort


def f32(v) -> np.ndarray:
    return np.array(v, dtype=np.float32)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("scales", [(1, 1, 2.0, 1.5), (1, 1, 0.5, 0.5)], ids=["up", "down"])
def test_resize19_scales(mode, coord, scales):
    # scales that give whole output lengths: with a fractional one (6 x 0.75 = 4.5),
    # align_corners divides by 4.5 - 1 in the spec and onnx.reference (which the conformance
    # data follows, and so do we) but by 4 - 1 in onnxruntime
    check("Resize", [randn(1, 2, 4, 6), None, f32(scales)], opset=19, consts=(2,), mode=mode,
          coordinate_transformation_mode=coord, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {}, {"mode": "linear", "antialias": 1}, {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
    {"nearest_mode": "ceil"}, {"keep_aspect_ratio_policy": "not_larger", "axes": [2, 3]},
], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "attrs=absent")
def test_resize19_sizes(attrs):
    sizes = (3, 5) if "axes" in attrs else (1, 2, 3, 5)
    check("Resize", [randn(1, 2, 8, 9), None, None, i64(sizes)], opset=19, consts=(3,),
          rtol=1e-4, atol=1e-5, **attrs)


def test_resize_tf_crop_and_resize():
    check("Resize", [randn(1, 1, 6, 6), f32([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2]), None, i64([1, 1, 4, 5])],
          opset=13, consts=(1, 3), mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
          extrapolation_value=-1.0, rtol=1e-4, atol=1e-5)


def test_resize11_empty_scales_with_sizes():
    check("Resize", [randn(1, 1, 4, 4), f32([]), f32([]), i64([1, 1, 6, 3])], opset=11,
          consts=(1, 2, 3), mode="linear")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 3), (1, 1, 0.5, 0.5), (1, 1, 2, 0.5)], ids=str)
def test_resize10(mode, scales):
    check("Resize", [randn(1, 2, 4, 6), f32(scales)], opset=10, consts=(1,), mode=mode)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample9(mode):
    check("Upsample", [randn(1, 2, 3, 4), f32([1, 1, 2, 3])], opset=9, consts=(1,), mode=mode)


def test_upsample7_attribute():
    x = randn(1, 1, 2, 3)
    (got,) = run_converted("Upsample", [x], opset=7, scales=[1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))


@requires_ort
def test_run_time_scales_are_dynamic_resize():
    g = check("Resize", [randn(1, 1, 2, 2), None, f32([1, 1, 2, 2])], opset=13)
    assert [n.op for n in g.nodes] == ["DynamicResize"]


def test_both_scales_and_sizes():
    with pytest.raises(OpbridgeError, match=r"both scales \(input 2\) and sizes \(input 3\)"):
        convert("Resize", [randn(1, 1, 2, 2), None, f32([1, 1, 2, 2]), i64([1, 1, 4, 4])], opset=13,
                consts=(2, 3))


def test_tf_half_pixel_for_nn_is_unsupported():
    with pytest.raises(UnsupportedOpError, match=r"tf_half_pixel_for_nn"):
        convert("Resize", [randn(1, 1, 2, 2), f32([]), f32([1, 1, 2, 2])], opset=11, consts=(1, 2),
                coordinate_transformation_mode="tf_half_pixel_for_nn")
