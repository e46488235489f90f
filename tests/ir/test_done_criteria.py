"""A Conv(strides, pads) + Relu graph built by hand round-trips
through .obir and interprets to what a naive loop convolution computes; group=0 is rejected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob


def naive_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: tuple[int, int],
                 pads: tuple[int, int, int, int]) -> np.ndarray:
    """Direct convolution by explicit loops (independent of the kernel under test)."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.zeros((n, c, h + top + bottom, wd + left + right), np.float64)
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - kh) // stride[0] + 1
    ow = (wd + left + right - kw) // stride[1] + 1
    out = np.zeros((n, m, oh, ow), np.float64)
    for i in range(n):
        for o in range(m):
            for y in range(oh):
                for xx in range(ow):
                    acc = float(b[o])
                    for ci in range(c):
                        for dy in range(kh):
                            for dx in range(kw):
                                acc += xp[i, ci, y * stride[0] + dy, xx * stride[1] + dx] * w[o, ci, dy, dx]
                    out[i, o, y, xx] = acc
    return out


def test_conv_relu_roundtrips_obir_and_matches_naive_conv(tmp_path: Path) -> None:
    rng = np.random.default_rng(42)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)

    b = ob.GraphBuilder("conv_relu")
    xi = b.input("x", "f32", x.shape)
    y = b.op("Conv", [xi, b.constant("w", w), b.constant("b", bias)], name="conv1",
             strides=(2, 1), pads=(1, 0, 2, 1))
    b.output(b.op("Relu", [y], name="relu1"))
    g = b.build()

    path = tmp_path / "conv_relu.obir"
    ob.save(g, path)
    g2 = ob.load(path)
    assert [n.op for n in g2.nodes] == ["Conv", "Relu"]
    assert g2.node("conv1").attrs["strides"] == (2, 1)
    assert g2.node("conv1").attrs["pads"] == (1, 0, 2, 1)

    out = ob.interpret(g2, {"x": x})
    (got,) = out.values()
    expected = np.maximum(naive_conv2d(x, w, bias, (2, 1), (1, 0, 2, 1)), 0)
    assert got.shape == expected.shape == (2, 4, 5, 8)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_group_zero_rejected_by_build_naming_the_attribute() -> None:
    b = ob.GraphBuilder("bad")
    xi = b.input("x", "f32", (1, 4, 8, 8))
    with pytest.raises(ob.OpbridgeError, match=r"'conv1' \(Conv\) param 'group'"):
        b.op("Conv", [xi, b.constant("w", np.zeros((4, 4, 3, 3), np.float32))], name="conv1",
             group=0)
        b.build()


def test_group_zero_set_after_the_op_is_rejected_by_build() -> None:
    # the verifier that build() runs re-checks attributes, whoever set them
    b = ob.GraphBuilder("bad")
    xi = b.input("x", "f32", (1, 4, 8, 8))
    y = b.op("Conv", [xi, b.constant("w", np.zeros((4, 4, 3, 3), np.float32))], name="conv1")
    b.output(y)
    b.nodes[0].attrs["group"] = 0
    with pytest.raises(ob.OpbridgeError, match=r"'conv1' \(Conv\) param 'group' = 0: must be >= 1"):
        b.build()
