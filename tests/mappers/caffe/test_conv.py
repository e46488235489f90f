"""Convolution, depthwise, Deconvolution and InnerProduct against OpenCV's Caffe importer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.parsers.caffe_weights import read_caffemodel
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

pytestmark = requires_cv2

CONV_CASES = {
    "kernel=3": "num_output: 4 kernel_size: 3",
    "bias_term=false": "num_output: 4 kernel_size: 3 bias_term: false",
    "pad=1,stride=2": "num_output: 5 kernel_size: 3 pad: 1 stride: 2",
    "kernel_h/w,stride_h/w,pad_h/w": "num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
    "kernel=2 values": "num_output: 4 kernel_size: 3 kernel_size: 1",
    "group=3": "num_output: 6 kernel_size: 3 group: 3",
    "dilation=2": "num_output: 4 kernel_size: 3 dilation: 2 pad: 2",
    "kernel=1": "num_output: 7 kernel_size: 1",
}


@pytest.mark.parametrize("params", list(CONV_CASES.values()), ids=list(CONV_CASES))
def test_convolution(tmp_path: Path, params: str) -> None:
    text = tiny_net(layer("Convolution", f"convolution_param {{ {params} }}"), (2, 6, 9, 8) if "group: 3" in params else (2, 3, 9, 8))
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": (2, 6, 9, 8) if "group: 3" in params else (2, 3, 9, 8)})
    assert_blobs_close(ours, refs)


@pytest.mark.parametrize("type_", ["ConvolutionDepthwise", "Convolution"], ids=["fork-type", "group=C"])
def test_depthwise(tmp_path: Path, type_: str) -> None:
    group = "" if type_ == "ConvolutionDepthwise" else "group: 4"
    text = tiny_net(layer(type_, f"convolution_param {{ num_output: 4 kernel_size: 3 pad: 1 {group} }}"), (1, 4, 7, 7))
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": (1, 4, 7, 7)})
    assert_blobs_close(ours, refs)


DECONV_CASES = {
    "stride=2": "num_output: 3 kernel_size: 4 stride: 2 pad: 1",
    "group=2": "num_output: 4 kernel_size: 3 stride: 2 group: 2",
    "bias_term=false": "num_output: 2 kernel_size: 2 stride: 2 bias_term: false",
}


@pytest.mark.parametrize("params", list(DECONV_CASES.values()), ids=list(DECONV_CASES))
def test_deconvolution(tmp_path: Path, params: str) -> None:
    text = tiny_net(layer("Deconvolution", f"convolution_param {{ {params} }}"), (1, 4, 5, 6))
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": (1, 4, 5, 6)})
    assert_blobs_close(ours, refs)


IP_CASES = {
    "axis=absent": "num_output: 5",
    "bias_term=false": "num_output: 5 bias_term: false",
    "axis=2": "num_output: 5 axis: 2",
}


@pytest.mark.parametrize("params", list(IP_CASES.values()), ids=list(IP_CASES))
def test_inner_product(tmp_path: Path, params: str) -> None:
    text = tiny_net(layer("InnerProduct", f"inner_product_param {{ {params} }}"), (2, 3, 4, 5))
    ours, refs = run_ours_and_opencv(tmp_path, text, {"data": (2, 3, 4, 5)})
    assert_blobs_close(ours, refs)


@pytest.mark.parametrize("bias", [True, False], ids=["bias_term=absent", "bias_term=false"])
def test_inner_product_transpose(tmp_path: Path, bias: bool) -> None:
    """OpenCV ignores ``transpose`` (it reads every weight as (N, K)), so the reference here is
    numpy: Caffe stores W as (K, N) and computes y = x W + b."""
    extra = "" if bias else "bias_term: false"
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("InnerProduct", f"inner_product_param {{ num_output: 5 transpose: true {extra} }}"),
                              (2, 3, 2, 2)))
    write_random_weights(proto, tmp_path / "w.caffemodel", seed=3)
    blobs = read_caffemodel(tmp_path / "w.caffemodel")["y"]
    assert blobs[0].shape == (12, 5)
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2)).astype(np.float32)
    want = x.reshape(2, 12) @ blobs[0] + (blobs[1] if bias else 0)
    got = ob.interpret(convert(proto, weights=tmp_path / "w.caffemodel"), {"data": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
