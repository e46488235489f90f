"""The float depthwise convolution, strided (read from stride phases) or not, gives the bits
of the plain sum over the taps in tap order: (((0 + x_0 w_0) + x_1 w_1) + ...), written here
with np.pad and strided slices."""

from __future__ import annotations

import numpy as np
import pytest

from .onnx_ref import run_ir


def _plain_sum(x: np.ndarray, w: np.ndarray, strides: list[int], pads: list[int],
               dilations: list[int]) -> np.ndarray:
    c = x.shape[1]
    mg = w.shape[0] // c
    xp = np.pad(np.repeat(x, mg, axis=1), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    acc = np.zeros((x.shape[0], w.shape[0], oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            a, b = i * dilations[0], j * dilations[1]
            view = xp[:, :, a:a + (oh - 1) * strides[0] + 1:strides[0], b:b + (ow - 1) * strides[1] + 1:strides[1]]
            acc = acc + view * w[:, 0, i, j].reshape(1, -1, 1, 1)
    return acc


@pytest.mark.parametrize("k,strides,dilations,mult", [
    (5, [2, 2], [1, 1], 1), (3, [2, 2], [1, 1], 1), (3, [1, 2], [2, 1], 2), (5, [3, 2], [1, 2], 1),
    (3, [1, 1], [1, 1], 1), (1, [2, 2], [1, 1], 1)])
def test_depthwise_bits_match_the_plain_tap_sum(k: int, strides: list[int], dilations: list[int],
                                                mult: int) -> None:
    rng = np.random.default_rng(k * 10 + strides[0])
    x = rng.standard_normal((2, 4, 17, 14)).astype(np.float32)
    x[0, 0] = 0.0  # zeros times negative weights: the sign of zero must match too
    w = rng.standard_normal((4 * mult, 1, k, k)).astype(np.float32)
    pads = [k // 2, 0, 1, k // 2]
    got = run_ir("Conv", [x, w], group=4, strides=strides, pads=pads, dilations=dilations)[0]
    want = _plain_sum(x, w, strides, pads, dilations)
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_depthwise_summed_by_channel_blocks_keeps_the_bits(strides: list[int],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A large accumulator is summed a block of channels at a time (blocks of 3 channels and a
    remainder here, the thresholds lowered): the bits of the plain tap sum."""
    from opbridge.ir.ops import conv

    monkeypatch.setattr(conv, "_DW_WHOLE", 0)
    monkeypatch.setattr(conv, "_DW_BLOCK", 3 * (2 * 9 * 8 * 4))  # 3 channels of the 2 x 9 x 8 f32 output
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 9 * strides[0], 8 * strides[1])).astype(np.float32)
    w = rng.standard_normal((14, 1, 3, 3)).astype(np.float32)
    pads = [1, 1, 1, 1]
    got = run_ir("Conv", [x, w], group=7, strides=strides, pads=pads)[0]
    want = _plain_sum(x, w, strides, pads, [1, 1])
    assert got.shape == (2, 14, 9, 8)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_depthwise_1d_bits_match_the_plain_tap_sum(stride: int) -> None:
    """Rank 1 (taps read from stride phases when strided): the same bits as the plain sum."""
    rng = np.random.default_rng(stride)
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    w = rng.standard_normal((3, 1, 7)).astype(np.float32)
    got = run_ir("Conv", [x, w], group=3, strides=[stride], pads=[3, 2], dilations=[1])[0]
    xp = np.pad(x, ((0, 0), (0, 0), (3, 2)))
    o = (xp.shape[2] - 7) // stride + 1
    want = np.zeros((2, 3, o), np.float32)
    for t in range(7):
        want = want + xp[:, :, t:t + (o - 1) * stride + 1:stride] * w[:, 0, t].reshape(1, 3, 1)
    assert got.tobytes() == want.tobytes()
