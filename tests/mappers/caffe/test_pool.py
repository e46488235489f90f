"""Pooling against OpenCV: Caffe's ceil rounding, the last-window rule, the AVE divisor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

pytestmark = requires_cv2

CASES = {
    "MAX,k=3,s=2,ceil overhang": ("pool: MAX kernel_size: 3 stride: 2", (1, 2, 8, 8)),
    "MAX,pool=absent": ("kernel_size: 2 stride: 2", (1, 2, 7, 7)),
    "MAX,pad=1,last window rule": ("pool: MAX kernel_size: 3 stride: 2 pad: 1", (1, 2, 6, 6)),
    "MAX,stride=absent": ("pool: MAX kernel_size: 3", (1, 2, 5, 6)),
    "AVE,k=3,s=2": ("pool: AVE kernel_size: 3 stride: 2", (1, 2, 8, 8)),
    "AVE,pad=1,divisor counts pads not overhang": ("pool: AVE kernel_size: 3 stride: 2 pad: 1", (1, 2, 8, 8)),
    "AVE,pad=2,k=5,s=3": ("pool: AVE kernel_size: 5 stride: 3 pad: 2", (1, 2, 11, 10)),
    "AVE,kernel_h/w,stride_h/w,pad_h/w": ("pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
                                          (1, 2, 7, 6)),
    "MAX,global": ("pool: MAX global_pooling: true", (2, 3, 5, 4)),
    "AVE,global": ("pool: AVE global_pooling: true", (2, 3, 5, 4)),
    "MAX,ceil_mode=false (fork)": ("pool: MAX kernel_size: 3 stride: 2 ceil_mode: false", (1, 2, 8, 8)),
    "AVE,ceil_mode=false (fork)": ("pool: AVE kernel_size: 2 stride: 2 ceil_mode: false", (1, 2, 7, 7)),
}


@pytest.mark.parametrize(("params", "shape"), list(CASES.values()), ids=list(CASES))
def test_pooling(tmp_path: Path, params: str, shape: tuple[int, ...]) -> None:
    text = tiny_net(layer("Pooling", f"pooling_param {{ {params} }}"), shape)
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": shape})
    assert_blobs_close(ours, refs)


def _spp_levels_as_pooling(levels: int, pool: str, h: int, w: int) -> str:
    """The same pyramid written as Pooling + Flatten + Concat layers OpenCV can run, with the
    windows of BVLC's SPPLayer::GetPoolingParam (kernel ceil(H/bins), pad (kernel*bins-H+1)/2)."""
    text, names = "", []
    for level in range(levels):
        bins = 2 ** level
        kh, kw = -(-h // bins), -(-w // bins)
        ph, pw = (kh * bins - h + 1) // 2, (kw * bins - w + 1) // 2
        text += layer("Pooling", f"pooling_param {{ pool: {pool} kernel_h: {kh} kernel_w: {kw} stride_h: {kh} "
                      f"stride_w: {kw} pad_h: {ph} pad_w: {pw} }}", name=f"l{level}")
        if levels > 1:
            text += layer("Flatten", "", name=f"f{level}", bottoms=(f"l{level}",))
        names.append(f"f{level}" if levels > 1 else f"l{level}")
    if levels > 1:
        text += layer("Concat", "", name="y", bottoms=tuple(names))
    return text


@pytest.mark.parametrize(("levels", "pool", "shape"), [
    (3, "MAX", (1, 2, 9, 7)), (2, "AVE", (2, 3, 6, 6)), (1, "MAX", (1, 2, 5, 4)),
    (3, "pool=absent", (1, 2, 8, 8)),
], ids=["levels=3,MAX", "levels=2,AVE", "levels=1", "pool=absent"])
def test_spp(tmp_path: Path, levels: int, pool: str, shape: tuple[int, ...]) -> None:
    """OpenCV has no SPP layer: compare with the equivalent pooling layers run by OpenCV."""
    import cv2
    import numpy as np

    import opbridge as ob
    from opbridge.convert import convert

    method = "" if pool == "pool=absent" else f"pool: {pool}"
    ours_txt = tiny_net(layer("SPP", f"spp_param {{ pyramid_height: {levels} {method} }}"), shape)
    ref_txt = tiny_net(_spp_levels_as_pooling(levels, pool if method else "MAX", *shape[2:]), shape)
    (tmp_path / "a.prototxt").write_text(ours_txt)
    (tmp_path / "b.prototxt").write_text(ref_txt)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = ob.interpret(convert(tmp_path / "a.prototxt"), {"data": x})["y"]
    net = cv2.dnn.readNetFromCaffe(str(tmp_path / "b.prototxt"))
    net.setInput(x)
    ref = net.forward("y" if levels > 1 else "l0")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
