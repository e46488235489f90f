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
