"""Calibration samples: images (real photographs from scikit-image's data module) preprocessed
as the spec says, checked against numpy on OpenCV's decoding; arrays; bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.quant import IMAGENET, Preprocess, QuantError, load_samples
from tests.conftest import requires_cv2
from tests.quant.helpers import cnn_model, cos, feeds

skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (extra 'test') has the photographs")
PHOTOS = Path(skimage_data.__file__).parent
CALIBRATE = ["astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg"]
EVALUATE = ["motorcycle_left.png", "retina.jpg", "ihc.png", "hubble_deep_field.jpg"]


def _nhwc_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 3])
    return helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@requires_cv2
@pytest.mark.parametrize("layout, pixel_format", [("nchw", "rgb"), ("nchw", "bgr"), ("nhwc", "rgb")])
def test_image_preprocessing_matches_numpy(tmp_path, layout, pixel_format):
    import cv2

    bgr = cv2.imread(str(PHOTOS / "astronaut.png"))[100:116, 200:216]  # a 16x16 patch: no resize
    cv2.imwrite(str(tmp_path / "patch.png"), bgr)
    g = ob.convert(cnn_model() if layout == "nchw" else _nhwc_model())
    spec = Preprocess(IMAGENET.mean, IMAGENET.std, layout, pixel_format)
    (feed,) = load_samples(g, tmp_path, preprocess=spec)
    pixels = bgr if pixel_format == "bgr" else bgr[..., ::-1]
    want = (pixels.astype(np.float64) - np.array(IMAGENET.mean)) / np.array(IMAGENET.std)
    want = want.transpose(2, 0, 1)[None] if layout == "nchw" else want[None]
    np.testing.assert_allclose(feed[g.inputs[0].name], want, rtol=1e-5, atol=1e-5)


@requires_cv2
def test_crops_are_windows_of_two_thirds_of_the_width(tmp_path):
    import cv2

    bgr = cv2.imread(str(PHOTOS / "astronaut.png"))[100:116, 200:224]  # 16 high, 24 wide
    cv2.imwrite(str(tmp_path / "patch.png"), bgr)
    g = ob.convert(cnn_model())
    spec = Preprocess(IMAGENET.mean, IMAGENET.std, crops=2)
    whole, left, right = load_samples(g, tmp_path, preprocess=spec)
    assert whole["image"].shape == (1, 3, 16, 16)  # the whole image, resized
    # 16 columns each (two thirds of 24), at the left edge and at the right one: no resize
    for feed, cols in ((left, slice(0, 16)), (right, slice(8, 24))):
        want = (bgr[:, cols, ::-1].astype(np.float64) - np.array(IMAGENET.mean)) / np.array(IMAGENET.std)
        np.testing.assert_allclose(feed["image"], want.transpose(2, 0, 1)[None], rtol=1e-5, atol=1e-5)
    assert len(load_samples(g, tmp_path, preprocess=IMAGENET)) == 1
    with pytest.raises(QuantError, match="crops -1"):
        Preprocess(crops=-1)


def test_images_are_resized_to_the_input(tmp_path):
    shutil.copy(PHOTOS / "coffee.png", tmp_path)
    shutil.copy(PHOTOS / "camera.png", tmp_path)  # grayscale: repeated over the three channels
    (tmp_path / "notes.txt").write_text("not a sample")  # other files are not samples
    g = ob.convert(cnn_model())
    got = load_samples(g, tmp_path, preprocess=IMAGENET)
    assert len(got) == 2 and all(f["image"].shape == (1, 3, 16, 16) for f in got)
    assert all(f["image"].dtype == np.float32 for f in got)


def test_int8_on_real_photographs(tmp_path):
    cal, ev = tmp_path / "cal", tmp_path / "ev"
    cal.mkdir()
    ev.mkdir()
    for n in CALIBRATE:
        shutil.copy(PHOTOS / n, cal)
    for n in EVALUATE:
        shutil.copy(PHOTOS / n, ev)
    g = ob.convert(cnn_model())
    table = ob.calibrate(g, cal, method="percentile", preprocess=IMAGENET)
    assert table.samples == 4
    q = ob.quantize(g, table)
    for f in load_samples(g, ev, preprocess=IMAGENET):
        a = ob.interpret(g, f, keep_intermediates=True)
        b = ob.interpret(q, f, keep_intermediates=True)
        assert cos(a["logits"], b["logits"]) > 0.995 and cos(a["prob"], b["prob"]) > 0.999


def test_npz_samples_and_limits(tmp_path):
    for i, f in enumerate(feeds(3)):
        np.savez(tmp_path / f"s{i}.npz", **f)
    g = ob.convert(cnn_model())
    assert len(load_samples(g, tmp_path)) == 3
    assert len(load_samples(g, tmp_path, limit=2)) == 2
    chw = feeds(1)[0]["image"][0]  # a CHW array feeds the 1xCxHxW input
    assert load_samples(g, [{"image": chw}])[0]["image"].shape == (1, 3, 16, 16)


@pytest.mark.parametrize("samples, match", [
    ([{"img": np.zeros((1, 3, 16, 16), np.float32)}], "names 'img', which graph 'small_cnn' has no input of"),
    ([{}], "has no array for input 'image'"),
    ([np.zeros(3)], "is a ndarray, not a dict"),
    ([], "no calibration samples"),
    (42, "a list of feed dicts or a folder, not int"),
    ([{"image": np.zeros((1, 3, 16, 16), np.complex64)}], "wants f32, got complex64"),
])
def test_bad_samples(samples, match):
    g = ob.convert(cnn_model())
    with pytest.raises(QuantError, match=match):
        load_samples(g, samples)


def test_an_image_for_a_non_image_input_is_refused(tmp_path):
    shutil.copy(PHOTOS / "coffee.png", tmp_path)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    g = ob.convert(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                     opset_imports=[helper.make_opsetid("", 13)], ir_version=8))
    with pytest.raises(QuantError, match=r"is an image but input 'x' is f32\[1,8\]"):
        load_samples(g, tmp_path)
