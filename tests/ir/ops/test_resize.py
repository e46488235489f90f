"""Resize against onnx.reference (opset 19): every mode x coordinate mode, up and down, 3-D/4-D."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto

from opbridge.errors import AttrError
from tests.conftest import requires_ort

from .onnx_ref import assert_close, onnx_node_model, run_ir, run_onnx_reference

RNG = np.random.default_rng(3)
MODES = ["nearest", "linear", "cubic"]
COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric", "tf_crop_and_resize"]
ROI = (0.1, 0.2, 0.8, 0.9)


def _f32(v) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _check(x: np.ndarray, *, scales=None, sizes=None, roi=None, opset: int = 19, ir_axes=None,
           **attrs) -> None:
    """IR Resize (``ir_axes`` where it differs from the ONNX axes) vs the reference."""
    onnx_in = [x, None if roi is None else _f32(roi), None if scales is None else _f32(scales),
               None if sizes is None else np.array(sizes, np.int64)]
    while onnx_in[-1] is None:
        onnx_in.pop()
    want = run_onnx_reference("Resize", onnx_in, opset=opset, **attrs)[0]
    ir_attrs = dict(attrs) | ({} if ir_axes is None else {"axes": ir_axes})
    for k, v in (("scales", scales), ("sizes", sizes), ("roi", roi)):
        if v is not None:
            # the float32 value ONNX holds, so both sides compute the same output sizes
            ir_attrs[k] = [float(f) for f in _f32(v)] if k != "sizes" else v
    got = run_ir("Resize", [x], **ir_attrs)[0]
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def _x4() -> np.ndarray:
    return RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)


def _roi(coord: str, axes_rank: int):
    if coord != "tf_crop_and_resize":
        return None
    return (0.0,) * (axes_rank - 2) + ROI[:2] + (1.0,) * (axes_rank - 2) + ROI[2:]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", [2.0, 1.7, 0.5, 0.6], ids=lambda s: f"scale={s}")
def test_modes_scales_4d(mode, coord, scale):
    _check(_x4(), scales=(1.0, 1.0, scale, scale), roi=_roi(coord, 4), mode=mode,
           coordinate_transformation_mode=coord)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(7, 9), (3, 2), (4, 11)], ids=lambda s: f"sizes={s}")
def test_modes_sizes_4d(mode, coord, size):
    _check(_x4(), sizes=(1, 2) + size, roi=_roi(coord, 4), mode=mode,
           coordinate_transformation_mode=coord)


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", [3.0, 0.5], ids=lambda s: f"scale={s}")
def test_3d(mode, coord, scale):
    x = RNG.standard_normal((2, 3, 6)).astype(np.float32)
    _check(x, scales=(1.0, 1.0, scale), mode=mode, coordinate_transformation_mode=coord)


def test_defaults_all_absent():
    _check(_x4(), scales=(1.0, 1.0, 2.0, 3.0))


def test_linear_on_every_axis_5d():
    x = RNG.standard_normal((2, 3, 3, 4, 2)).astype(np.float32)
    _check(x, scales=(1.5, 2.0, 0.7, 1.3, 2.0), mode="linear")


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners"])
def test_nearest_modes(nearest_mode, coord):
    _check(_x4(), sizes=(1, 2, 8, 7), mode="nearest", nearest_mode=nearest_mode,
           coordinate_transformation_mode=coord)


@pytest.mark.parametrize("a", [-0.5, -0.75])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("scale", [2.0, 0.75], ids=lambda s: f"scale={s}")
def test_cubic_coeff_and_exclude_outside(a, exclude, scale):
    _check(_x4(), scales=(1.0, 1.0, scale, scale), mode="cubic", cubic_coeff_a=a,
           exclude_outside=exclude)


@pytest.mark.parametrize("mode, exclude", [("linear", 0), ("cubic", 0), ("cubic", 1)])
@pytest.mark.parametrize("scale", [0.5, 0.6, 0.3, 1.5], ids=lambda s: f"scale={s}")
def test_antialias(mode, exclude, scale):
    x = RNG.standard_normal((1, 1, 12, 10)).astype(np.float32)
    _check(x, scales=(1.0, 1.0, scale, scale), mode=mode, antialias=1, exclude_outside=exclude)


@pytest.mark.parametrize("axes", [(2, 3), (3, 2), (-1,), (1,)], ids=str)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_axes(axes, mode):
    scales = tuple(2.0 if a in (2, -2) else 1.5 for a in axes)
    # onnx.reference rejects negative axes; it gets their non-negative equivalent
    _check(_x4(), scales=scales, axes=[a % 4 for a in axes], ir_axes=axes, mode=mode)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_keep_aspect_ratio(policy, mode):
    _check(_x4(), sizes=(7, 7), axes=[2, 3], keep_aspect_ratio_policy=policy, mode=mode)


@pytest.mark.parametrize("value", [None, -3.0], ids=["extrapolation=absent", "extrapolation=-3"])
@pytest.mark.parametrize("mode", MODES)
def test_crop_extrapolation(value, mode):
    attrs = {} if value is None else {"extrapolation_value": value}
    _check(_x4(), sizes=(1, 2, 5, 6), roi=(0, 0, -0.3, 0.2, 1, 1, 0.9, 1.4), mode=mode,
           coordinate_transformation_mode="tf_crop_and_resize", **attrs)


def test_output_size_one():
    for mode, coord in itertools.product(["nearest", "linear"], ["half_pixel", "align_corners",
                                                                 "pytorch_half_pixel"]):
        _check(_x4(), sizes=(1, 2, 1, 1), mode=mode, coordinate_transformation_mode=coord)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16])
def test_other_dtypes(dtype):
    x = (RNG.random((1, 1, 4, 4)) * 100).astype(dtype)
    _check(x, scales=(1.0, 1.0, 2.0, 2.0), mode="nearest")
    if dtype == np.float16:
        _check(x, scales=(1.0, 1.0, 1.5, 1.5), mode="linear")


@pytest.mark.parametrize("attrs, param, match", [
    pytest.param({}, "scales", r"exactly one of 'scales' and 'sizes'", id="neither"),
    pytest.param({"scales": (1, 1, 2, 2), "sizes": (1, 2, 8, 10)}, "sizes", r"exactly one",
                 id="both"),
    pytest.param({"scales": (2.0, 2.0)}, "scales", r"has 2 entries for 4", id="length"),
    pytest.param({"scales": (1, 1, 0, 2)}, "scales", r"<= 0", id="zero-scale"),
    pytest.param({"sizes": (4, 4), "axes": (2, 2)}, "axes", r"names an axis twice", id="dup-axes"),
    pytest.param({"sizes": (1, 2, 3, 3), "coordinate_transformation_mode": "tf_crop_and_resize"},
                 "roi", r"needs \[starts..., ends...\]", id="crop-without-roi"),
    pytest.param({"sizes": (1, 2, 3, 3), "mode": "bicubic"}, "mode", r"must be one of",
                 id="bad-mode"),
])
def test_errors(attrs, param, match):
    with pytest.raises(AttrError, match=rf"node 'node' \(Resize\) param '{param}'.*{match}"):
        run_ir("Resize", [_x4()], **attrs)


@requires_ort
def test_pytorch_half_pixel_single_output_follows_spec():
    """The spec maps a length-1 output to coordinate 0 (onnxruntime agrees); onnx.reference
    uses -0.5, which only cubic can tell apart, so onnxruntime is the reference here."""
    import onnxruntime as ort

    x = _x4()
    model, feeds = onnx_node_model("Resize", [x, None, _f32((1, 1, 0.25, 0.2))], opset=19,
                                   mode="cubic", coordinate_transformation_mode="pytorch_half_pixel")
    model.ir_version = min(model.ir_version, 10)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    got = run_ir("Resize", [x], scales=(1.0, 1.0, 0.25, 0.2), mode="cubic",
                 coordinate_transformation_mode="pytorch_half_pixel")[0]
    assert_close(got, want, rtol=1e-4, atol=1e-5)
