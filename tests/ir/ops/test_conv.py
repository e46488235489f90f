"""Conv and ConvTranspose against the onnx reference (onnxruntime where the reference is wrong)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from onnx import helper

import opbridge as ob
from opbridge.errors import AttrError, OpbridgeError, ShapeError

from .onnx_ref import assert_close, onnx_node_model, run_ir, run_onnx_reference

RNG = np.random.default_rng(1234)


def run_ort(op: str, inputs: Sequence[np.ndarray | None], num_outputs: int = 1, *,
            out_types: Sequence[Any] | None = None, opset: int = 21, **attrs: Any) -> list[np.ndarray]:
    """The one-node ONNX model run in onnxruntime (one thread); outputs typed like input 0
    unless ``out_types`` (numpy dtypes) says otherwise."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    model, feeds = onnx_node_model(op, inputs, num_outputs, opset=opset, **attrs)
    model.ir_version = 10  # the newest IR version onnxruntime reads
    first = next(a for a in inputs if a is not None)
    for i, o in enumerate(model.graph.output):
        dt = out_types[i] if out_types else first.dtype
        o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(
            np.dtype(dt)), None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


CONV_CASES = {
    "1d": ((2, 3, 11), (4, 3, 3), {}),
    "1d-stride-pads": ((2, 3, 11), (4, 3, 3), {"strides": [2], "pads": [1, 2]}),
    "2d-attrs-absent": ((1, 3, 7, 8), (5, 3, 3, 3), {}),
    "2d-stride-pads": ((1, 3, 9, 9), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "2d-asym-pads": ((1, 2, 7, 6), (3, 2, 3, 2), {"pads": [0, 1, 2, 0]}),
    "2d-dilation": ((1, 2, 10, 10), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [1, 1, 1, 1]}),
    "2d-stride-rect": ((2, 4, 9, 10), (6, 4, 3, 1), {"strides": [3, 2]}),
    "2d-group2": ((1, 4, 8, 8), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "2d-depthwise": ((2, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    "2d-depthwise-mult2": ((1, 3, 7, 7), (6, 1, 3, 3), {"group": 3, "dilations": [2, 1]}),
    "2d-1x1": ((2, 8, 5, 5), (4, 8, 1, 1), {}),
    "2d-1x1-stride": ((2, 8, 5, 5), (4, 8, 1, 1), {"strides": [2, 2]}),
    "2d-kernel_shape-given": ((1, 3, 6, 6), (2, 3, 2, 2), {"kernel_shape": [2, 2]}),
    "3d": ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}),
    "3d-group": ((1, 4, 5, 5, 5), (4, 2, 3, 3, 3), {"group": 2, "dilations": [1, 2, 1]}),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "bias=absent"])
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv_matches_reference(case: str, bias: bool) -> None:
    xs, ws, attrs = CONV_CASES[case]
    x, w = _rand(*xs), _rand(*ws)
    b = _rand(ws[0]) if bias else None
    expected = run_onnx_reference("Conv", [x, w, b], **attrs)[0]
    assert_close(run_ir("Conv", [x, w, b], **attrs)[0], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=["f16", "f64"])
def test_conv_dtypes(dtype: Any) -> None:
    x, w = _rand(1, 2, 6, 6, dtype=dtype), _rand(3, 2, 3, 3, dtype=dtype)
    got = run_ir("Conv", [x, w], pads=[1, 1, 1, 1])[0]
    assert got.dtype == dtype
    expected = run_onnx_reference("Conv", [x.astype(np.float64), w.astype(np.float64)],
                                  pads=[1, 1, 1, 1])[0]
    tol = 1e-2 if dtype == np.float16 else 1e-10
    assert_close(got.astype(np.float64), expected, rtol=tol, atol=tol)


CONVT_CASES = {
    "1d-attrs-absent": ((2, 3, 5), (3, 2, 3), {}),
    "1d-stride": ((1, 2, 5), (2, 3, 3), {"strides": [3]}),
    "2d-stride-pads-outpad": ((1, 4, 5, 5), (4, 3, 3, 3),
                              {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]}),
    "2d-dilation": ((1, 2, 4, 5), (2, 2, 3, 2), {"dilations": [2, 1], "strides": [1, 2]}),
    "2d-group2": ((1, 4, 5, 5), (4, 2, 3, 2), {"group": 2, "strides": [2, 3]}),
    "2d-depthwise": ((2, 3, 4, 4), (3, 1, 2, 2), {"group": 3, "strides": [2, 2]}),
    "3d": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 0]}),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "bias=absent"])
@pytest.mark.parametrize("case", list(CONVT_CASES))
def test_conv_transpose_matches_onnxruntime(case: str, bias: bool) -> None:
    # onnx.reference's ConvTranspose mishandles group > 1 (a broadcast error), so the
    # reference here is onnxruntime.
    xs, ws, attrs = CONVT_CASES[case]
    x, w = _rand(*xs), _rand(*ws)
    b = _rand(ws[1] * attrs.get("group", 1)) if bias else None
    expected = run_ort("ConvTranspose", [x, w, b], **attrs)[0]
    assert_close(run_ir("ConvTranspose", [x, w, b], **attrs)[0], expected, rtol=1e-4, atol=1e-4)


def test_conv_transpose_matches_reference_group1() -> None:
    x, w = _rand(1, 3, 4, 4), _rand(3, 2, 3, 3)
    attrs = {"strides": [2, 2], "pads": [1, 1, 0, 0]}
    assert_close(run_ir("ConvTranspose", [x, w], **attrs)[0],
                 run_onnx_reference("ConvTranspose", [x, w], **attrs)[0], rtol=1e-4, atol=1e-4)


# -- errors --------------------------------------------------------------------------------
def _build_conv(xs: tuple[int, ...], ws: tuple[int, ...], op: str = "Conv", **attrs: Any) -> None:
    b = ob.GraphBuilder("bad")
    x = b.input("x", "f32", xs)
    w = b.constant("w", np.zeros(ws, np.float32))
    b.output(b.op(op, [x, w], name="conv1", **attrs))
    b.build()


def test_group_zero_is_rejected_naming_the_attribute() -> None:
    with pytest.raises(OpbridgeError, match=r"node 'conv1' \(Conv\) param 'group'.*>= 1"):
        _build_conv((1, 4, 8, 8), (4, 4, 3, 3), group=0)


def test_input_channels_must_match_weights() -> None:
    with pytest.raises(ShapeError, match=r"node 'conv1' \(Conv\).*X has 4 channels.*W expects 3"):
        _build_conv((1, 4, 8, 8), (2, 3, 3, 3))


@pytest.mark.parametrize("attrs, attr", [
    ({"group": 3}, "group"),
    ({"strides": [1]}, "strides"),
    ({"pads": [1, 1]}, "pads"),
    ({"dilations": [1, 1, 1]}, "dilations"),
    ({"kernel_shape": [2, 2]}, "kernel_shape"),
    ({"strides": [0, 1]}, "strides"),
    ({"pads": [-1, 0, 0, 0]}, "pads"),
], ids=["group-not-dividing", "strides-len", "pads-len", "dilations-len", "kernel_shape-mismatch",
        "strides-zero", "pads-negative"])
def test_bad_spatial_attrs_name_the_attribute(attrs: dict[str, Any], attr: str) -> None:
    with pytest.raises(AttrError, match=rf"node 'conv1' \(Conv\) param '{attr}'"):
        _build_conv((1, 4, 8, 8), (4, 4, 3, 3), **attrs)


def test_kernel_larger_than_input_is_an_error() -> None:
    with pytest.raises(AttrError, match=r"does not fit"):
        _build_conv((1, 1, 2, 2), (1, 1, 3, 3))


def test_conv_transpose_channel_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"ConvTranspose.*X has 4 channels but W's dim 0 is 3"):
        _build_conv((1, 4, 5, 5), (3, 2, 3, 3), op="ConvTranspose")


def test_conv_transpose_output_padding_length() -> None:
    with pytest.raises(AttrError, match=r"param 'output_padding'"):
        _build_conv((1, 4, 5, 5), (4, 2, 3, 3), op="ConvTranspose", output_padding=[1])


@pytest.mark.parametrize("zp", ["absent", "scalar", "per-channel-w"])
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)],
                         ids=["u8u8", "i8i8", "u8i8"])
def test_conv_integer(types: tuple[Any, Any], zp: str) -> None:
    tx, tw = types
    x = RNG.integers(np.iinfo(tx).min, np.iinfo(tx).max, (1, 2, 5, 5)).astype(tx)
    w = RNG.integers(np.iinfo(tw).min, np.iinfo(tw).max, (3, 2, 2, 2)).astype(tw)
    args: list[Any] = [x, w]
    if zp == "scalar":
        args += [np.array(5, tx), np.array(3, tw)]
    elif zp == "per-channel-w":
        args += [np.array(7, tx), np.array([1, 2, 3], tw)]
    attrs = {"pads": [1, 0, 0, 1], "strides": [2, 1]}
    got = run_ir("ConvInteger", args, **attrs)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, run_onnx_reference("ConvInteger", args, **attrs)[0])


def _random_conv_case(seed: int, transpose: bool) -> tuple[list[np.ndarray], dict[str, Any]]:
    """A random valid (Conv or ConvTranspose) configuration: rank, kernel, strides, dilations,
    asymmetric pads, groups, output_padding."""
    rng = np.random.default_rng(seed)
    nsp = int(rng.integers(1, 4))
    k = [int(rng.integers(1, 4)) for _ in range(nsp)]
    s = [int(rng.integers(1, 4)) for _ in range(nsp)]
    d = [int(rng.integers(1, 3)) for _ in range(nsp)]
    p = [int(rng.integers(0, k[i % nsp])) for i in range(2 * nsp)]
    size = [int(rng.integers((k[i] - 1) * d[i] + 1, 9)) for i in range(nsp)]
    group = int(rng.choice([1, 2, 3]))
    c = group * int(rng.integers(1, 3))
    m = group * int(rng.integers(1, 3))
    x = rng.standard_normal([2, c] + size).astype(np.float32)
    attrs: dict[str, Any] = {"strides": s, "pads": p, "dilations": d, "group": group}
    if transpose:
        w = rng.standard_normal([c, m // group] + k).astype(np.float32)
        # onnxruntime wants output_padding below the stride
        attrs["output_padding"] = [int(rng.integers(0, s[i])) for i in range(nsp)]
        bias = rng.standard_normal(m).astype(np.float32)
    else:
        w = rng.standard_normal([m, c // group] + k).astype(np.float32)
        bias = rng.standard_normal(m).astype(np.float32)
    return [x, w, bias], attrs


@pytest.mark.parametrize("seed", range(25), ids=[f"seed={i}" for i in range(25)])
@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_random_configurations_match_onnxruntime(op: str, seed: int) -> None:
    inputs, attrs = _random_conv_case(seed, op == "ConvTranspose")
    expected = run_ort(op, inputs, **attrs)[0]
    assert_close(run_ir(op, inputs, **attrs)[0], expected, rtol=1e-4, atol=1e-4)
