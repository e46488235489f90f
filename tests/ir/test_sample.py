"""The IR ops GridSample, Col2Im and DeformConv built directly: symbolic dims, required
attributes, empty outputs, and (onnx.reference) the IR's own attribute names."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError, ShapeError
from tests.ir.ops.onnx_ref import onnx_node_model

RNG = np.random.default_rng(7)


def _node(op: str, inputs: list[tuple[str, tuple]], **attrs):
    b = ob.GraphBuilder("g")
    vals = [b.input(name, "f32", shape) for name, shape in inputs]
    return b, b.op(op, vals, name="n", **attrs)


def test_grid_sample_keeps_symbolic_dims():
    _, y = _node("GridSample", [("x", ("N", 3, "H", "W")), ("g", ("N", "h", 7, 2))])
    assert tuple(y.shape) == ("N", 3, "h", 7)


def test_col2im_symbolic_batch_and_channels():
    _, y = _node("Col2Im", [("c", ("N", 12, 8))], image_shape=(5, 5), block_shape=(2, 2),
                 strides=(2, 1))
    assert tuple(y.shape) == ("N", 3, 5, 5)


def test_deform_conv_symbolic_batch():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", ("N", 4, 6, 5))
    off = b.input("off", "f32", ("N", 18, 4, 3))
    w = b.constant("w", RNG.standard_normal((8, 4, 3, 3)).astype(np.float32))
    y = b.op("DeformConv", [x, w, off], name="n")
    assert tuple(y.shape) == ("N", 8, 4, 3)
    # every per-axis attribute is explicit on the node (filled from W and the rank)
    b.output(y)
    node = b.build(require_static=False).nodes[0]
    assert node.attrs["kernel_shape"] == (3, 3) and node.attrs["pads"] == (0, 0, 0, 0)


def test_col2im_needs_image_and_block_shape():
    with pytest.raises(AttrError, match=r"node 'n' \(Col2Im\) param 'image_shape': required but absent"):
        _node("Col2Im", [("c", (1, 12, 12))], block_shape=(2, 2))


def test_grid_sample_mode_names_are_onnx_20s():
    with pytest.raises(AttrError, match=r"param 'mode'"):
        _node("GridSample", [("x", (1, 3, 4, 4)), ("g", (1, 2, 2, 2))], mode="bilinear")


@pytest.mark.parametrize("dtype", ["i32", "u8", "bool"])
def test_grid_sample_integer_x_interpolated_is_refused(dtype):
    """No runtime interpolates an integer image (see INTEGER_X_HINT): a hand-built graph gets
    the refusal from the op's own checks; nearest is allowed."""
    b = ob.GraphBuilder("g")
    x, gr = b.input("x", dtype, (1, 2, 4, 4)), b.input("g", "f32", (1, 3, 3, 2))
    with pytest.raises(AttrError, match=rf"'n' \(GridSample\) param 'mode': = 'linear' on X of dtype {dtype}") as err:
        b.op("GridSample", [x, gr], name="n")
    assert "nearest" in err.value.hint
    assert b.op("GridSample", [x, gr], mode="nearest").dtype == dtype


def test_deform_conv_offset_of_the_wrong_shape():
    with pytest.raises(ShapeError, match=r"node 'n' \(DeformConv\): offset has shape"):
        b = ob.GraphBuilder("g")
        x = b.input("x", "f32", (1, 4, 6, 5))
        w = b.constant("w", np.zeros((8, 4, 3, 3), np.float32))
        b.op("DeformConv", [x, w, b.input("off", "f32", (1, 18, 3, 3))], name="n")


def test_grid_sample_empty_grid_gives_an_empty_output():
    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    g = np.zeros((1, 0, 4, 2), np.float32)
    b, y = _node("GridSample", [("x", x.shape), ("g", g.shape)])
    b.output(y)
    out = ob.interpret(b.build(), {"x": x, "g": g})[y.name]
    assert out.shape == (1, 2, 0, 4)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_ir_attributes_are_onnx_attributes(mode):
    """The IR node's attributes, given to an ONNX node as they are, mean the same there."""
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    g = RNG.uniform(-1.2, 1.2, (2, 3, 3, 2)).astype(np.float32)
    b, y = _node("GridSample", [("x", x.shape), ("g", g.shape)], mode=mode,
                 padding_mode="reflection", align_corners=1)
    b.output(y)
    graph = b.build()
    got = ob.interpret(graph, {"x": x, "g": g})[y.name]
    model, feeds = onnx_node_model("GridSample", [x, g], opset=22, **graph.nodes[0].attrs)
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_non_finite_points_do_not_crash(padding):
    """A NaN point reads 0 (no index to gather); an infinite one in zeros padding reads 0 too
    (it is outside), while border clamps it to the edge (the spec's rule: onnxruntime casts
    such a coordinate to an int, which C++ leaves undefined, so no reference says more)."""
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    g = np.array([[[[np.nan, 0.0], [np.inf, 0.0]]]], np.float32)
    b, y = _node("GridSample", [("x", x.shape), ("g", g.shape)], padding_mode=padding,
                 mode="nearest", align_corners=1)
    b.output(y)
    out = ob.interpret(b.build(), {"x": x, "g": g})[y.name]
    assert out.shape == (1, 1, 1, 2) and out[0, 0, 0, 0] == 0
    if padding == "zeros":
        assert out[0, 0, 0, 1] == 0
    if padding == "border":
        assert out[0, 0, 0, 1] == 6  # the middle row's last pixel


def test_grid_sample_bf16_image_is_sampled_in_f32():
    """A bf16 image's taps are weighted and summed in f32, then rounded once to bf16: the
    result is onnx.reference's f32 GridSample of the same values, cast to bf16."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 2, 16, 16)).astype(ml_dtypes.bfloat16)
    g = rng.uniform(-1.0, 1.0, (1, 8, 8, 2)).astype(np.float32)
    b = ob.GraphBuilder("g")
    y = b.op("GridSample", [b.input("x", "bf16", x.shape), b.input("g", "f32", g.shape)], name="n",
             mode="cubic", padding_mode="zeros", align_corners=0)
    b.output(y)
    got = ob.interpret(b.build(), {"x": x, "g": g})[y.name]
    model, feeds = onnx_node_model("GridSample", [x.astype(np.float32), g], opset=20, mode="cubic",
                                   padding_mode="zeros", align_corners=0)
    want = ReferenceEvaluator(model).run(None, feeds)[0].astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    # one bf16 step at most (the f32 sums may round either way); taps summed in bf16 miss by ~8
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -8, atol=2 ** -8)
