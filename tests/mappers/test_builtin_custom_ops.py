"""Built-in one-to-one mappings go through the public ``register_custom_op`` builder, and what
the builder grew for them (opset ranges, an input-count check) works for a plugin too."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError
from opbridge.mappers import DEFAULT_MAPPINGS, MappingRegistry, register_custom_op
from opbridge.mappers.converter import convert_origin_graph
from opbridge.mappers.custom_op import CustomOpBuilder
from opbridge.parsers.origin import Framework, OriginGraph, OriginNode, TensorInfo


def _through_builder(entry) -> bool:
    return isinstance(getattr(entry.fn, "__self__", None), CustomOpBuilder)


@pytest.mark.parametrize("framework, minimum", [(Framework.ONNX, 80), (Framework.TORCHSCRIPT, 10)])
def test_builtin_one_to_one_mappings_use_the_public_builder(framework, minimum):
    entries = [e for e in DEFAULT_MAPPINGS.entries(framework) if _through_builder(e)]
    assert len(entries) >= minimum
    assert all(e.ir_op is not None for e in entries)


@pytest.mark.parametrize("framework, op, since, site", [
    (Framework.ONNX, "Abs", 1, "mappers/onnx/elementwise.py"),
    (Framework.ONNX, "Add", 7, "mappers/onnx/elementwise.py"),
    (Framework.ONNX, "LeakyRelu", 1, "mappers/onnx/activation.py"),
    (Framework.TORCHSCRIPT, "aten::relu_", 1, "mappers/torchscript/activation.py"),
    (Framework.TORCHSCRIPT, "aten::sign", 1, "mappers/torchscript/elementwise.py"),
])
def test_builtin_entries_name_the_line_that_registered_them(framework, op, since, site):
    domain, _, name = op.rpartition("::")
    entry = DEFAULT_MAPPINGS.find(framework, name, domain, version=since)
    assert entry is not None and _through_builder(entry) and entry.since == since
    assert site in entry.defined_at.replace("\\", "/")


def _graph(framework, op_type, inputs, *, opsets=None, attrs=None):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    tensors = {name: x for name in inputs if name and name != "x"}
    domain, _, op_type = op_type.rpartition("::")
    node = OriginNode("n1", op_type, list(inputs), ["y"], dict(attrs or {}), framework=framework,
                      domain=domain)
    return OriginGraph("g", framework, [node], [TensorInfo("x", np.dtype(np.float32), (2, 3))],
                       [TensorInfo("y")], tensors, opsets=opsets or {}), x


def test_builder_since_opset_ranges_pick_by_model_opset():
    reg = MappingRegistry()
    (register_custom_op("Relu", registry=reg).framework_type(Framework.ONNX).since_opset(1)
     .origin_op_type("com.example::Act"))
    (register_custom_op("Sigmoid", registry=reg).framework_type(Framework.ONNX).since_opset(5)
     .origin_op_type("com.example::Act"))
    for version, op in ((4, "Relu"), (5, "Sigmoid"), (9, "Sigmoid")):
        origin, _ = _graph(Framework.ONNX, "com.example::Act", ["x"], opsets={"": 17, "com.example": version})
        assert convert_origin_graph(origin, registry=reg).nodes[0].op == op


@pytest.mark.parametrize("inputs, message", [
    (["x", "x2"], r"layer 'n1' \(Act\): takes 1 input\(s\), the node has 2"),
    ([""], r"layer 'n1' \(Act\): input 0 is required but absent"),
], ids=["extra-input", "absent-input"])
def test_builder_num_inputs_checks_the_origin_node(inputs, message):
    reg = MappingRegistry()
    register_custom_op("Relu", registry=reg).framework_type("caffe").num_inputs(1).origin_op_type("Act")
    origin, _ = _graph(Framework.CAFFE, "Act", inputs)
    with pytest.raises(OpbridgeError, match=message):
        convert_origin_graph(origin, registry=reg)


def test_builder_parse_fn_sees_the_model_opset():
    reg = MappingRegistry()
    seen = []

    def parse(src, dst):
        seen.append(dst.opset)

    (register_custom_op("Relu", registry=reg).framework_type(Framework.ONNX)
     .parse_params_by_operator_fn(parse).origin_op_type("com.example::Act"))
    origin, _ = _graph(Framework.ONNX, "com.example::Act", ["x"], opsets={"": 17, "com.example": 3})
    convert_origin_graph(origin, registry=reg)
    assert seen == [3]


def test_torchscript_one_to_one_refuses_an_extra_input_not_ignores_it():
    # a one-to-one mapping takes the node's tensor inputs as they are: a second input (an
    # overload the mapping does not know) is refused, not dropped
    origin, _ = _graph(Framework.TORCHSCRIPT, "aten::sign", ["x", "d"])
    origin.tensors = {"d": np.array(2, np.int64)}
    with pytest.raises(OpbridgeError, match=r"\(sign\): takes 1 input\(s\), the node has 2"):
        convert_origin_graph(origin)


@pytest.mark.parametrize("kind, ref", [
    ("aten::silu", lambda x: x / (1 + np.exp(-x))),
    ("aten::selu", lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
    ("aten::sinh_", np.sinh),
])
def test_torchscript_one_to_one_values(kind, ref):
    # references: torch's documented formulas (nn.SiLU, nn.SELU), numpy
    origin, x = _graph(Framework.TORCHSCRIPT, kind, ["x"])
    g = convert_origin_graph(origin)
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], ref(x), rtol=1e-5, atol=1e-6)
