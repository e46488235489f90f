"""ImageDecoder-20 beyond the node tests: images encoded by OpenCV (an encoder independent of
the Pillow decoder) in each format decode to OpenCV's own decoding (lossless formats exactly),
and to onnx.reference's for every pixel_format (JPEG too); an RGBA PNG decodes to 3 channels;
the simulator runs it as a host op and matches the interpreter; bad attributes and inputs, a
corrupt stream, a format outside the spec's list (EPS, whose Pillow reader would run
Ghostscript) and a missing Pillow are refused with a hint."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main

cv2 = pytest.importorskip("cv2", reason="OpenCV encodes the test images and is a second decoder")
pytest.importorskip("PIL", reason="ImageDecoder decodes with Pillow (pip install pillow)")


def _model(dtype: int = TensorProto.UINT8, **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node("ImageDecoder", ["data"], ["image"], name="decode", **attrs)
    graph = helper.make_graph([node], "decode", [helper.make_tensor_value_info("data", dtype, ["n"])],
                              [helper.make_tensor_value_info("image", TensorProto.UINT8, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _picture(h: int = 23, w: int = 37, c: int = 3) -> np.ndarray:
    """A BGR(A) picture with gradients and noise, odd sizes to catch stride mistakes."""
    rng = np.random.default_rng(h * w)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([yy * 255 // h, xx * 255 // w, (yy + xx) * 127 // (h + w)] + [yy * 0 + 200] * (c - 3), -1)
    return np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8)


def _encode(ext: str, bgr: np.ndarray) -> np.ndarray:
    ok, buf = cv2.imencode(ext, bgr, [cv2.IMWRITE_WEBP_QUALITY, 101] if ext == ".webp" else [])
    assert ok
    return buf.reshape(-1)


def _decode(data: np.ndarray, **attrs: Any) -> np.ndarray:
    return np.asarray(ob.interpret(ob.convert(_model(**attrs)), {"data": data})["image"])


@pytest.mark.parametrize("ext", [".png", ".bmp", ".tiff", ".ppm", ".webp"])
def test_lossless_formats_match_opencv(ext: str) -> None:
    bgr = _picture()
    got = _decode(_encode(ext, bgr), pixel_format="BGR")
    np.testing.assert_array_equal(got, bgr)
    np.testing.assert_array_equal(_decode(_encode(ext, bgr)), bgr[:, :, ::-1])  # pixel_format absent: RGB


@pytest.mark.parametrize("fmt", ["absent", "RGB", "BGR", "Grayscale"])
@pytest.mark.parametrize("ext", [".jpg", ".png"])
def test_matches_reference(ext: str, fmt: str) -> None:
    attrs = {} if fmt == "absent" else {"pixel_format": fmt}
    data = _encode(ext, _picture(40, 31))
    got = _decode(data, **attrs)
    want = ReferenceEvaluator(_model(**attrs)).run(None, {"data": data})[0]
    assert got.shape == want.shape == (40, 31, 1 if fmt == "Grayscale" else 3)
    np.testing.assert_array_equal(got, want)


def test_jpeg_close_to_opencv() -> None:
    """Another libjpeg build may round the IDCT differently: within a few levels."""
    data = _encode(".jpg", _picture(48, 64))
    got = _decode(data, pixel_format="BGR").astype(int)
    assert np.abs(got - cv2.imdecode(data, cv2.IMREAD_COLOR).astype(int)).max() <= 4


def test_rgba_png_decodes_to_three_channels() -> None:
    bgra = _picture(c=4)
    got = _decode(_encode(".png", bgra))
    np.testing.assert_array_equal(got, bgra[:, :, 2::-1])


def test_simulator_runs_it_on_the_host() -> None:
    feeds = {"data": _encode(".png", _picture())}
    g = ob.convert(_model(pixel_format="BGR"), input_shapes={"data": feeds["data"].shape})
    prog = ob.compile(g, target="bm1684")
    np.testing.assert_array_equal(prog.run(feeds)["image"], np.asarray(ob.interpret(g, feeds)["image"]))
    assert prog.profile().num_cpu_layers == 1


def _png_claiming(w: int, h: int) -> np.ndarray:
    """A small PNG whose header (IHDR, CRC mended) claims w x h pixels."""
    import struct
    import zlib

    data = bytearray(_encode(".png", _picture()).tobytes())
    data[16:24] = struct.pack(">II", w, h)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return np.frombuffer(bytes(data), np.uint8)


BAD_STREAMS = {
    "header-claims-100M-pixels": (_png_claiming(10000, 10000), "more than the"),
    "truncated": (_encode(".png", _picture())[:60], "could not be decoded"),
    "not-an-image": (np.frombuffer(b"hello, world" * 8, np.uint8), "not an image"),
    "eps": (np.frombuffer(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n", np.uint8),
            "not an image"),
}


@pytest.mark.parametrize("case", list(BAD_STREAMS))
def test_bad_streams_are_refused_at_run(case: str) -> None:
    data, match = BAD_STREAMS[case]
    with pytest.raises(ob.InterpretError, match=match) as err:
        _decode(data)
    assert err.value.hint


@pytest.mark.parametrize("case,model,match", [
    ("pixel_format", _model(pixel_format="YUV"), "pixel_format"),
    ("float-stream", _model(TensorProto.FLOAT), "1-D u8"),
])
def test_bad_models_are_refused(case: str, model: onnx.ModelProto, match: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "decode.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ob.OpbridgeError, match=match) as err:
        ob.convert(str(path))
    assert "'decode'" in str(err.value) and err.value.hint
    assert main(["convert", str(path), "-o", str(tmp_path / "d.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") for line in lines)
    assert any(line.startswith("hint:") for line in lines)


def test_without_pillow(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                        capsys: pytest.CaptureFixture) -> None:
    g = ob.convert(_model())  # converted while Pillow is there, run without it
    for name in [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ob.InterpretError, match="Pillow") as err:
        ob.interpret(g, {"data": _encode(".png", _picture())})
    assert "pip install pillow" in err.value.hint
    path = tmp_path / "decode.onnx"
    onnx.save(_model(), str(path))
    with pytest.raises(ob.UnsupportedOpError, match=r"'decode' \(ImageDecoder\).*Pillow") as err2:
        ob.convert(str(path))
    assert "pip install pillow" in err2.value.hint
    assert main(["convert", str(path), "-o", str(tmp_path / "d.obir")]) == 2
    err_text = capsys.readouterr().err
    assert "error:" in err_text and "hint:" in err_text and "pip install pillow" in err_text


def test_obir_round_trip(tmp_path: Path) -> None:
    g = ob.convert(_model(pixel_format="Grayscale"))
    ob.save(g, tmp_path / "d.obir")
    loaded = ob.load(tmp_path / "d.obir")
    feeds = {"data": _encode(".bmp", _picture())}
    got = np.asarray(ob.interpret(loaded, feeds)["image"])
    assert got.shape == (23, 37, 1)
    np.testing.assert_array_equal(got, np.asarray(ob.interpret(g, feeds)["image"]))
