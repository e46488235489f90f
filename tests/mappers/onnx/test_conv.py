"""ONNX Conv / ConvTranspose mappings: converted one-node models against onnxruntime.

``check`` (used by the other family test modules here too) converts a one-node model with
opbridge, interprets it and compares every output with onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError
from tests.conftest import requires_ort
from tests.ir.ops.onnx_ref import onnx_node_model

pytestmark = requires_ort


def convert_node(op: str, inputs: list[Any], n_out: int = 1, *, opset: int,
                 initializers: list[bool] | None = None,
                 **attrs: Any) -> tuple[ob.Graph, onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node ONNX model (typed by ONNX shape inference) and its converted IR graph."""
    model, feeds = onnx_node_model(op, inputs, n_out, opset=opset, initializers=initializers,
                                   **attrs)
    model = onnx.shape_inference.infer_shapes(model)
    model.ir_version = min(model.ir_version, 10)  # the newest IR version onnxruntime reads here
    first = next(a for a in inputs if a is not None)
    for out in model.graph.output:  # ops ONNX shape inference leaves untyped: input 0's type
        if not out.type.tensor_type.elem_type:
            out.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(first.dtype)
    return ob.convert(model), model, feeds


def check(op: str, inputs: list[Any], n_out: int = 1, *, opset: int,
          initializers: list[bool] | None = None, rtol: float = 1e-5, atol: float = 1e-5,
          **attrs: Any) -> ob.Graph:
    """Convert, interpret, and compare every output (dtype, shape, values) with onnxruntime."""
    import onnxruntime as ort

    g, model, feeds = convert_node(op, inputs, n_out, opset=opset, initializers=initializers,
                                   **attrs)
    got = ob.interpret(g, feeds)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    for i, w in enumerate(want):
        a = got[f"out{i}"]
        assert a.dtype == w.dtype, f"output {i}: dtype {a.dtype} != {w.dtype}"
        assert a.shape == w.shape, f"output {i}: shape {a.shape} != {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(a.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, w)
    return g


def randn(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


CONV = {
    "attrs-absent": ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    "pads-strides": ((1, 3, 9, 8), (4, 3, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    "same-upper": ((1, 3, 9, 8), (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    "same-lower": ((1, 3, 9, 8), (4, 3, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    "valid": ((1, 3, 9, 8), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    "notset-explicit": ((1, 3, 6, 6), (4, 3, 3, 3), {"auto_pad": "NOTSET", "pads": [1, 1, 1, 1]}),
    "kernel_shape-given": ((1, 3, 6, 6), (4, 3, 3, 3), {"kernel_shape": [3, 3]}),
    "group-depthwise": ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "1d": ((2, 3, 10), (4, 3, 3), {"strides": [2], "auto_pad": "SAME_UPPER"}),
    "3d": ((1, 2, 4, 5, 6), (3, 2, 2, 2, 3), {"pads": [0, 1, 1, 1, 0, 1]}),
}


@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("case", list(CONV))
def test_conv(case: str, opset: int) -> None:
    xs, ws, attrs = CONV[case]
    # opset 1 is what onnxruntime calls the oldest Conv it runs; every version means the same
    check("Conv", [randn(*xs), randn(*ws, seed=1), randn(ws[0], seed=2)], opset=max(opset, 7),
          initializers=[False, True, True], rtol=1e-4, atol=1e-4, **attrs)


def check_reference(op: str, inputs: list[Any], *, opset: int, initializers: list[bool],
                    rtol: float = 1e-5, atol: float = 1e-5, **attrs: Any) -> None:
    """Convert and interpret; compare with onnx.reference (for cases onnxruntime rejects)."""
    from onnx.reference import ReferenceEvaluator

    g, model, feeds = convert_node(op, inputs, opset=opset, initializers=initializers, **attrs)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(ob.interpret(g, feeds)["out0"], want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_auto_pad_with_dilation(mode: str) -> None:
    # onnxruntime refuses dilations with SAME auto_pad; the onnx reference computes it
    check_reference("Conv", [randn(1, 2, 9, 8), randn(2, 2, 3, 2, seed=1)], opset=13,
                    initializers=[False, True], rtol=1e-4, atol=1e-4, auto_pad=mode,
                    dilations=[2, 3], strides=[2, 1])


def test_conv_bias_absent_and_weights_fed() -> None:
    check("Conv", [randn(1, 3, 6, 6), randn(2, 3, 3, 3, seed=1)], opset=13, pads=[1, 1, 1, 1],
          rtol=1e-4, atol=1e-4)


CONVT = {
    "attrs-absent": ((1, 3, 4, 4), (3, 2, 3, 3), {}),
    "strides-pads": ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 1]}),
    "output_padding": ((1, 2, 4, 5), (2, 2, 3, 3), {"strides": [2, 3], "output_padding": [1, 2]}),
    "output_shape": ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    "output_shape-cropping": ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 6]}),
    "output_shape-same-upper": ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 7],
                                                            "auto_pad": "SAME_UPPER"}),
    "same-upper": ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same-lower": ((1, 2, 3, 4), (2, 3, 4, 3), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    "group": ((1, 4, 3, 3), (4, 2, 2, 2), {"group": 2, "dilations": [2, 1]}),
    "1d": ((2, 2, 5), (2, 3, 3), {"strides": [2]}),
}


@pytest.mark.parametrize("case", list(CONVT))
def test_conv_transpose(case: str) -> None:
    xs, ws, attrs = CONVT[case]
    m = ws[1] * attrs.get("group", 1)
    check("ConvTranspose", [randn(*xs), randn(*ws, seed=1), randn(m, seed=2)], opset=17,
          initializers=[False, True, True], rtol=1e-4, atol=1e-4, **attrs)


def test_conv_transpose_output_shape_past_natural_size_is_output_padding() -> None:
    # one more than the natural size (7) on each axis equals output_padding=1 (PyTorch's
    # output_size rule); neither onnxruntime nor onnx.reference take such an output_shape
    x, w = randn(1, 2, 3, 3), randn(2, 2, 3, 3, seed=1)
    g, _, feeds = convert_node("ConvTranspose", [x, w], opset=17, initializers=[False, True],
                               strides=[2, 2], output_shape=[8, 8])
    import onnxruntime as ort

    model, _ = onnx_node_model("ConvTranspose", [x, w], opset=17, initializers=[False, True],
                               strides=[2, 2], output_padding=[1, 1])
    model = onnx.shape_inference.infer_shapes(model)
    model.ir_version = min(model.ir_version, 10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ob.interpret(g, feeds)["out0"], sess.run(None, feeds)[0],
                               rtol=1e-4, atol=1e-4)


def test_conv_transpose_output_shape_too_large_is_an_error() -> None:
    with pytest.raises(OpbridgeError, match=r"attribute 'output_shape'.*more than a stride"):
        convert_node("ConvTranspose", [randn(1, 2, 3, 3), randn(2, 2, 3, 3)], opset=17,
                     initializers=[False, True], strides=[2, 2], output_shape=[9, 7])


def test_auto_pad_becomes_explicit_pads() -> None:
    g, _, _ = convert_node("Conv", [randn(1, 1, 5, 5), randn(1, 1, 2, 2)], opset=13,
                           initializers=[False, True], auto_pad="SAME_LOWER")
    (conv,) = [n for n in g.nodes if n.op == "Conv"]
    assert conv.attrs["pads"] == (1, 1, 0, 0)
    assert "auto_pad" not in conv.attrs


@pytest.mark.parametrize("attrs, match", [
    ({"kernel_shape": [2, 2]}, r"attribute 'kernel_shape'.*weights' spatial shape is \[3, 3\]"),
    ({"auto_pad": "SAME"}, r"attribute 'auto_pad'.*must be one of"),
    ({"strides": [1, 1, 1]}, r"attribute 'strides'.*3 entries"),
    ({"group": 0}, r"param 'group'"),
    ({"foo": 1}, r"attribute 'foo': not an attribute of Conv"),
], ids=["kernel_shape-mismatch", "auto_pad-unknown", "strides-len", "group=0", "unknown-attr"])
def test_conv_errors_name_node_and_attribute(attrs: dict[str, Any], match: str) -> None:
    with pytest.raises(OpbridgeError, match=match) as info:
        convert_node("Conv", [randn(1, 2, 5, 5), randn(2, 2, 3, 3)], opset=13,
                     initializers=[False, True], **attrs)
    assert "Conv" in str(info.value)


@pytest.mark.parametrize("zp", [False, True], ids=["zero_points=absent", "zero_points"])
def test_conv_integer(zp: bool) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (1, 2, 6, 6)).astype(np.uint8)
    w = rng.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
    ins = [x, w] + ([np.array(100, np.uint8), np.array(120, np.uint8)] if zp else [])
    check("ConvInteger", ins, opset=10, auto_pad="SAME_UPPER", strides=[2, 2])
