"""Activation and math layers against OpenCV's Caffe importer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

pytestmark = requires_cv2

SHAPE = (2, 3, 4, 5)
CASES = {
    "ReLU,negative_slope=absent": ("ReLU", ""),
    "ReLU,negative_slope=0.1": ("ReLU", "relu_param { negative_slope: 0.1 }"),
    "ReLU6": ("ReLU6", ""),
    "PReLU,channel_shared=absent": ("PReLU", ""),
    "PReLU,channel_shared=true": ("PReLU", "prelu_param { channel_shared: true }"),
    "ELU,alpha=absent": ("ELU", ""),
    "ELU,alpha=0.5": ("ELU", "elu_param { alpha: 0.5 }"),
    "Sigmoid": ("Sigmoid", ""),
    "TanH": ("TanH", ""),
    "AbsVal": ("AbsVal", ""),
    "BNLL": ("BNLL", ""),
    "Power,params=absent": ("Power", ""),
    "Power,power=2,scale,shift": ("Power", "power_param { power: 2 scale: 0.5 shift: 3 }"),
    "Power,power=0.5": ("Power", "power_param { power: 0.5 shift: 5 }"),
    "Exp,base=absent": ("Exp", "exp_param { scale: 0.5 shift: 0.1 }"),
    "Exp,base=2": ("Exp", "exp_param { base: 2 scale: 0.5 }"),
    "Log,params=absent": ("Log", ""),
    "Dropout": ("Dropout", "dropout_param { dropout_ratio: 0.3 }"),
    "Swish": ("Swish", ""),
    "Mish": ("Mish", ""),
}


@pytest.mark.parametrize(("type_", "params"), list(CASES.values()), ids=list(CASES))
def test_activation(tmp_path: Path, type_: str, params: str) -> None:
    # positive inputs keep Log's argument in its domain
    x = np.random.default_rng(1).uniform(0.1, 2.0, SHAPE).astype(np.float32) if type_ == "Log" else None
    ours, refs = run_ours_and_opencv(tmp_path, tiny_net(layer(type_, params), SHAPE), {"data": SHAPE},
                                     feeds={"data": x} if x is not None else None)
    assert_blobs_close(ours, refs)


@pytest.mark.parametrize(("params", "base", "scale", "shift"), [
    ("log_param { shift: 0.5 }", np.e, 1.0, 0.5),
    ("log_param { base: 10 scale: 2 shift: 0.5 }", 10.0, 2.0, 0.5),
    ("log_param { base: 2 scale: 3 }", 2.0, 3.0, 0.0),
], ids=["base=absent,shift", "base=10,scale,shift", "base=2,shift=absent"])
def test_log_params(tmp_path: Path, params: str, base: float, scale: float, shift: float) -> None:
    """OpenCV's Log ignores log_param (it computes ln x); Caffe's is log_base(shift + scale x)."""
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Log", params), SHAPE))
    x = np.random.default_rng(0).uniform(0.1, 2.0, SHAPE).astype(np.float32)
    got = ob.interpret(convert(proto), {"data": x})["y"]
    np.testing.assert_allclose(got, np.log(shift + scale * x) / np.log(base), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threshold", [None, 0.4, -1.0], ids=["threshold=absent", "threshold=0.4",
                                                             "threshold=-1"])
def test_threshold(tmp_path: Path, threshold: float | None) -> None:
    """OpenCV has no Threshold layer; Caffe's rule is y = 1 if x > threshold else 0."""
    params = "" if threshold is None else f"threshold_param {{ threshold: {threshold} }}"
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Threshold", params), SHAPE))
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    x[0, 0, 0, :2] = [0.0, 0.4]  # the boundary: not strictly greater
    got = ob.interpret(convert(proto), {"data": x})["y"]
    np.testing.assert_array_equal(got, (x > (threshold or 0.0)).astype(np.float32))


def test_in_place_relu_keeps_blob_name(tmp_path: Path) -> None:
    """conv1 -> relu (top == bottom): the blob 'conv1' is the ReLU's output, as in Caffe."""
    text = tiny_net(
        layer("Convolution", "convolution_param { num_output: 4 kernel_size: 3 }", name="conv1")
        + layer("ReLU", name="relu1", bottoms=("conv1",), tops=("conv1",)),
        (1, 3, 6, 6),
    )
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": (1, 3, 6, 6)})
    assert (ours["conv1"] >= 0).all()
    assert_blobs_close(ours, refs)


@pytest.mark.parametrize(("lo", "hi"), [(-0.5, 0.5), (0.0, 6.0)])
def test_clip(tmp_path: Path, lo: float, hi: float) -> None:
    """BVLC's Clip layer (clip_param min/max are required): numpy reference."""
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Clip", f"clip_param {{ min: {lo} max: {hi} }}"), SHAPE))
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 4).astype(np.float32)
    np.testing.assert_array_equal(ob.interpret(convert(proto), {"data": x})["y"], np.clip(x, lo, hi))
