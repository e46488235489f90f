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


def test_axpy(tmp_path: Path) -> None:
    """The Axpy fork layer (OpenCV lacks it): a * x + y, a of shape (N, C, 1, 1)."""
    import numpy as np

    import opbridge as ob
    from opbridge.convert import convert

    text = tiny_net(layer("Pooling", "pooling_param { pool: AVE global_pooling: true }", name="a")
                    + layer("Power", "power_param { scale: -1 }", name="yb")
                    + layer("Axpy", "", name="y", bottoms=("a", "data", "yb")), SHAPE)
    proto = tmp_path / "net.prototxt"
    proto.write_text(text)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    got = ob.interpret(convert(proto), {"data": x})["y"]
    np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True) * x - x, rtol=1e-5, atol=1e-6)
