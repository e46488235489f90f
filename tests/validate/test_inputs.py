"""Validation inputs: .npy/.npz files, images with preprocessing, random feeds."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.validate.inputs import InputError, image_input, image_spec, make_inputs
from tests.conftest import requires_cv2


def _graph(shape=(1, 3, 2, 2), extra=False):
    b = ob.GraphBuilder("g")
    x = b.input("data", "f32", shape)
    outs = [b.op("Relu", [x], name="r")]
    if extra:
        k = b.input("k", "i64", (2,))
        outs.append(b.op("Relu", [k], name="rk"))
    b.output(*outs)
    return b.build()


def test_random_is_seeded_and_typed():
    g = _graph(extra=True)
    f1, where = make_inputs(g, seed=3)
    f2, _ = make_inputs(g, seed=3)
    assert f1["data"].dtype == np.float32 and f1["k"].dtype == np.int64
    assert np.array_equal(f1["data"], f2["data"]) and np.array_equal(f1["k"], f2["k"])
    assert where["data"] == "f32[1,3,2,2] random (seed 3)"
    assert not np.array_equal(f1["data"], make_inputs(g, seed=4)[0]["data"])


@pytest.mark.parametrize("form", ["name=npy", "bare npy", "name=npz", "bare npz"])
def test_array_files(tmp_path, form):
    g = _graph()
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2)
    if "npz" in form:
        np.savez(tmp_path / "in.npz", data=x)
        path = str(tmp_path / "in.npz")
    else:
        np.save(tmp_path / "in.npy", x)
        path = str(tmp_path / "in.npy")
    spec = f"data={path}" if form.startswith("name") else path
    feeds, where = make_inputs(g, specs=[spec])
    assert np.array_equal(feeds["data"], x)
    assert where["data"].startswith("f32[1,3,2,2] from in.np")


def test_array_file_wrong_shape(tmp_path):
    np.save(tmp_path / "in.npy", np.zeros((2, 2), np.float32))
    with pytest.raises(InputError, match=r"input 'data' wants f32\[1,3,2,2\]"):
        make_inputs(_graph(), specs=[f"data={tmp_path / 'in.npy'}"])


def test_array_file_unknown_name(tmp_path):
    np.save(tmp_path / "in.npy", np.zeros((1, 3, 2, 2), np.float32))
    with pytest.raises(InputError, match="no input named 'nope'") as e:
        make_inputs(_graph(), specs=[f"nope={tmp_path / 'in.npy'}"])
    assert "data" in e.value.hint


def test_object_array_refused(tmp_path):
    np.save(tmp_path / "in.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="not a readable .npy"):
        make_inputs(_graph(), specs=[str(tmp_path / "in.npy")])


def test_missing_file():
    with pytest.raises(InputError, match="does not exist"):
        make_inputs(_graph(), specs=["/nonexistent/x.npy"])


def _ppm(path, rgb):
    h, w, _ = rgb.shape
    path.write_bytes(b"P6\n# a comment\n%d %d\n255\n" % (w, h) + rgb.astype(np.uint8).tobytes())


# One 2x2 RGB image; pixel (0,0) is R=10, G=20, B=30.
RGB = np.array([[[10, 20, 30], [40, 50, 60]], [[70, 80, 90], [100, 110, 120]]], np.uint8)


@pytest.mark.parametrize("fmt", ["rgb", "bgr"])
def test_image_ppm_mean_scale(tmp_path, fmt, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)  # the built-in PPM reader
    _ppm(tmp_path / "im.ppm", RGB)
    spec = image_spec(str(tmp_path / "im.ppm"), mean="1,2,3", scale="0.5", pixel_format=fmt)
    name, arr, desc = image_input(_graph(), spec)
    assert name == "data" and arr.shape == (1, 3, 2, 2) and arr.dtype == np.float32
    first = [10, 20, 30] if fmt == "rgb" else [30, 20, 10]
    # channel c of pixel (0,0): (value - mean[c]) * 0.5
    assert arr[0, :, 0, 0].tolist() == [(first[0] - 1) * 0.5, (first[1] - 2) * 0.5, (first[2] - 3) * 0.5]


def test_image_gray(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)
    _ppm(tmp_path / "im.ppm", RGB)
    _, arr, _ = image_input(_graph((1, 1, 2, 2)), image_spec(str(tmp_path / "im.ppm"), pixel_format="gray"))
    assert arr[0, 0].tolist() == [[20.0, 50.0], [80.0, 110.0]]


@requires_cv2
def test_image_png_through_cv2(tmp_path):
    import cv2

    cv2.imwrite(str(tmp_path / "im.png"), RGB[:, :, ::-1])  # cv2 writes BGR
    _, arr, _ = image_input(_graph(), image_spec(str(tmp_path / "im.png"), pixel_format="rgb"))
    assert arr[0, :, 1, 1].tolist() == [100.0, 110.0, 120.0]


def test_image_resized(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)
    _ppm(tmp_path / "im.ppm", RGB)
    _, arr, _ = image_input(_graph((1, 3, 4, 4)), image_spec(str(tmp_path / "im.ppm"), pixel_format="rgb"))
    assert arr.shape == (1, 3, 4, 4) and arr[0, 0, 0, 0] == 10.0 and arr[0, 0, 3, 3] == 100.0


@pytest.mark.parametrize("data,needle", [(b"P3\n1 1\n255\n0 0 0", "not a binary PPM"),
                                         (b"P6\n2 2\n255\n\x00", "truncated"),
                                         (b"P6\n2", "truncated PPM/PGM header")],
                         ids=["ascii", "short-pixels", "short-header"])
def test_bad_ppm(tmp_path, monkeypatch, data, needle):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)
    (tmp_path / "im.ppm").write_bytes(data)
    with pytest.raises(InputError, match=needle):
        image_input(_graph(), image_spec(str(tmp_path / "im.ppm")))


def test_image_wrong_mean_count(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)
    _ppm(tmp_path / "im.ppm", RGB)
    with pytest.raises(InputError, match="--mean: 2 values for 3 channels"):
        image_input(_graph(), image_spec(str(tmp_path / "im.ppm"), mean="1,2"))
