"""Conv's fast paths (Winograd 3x3 stride 1, strided 1x1 without im2col), in the interpreter
and in the simulator's tiles, against onnxruntime (float32) and the onnx reference run in
float64 (the exact result of the float32 inputs).

The shapes are chosen so that each path runs: 3x3 stride-1 convolutions with at least 8
channels in and out use Winograd F(2x2, 3x3) from an output side of 10 and F(4x4, 3x3) from
20 (``opbridge.ir.winograd.tile_size``); odd output sizes crop the last tile; asymmetric and
absent pads move where the tiles start.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir import winograd

from .onnx_ref import run_ir, run_onnx_reference
from .test_conv import run_ort

RNG = np.random.default_rng(77)

#: (X shape, W shape, attributes); the comment names the path each case takes.
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "f4x4-same": ((1, 16, 24, 24), (12, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "f4x4-odd-crop": ((1, 8, 23, 27), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "f4x4-asym-pads": ((1, 9, 25, 22), (10, 9, 3, 3), {"pads": [0, 2, 1, 0]}),
    "f4x4-no-pads-batch2": ((2, 8, 26, 30), (16, 8, 3, 3), {}),
    "f2x2-same": ((1, 32, 14, 14), (24, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "f2x2-odd-batch3": ((3, 8, 13, 17), (9, 8, 3, 3), {"pads": [1, 0, 1, 2]}),
    "f2x2-large-pads": ((1, 8, 9, 9), (8, 8, 3, 3), {"pads": [2, 2, 2, 2]}),
    "im2col-small": ((1, 16, 7, 7), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "im2col-few-channels": ((1, 4, 24, 24), (8, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    "stride2-3x3": ((1, 8, 24, 24), (8, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # strided im2col: a stem-like 7x7, unequal strides with asymmetric pads, groups
    "stem-7x7-stride2": ((2, 3, 31, 30), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "5x5-stride3x2-asym": ((1, 4, 23, 19), (6, 4, 5, 5), {"strides": [3, 2], "pads": [2, 1, 0, 2]}),
    "3x3-stride2-many-ch": ((1, 40, 13, 13), (8, 40, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "stride2-grouped-poly": ((1, 8, 17, 17), (8, 4, 5, 5), {"strides": [2, 2], "group": 2}),
    "dilated-3x3": ((1, 8, 24, 24), (8, 8, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "grouped-3x3": ((1, 16, 24, 24), (16, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "1x1-stride2": ((2, 16, 15, 14), (8, 16, 1, 1), {"strides": [2, 2]}),
    "1x1-stride-rect": ((1, 16, 9, 12), (8, 16, 1, 1), {"strides": [3, 2]}),
    "1x1-stride2-grouped": ((1, 16, 10, 10), (8, 4, 1, 1), {"strides": [2, 2], "group": 4}),
}


def _inputs(case: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, ws, _ = CASES[case]
    x = RNG.standard_normal(xs).astype(np.float32)
    fan_in = int(np.prod(ws[1:]))  # weights scaled as trained nets are: outputs of about unit size
    w = (RNG.standard_normal(ws) / np.sqrt(fan_in)).astype(np.float32)
    return x, w, RNG.standard_normal(ws[0]).astype(np.float32)


def _assert_near(got: np.ndarray, want: np.ndarray, rel: float) -> None:
    """Largest error at most ``rel`` of the largest magnitude: Winograd's error is spread
    evenly over a tile, so it is bounded relative to the output's scale, not elementwise."""
    assert got.shape == want.shape and got.dtype == np.float32
    err = float(np.abs(got.astype(np.float64) - want).max())
    assert err <= rel * float(np.abs(want).max()), f"max error {err:.3g}"


@pytest.mark.parametrize("case", list(CASES))
def test_conv_matches_float64_reference_and_onnxruntime(case: str) -> None:
    x, w, b = _inputs(case)
    attrs = CASES[case][2]
    got = run_ir("Conv", [x, w, b], const=[False, True, True], **attrs)[0]
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64),
                                        b.astype(np.float64)], **attrs)[0]
    _assert_near(got, exact, 2e-6 if not case.startswith("f4x4") else 2e-5)
    _assert_near(got, run_ort("Conv", [x, w, b], **attrs)[0], 2e-6 if not case.startswith("f4x4") else 2e-5)


@pytest.mark.parametrize("side,want", [(7, None), (9, None), (10, 2), (19, 2), (20, 4), (56, 4)])
def test_tile_size_by_output_side(side: int, want: int | None) -> None:
    assert winograd.tile_size(64, 64, side, side + 3) == want
    assert winograd.tile_size(4, 64, side, side) is None


def test_refilled_weights_are_transformed_again() -> None:
    """The filter transform is kept per weight array; refilling the array in place (a reused
    buffer) must not reuse the old transform."""
    x, w, _ = _inputs("f4x4-same")
    attrs = {"pads": (1, 1, 1, 1)}
    from opbridge.ir.ops.conv import conv_nd

    first = conv_nd(x, w, None, group=1, k=(3, 3), s=(1, 1), d=(1, 1), p=attrs["pads"])
    w[...] = RNG.standard_normal(w.shape).astype(np.float32) / 12
    again = conv_nd(x, w, None, group=1, k=(3, 3), s=(1, 1), d=(1, 1), p=attrs["pads"])
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64)], **attrs)[0]
    _assert_near(again, exact, 2e-5)
    assert not np.allclose(first, again)


def test_full_cache_falls_back_to_im2col(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(winograd, "CACHE_BYTES", 0)
    x, w, b = _inputs("f4x4-same")
    w2 = w.copy()  # a fresh array: nothing cached for it
    assert winograd.transformed_weights(w2, 4) is None
    got = run_ir("Conv", [x, w2, b], pads=[1, 1, 1, 1])[0]
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w2.astype(np.float64),
                                        b.astype(np.float64)], pads=[1, 1, 1, 1])[0]
    _assert_near(got, exact, 2e-6)


def test_f16_conv_through_winograd() -> None:
    x, w, b = (a.astype(np.float16) for a in _inputs("f4x4-same"))
    got = run_ir("Conv", [x, w, b], pads=[1, 1, 1, 1])[0]
    assert got.dtype == np.float16
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64),
                                        b.astype(np.float64)], pads=[1, 1, 1, 1])[0]
    assert float(np.abs(got - exact).max()) <= 1e-2 * float(np.abs(exact).max())


#: (X shape, W shape, pads, local memory per lane, Winograd tiles expected per run): row tiles
#: of 12-13 (F(2x2)) and 32-33 rows (F(4x4)) with halos, the edge tiles with their own pads.
SIM_CASES = {
    "whole-f4x4": ((1, 16, 24, 24), (12, 16, 3, 3), [1, 1, 1, 1], None, 1),
    "row-tiles-f2x2": ((1, 9, 50, 22), (10, 9, 3, 3), [0, 2, 1, 0], 8192, 4),
    "row-tiles-f4x4": ((1, 8, 130, 28), (10, 8, 3, 3), [2, 1, 0, 1], 8192, 4),
}


@pytest.mark.parametrize("case", list(SIM_CASES))
def test_simulator_tiles_match(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's Conv tiles (row tiles with halos and per-tile pads when local memory is
    small) take the same Winograd path; each tile must still be the exact convolution."""
    import opbridge.simulator.kernels.conv as kernel

    xs, ws, pads, lmem, tiles = SIM_CASES[case]
    x = RNG.standard_normal(xs).astype(np.float32)
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    calls = []
    monkeypatch.setattr(kernel, "winograd_conv2d",
                        lambda *a, **k: calls.append(a[0].shape) or winograd.winograd_conv2d(*a, **k))
    g = ob.GraphBuilder("winograd")
    xin = g.input("x", "f32", x.shape)
    g.output(g.op("Relu", [g.op("Conv", [xin, g.constant("w", w), g.constant("b", b)], pads=pads)]))
    target = ob.Target.preset("bm1684", **({"lmem_bytes_per_lane": lmem} if lmem else {}))
    got = next(iter(ob.compile(g.build(), target).run({"x": x}).values()))
    assert len(calls) == tiles
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64),
                                        b.astype(np.float64)], pads=pads)[0]
    _assert_near(got, np.maximum(exact, 0), 2e-5)


class _CountingTransforms(dict):
    """``winograd._F`` that counts lookups: one per filter transform computed."""

    count = 0

    def __getitem__(self, r: int) -> Any:
        type(self).count += 1
        return super().__getitem__(r)


def _conv_program(x_shape: tuple[int, ...], w: np.ndarray, b: np.ndarray, lmem: int) -> Any:
    g = ob.GraphBuilder("winograd_once")
    xin = g.input("x", "f32", x_shape)
    g.output(g.op("Conv", [xin, g.constant("w", w), g.constant("b", b)], pads=[1, 1, 1, 1]))
    return ob.compile(g.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))


# (X shape, W shape, local memory per lane): four row tiles of one resident weight; a weight
# streamed in four chunks of 64 output channels (each chunk its own transform)
ONCE_CASES = {
    "row-tiles": ((1, 8, 130, 28), (10, 8, 3, 3), 8192, 1),
    "streamed-chunks": ((1, 16, 12, 12), (512, 16, 3, 3), 4096, 4),
}


@pytest.mark.parametrize("case", list(ONCE_CASES))
def test_simulator_transforms_each_weight_once(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program transforms each weight (each streamed chunk of it) once, not once per tile,
    and keeps it across its runs; another program with other weights at the same local
    addresses gets its own transform, not the first one's."""
    spy = _CountingTransforms(winograd._F)
    _CountingTransforms.count = 0
    monkeypatch.setattr(winograd, "_F", spy)
    xs, ws, lmem, transforms = ONCE_CASES[case]
    x = RNG.standard_normal(xs).astype(np.float32)
    progs, weights = [], []
    for _ in range(2):
        w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        b = RNG.standard_normal(ws[0]).astype(np.float32)
        weights.append((w, b))
        progs.append(_conv_program(xs, w, b, lmem))
    first = next(iter(progs[0].run({"x": x}).values()))
    assert _CountingTransforms.count == transforms
    again = next(iter(progs[0].run({"x": x}).values()))
    assert _CountingTransforms.count == transforms
    assert np.array_equal(first, again)
    other = next(iter(progs[1].run({"x": x}).values()))
    assert _CountingTransforms.count == 2 * transforms
    for got, (w, b) in zip((first, other), weights):
        exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64),
                                            b.astype(np.float64)], pads=[1, 1, 1, 1])[0]
        _assert_near(got, exact, 2e-5)


@pytest.mark.parametrize("choice", [None, 2, 4])
def test_interpreter_and_simulator_share_one_winograd_decision(
        choice: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both Conv paths ask ``winograd.winograd_tile``: what it answers (here forced, even for
    a 7x7 output that im2col would take) is the path both take, with the right numbers."""
    import opbridge.simulator.kernels.conv as kernel

    real = winograd.winograd_conv2d
    asked: list[tuple[int, ...]] = []
    used: list[int] = []

    def conv2d(*a: Any, **k: Any) -> np.ndarray:
        used.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(winograd, "winograd_tile",
                        lambda c, m, k, s, d, group, out_hw, dtype: asked.append(tuple(out_hw)) or choice)
    monkeypatch.setattr(winograd, "winograd_conv2d", conv2d)
    monkeypatch.setattr(kernel, "winograd_conv2d", conv2d)
    x = RNG.standard_normal((1, 8, 7, 7)).astype(np.float32)
    w = (RNG.standard_normal((12, 8, 3, 3)) / np.sqrt(72)).astype(np.float32)
    b = RNG.standard_normal(12).astype(np.float32)
    exact = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64),
                                        b.astype(np.float64)], pads=[1, 1, 1, 1])[0]
    interpreted = run_ir("Conv", [x, w, b], const=[False, True, True], pads=[1, 1, 1, 1])[0]
    assert (asked, used) == ([(7, 7)], [choice] if choice else [])
    simulated = next(iter(_conv_program(x.shape, w, b, 512 << 10).run({"x": x}).values()))
    assert (asked, used) == ([(7, 7)] * 2, [choice] * 2 if choice else [])
    _assert_near(interpreted, exact, 2e-5)
    _assert_near(simulated, exact, 2e-5)
