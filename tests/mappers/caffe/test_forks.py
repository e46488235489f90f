"""Fork layers that move or rescale data, each against an outside reference: OpenCV's Caffe
importer where it has the layer (Reorg, HardSwish, HardSigmoid, Upsample after a two-top
Pooling as MaxUnpool), torch (Im2col as F.unfold), else numpy written here from the fork's
C++ source named in each test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import OpbridgeError
from opbridge.parsers.caffe_weights import read_caffemodel
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

SHAPE = (2, 8, 4, 6)
X = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)


def _run(tmp_path: Path, layers: str, x: np.ndarray = X, seed: int = 0) -> tuple[dict[str, np.ndarray], dict]:
    """Our blobs (random weights, written to a caffemodel) and the caffemodel's blobs."""
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layers, x.shape))
    model = tmp_path / "net.caffemodel"
    written = write_random_weights(proto, model, seed=seed)
    g = convert(proto, weights=model if written else None)
    blobs = read_caffemodel(model) if written else {}
    return ob.interpret(g, {"data": x}, keep_intermediates=True), blobs


OPENCV_CASES = {
    "Reorg,stride=absent": layer("Reorg"),
    "Reorg,stride=2": layer("Reorg", "reorg_param { stride: 2 }"),
    "HardSwish": layer("HardSwish"),
    "HardSigmoid,params=absent": layer("HardSigmoid"),
    "HardSigmoid,alpha,beta": layer("HardSigmoid", "hard_sigmoid_param { alpha: 0.3 beta: 0.4 }"),
}


@requires_cv2
@pytest.mark.parametrize("text", list(OPENCV_CASES.values()), ids=list(OPENCV_CASES))
def test_against_opencv(tmp_path: Path, text: str) -> None:
    ours, refs = run_ours_and_opencv(tmp_path, tiny_net(text, SHAPE), {"data": SHAPE})
    assert_blobs_close(ours, refs)


def test_reorg_space_to_depth_mode(tmp_path: Path) -> None:
    """The other forks' reorg: plain space-to-depth, output channel (bh * s + bw) * C + c."""
    got = _run(tmp_path, layer("Reorg", 'reorg_param { stride: 2 mode: "space_to_depth" }'))[0]["y"]
    n, c, h, w = SHAPE
    want = X.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * 4, h // 2, w // 2)
    np.testing.assert_array_equal(got, want)


def test_reorg_bad_stride_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match=r"reorg_param.stride"):
        _run(tmp_path, layer("Reorg", "reorg_param { stride: 4 }"))


_POOL2 = layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="pool", tops=("p", "mask"))


@requires_cv2
@pytest.mark.parametrize("params", ["", "upsample_param { scale: 2 }", "upsample_param { upsample_h: 4 upsample_w: 6 }"],
                         ids=["params=absent", "scale=2", "upsample_h,upsample_w"])
def test_segnet_unpooling_against_opencv(tmp_path: Path, params: str) -> None:
    """SegNet's pooling mask and its Upsample with two bottoms; OpenCV reads the same layer
    pair (a Pooling with two tops, then MaxUnpool) when the Upsample is spelled MaxUnpool
    with its pool_* fields, so it gets that spelling of the same net (batch 1: OpenCV's
    MaxUnpool takes no more)."""
    x = np.ascontiguousarray(X[:1])
    ours_text = tiny_net(_POOL2 + layer("Upsample", params, name="up", bottoms=("p", "mask")), x.shape)
    proto = tmp_path / "ours.prototxt"
    proto.write_text(ours_text)
    ours = ob.interpret(convert(proto), {"data": x}, keep_intermediates=True)
    import cv2

    cv_text = tiny_net(_POOL2 + layer("MaxUnpool", "pool_k_h: 2 pool_k_w: 2 pool_stride_h: 2 pool_stride_w: 2 "
                                      "pool_pad_h: 0 pool_pad_w: 0", name="up", bottoms=("p", "mask")), x.shape)
    (tmp_path / "cv.prototxt").write_text(cv_text)
    net = cv2.dnn.readNetFromCaffe(str(tmp_path / "cv.prototxt"))
    net.setInput(x)
    up, pool = net.forward(["up", "pool"])
    np.testing.assert_allclose(ours["up"], up, rtol=1e-6)
    np.testing.assert_allclose(ours["p"], pool, rtol=1e-6)


def test_segnet_mask_is_the_plane_index(tmp_path: Path) -> None:
    """caffe pooling_layer.cpp MAX: mask = h * W + w of the first maximum of each window."""
    ours = _run(tmp_path, _POOL2)[0]
    n, c, h, w = SHAPE
    win = X.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    oy, ox = np.meshgrid(np.arange(h // 2), np.arange(w // 2), indexing="ij")
    want = (oy * 2 + arg // 2) * w + ox * 2 + arg % 2
    np.testing.assert_array_equal(ours["mask"], want.astype(np.float32))


@pytest.mark.parametrize(("params", "size"), [
    ("upsample_param { scale: 2 pad_out_h: true }", (3, 6)),
    ("upsample_param { scale_h: 2 scale_w: 2 pad_out_w: true }", (4, 5)),
    ("upsample_param { upsample_h: 5 upsample_w: 7 }", (5, 7)),
], ids=["pad_out_h", "scale_h,scale_w,pad_out_w", "upsample_h=5,upsample_w=7"])
def test_segnet_unpool_sizes(tmp_path: Path, params: str, size: tuple[int, int]) -> None:
    """caffe-segnet UpsampleLayer::Reshape and Forward_cpu: top (upsample_h, upsample_w), or
    H * scale_h - pad_out_h; each value written at its mask index of a zero plane."""
    pool = layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="pool", tops=("p", "mask"))
    x = X[:, :, :3, :5] if size == (3, 6) else X
    x = np.ascontiguousarray(X[:, :, :, :5]) if size == (4, 5) else np.ascontiguousarray(x)
    ours = _run(tmp_path, pool + layer("Upsample", params, name="up", bottoms=("p", "mask")), x)[0]
    n, c = x.shape[:2]
    want = np.zeros((n, c, size[0] * size[1]), np.float32)
    m = ours["mask"].reshape(n, c, -1).astype(np.int64)
    np.put_along_axis(want, m, ours["p"].reshape(n, c, -1), axis=2)
    np.testing.assert_array_equal(ours["up"], want.reshape(n, c, *size))


@pytest.mark.parametrize("params", ["upsample_param { scale_h: 2 scale_w: 3 }", "upsample_param { scale: 3 }"],
                         ids=["scale_h=2,scale_w=3", "scale=3"])
def test_nearest_upsample_scales(tmp_path: Path, params: str) -> None:
    """The 1-bottom (YOLOv3 fork) Upsample: every pixel repeated scale_h x scale_w."""
    sh, sw = (2, 3) if "scale_h" in params else (3, 3)
    got = _run(tmp_path, layer("Upsample", params))[0]["y"]
    np.testing.assert_array_equal(got, X.repeat(sh, axis=2).repeat(sw, axis=3))


def test_upsample_with_three_bottoms_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match="got 3"):
        _run(tmp_path, layer("Upsample", bottoms=("data", "data", "data")))


def _bn_ref(x: np.ndarray, blobs: list[np.ndarray], eps: float) -> np.ndarray:
    scale, shift, mean, var = (b.reshape(1, -1, 1, 1) for b in blobs)
    return scale * (x - mean) / np.sqrt(var + eps) + shift


def test_bn_pspnet(tmp_path: Path) -> None:
    """hszhao/PSPNet bn_layer.cpp, TEST with moving_average: the stored mean and variance,
    y = scale (x - mean) / sqrt(var + var_eps) + shift."""
    text = layer("BN", "bn_param { scale_filler { type: 'constant' value: 1 } moving_average: true "
                 "decay: 0.05 var_eps: 1e-5 }")
    ours, blobs = _run(tmp_path, text)
    assert len(blobs["y"]) == 4 and blobs["y"][0].shape == (1, 8, 1, 1)
    np.testing.assert_allclose(ours["y"], _bn_ref(X, blobs["y"], 1e-5), rtol=1e-5, atol=1e-5)


def test_bn_segnet_inference(tmp_path: Path) -> None:
    """alexgkendall/caffe-segnet bn_layer.cpp, bn_mode INFERENCE: scale x + shift, 2 blobs."""
    ours, blobs = _run(tmp_path, layer("BN", "bn_param { bn_mode: INFERENCE }"))
    assert len(blobs["y"]) == 2
    scale, shift = (b.reshape(1, -1, 1, 1) for b in blobs["y"])
    np.testing.assert_allclose(ours["y"], scale * X + shift, rtol=1e-6, atol=1e-6)


def test_bn_segnet_learn_uses_batch_statistics(tmp_path: Path) -> None:
    """caffe-segnet BN, bn_mode LEARN (the default): the batch's mean and E(x^2) - E(x)^2 over
    N, H, W, eps 1e-9."""
    ours, blobs = _run(tmp_path, layer("BN"))
    scale, shift = (b.reshape(1, -1, 1, 1) for b in blobs["y"])
    x = X.astype(np.float64)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = (x * x).mean(axis=(0, 2, 3), keepdims=True) - mean ** 2
    np.testing.assert_allclose(ours["y"], scale * (x - mean) / np.sqrt(var + 1e-9) + shift, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 2, -1], ids=["axis=0", "axis=2", "axis=-1"])
def test_reverse(tmp_path: Path, axis: int) -> None:
    """tianzhi0549/CTPN reverse_layer.cpp: the bottom reversed along reverse_param.axis."""
    got = _run(tmp_path, layer("Reverse", f"reverse_param {{ axis: {axis} }}"))[0]["y"]
    np.testing.assert_array_equal(got, np.flip(X, axis=axis))


def test_reverse_axis_absent_is_axis_0(tmp_path: Path) -> None:
    got = _run(tmp_path, layer("Reverse"))[0]["y"]
    np.testing.assert_array_equal(got, X[::-1])


def test_transpose(tmp_path: Path) -> None:
    """CTPN transpose_layer.cpp: top shape[i] = bottom shape[dim[i]]."""
    got = _run(tmp_path, layer("Transpose", "transpose_param { dim: 3 dim: 2 dim: 0 dim: 1 }"))[0]["y"]
    np.testing.assert_array_equal(got, X.transpose(3, 2, 0, 1))


def test_transpose_needs_a_permutation(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match=r"transpose_param.dim"):
        _run(tmp_path, layer("Transpose", "transpose_param { dim: 0 dim: 0 dim: 1 dim: 2 }"))


@pytest.mark.parametrize("params", [
    "convolution_param { kernel_size: 3 pad: 1 }",
    "convolution_param { kernel_size: 2 stride: 2 }",
    "convolution_param { kernel_h: 2 kernel_w: 3 dilation: 2 }",
], ids=["k3,pad1", "k2,stride2", "kernel_h,kernel_w,dilation"])
def test_im2col_against_torch_unfold(tmp_path: Path, params: str) -> None:
    """BVLC im2col_layer.cpp (as CTPN uses it): channels c * kh * kw + ki * kw + kj, the order
    of torch.nn.functional.unfold."""
    import torch
    import torch.nn.functional as F

    got = _run(tmp_path, layer("Im2col", params))[0]["y"]
    kw = dict(kernel_size=3, padding=1) if "pad: 1" in params else (
        dict(kernel_size=2, stride=2) if "stride" in params else dict(kernel_size=(2, 3), dilation=2))
    want = F.unfold(torch.from_numpy(X), **kw).numpy()
    assert got.shape[:2] == want.shape[:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def _caffe_im2col(x: np.ndarray, k: tuple[int, int], pad: tuple[int, int], stride: tuple[int, int],
                  dil: tuple[int, int]) -> np.ndarray:
    """BVLC src/caffe/util/im2col.cpp im2col_cpu, loop for loop, per image, with the output
    size of Im2colLayer::Reshape (include/caffe/util/im2col.hpp declares the argument order):
    row (c * kh + ki) * kw + kj, column oy * OW + ox reads input row -pad_h + ki * dil_h +
    oy * stride_h (and likewise the column), 0 outside the image."""
    n, c, h, w = x.shape
    oh = (h + 2 * pad[0] - (dil[0] * (k[0] - 1) + 1)) // stride[0] + 1
    ow = (w + 2 * pad[1] - (dil[1] * (k[1] - 1) + 1)) // stride[1] + 1
    out = np.zeros((n, c * k[0] * k[1], oh, ow), x.dtype)
    for b in range(n):
        for ch in range(c):
            for ki in range(k[0]):
                for kj in range(k[1]):
                    row = (ch * k[0] + ki) * k[1] + kj
                    for oy in range(oh):
                        iy = -pad[0] + ki * dil[0] + oy * stride[0]
                        for ox in range(ow):
                            ix = -pad[1] + kj * dil[1] + ox * stride[1]
                            if 0 <= iy < h and 0 <= ix < w:
                                out[b, row, oy, ox] = x[b, ch, iy, ix]
    return out


#: convolution_param text -> (kernel, pad, stride, dilation) as (h, w)
IM2COL_CASES = {
    "pad,stride,dilation=absent": ("convolution_param { kernel_size: 2 }", ((2, 2), (0, 0), (1, 1), (1, 1))),
    "k3,pad1": ("convolution_param { kernel_size: 3 pad: 1 }", ((3, 3), (1, 1), (1, 1), (1, 1))),
    "k3,stride2,dilation2": ("convolution_param { kernel_size: 3 stride: 2 dilation: 2 pad: 2 }",
                             ((3, 3), (2, 2), (2, 2), (2, 2))),
    "kernel_h,kernel_w,pad_h,pad_w,stride_h,stride_w": (
        "convolution_param { kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0 stride_h: 1 stride_w: 2 }",
        ((3, 2), (1, 0), (1, 2), (1, 1))),
    "per-axis lists": ("convolution_param { kernel_size: 1 kernel_size: 3 pad: 0 pad: 2 dilation: 1 dilation: 2 }",
                       ((1, 3), (0, 2), (1, 1), (1, 2))),
}


@pytest.mark.parametrize(("params", "geometry"), list(IM2COL_CASES.values()), ids=list(IM2COL_CASES))
def test_im2col_against_caffe_cpp(tmp_path: Path, params: str, geometry: tuple) -> None:
    """OpenCV's Caffe importer has no Im2col layer ("Can't create layer"), so the reference is
    BVLC's im2col_cpu written out in numpy here."""
    got = _run(tmp_path, layer("Im2col", params))[0]["y"]
    np.testing.assert_array_equal(got, _caffe_im2col(X, *geometry))


def test_im2col_passes_inf_and_nan_through_exactly(tmp_path: Path) -> None:
    """Copies only: an inf stays inf (a one-hot convolution made it NaN, inf * 0) and a NaN
    reaches only the columns that read it, on the interpreter and on the simulator."""
    x = X.copy()
    x[0, 1, 2, 3], x[1, 4, 0, 0], x[1, 7, 3, 5] = np.inf, -np.inf, np.nan
    params = "convolution_param { kernel_size: 3 pad: 1 }"
    want = _caffe_im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))
    # an inner pixel is read by 9 windows, a corner one by 4
    assert np.isinf(want).sum() == 9 + 4 and np.isnan(want).sum() == 4
    got = _run(tmp_path, layer("Im2col", params), x)[0]["y"]
    np.testing.assert_array_equal(got, want)
    sim = ob.compile(convert(tmp_path / "net.prototxt")).run({"data": x})
    np.testing.assert_array_equal(sim["y"], want)


def test_im2col_is_copies_not_a_convolution(tmp_path: Path) -> None:
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Im2col", "convolution_param { kernel_size: 3 pad: 1 }"), X.shape))
    ops = convert(proto).op_counts()
    assert "Conv" not in ops and ops.get("Slice") == 9, ops


def test_im2col_other_channel_axis_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match=r"axis.*only the channel axis 1"):
        _run(tmp_path, layer("Im2col", "convolution_param { kernel_size: 1 axis: 2 }"))


@pytest.mark.parametrize("t", [1, 5], ids=["T=1", "T=5"])
def test_ctpn_lstm_against_torch(tmp_path: Path, t: int) -> None:
    """CTPN lstm_layer.cpp: gates i, f, o, g along 4H of W_x (4H, I), W_h (4H, H), b; zero
    state at t = 0. torch.nn.LSTM orders its gates i, f, g, o: the blobs are reordered for it."""
    import torch

    x = np.random.default_rng(3).standard_normal((t, 3, 2, 2)).astype(np.float32)
    ours, blobs = _run(tmp_path, layer("Lstm", "lstm_param { num_output: 4 }"), x)
    wx, wh, b = blobs["y"]
    hid = 4
    order = np.concatenate([np.arange(0, hid), np.arange(hid, 2 * hid), np.arange(3 * hid, 4 * hid),
                            np.arange(2 * hid, 3 * hid)])
    ref = torch.nn.LSTM(4, hid)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.from_numpy(wx[order]))
        ref.weight_hh_l0.copy_(torch.from_numpy(wh[order]))
        ref.bias_ih_l0.copy_(torch.from_numpy(b[order]))
        ref.bias_hh_l0.zero_()
        want = ref(torch.from_numpy(x.reshape(t, 3, 4)))[0].numpy()
    np.testing.assert_allclose(ours["y"], want, rtol=1e-5, atol=1e-5)


def test_ctpn_lstm_needs_num_output(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match=r"lstm_param.num_output"):
        _run(tmp_path, layer("Lstm"), np.zeros((2, 1, 3), np.float32))


@pytest.mark.parametrize(("params", "size"), [
    ("imresize_param { target_spatial_width: 9 target_spatial_height: 7 }", (7, 9)),
    ("imresize_param { factor: 2.5 }", (10, 15)),
    ("imresize_param { target_spatial_width: 3 target_spatial_height: 2 }", (2, 3)),
], ids=["target_spatial_*", "factor=2.5", "downscale"])
def test_openpose_imresize_against_cv2_resize(tmp_path: Path, params: str, size: tuple[int, int]) -> None:
    """caffe_rtpose imresize_layer.cpp: cv::resize(INTER_CUBIC) of every plane."""
    import cv2

    got = _run(tmp_path, layer("ImResize", params))[0]["y"]
    n, c = SHAPE[:2]
    want = np.stack([cv2.resize(X[i, j], (size[1], size[0]), interpolation=cv2.INTER_CUBIC)
                     for i in range(n) for j in range(c)]).reshape(n, c, *size)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _caffe_windows_resize_ref(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """happynear/caffe-windows src/caffe/util/util_img.cpp BiLinearResizeMat_cpu, its loops
    (commit 3937c98c): float32 scale = in / out, source floor(dst * scale), weights 1 - f and
    f; the right, lower and lower-right neighbours only where they exist (the lower-right one
    only when both others do)."""
    n, c, h, w = x.shape
    f32 = np.float32
    scale_w, scale_h = f32(w) / f32(ow), f32(h) / f32(oh)
    out = np.zeros((n, c, oh, ow), np.float32)
    for b in range(n):
        for ch in range(c):
            src = x[b, ch].reshape(-1)
            for dh in range(oh):
                fh = f32(dh) * scale_h
                sh = int(np.floor(fh))
                fh = f32(fh - f32(sh))
                wh0, wh1 = abs(f32(1) - fh), abs(fh)
                for dw in range(ow):
                    fw = f32(dw) * scale_w
                    sw = int(np.floor(fw))
                    fw = f32(fw - f32(sw))
                    ww0, ww1 = abs(f32(1) - fw), abs(fw)
                    i = sh * w + sw
                    v = wh0 * ww0 * src[i]
                    flag = 0
                    if sw + 1 < w:
                        v += wh0 * ww1 * src[i + 1]
                        flag += 1
                    if sh + 1 < h:
                        v += wh1 * ww0 * src[i + w]
                        flag += 1
                    if flag > 1:
                        v += wh1 * ww1 * src[i + w + 1]
                    out[b, ch, dh, dw] = v
    return out


@pytest.mark.parametrize(("params", "size"), [
    ("resize_param { height: 9 width: 13 }", (9, 13)),
    ("resize_param { height: 3 width: 4 }", (3, 4)),
    ("resize_param { height: 4 width: 6 }", (4, 6)),
    ("resize_param { is_pyramid_test: true out_height_scale: 2.5 out_width_scale: 0.7 }", (10, 4)),
], ids=["upscale", "downscale", "same-size", "is_pyramid_test"])
def test_caffe_windows_resize(tmp_path: Path, params: str, size: tuple[int, int]) -> None:
    """happynear/caffe-windows resize_layer.cpp (Reshape: height/width, or the input size
    times out_*_scale truncated) and util_img.cpp (the bilinear grid)."""
    got = _run(tmp_path, layer("Resize", params))[0]["y"]
    assert got.shape == SHAPE[:2] + size
    np.testing.assert_allclose(got, _caffe_windows_resize_ref(X, *size), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("params", "field"), [
    ("", "resize_param.height"),
    ("resize_param { is_pyramid_test: true out_height_scale: 2 }", "resize_param.out_height_scale"),
], ids=["params=absent", "pyramid-without-width-scale"])
def test_caffe_windows_resize_needs_its_size(tmp_path: Path, params: str, field: str) -> None:
    with pytest.raises(OpbridgeError, match=field):
        _run(tmp_path, layer("Resize", params))


def _nms_ref(x: np.ndarray, threshold: float, num_peak: int) -> np.ndarray:
    """caffe_rtpose nms_layer.cpp Forward_cpu, its loops (plane n of image n, 4-neighbour
    strict maxima, 0 outside the map); at most num_peak peaks kept."""
    n, _, h, w = x.shape
    planes = x.reshape(-1, h, w)
    out = np.zeros((n, 1, num_peak + 1, 3), np.float32)
    for b in range(n):
        count = 0
        for y in range(h):
            for xx in range(w):
                v = planes[b, y, xx]
                if v < threshold:
                    continue
                top = 0 if y == 0 else planes[b, y - 1, xx]
                bottom = 0 if y == h - 1 else planes[b, y + 1, xx]
                left = 0 if xx == 0 else planes[b, y, xx - 1]
                right = 0 if xx == w - 1 else planes[b, y, xx + 1]
                if v > top and v > bottom and v > left and v > right and count < num_peak:
                    out[b, 0, count + 1] = [xx, y, v]
                    count += 1
        out[b, 0, 0, 0] = count
    return out


@pytest.mark.parametrize(("params", "thr", "k"), [("", 0.5, 100), ("nms_param { threshold: 0.1 num_peak: 3 }", 0.1, 3)],
                         ids=["params=absent", "threshold,num_peak=3"])
def test_openpose_nms(tmp_path: Path, params: str, thr: float, k: int) -> None:
    x = np.random.default_rng(4).uniform(0, 1, (2, 1, 6, 7)).astype(np.float32)
    got = _run(tmp_path, layer("Nms", params), x)[0]["y"]
    np.testing.assert_allclose(got, _nms_ref(x, thr, k), rtol=1e-6)


#: The fork layer types of the issue that opbridge maps itself (each tested in test_forks*.py).
FORK_TYPES = ("BN", "Upsample", "MaxUnpool", "Reorg", "Region", "YoloDetectionOutput", "Yolov3DetectionOutput",
              "PSROIPooling", "ROIAlign", "Proposal", "Interp", "ReLU6", "HardSwish", "HardSigmoid", "Swish",
              "Mish", "ShuffleChannel", "DepthwiseConvolution", "ConvolutionDepthwise", "Axpy", "Lstm",
              "Reverse", "Transpose", "Im2col", "ImResize", "Resize", "Nms", "Normalize", "PriorBox", "DetectionOutput",
              "Permute", "ROIPooling")


def test_fork_layers_are_built_in() -> None:
    from opbridge.mappers import DEFAULT_MAPPINGS

    builtin = {e.op_type for e in DEFAULT_MAPPINGS.entries("caffe")
               if "/mappers/caffe/" in e.defined_at.replace("\\", "/")}
    missing = [t for t in FORK_TYPES if t not in builtin]
    assert not missing, f"fork layers without a built-in mapping: {missing}"


# -- the FCN-era Crop (longjon/caffe crop_layer.cpp): offsets from the coordinate maps -------
# coords.hpp FilterMap(k, s, p) maps y to s * y + (k - 1) / 2 - p; Convolution and Pooling map
# their bottom to their top by its inverse, Deconvolution by FilterMap itself; the crop is
# minus the offset of (map to bottom 1) o (map to bottom 0)^-1.
_COORD = 'crop_param { mode: "coord_map" }'


def test_coord_map_crop_after_padded_convolution(tmp_path: Path) -> None:
    """Convolution k3 pad 3: FilterMap (1, 1 - 3) = (1, -2), its inverse (1, 2): crop 2."""
    conv = layer("Convolution", "convolution_param { num_output: 3 kernel_size: 3 pad: 3 }", name="c")
    ours = _run(tmp_path, conv + layer("Crop", _COORD, bottoms=("c", "data")))[0]
    h, w = SHAPE[2:]
    np.testing.assert_array_equal(ours["y"], ours["c"][:, :, 2:2 + h, 2:2 + w])


def test_coord_map_crop_through_pooling_and_deconvolution(tmp_path: Path) -> None:
    """Pooling k2 s2: inverse of (2, 1/2) is (1/2, -1/4); Deconvolution k4 s2: (2, 3/2);
    composed (1, -1/2 + 3/2) = (1, 1): crop 1 on both axes."""
    x = np.random.default_rng(5).standard_normal((1, 2, 6, 8)).astype(np.float32)
    net = (layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="p")
           + layer("Deconvolution", "convolution_param { num_output: 2 kernel_size: 4 stride: 2 }", name="d",
                   bottoms=("p",))
           + layer("Crop", _COORD, bottoms=("d", "data")))
    ours = _run(tmp_path, net, x)[0]
    np.testing.assert_array_equal(ours["y"], ours["d"][:, :, 1:7, 1:9])


def test_coord_map_crop_of_hed_matches_the_fork_algebra(tmp_path: Path) -> None:
    """HED's five side outputs (s9xie/hed deploy, each Crop given mode coord_map; the maps do
    not depend on the input size): conv1_1 (k3 pad 35) maps data by (1, 34); each 2x2
    pooling then halves, (1/2, -1/4); the side deconvolutions (k 2s, stride s) bring it back
    with (s, s - 1/2). Crops: 34; 2 * 16.75 + 1.5 = 35; 4 * 8.125 + 3.5 = 36;
    8 * 3.8125 + 7.5 = 38; 16 * 1.65625 + 15.5 = 42."""
    import warnings

    text = (Path(__file__).resolve().parents[2] / "data" / "caffe_nets" / "hed" / "deploy.prototxt").read_text()
    proto, model = tmp_path / "hed.prototxt", tmp_path / "hed.caffemodel"
    proto.write_text(text.replace("top: 'upscore-dsn", f"{_COORD} top: 'upscore-dsn"))
    shapes = {"data": (1, 3, 32, 32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the renamed duplicate 'crop' layers
        write_random_weights(proto, model, seed=0, input_shapes=shapes)
        g = convert(proto, weights=model, input_shapes=shapes)
    starts = {n.outputs[0].name: list(n.attrs["starts"]) for n in g.nodes if n.op == "Slice"}
    assert starts == {f"upscore-dsn{i}": [c, c] for i, c in zip(range(1, 6), (34, 35, 36, 38, 42))}


@pytest.mark.parametrize(("net", "match"), [
    (layer("Convolution", "convolution_param { num_output: 3 kernel_size: 2 }", name="c")
     + layer("Crop", _COORD, bottoms=("c", "data")), "not a crop by a whole number"),
    (layer("Crop", 'crop_param { mode: "centre" }', bottoms=("data", "data")), "crop_param.mode"),
    (layer("Crop", 'crop_param { mode: "coord_map" offset: 1 }', bottoms=("data", "data")), "without axis or offset"),
], ids=["negative-or-fractional-shift", "unknown-mode", "mode-with-offset"])
def test_coord_map_crop_errors_name_the_field(tmp_path: Path, net: str, match: str) -> None:
    with pytest.raises(OpbridgeError, match=match):
        _run(tmp_path, net)
