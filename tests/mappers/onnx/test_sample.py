"""ONNX GridSample (16, 20), Col2Im (18) and DeformConv (19, 22): converted, interpreted and
run on the simulator, against onnx.reference.ReferenceEvaluator and onnxruntime (DeformConv in
1-D / 3-D with offsets: against a point-by-point reference written from the spec); integer
images (GridSample nearest); bad attributes and ranks refused with the node named and a hint
(CLI: exit 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import OpbridgeError
from tests.conftest import HAVE_ORT, requires_ort
from tests.ir.ops.onnx_ref import onnx_node_model

RNG = np.random.default_rng(18)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def grid(n: int, *out: int, nsp: int, spread: float = 1.25, dtype=np.float32) -> np.ndarray:
    """Random normalised points, some outside [-1, 1] (where the padding modes differ)."""
    return RNG.uniform(-spread, spread, (n, *out, nsp)).astype(dtype)


def model_of(op: str, inputs: list, *, opset: int, consts: tuple[int, ...] = (), **attrs):
    inits = [i in consts for i in range(len(inputs))]
    model, feeds = onnx_node_model(op, inputs, opset=opset, initializers=inits, **attrs)
    model = onnx.shape_inference.infer_shapes(model)
    model.ir_version = min(model.ir_version, 10)  # the newest IR version onnxruntime reads
    return model, feeds


def run_ours(model: onnx.ModelProto, feeds: dict, *, simulator: bool = True) -> np.ndarray:
    """The interpreter's output; with ``simulator``, the compiled program must give the same."""
    g = ob.convert(model)
    got = ob.interpret(g, feeds)["out0"]
    if simulator:
        sim = ob.compile(g, "bm1684").run(feeds)["out0"]
        np.testing.assert_array_equal(sim, got, err_msg="simulator != interpreter")
    return got


def run_ref(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    return ReferenceEvaluator(model).run(None, feeds)[0]


def run_ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype,
                                                                 want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


# -- GridSample -----------------------------------------------------------------------------
MODES = ("linear", "nearest", "cubic")
PADDINGS = ("zeros", "border", "reflection")


@pytest.mark.parametrize("align", [0, 1], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rank", [4, 5], ids=lambda r: f"rank={r}")
def test_grid_sample_random_grids_vs_reference(rank, mode, padding, align):
    """Batch 2, random points inside and outside the image, 2-D and volumes (GridSample-20)."""
    if mode == "cubic" and padding == "border":
        pytest.skip("onnx.reference clamps a cubic point's coordinate before its taps, onnxruntime "
                    "and PyTorch clamp the taps only (we follow them): test_grid_sample16_vs_"
                    "onnxruntime and the TorchScript tests check this case")
    if rank == 4:
        x, gr = randn(2, 3, 5, 6), grid(2, 4, 7, nsp=2)
    else:
        x, gr = randn(2, 2, 3, 4, 5), grid(2, 2, 3, 4, nsp=3)
    model, feeds = model_of("GridSample", [x, gr], opset=20, mode=mode, padding_mode=padding,
                            align_corners=align)
    assert_close(run_ours(model, feeds), run_ref(model, feeds))


@requires_ort
@pytest.mark.parametrize("align", [0, 1], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample16_vs_onnxruntime(mode, padding, align):
    x, gr = randn(2, 3, 6, 5), grid(2, 5, 4, nsp=2)
    model, feeds = model_of("GridSample", [x, gr], opset=16, mode=mode, padding_mode=padding,
                            align_corners=align)
    assert_close(run_ours(model, feeds, simulator=False), run_ort(model, feeds))


@requires_ort
def test_grid_sample_attrs_absent_vs_onnxruntime():
    x, gr = randn(1, 2, 4, 4), grid(1, 3, 3, nsp=2)
    for opset in (16, 20, 22):
        model, feeds = model_of("GridSample", [x, gr], opset=opset)
        assert_close(run_ours(model, feeds, simulator=False), run_ort(model, feeds))


def test_grid_sample_f64():
    x, gr = randn(2, 2, 4, 5, dtype=np.float64), grid(2, 3, 2, nsp=2, dtype=np.float64)
    model, feeds = model_of("GridSample", [x, gr], opset=22, mode="cubic", padding_mode="reflection")
    got = run_ours(model, feeds)
    assert got.dtype == np.float64
    # onnx.reference keeps the pixel coordinates in float32 whatever the grid's type
    assert_close(got, run_ref(model, feeds), rtol=1e-5, atol=1e-5)


@requires_ort
@pytest.mark.parametrize("align", [0, 1], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
def test_grid_sample_one_pixel_axis_vs_onnxruntime(padding, align):
    """An axis of length 1: reflection has nothing to fold over (onnx.reference divides by 0)."""
    x, gr = randn(1, 2, 1, 5), grid(1, 3, 2, nsp=2)
    model, feeds = model_of("GridSample", [x, gr], opset=20, padding_mode=padding,
                            align_corners=align)
    assert_close(run_ours(model, feeds), run_ort(model, feeds))


def _image(dtype, *shape: int) -> np.ndarray:
    """An integer (or bool) image using its type's whole range: int64 values past 2**53, which a
    float gather would round."""
    if dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(np.bool_)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64, np.bool_],
                         ids=["u8", "i8", "i32", "i64", "bool"])
@pytest.mark.parametrize("opset, rank", [(16, 4), (20, 4), (22, 5)], ids=["16", "20", "22-rank5"])
def test_grid_sample_integer_x_nearest_vs_reference(opset, rank, dtype, padding):
    """ONNX allows X of any type; nearest gathers it exactly, as onnx.reference does
    (onnxruntime has no integer GridSample kernel)."""
    shape = (2, 3, 5, 6) if rank == 4 else (2, 2, 3, 4, 5)
    x, gr = _image(dtype, *shape), grid(2, 4, 3, *([2] if rank == 5 else []), nsp=rank - 2)
    model, feeds = model_of("GridSample", [x, gr], opset=opset, mode="nearest", padding_mode=padding,
                            align_corners=1 if padding == "border" else 0)
    got, want = run_ours(model, feeds), run_ref(model, feeds)
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset, mode", [(16, "bilinear"), (16, "bicubic"), (20, "linear"),
                                         (22, "cubic"), (20, None)], ids=lambda v: str(v))
def test_grid_sample_integer_x_interpolated_is_refused(opset, mode, tmp_path, capsys):
    """No runtime interpolates an integer image (onnxruntime has no kernel, onnx.reference
    truncates its weights to the integer type): refused with the node named, the way out in the
    hint (mode=None: the attribute absent, linear by default)."""
    attrs = {} if mode is None else {"mode": mode}
    model, _ = model_of("GridSample", [_image(np.int32, 1, 2, 4, 4), grid(1, 3, 3, nsp=2)],
                        opset=opset, **attrs)
    model.graph.node[0].name = "warp"
    with pytest.raises(ob.UnsupportedOpError, match=r"'warp' \(GridSample\): mode '\w+' on X of "
                                                    r"dtype i32 is not supported") as err:
        ob.convert(model)
    assert "Cast X to float" in err.value.hint and "'nearest'" in err.value.hint
    err_line, hint_line = _cli_error(capsys, model, tmp_path)
    assert "warp" in err_line and "Cast X" in hint_line


@pytest.mark.parametrize("shapes, match", [
    (((1, 2, 4, 4), (1, 3, 3, 3)), r"grid's last dim is 3; it must be 2"),
    (((1, 2, 4, 4), (1, 3, 3, 1, 2)), r"grid has rank 5, X has rank 4"),
    (((2, 2, 4, 4), (1, 3, 3, 2)), r"X has batch 2, grid has batch 1"),
    (((2, 4), (2, 4)), r"X has rank 2; it needs N, C and at least one spatial axis"),
], ids=["grid-last-dim", "rank-mismatch", "batch-mismatch", "rank-2"])
def test_grid_sample_bad_shapes_are_refused(shapes, match):
    model, _ = model_of("GridSample", [randn(*shapes[0]), randn(*shapes[1])], opset=20)
    with pytest.raises(OpbridgeError, match=r"node '.*' \(GridSample\).*" + match) as err:
        ob.convert(model)
    assert err.value.hint


@pytest.mark.parametrize("opset, attrs, match", [
    (20, {"mode": "bilinear"}, r"attribute 'mode': = 'bilinear': must be one of linear"),
    (16, {"mode": "linear"}, r"attribute 'mode': = 'linear': must be one of bilinear"),
    (20, {"padding_mode": "wrap"}, r"attribute 'padding_mode': = 'wrap'"),
    (20, {"align_corners": 2}, r"attribute 'align_corners': = 2: must be 0 or 1"),
], ids=["opset20-bilinear", "opset16-linear", "padding-wrap", "align-2"])
def test_grid_sample_bad_attributes_are_refused(opset, attrs, match):
    model, _ = model_of("GridSample", [randn(1, 1, 3, 3), grid(1, 2, 2, nsp=2)], opset=opset, **attrs)
    with pytest.raises(OpbridgeError, match=match) as err:
        ob.convert(model)
    assert err.value.hint


def test_grid_sample16_refuses_volumes():
    model, _ = model_of("GridSample", [randn(1, 1, 2, 3, 3), grid(1, 2, 2, 2, nsp=3)], opset=16)
    with pytest.raises(OpbridgeError, match=r"GridSample-16 takes 4-D input") as err:
        ob.convert(model)
    assert "opset 20" in err.value.hint


def _cli_error(capsys, model: onnx.ModelProto, tmp_path) -> tuple[str, str]:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "m.obir")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    return (next(line for line in lines if line.startswith("error:")),
            next(line for line in lines if line.startswith("hint:")))


def test_grid_sample_cli_error_and_hint(tmp_path, capsys):
    model, _ = model_of("GridSample", [randn(1, 2, 4, 4), randn(1, 3, 3, 3)], opset=20)
    error, hint = _cli_error(capsys, model, tmp_path)
    assert "(GridSample)" in error and "grid's last dim is 3" in error
    assert "hint: grid holds (x, y[, z])" in hint


def _graph_with(nodes, inputs, outputs, opset):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def test_grid_sample_between_convolutions_compiles_and_runs():
    """In a network: a conv makes the grid's source, GridSample warps it, the simulator runs
    the warp as a global layer between layer groups and gives the interpreter's bytes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])
    gr = helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 6, 6, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(randn(4, 3, 3, 3), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GridSample", ["c", "g"], ["s"], padding_mode="border"),
             helper.make_node("Relu", ["s"], ["y"])]
    model = _graph_with(nodes, [x, gr], [y], 20)
    model.graph.initializer.append(w)
    feeds = {"x": randn(2, 3, 8, 8), "g": grid(2, 6, 6, nsp=2)}
    g = ob.convert(model)
    prog = ob.compile(g, "bm1684")
    want = ob.interpret(g, feeds)["y"]
    np.testing.assert_array_equal(prog.run(feeds)["y"], want)
    np.testing.assert_allclose(want, run_ref(model, feeds), rtol=1e-4, atol=1e-5)
    units = {u.op: u for u in prog.units if getattr(u, "op", None) == "GridSample"}
    assert units, "GridSample did not run as a layer of its own"
    assert prog.profile().flops > 0


# -- Col2Im ---------------------------------------------------------------------------------
def i64(v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def _blocks(image, block, strides, dilations, pads):
    n = len(image)
    return [(image[i] + pads[i] + pads[i + n] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
            for i in range(n)]


@pytest.mark.parametrize("image, block, attrs", [
    ((5, 5), (2, 3), {}),
    ((6, 7), (3, 3), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((7, 6), (2, 2), {"dilations": [2, 3], "strides": [1, 2]}),
    ((4, 5), (3, 2), {"pads": [1, 1, 1, 1], "dilations": [1, 2], "strides": [2, 2]}),
    ((3, 4, 5), (2, 2, 3), {"strides": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 1]}),
    ((6,), (3,), {"strides": [2], "pads": [1, 2]}),
], ids=["attrs=absent", "strides,pads", "dilations", "all", "3-D", "1-D"])
def test_col2im_vs_reference(image, block, attrs):
    """Batch 2 and 3 channels, random columns, against onnx.reference (and onnxruntime where
    it runs the case: 2-D images)."""
    n_default = len(image)
    blocks = _blocks(image, block, attrs.get("strides", [1] * n_default),
                     attrs.get("dilations", [1] * n_default), attrs.get("pads", [0] * 2 * n_default))
    x = randn(2, 3 * int(np.prod(block)), int(np.prod(blocks)))
    model, feeds = model_of("Col2Im", [x, i64(image), i64(block)], opset=18, consts=(1, 2), **attrs)
    got = run_ours(model, feeds)
    assert_close(got, run_ref(model, feeds), rtol=1e-5, atol=1e-5)
    if len(image) == 2 and HAVE_ORT:  # onnxruntime's Col2Im takes 2-D images
        assert_close(got, run_ort(model, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, image, block, attrs, match", [
    ((1, 12, 8), (5, 5), (2, 3), {}, r"input has 8 columns; .* give 4 x 3 = 12 blocks"),
    ((1, 10, 12), (5, 5), (2, 3), {}, r"input has 10 rows, not a multiple of prod\(block_shape\) = 6"),
    ((12, 12), (5, 5), (2, 3), {}, r"input has rank 2; it must be 3"),
    ((1, 6, 12), (5, 5), (2, 3, 1), {}, r"param 'block_shape': has 3 entries, image_shape has 2"),
    ((1, 6, 12), (5, 5), (2, 3), {"strides": [0, 1]}, r"param 'strides': = \[0, 1\]"),
    ((1, 6, 12), (5, 5), (2, 0), {}, r"param 'block_shape': = \[2, 0\]: every entry must be >= 1"),
    ((1, 9, 12), (2, 2), (3, 3), {}, r"param 'block_shape': a block .* does not fit"),
], ids=["columns", "rows", "rank-2", "block-length", "stride-0", "block-0", "block-too-big"])
def test_col2im_bad_shapes_and_attributes_are_refused(x_shape, image, block, attrs, match):
    model, _ = model_of("Col2Im", [randn(*x_shape), i64(image), i64(block)], opset=18,
                        consts=(1, 2), **attrs)
    with pytest.raises(OpbridgeError, match=r"node '.*' \(Col2Im\).*" + match):
        ob.convert(model)


def test_col2im_run_time_image_shape_is_refused_with_a_hint():
    model, _ = model_of("Col2Im", [randn(1, 6, 12), i64([5, 5]), i64([2, 3])], opset=18,
                        consts=(2,))
    with pytest.raises(OpbridgeError, match=r"image_shape") as err:
        ob.convert(model)
    assert err.value.hint


def test_col2im_cli_error_and_hint(tmp_path, capsys):
    model, _ = model_of("Col2Im", [randn(1, 6, 8), i64([5, 5]), i64([2, 3])], opset=18,
                        consts=(1, 2))
    error, hint = _cli_error(capsys, model, tmp_path)
    assert "(Col2Im)" in error and "input has 8 columns" in error
    assert hint.startswith("hint: check the attributes")


# -- DeformConv -----------------------------------------------------------------------------
def _deform_inputs(n, c, m, hw, k, *, group=1, offset_group=1, strides=(1, 1), dilations=(1, 1),
                   pads=(0, 0, 0, 0), bias=False, mask=False, spread=1.5):
    out = [(hw[i] + pads[i] + pads[i + 2] - dilations[i] * (k[i] - 1) - 1) // strides[i] + 1
           for i in range(2)]
    kk = k[0] * k[1]
    inputs = [randn(n, c, *hw), randn(m, c // group, *k),
              RNG.uniform(-spread, spread, (n, offset_group * kk * 2, *out)).astype(np.float32),
              randn(m) if bias else None,
              RNG.uniform(0, 1, (n, offset_group * kk, *out)).astype(np.float32) if mask else None]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


@pytest.mark.parametrize("opset", [19, 22])
@pytest.mark.parametrize("kw, attrs", [
    ({}, {}),
    ({"bias": True, "mask": True, "pads": (1, 0, 1, 2)}, {"pads": [1, 0, 1, 2]}),
    ({"strides": (2, 1), "dilations": (1, 2)}, {"strides": [2, 1], "dilations": [1, 2]}),
    ({"group": 2, "bias": True}, {"group": 2}),
    ({"group": 2, "offset_group": 2, "mask": True}, {"group": 2, "offset_group": 2}),
    ({"offset_group": 4, "spread": 4.0}, {"offset_group": 4, "kernel_shape": [2, 3]}),
], ids=["attrs=absent", "bias,mask,pads", "strides,dilations", "group", "offset_groups,mask",
        "offset_group=4,far"])
def test_deform_conv_vs_reference(opset, kw, attrs):
    """Batch 2, random offsets (some reading outside the image), against onnx.reference and
    (where installed) onnxruntime."""
    k = tuple(attrs.get("kernel_shape", (3, 3)))
    inputs = _deform_inputs(2, 4, 6, (6, 5), k, **kw)
    model, feeds = model_of("DeformConv", inputs, opset=opset, consts=(1,), **attrs)
    got = run_ours(model, feeds)
    assert_close(got, run_ref(model, feeds), rtol=1e-4, atol=1e-4)
    if HAVE_ORT:
        assert_close(got, run_ort(model, feeds), rtol=1e-4, atol=1e-4)


@requires_ort
@pytest.mark.parametrize("shape, k, attrs", [
    ((2, 3, 9), (3,), {"pads": [1, 2], "strides": [2]}),
    ((1, 4, 4, 5, 6), (2, 3, 2), {"group": 2, "dilations": [1, 1, 2]}),
], ids=["1-D", "3-D"])
def test_deform_conv_without_offsets_is_conv(shape, k, attrs):
    """1-D and 3-D (onnx.reference does 2-D only): zero offsets and no mask make the
    convolution, which onnxruntime computes."""
    nsp = len(k)
    x, w = randn(*shape), randn(6, shape[1] // attrs.get("group", 1), *k)
    conv, feeds = model_of("Conv", [x, w], opset=19, consts=(1,), **attrs)
    want = run_ort(conv, feeds)
    offset = np.zeros((shape[0], int(np.prod(k)) * nsp, *want.shape[2:]), np.float32)
    model, feeds = model_of("DeformConv", [x, w, offset], opset=19, consts=(1,), **attrs)
    assert_close(run_ours(model, feeds), want, rtol=1e-4, atol=1e-4)


def _sample_by_the_spec(image: np.ndarray, p: list[float]) -> float:
    """``image`` read at real point ``p`` N-linearly: every corner of the cell around ``p``
    weighs the product over the axes of 1 - |p_a - q_a|, and a corner outside the image reads 0."""
    total = 0.0
    for corner in np.ndindex(*([2] * len(p))):
        q = [int(np.floor(pa)) + ca for pa, ca in zip(p, corner)]
        if all(0 <= qa < size for qa, size in zip(q, image.shape)):
            total += float(np.prod([1 - abs(pa - qa) for pa, qa in zip(p, q)])) * float(image[tuple(q)])
    return total


def deform_conv_by_the_spec(x, w, offset, b=None, mask=None, *, group=1, offset_group=1,
                            strides, dilations, pads) -> np.ndarray:
    """ONNX DeformConv (https://onnx.ai/onnx/operators/onnx__DeformConv.html) point by point, for
    any spatial rank, in float64: tap t of output point o reads input channel c at
    o * strides - pads_begin + t * dilations + its offset (per offset group and tap, one value
    per axis, first axis first: the spec's (N, offset_group * prod(k) * r, out...) with the 2-D
    layout's (y, x) pairs carried to r axes), sampled N-linearly with zeros outside, times its
    mask; then the weights' grouped sum over channels and taps, plus the bias."""
    n, c = x.shape[:2]
    m, cg, *k = w.shape
    nsp, taps = len(k), list(np.ndindex(*k))
    out_sp = offset.shape[2:]
    y = np.zeros((n, m, *out_sp))
    for i in range(n):
        for o in np.ndindex(*out_sp):
            cols = np.zeros((c, len(taps)))
            for ci in range(c):
                for ti, t in enumerate(taps):
                    ch = (ci // (c // offset_group)) * len(taps) + ti
                    p = [o[a] * strides[a] - pads[a] + t[a] * dilations[a]
                         + float(offset[(i, ch * nsp + a, *o)]) for a in range(nsp)]
                    scale = 1.0 if mask is None else float(mask[(i, ch, *o)])
                    cols[ci, ti] = _sample_by_the_spec(x[i, ci], p) * scale
            for mi in range(m):
                g = mi // (m // group)
                y[(i, mi, *o)] = np.sum(w[mi].reshape(cg, -1).astype(np.float64) * cols[g * cg:(g + 1) * cg])
                y[(i, mi, *o)] += 0.0 if b is None else float(b[mi])
    return y


@pytest.mark.parametrize("shape, k, attrs", [
    ((2, 4, 6, 5), (3, 2), {"pads": [1, 0, 1, 1], "strides": [2, 1], "group": 2, "offset_group": 2}),
    ((2, 4, 9), (3,), {"pads": [1, 2], "strides": [2], "group": 2, "offset_group": 2}),
    ((2, 2, 11), (2,), {"dilations": [3]}),
    ((1, 4, 4, 5, 6), (2, 3, 2), {"group": 2, "offset_group": 4, "dilations": [1, 1, 2],
                                  "pads": [0, 1, 1, 1, 0, 0]}),
], ids=["2-D(checks the reference)", "1-D,groups,pads,strides", "1-D,dilations", "3-D"])
def test_deform_conv_random_offsets_vs_the_spec(shape, k, attrs):
    """Non-zero offsets (some reading outside the input), mask and bias in 1-D and 3-D, where
    onnx.reference has 2-D only and onnxruntime's Conv checks zero offsets only: against a
    point-by-point reference written from the spec (which, in 2-D, onnx.reference confirms)."""
    nsp, kk = len(k), int(np.prod(k))
    group, og = attrs.get("group", 1), attrs.get("offset_group", 1)
    pads = attrs.get("pads", [0] * 2 * nsp)
    strides, dilations = attrs.get("strides", [1] * nsp), attrs.get("dilations", [1] * nsp)
    out = [(shape[2 + a] + pads[a] + pads[a + nsp] - dilations[a] * (k[a] - 1) - 1) // strides[a] + 1
           for a in range(nsp)]
    x, w = randn(*shape), randn(6, shape[1] // group, *k)
    offset = RNG.uniform(-2.5, 2.5, (shape[0], og * kk * nsp, *out)).astype(np.float32)
    b, mask = randn(6), RNG.uniform(0, 1, (shape[0], og * kk, *out)).astype(np.float32)
    model, feeds = model_of("DeformConv", [x, w, offset, b, mask], opset=22, consts=(1,), **attrs)
    want = deform_conv_by_the_spec(x, w, offset, b, mask, group=group, offset_group=og,
                                   strides=strides, dilations=dilations, pads=pads)
    if nsp == 2:
        np.testing.assert_allclose(run_ref(model, feeds), want, rtol=1e-4, atol=1e-4)
    assert_close(run_ours(model, feeds).astype(np.float64), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("change, attrs, match", [
    ("offset-channels", {}, r"offset has shape \[1, 16, 3, 3\]; it must be \[1, 18, 3, 3\]"),
    ("offset-spatial", {}, r"offset has shape \[1, 18, 2, 3\]; it must be \[1, 18, 3, 3\]"),
    ("mask", {}, r"mask has shape \[1, 18, 3, 3\]; it must be \[1, 9, 3, 3\]"),
    ("bias", {}, r"bias B has shape \[3\]; it must be \[4\]"),
    ("none", {"offset_group": 3}, r"param 'offset_group': = 3 does not divide the 4 input channels"),
    ("none", {"group": 3}, r"param 'group': = 3 does not divide the 4 input channels"),
    ("none", {"pads": [1, 1]}, r"attribute 'pads'"),
], ids=["offset-channels", "offset-spatial", "mask", "bias", "offset_group", "group", "pads-length"])
def test_deform_conv_bad_shapes_and_attributes_are_refused(change, attrs, match):
    x, w = randn(1, 4, 5, 5), randn(4, 4, 3, 3)
    offset, mask, b = randn(1, 18, 3, 3), None, None
    if change == "offset-channels":
        offset = randn(1, 16, 3, 3)
    elif change == "offset-spatial":
        offset = randn(1, 18, 2, 3)
    elif change == "mask":
        b, mask = randn(4), randn(1, 18, 3, 3)
    elif change == "bias":
        b = randn(3)
    inputs = [x, w, offset, b, mask]
    while inputs[-1] is None:
        inputs.pop()
    model, _ = model_of("DeformConv", inputs, opset=19, consts=(1,), **attrs)
    with pytest.raises(OpbridgeError, match=r"node '.*' \(DeformConv\).*" + match):
        ob.convert(model)


def test_deform_conv_cli_error_and_hint(tmp_path, capsys):
    model, _ = model_of("DeformConv", [randn(1, 4, 5, 5), randn(4, 4, 3, 3), randn(1, 16, 3, 3)],
                        opset=19, consts=(1,))
    error, hint = _cli_error(capsys, model, tmp_path)
    assert "(DeformConv)" in error and "offset has shape [1, 16, 3, 3]" in error
    assert hint.startswith("hint: check offset_group")


def test_deform_conv_with_symbolic_dims_converts_and_runs():
    """Offsets whose dims are symbolic where X's are (a dynamic model) are taken; only dims
    known to differ are refused. The result matches onnx.reference at one size."""
    node = helper.make_node("DeformConv", ["x", "w", "off"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g = helper.make_graph(
        [node], "dc_sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, "h", "w"]),
         helper.make_tensor_value_info("off", TensorProto.FLOAT, ["n", 18, "oh", "ow"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5, "h", "w"])],
        [numpy_helper.from_array(np.random.default_rng(1).standard_normal((5, 4, 3, 3)).astype(np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    gr = ob.convert(m)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 4, 6, 7)).astype(np.float32),
             "off": rng.standard_normal((2, 18, 6, 7)).astype(np.float32)}
    ref = ReferenceEvaluator(m).run(None, feeds)[0]
    got = list(ob.interpret(gr, feeds).values())[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
