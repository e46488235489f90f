"""Eltwise (SUM with coeff, PROD, MAX) against OpenCV's Caffe importer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

pytestmark = requires_cv2

SHAPE = (2, 3, 4, 5)
CASES = {
    "operation=absent": "",
    "SUM,coeff": "eltwise_param { operation: SUM coeff: 0.5 coeff: -2 coeff: 1 }",
    "PROD": "eltwise_param { operation: PROD }",
    "MAX": "eltwise_param { operation: MAX }",
}


@pytest.mark.parametrize("params", list(CASES.values()), ids=list(CASES))
def test_eltwise(tmp_path: Path, params: str) -> None:
    branches = "".join(
        layer("Power", f"power_param {{ scale: {s} shift: {b} }}", name=f"p{i}")
        for i, (s, b) in enumerate([(1.5, 0.1), (-0.7, 0.2), (0.3, -0.4)])
    )
    text = tiny_net(branches + layer("Eltwise", params, name="y", bottoms=("p0", "p1", "p2")), SHAPE)
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": SHAPE})
    assert_blobs_close(ours, refs)
