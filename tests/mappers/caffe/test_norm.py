"""BatchNorm, Scale, Bias, LRN, MVN, Normalize and Softmax against OpenCV's Caffe importer."""

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

SHAPE = (2, 4, 5, 6)
CASES = {
    "BatchNorm,eps=absent": ("BatchNorm", ""),
    "BatchNorm,eps=1e-3": ("BatchNorm", "batch_norm_param { eps: 0.001 }"),
    "BatchNorm,use_global_stats=true": ("BatchNorm", "batch_norm_param { use_global_stats: true }"),
    "Scale,params=absent": ("Scale", ""),
    "Scale,bias_term=true": ("Scale", "scale_param { bias_term: true }"),
    "Scale,axis=2,num_axes=2": ("Scale", "scale_param { axis: 2 num_axes: 2 }"),
    "Scale,num_axes=-1": ("Scale", "scale_param { axis: 1 num_axes: -1 }"),
    "LRN,across,local_size=3": ("LRN", "lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 }"),
    "LRN,across,alpha=1e-4": ("LRN", "lrn_param { alpha: 0.0001 }"),
    "LRN,within,local_size=3": ("LRN", "lrn_param { norm_region: WITHIN_CHANNEL local_size: 3 alpha: 0.5 beta: 0.75 }"),
    # a window wider than the whole input: the mapping shrinks it (alpha rescaled)
    "LRN,within,local_size=17>2H+1": (
        "LRN", "lrn_param { norm_region: WITHIN_CHANNEL local_size: 17 alpha: 0.5 beta: 0.75 }"),
    "MVN,params=absent": ("MVN", ""),
    "MVN,across_channels=true": ("MVN", "mvn_param { across_channels: true }"),
    "MVN,normalize_variance=false": ("MVN", "mvn_param { normalize_variance: false }"),
    "Normalize,params=absent": ("Normalize", ""),
    "Normalize,across_spatial=false,channel_shared=false": (
        "Normalize", "norm_param { across_spatial: false channel_shared: false }"),
    "Normalize,eps=0.1": ("Normalize", "norm_param { across_spatial: false eps: 0.1 }"),
    "Softmax,axis=absent": ("Softmax", ""),
    "Softmax,axis=3": ("Softmax", "softmax_param { axis: 3 }"),
    "Softmax,axis=-2": ("Softmax", "softmax_param { axis: -2 }"),
}


@pytest.mark.parametrize(("type_", "params"), list(CASES.values()), ids=list(CASES))
def test_norm(tmp_path: Path, type_: str, params: str) -> None:
    ours, refs = run_ours_and_opencv(tmp_path, tiny_net(layer(type_, params), SHAPE), {"data": SHAPE})
    assert_blobs_close(ours, refs)


def _second_bottom_net(type_: str) -> str:
    return tiny_net(
        layer("Pooling", "pooling_param { pool: AVE global_pooling: true }", name="gp")
        + layer("Reshape", "reshape_param { shape { dim: 0 dim: -1 } }", name="s", bottoms=("gp",))
        + layer(type_, f"{type_.lower()}_param {{ axis: 0 }}", name="y", bottoms=("data", "s")),
        SHAPE,
    )


def test_scale_second_bottom(tmp_path: Path) -> None:
    """The scale as a second bottom (N, C), axis 0 (a per-channel blob made by pooling)."""
    ours, refs = run_ours_and_opencv(tmp_path, _second_bottom_net("Scale"), {"data": SHAPE})
    assert_blobs_close(ours, refs)


def test_bias_second_bottom(tmp_path: Path) -> None:
    """OpenCV cannot load Bias with two bottoms: numpy reference x + mean_hw(x)."""
    proto = tmp_path / "net.prototxt"
    proto.write_text(_second_bottom_net("Bias"))
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    got = ob.interpret(convert(proto), {"data": x})["y"]
    want = x + x.mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _run_numpy_case(tmp_path: Path, type_: str, params: str) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer(type_, params), SHAPE))
    model = tmp_path / "w.caffemodel"
    written = write_random_weights(proto, model, seed=5)
    blobs = read_caffemodel(model)["y"] if written else []
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    got = ob.interpret(convert(proto, weights=model if written else None), {"data": x})["y"]
    return x, got, blobs


def _lrn_across(x: np.ndarray, n: int, alpha: float, beta: float, k: float) -> np.ndarray:
    pad = np.pad(x * x, ((0, 0), (n // 2, n // 2), (0, 0), (0, 0)))
    s = sum(pad[:, i:i + x.shape[1]] for i in range(n))
    return x / (k + alpha / n * s) ** beta


@pytest.mark.parametrize(("params", "n", "alpha", "beta", "k"), [
    ("", 5, 1.0, 0.75, 1.0),
    ("lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 k: 2 }", 3, 0.5, 0.6, 2.0),
    ("lrn_param { local_size: 15 alpha: 0.5 beta: 0.6 k: 2 }", 15, 0.5, 0.6, 2.0),
], ids=["params=absent", "local_size=3,k=2", "local_size=15>2C+1"])
def test_lrn_caffe_defaults(tmp_path: Path, params: str, n: int, alpha: float, beta: float, k: float) -> None:
    """OpenCV's importer ignores ``k`` and defaults alpha to 1e-4 (Caffe's schema says 1), so
    these cases use a numpy reference of Caffe's formula: x / (k + alpha/n * sum x^2)^beta."""
    x, got, _ = _run_numpy_case(tmp_path, "LRN", params)
    np.testing.assert_allclose(got, _lrn_across(x, n, alpha, beta, k), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("type_", "params", "shape"), [
    ("Scale", "scale_param { num_axes: 0 bias_term: true }", ()),
    ("Bias", "", (4, 1, 1)),
    ("Bias", "bias_param { axis: 2 num_axes: 1 }", (5, 1)),
    ("Bias", "bias_param { axis: 0 num_axes: -1 }", SHAPE),
], ids=["Scale,num_axes=0", "Bias,params=absent", "Bias,axis=2,num_axes=1", "Bias,num_axes=-1"])
def test_scale_bias_blob_forms(tmp_path: Path, type_: str, params: str, shape: tuple[int, ...]) -> None:
    """Forms OpenCV cannot load (a scalar scale; Bias with a learned blob): numpy reference."""
    x, got, blobs = _run_numpy_case(tmp_path, type_, params)
    if type_ == "Scale":
        want = x * blobs[0].reshape(shape) + blobs[1].reshape(shape)
    else:
        want = x + blobs[0].reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_batch_norm_use_global_stats_false_uses_the_batch(tmp_path: Path) -> None:
    """Caffe normalises with the batch's own mean/variance when use_global_stats is false
    (OpenCV always uses the stored ones): numpy reference over N, H, W."""
    x, got, _ = _run_numpy_case(tmp_path, "BatchNorm", "batch_norm_param { use_global_stats: false eps: 0.001 }")
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(var + 0.001), rtol=1e-4, atol=1e-5)
