"""Per-axis parameters (strides, pads, dilations, ...) are filled at node creation, required
by the verifier, and filled when an older .obir holds None for them."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import opbridge as ob
from opbridge.errors import AttrError
from opbridge.ir import io as ir_io
from opbridge.ir.opdef import DEFAULT_OPS

#: (op, inputs' shapes, given attrs, expected filled attrs) - the fill is ONNX's meaning of
#: absence: stride 1, dilation 1, no padding, kernel from W, no output padding.
CASES = [
    ("Conv", [(1, 3, 8, 8), (4, 3, 3, 3)], {"strides": (2, 2), "pads": (1, 1, 1, 1)},
     {"kernel_shape": (3, 3), "dilations": (1, 1)}),
    ("Conv", [(1, 2, 9), (2, 2, 2)], {},
     {"kernel_shape": (2,), "strides": (1,), "dilations": (1,), "pads": (0, 0)}),
    ("ConvTranspose", [(1, 2, 4, 4, 4), (2, 3, 2, 2, 2)], {"strides": (2, 2, 2)},
     {"dilations": (1, 1, 1), "pads": (0,) * 6, "output_padding": (0, 0, 0)}),
    ("MaxPool", [(1, 2, 6, 6)], {"kernel_shape": (2, 2)},
     {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0)}),
    ("AveragePool", [(1, 2, 7)], {"kernel_shape": (3,), "pads": (1, 1)},
     {"strides": (1,), "dilations": (1,)}),
    ("LpPool", [(1, 1, 5, 5)], {"kernel_shape": (2, 2), "strides": (2, 2)},
     {"dilations": (1, 1), "pads": (0, 0, 0, 0)}),
]


def _build(op, shapes, attrs):
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", shapes[0])
    ins = [x] + [b.constant(f"w{i}", np.ones(s, np.float32)) for i, s in enumerate(shapes[1:])]
    b.output(b.op(op, ins, **attrs))
    return b.build()


@pytest.mark.parametrize("op, shapes, given, filled", CASES,
                         ids=[f"{c[0]}-rank{len(c[1][0])}" for c in CASES])
def test_builder_fills_every_per_axis_param(op, shapes, given, filled):
    node = _build(op, shapes, given).nodes[0]
    for name, value in {**given, **filled}.items():
        assert node.attrs[name] == value, name
    assert not DEFAULT_OPS.get(op).unfilled_params(node.attrs)


def test_conv_without_dilations_matches_onnxruntime():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = ob.GraphBuilder("g")
    xi = b.input("x", "f32", x.shape)
    b.output(b.op("Conv", [xi, b.constant("w", w)], strides=(2, 2), pads=(1, 1, 1, 1)))
    g = b.build()
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {"x": x, "w": w})
    out = g.outputs[0].name
    np.testing.assert_allclose(ob.interpret(g, {"x": x})[out], ref, rtol=1e-5, atol=1e-5)
    sim = ob.compile(g, target="bm1684").run({"x": x})[out]
    np.testing.assert_allclose(sim, ref, rtol=1e-5, atol=1e-5)


def test_verifier_rejects_a_node_missing_a_per_axis_param():
    g = _build("Conv", [(1, 3, 8, 8), (4, 3, 3, 3)], {})
    conv = g.nodes[0]
    conv.attrs["dilations"] = None
    with pytest.raises(AttrError, match=r"node '[^']+' \(Conv\) param 'dilations': absent"):
        g.verify()


def _rewrite_graph_json(path, edit):
    with safe_open(str(path), framework="numpy") as f:
        meta = dict(f.metadata())
    tensors = load_file(str(path))
    doc = json.loads(meta["graph"])
    edit(doc)
    meta["graph"] = json.dumps(doc)
    save_file(tensors, str(path), metadata=meta)


def test_old_obir_with_none_per_axis_params_loads_filled(tmp_path):
    g = _build("Conv", [(1, 3, 8, 8), (4, 3, 3, 3)], {"pads": (1, 1, 1, 1)})
    path = tmp_path / "old.obir"
    ir_io.save(g, path)

    def as_written_before(doc):  # per-axis parameters left None, as older versions did
        for nd in doc["nodes"]:
            for name in ("kernel_shape", "strides", "dilations"):
                nd["attrs"][name] = None

    _rewrite_graph_json(path, as_written_before)
    loaded = ob.load(path)
    attrs = loaded.nodes[0].attrs
    assert (attrs["kernel_shape"], attrs["strides"], attrs["dilations"], attrs["pads"]) == \
        ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1))


#: Parameters with one entry per sliced / padded / resized axis are filled too.
AXIS_CASES = [
    ("Slice", (3, 4, 5), {"starts": (1, 0), "ends": (3, 2)}, {"axes": (0, 1), "steps": (1, 1)}),
    ("Pad", (2, 3), {"pads": (1, 0, 0, 2)}, {"axes": (0, 1)}),
    ("Resize", (1, 1, 2, 2), {"scales": (1.0, 1.0, 2.0, 2.0)}, {"axes": (0, 1, 2, 3)}),
    ("Transpose", (2, 3, 4), {}, {"perm": (2, 1, 0)}),
]


@pytest.mark.parametrize("op, shape, given, filled", AXIS_CASES, ids=[c[0] for c in AXIS_CASES])
def test_builder_fills_per_axis_lists(op, shape, given, filled):
    b = ob.GraphBuilder("g")
    b.output(b.op(op, [b.input("x", "f32", shape)], **given))
    node = b.build().nodes[0]
    assert {k: node.attrs[k] for k in filled} == filled


def test_old_obir_with_empty_slice_axes_loads_filled(tmp_path):
    b = ob.GraphBuilder("g")
    b.output(b.op("Slice", [b.input("x", "f32", (3, 4))], starts=(1,), ends=(3,)))
    path = tmp_path / "old.obir"
    ir_io.save(b.build(), path)

    def as_written_before(doc):  # "empty: the default" was how axes and steps were stored
        for nd in doc["nodes"]:
            nd["attrs"]["axes"], nd["attrs"]["steps"] = [], []

    _rewrite_graph_json(path, as_written_before)
    g = ob.load(path)
    assert (g.nodes[0].attrs["axes"], g.nodes[0].attrs["steps"]) == ((0,), (1,))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(ob.interpret(g, {"x": x})[g.outputs[0].name], x[1:3])
