"""Concat, Slice, Split, Flatten, Reshape, Permute, Crop, Tile, ShuffleChannel, Upsample,
Reduction, ArgMax against OpenCV (numpy where OpenCV lacks the layer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv, tiny_net

SHAPE = (2, 6, 4, 5)


def _two(params_a: str = "power_param { scale: 2 }", params_b: str = "power_param { shift: 1 }") -> str:
    return layer("Power", params_a, name="a") + layer("Power", params_b, name="b")


CASES = {
    "Concat,axis=absent": (_two() + layer("Concat", "", bottoms=("a", "b"))),
    "Concat,axis=3": (_two() + layer("Concat", "concat_param { axis: 3 }", bottoms=("a", "b"))),
    "Concat,axis=-2": (_two() + layer("Concat", "concat_param { axis: -2 }", bottoms=("a", "b"))),
    "Slice,slice_point": layer("Slice", "slice_param { slice_point: 1 slice_point: 4 }", tops=("y", "y2", "y3")),
    "Slice,axis=2": layer("Slice", "slice_param { axis: 2 slice_point: 3 }", tops=("y", "y2")),
    "Flatten,params=absent": layer("Flatten"),
    "Flatten,axis=2": layer("Flatten", "flatten_param { axis: 2 }"),
    "Flatten,axis=1,end_axis=2": layer("Flatten", "flatten_param { axis: 1 end_axis: 2 }"),
    "Reshape,0 and -1": layer("Reshape", "reshape_param { shape { dim: 0 dim: -1 dim: 5 } }"),
    "Reshape,full": layer("Reshape", "reshape_param { shape { dim: 2 dim: 3 dim: 2 dim: 20 } }"),
    "Reshape,axis=1,num_axes=1": layer("Reshape", "reshape_param { shape { dim: 2 dim: 3 } axis: 1 num_axes: 1 }"),
    "Permute,0231": layer("Permute", "permute_param { order: 0 order: 2 order: 3 order: 1 }"),
    "ShuffleChannel,group=3": layer("ShuffleChannel", "shuffle_channel_param { group: 3 }"),
    "ShuffleChannel,group=absent": layer("ShuffleChannel"),
    "Split": (layer("Split", name="sp", tops=("s1", "s2")) + layer("Eltwise", "", name="y", bottoms=("s1", "s2"))),
    "Crop,axis=absent": (layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="p")
                         + layer("Crop", "crop_param { offset: 1 }", bottoms=("data", "p"))),
    "Crop,axis=1,offsets": (layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="p")
                            + layer("Crop", "crop_param { axis: 2 offset: 1 offset: 2 }", bottoms=("data", "p"))),
}


@requires_cv2
@pytest.mark.parametrize("layers", list(CASES.values()), ids=list(CASES))
def test_shape_layers(tmp_path: Path, layers: str) -> None:
    ours, refs = run_ours_and_opencv(tmp_path, tiny_net(layers, SHAPE), {"data": SHAPE})
    assert_blobs_close(ours, refs, rtol=0.0)


def _ours(tmp_path: Path, layers: str, x: np.ndarray) -> dict[str, np.ndarray]:
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layers, x.shape))
    return ob.interpret(convert(proto), {"data": x})


X = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)


# Cases OpenCV gets wrong or cannot load: it ignores the legacy concat_dim/slice_dim, needs a
# full Permute order, and rejects an equal Slice of 6 channels into 3 tops.
NUMPY_CASES = {
    "Concat,concat_dim=0": (layer("Concat", "concat_param { concat_dim: 0 }", bottoms=("data", "data")),
                            lambda x: [np.concatenate([x, x], axis=0)]),
    "Slice,equal parts": (layer("Slice", "", tops=("y", "y2", "y3")), lambda x: np.split(x, 3, axis=1)),
    "Slice,slice_dim=3": (layer("Slice", "slice_param { slice_dim: 3 slice_point: 2 }", tops=("y", "y2")),
                          lambda x: np.split(x, [2], axis=3)),
    "Permute,partial order": (layer("Permute", "permute_param { order: 0 order: 3 }"),
                              lambda x: [x.transpose(0, 3, 1, 2)]),
}


@pytest.mark.parametrize(("layers", "want"), list(NUMPY_CASES.values()), ids=list(NUMPY_CASES))
def test_shape_layers_numpy(tmp_path: Path, layers: str, want) -> None:  # noqa: ANN001
    outs = _ours(tmp_path, layers, X)
    names = [n for n in ("y", "y2", "y3") if n in outs]
    for name, ref in zip(names, want(X), strict=True):
        np.testing.assert_array_equal(outs[name], ref)


@pytest.mark.parametrize("scale", [None, 3], ids=["scale=absent", "scale=3"])
def test_upsample(tmp_path: Path, scale: int | None) -> None:
    """YOLOv3's Upsample fork layer (OpenCV lacks it): every pixel repeated scale x scale."""
    params = "" if scale is None else f"upsample_param {{ scale: {scale} }}"
    s = scale or 2
    got = _ours(tmp_path, layer("Upsample", params), X)["y"]
    np.testing.assert_array_equal(got, X.repeat(s, axis=2).repeat(s, axis=3))


@pytest.mark.parametrize(("params", "want"), [
    ("", lambda x: np.array(x.sum())),
    ("reduction_param { operation: ASUM axis: 1 }", lambda x: np.abs(x).sum(axis=(1, 2, 3))),
    ("reduction_param { operation: SUMSQ axis: 2 coeff: 0.5 }", lambda x: 0.5 * (x * x).sum(axis=(2, 3))),
    ("reduction_param { operation: MEAN axis: -1 }", lambda x: x.mean(axis=3)),
], ids=["operation=absent,axis=absent", "ASUM,axis=1", "SUMSQ,coeff", "MEAN,axis=-1"])
def test_reduction(tmp_path: Path, params: str, want) -> None:  # noqa: ANN001
    """Caffe's Reduction over all axes from ``axis`` on (numpy reference; OpenCV lacks it)."""
    got = _ours(tmp_path, layer("Reduction", params), X)["y"]
    np.testing.assert_allclose(got, want(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("params", "want"), [
    ("", lambda x: x.reshape(2, -1).argmax(axis=1).reshape(2, 1, 1, 1).astype(np.float32)),
    ("argmax_param { axis: 1 }", lambda x: x.argmax(axis=1)[:, None].astype(np.float32)),
    ("argmax_param { axis: 1 out_max_val: true }", lambda x: x.max(axis=1, keepdims=True)),
    ("argmax_param { out_max_val: true }", lambda x: np.concatenate(
        [x.reshape(2, -1).argmax(axis=1).reshape(2, 1, 1, 1).astype(np.float32),
         x.reshape(2, -1).max(axis=1).reshape(2, 1, 1, 1)], axis=1)),
], ids=["axis=absent", "axis=1", "axis=1,out_max_val", "axis=absent,out_max_val"])
def test_argmax(tmp_path: Path, params: str, want) -> None:  # noqa: ANN001
    """Caffe's ArgMax (top_k 1): indices as floats, or the values (numpy reference); the top
    has the bottom's rank (4) with trailing ones, as argmax_layer.cpp's Reshape makes it."""
    got = _ours(tmp_path, layer("ArgMax", params), X)["y"]
    assert got.shape == want(X).shape
    np.testing.assert_allclose(got, want(X), rtol=1e-6)


@pytest.mark.parametrize("tiles", [2, 3])
def test_tile(tmp_path: Path, tiles: int) -> None:
    got = _ours(tmp_path, layer("Tile", f"tile_param {{ axis: 2 tiles: {tiles} }}"), X)["y"]
    np.testing.assert_array_equal(got, np.tile(X, (1, 1, tiles, 1)))


INTERP_CASES = {
    "height,width": "interp_param { height: 9 width: 7 }",
    "zoom_factor=2": "interp_param { zoom_factor: 2 }",
}


@requires_cv2
@pytest.mark.parametrize("params", list(INTERP_CASES.values()), ids=list(INTERP_CASES))
def test_interp(tmp_path: Path, params: str) -> None:
    ours, refs = run_ours_and_opencv(tmp_path, tiny_net(layer("Interp", params), SHAPE), {"data": SHAPE})
    assert_blobs_close(ours, refs)


def _bilinear_align_corners(x: np.ndarray, ho: int, wo: int) -> np.ndarray:
    """Caffe's caffe_cpu_interp2: source coordinate = out * (in - 1) / (out - 1)."""
    h, w = x.shape[2:]
    out = np.zeros(x.shape[:2] + (ho, wo), np.float64)
    for i in range(ho):
        fy = i * (h - 1) / (ho - 1) if ho > 1 else 0.0
        y0 = int(fy)
        y1, ly = min(y0 + 1, h - 1), fy - y0
        for j in range(wo):
            fx = j * (w - 1) / (wo - 1) if wo > 1 else 0.0
            x0 = int(fx)
            x1, lx = min(x0 + 1, w - 1), fx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                               + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out.astype(np.float32)


@pytest.mark.parametrize(("params", "crop", "size"), [
    ("interp_param { shrink_factor: 2 }", 0, (2, 3)),
    ("interp_param { shrink_factor: 2 zoom_factor: 3 }", 0, (4, 7)),
    ("interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -1 }", 1, (3, 5)),
], ids=["shrink_factor=2", "shrink+zoom", "pad_beg/pad_end crop"])
def test_interp_numpy(tmp_path: Path, params: str, crop: int, size: tuple[int, int]) -> None:
    """Cases OpenCV rejects; numpy reference of Caffe's interp2 (corners aligned)."""
    got = _ours(tmp_path, layer("Interp", params), X)["y"]
    src = X[:, :, crop:X.shape[2] - crop, crop:X.shape[3] - crop]
    np.testing.assert_allclose(got, _bilinear_align_corners(src, *size), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", ["", "bias_term: false"], ids=["bias_term=absent", "bias_term=false"])
def test_embed(tmp_path: Path, bias: str) -> None:
    """Embed (OpenCV lacks it): row x of the (input_dim, num_output) weight, plus the bias."""
    from opbridge.parsers.caffe_weights import read_caffemodel
    from opbridge.tools.caffe_weights import write_random_weights

    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Embed", f"embed_param {{ num_output: 3 input_dim: 7 {bias} }}"), (2, 4)))
    write_random_weights(proto, tmp_path / "w.caffemodel", seed=2)
    blobs = read_caffemodel(tmp_path / "w.caffemodel")["y"]
    idx = np.array([[0, 6, 3, 3], [1, 2, 5, 0]], np.float32)
    got = ob.interpret(convert(proto, weights=tmp_path / "w.caffemodel"), {"data": idx})["y"]
    want = blobs[0][idx.astype(int)] + (blobs[1] if not bias else 0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_parameter_layer_outputs_its_blob(tmp_path: Path) -> None:
    from opbridge.parsers.caffe_weights import read_caffemodel
    from opbridge.tools.caffe_weights import write_random_weights

    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("Parameter", "parameter_param { shape { dim: 2 dim: 3 } }", name="p",
                                    bottoms=())
                              + layer("Eltwise", "", bottoms=("data", "p")), (2, 3)))
    write_random_weights(proto, tmp_path / "w.caffemodel", seed=1)
    blob = read_caffemodel(tmp_path / "w.caffemodel")["p"][0]
    x = np.ones((2, 3), np.float32)
    got = ob.interpret(convert(proto, weights=tmp_path / "w.caffemodel"), {"data": x})["y"]
    np.testing.assert_allclose(got, x + blob, rtol=1e-6)


def test_split_and_silence_mappings_on_a_hand_built_graph() -> None:
    """The parser resolves Split and Silence itself; their mappings serve graphs built by hand."""
    from opbridge.parsers.origin import Framework, OriginGraph, OriginNode, TensorInfo

    nodes = [
        OriginNode("sp", "Split", ["x"], ["a", "b"], framework=Framework.CAFFE),
        OriginNode("sil", "Silence", ["b"], [], framework=Framework.CAFFE),
        OriginNode("r", "ReLU", ["a"], ["y"], framework=Framework.CAFFE),
    ]
    og = OriginGraph("t", Framework.CAFFE, nodes=nodes, inputs=[TensorInfo("x", np.dtype(np.float32), (1, 3))],
                     outputs=[TensorInfo("y")])
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    np.testing.assert_array_equal(ob.interpret(convert(og), {"x": x})["y"], np.maximum(x, 0))


def test_batch_reindex(tmp_path: Path) -> None:
    """BatchReindex (OpenCV lacks it): x[indices] along the batch axis."""
    proto = tmp_path / "net.prototxt"
    proto.write_text('input: "data" input_shape { dim: 3 dim: 2 }\ninput: "idx" input_shape { dim: 4 }\n'
                     + layer("BatchReindex", "", bottoms=("data", "idx")))
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    idx = np.array([2, 0, 2, 1], np.float32)
    got = ob.interpret(convert(proto), {"data": x, "idx": idx})["y"]
    np.testing.assert_array_equal(got, x[[2, 0, 2, 1]])
