"""ONNX attribute defaults and names come from onnx.defs, once, before a mapping runs:
absent attributes convert as onnxruntime reads them, an attribute the schema does not declare
is refused as onnx's checker refuses it, and no mapping repeats a default."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import defs

import opbridge as ob
from opbridge.errors import AttrError
from opbridge.mappers.onnx import schema_defaults
from opbridge.mappers.registry import MappingRegistry, mapping
from opbridge.parsers.origin import Framework, OriginNode
from tests.conftest import requires_ort
from tests.ir.ops.onnx_ref import onnx_node_model
from tests.mappers.onnx.test_activation import check_ort, randn

F32 = np.float32
MAPPERS = Path(schema_defaults.__file__).parent


# -- attribute absent: the schema's default, as onnxruntime reads the node -------------------
def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return randn(*shape, seed=seed)


ABSENT = [
    ("LeakyRelu", lambda: [_x(2, 5)], 13),
    ("Elu", lambda: [_x(2, 5)], 6),
    ("Selu", lambda: [_x(2, 5)], 6),
    ("HardSigmoid", lambda: [_x(2, 5)], 6),
    ("Celu", lambda: [_x(2, 5)], 12),
    ("Clip", lambda: [np.array([-np.inf, -1, 0, 2, np.inf], F32)], 6),
    ("Softmax", lambda: [_x(2, 3, 4)], 11),  # axis 1, flattened, before opset 13
    ("Softmax", lambda: [_x(2, 3, 4)], 13),  # axis -1 from 13
    ("LogSoftmax", lambda: [_x(2, 3, 4)], 11),
    ("Hardmax", lambda: [_x(2, 3, 4)], 13),
    ("Flatten", lambda: [_x(2, 3, 4)], 13),
    ("Gemm", lambda: [_x(2, 3), _x(3, 4, seed=1), _x(4, seed=2)], 13),
    ("BatchNormalization", lambda: [_x(2, 3, 4), _x(3, seed=1), _x(3, seed=2), _x(3, seed=3),
                                    np.abs(_x(3, seed=4)) + 0.1], 15),
    ("InstanceNormalization", lambda: [_x(2, 3, 4), _x(3, seed=1), _x(3, seed=2)], 6),
    ("LayerNormalization", lambda: [_x(2, 3, 4), _x(4, seed=1), _x(4, seed=2)], 17),
    ("ArgMax", lambda: [_x(3, 4)], 13),
    ("ReduceMean", lambda: [_x(3, 4)], 13),
    ("ReduceSum", lambda: [_x(3, 4)], 13),
    ("Gather", lambda: [_x(3, 4), np.array([2, 0], np.int64)], 13),
    ("Split", lambda: [_x(4, 3)], 13),
    ("Pad", lambda: [_x(2, 3), np.array([1, 0, 0, 2], np.int64)], 13),
    ("MaxPool", lambda: [_x(1, 2, 5, 5)], 12, {"kernel_shape": [2, 2]}),
    ("AveragePool", lambda: [_x(1, 2, 5, 5)], 11, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("LpPool", lambda: [_x(1, 2, 5, 5)], 11, {"kernel_shape": [2, 2]}),
    ("Conv", lambda: [_x(1, 2, 5, 5), _x(3, 2, 3, 3, seed=1)], 11),
    ("LRN", lambda: [_x(1, 5, 3, 3)], 13, {"size": 3}),
    ("EyeLike", lambda: [_x(3, 4)], 9),
    ("CumSum", lambda: [_x(3, 4), np.array(1, np.int64)], 14),
]


@requires_ort
@pytest.mark.parametrize(
    "case", ABSENT, ids=[f"{c[0]}-{c[2]}-attrs=absent" + ("-but-" + "-".join(c[3]) if len(c) > 3 else "")
                         for c in ABSENT])
def test_absent_attributes_match_onnxruntime(case):
    op, inputs, opset, *given = case
    attrs = given[0] if given else {}
    ins = inputs()
    inits = [i > 0 and op in ("Gather", "Pad", "CumSum") for i in range(len(ins))]
    check_ort(op, ins, opset=opset, initializers=inits, rtol=1e-4, atol=1e-5, **attrs)


def test_the_filled_defaults_reach_the_ir_node():
    model, _ = onnx_node_model("LeakyRelu", [_x(3)], opset=16)
    node = ob.convert(model).nodes[0]
    assert node.attrs["alpha"] == pytest.approx(
        onnx.helper.get_attribute_value(defs.get_schema("LeakyRelu", 16).attributes["alpha"].default_value))


# -- unknown attributes ---------------------------------------------------------------------
def _check_node(model: onnx.ModelProto) -> None:
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    onnx.checker.check_node(model.graph.node[0], ctx)


@pytest.mark.parametrize("op, inputs, opset, attrs, bad", [
    ("Relu", [_x(3)], 14, {"alpha": 0.2}, "alpha"),
    ("Conv", [_x(1, 1, 4, 4), _x(1, 1, 2, 2)], 11, {"stride": [2, 2]}, "stride"),
    ("Softmax", [_x(3)], 13, {"axis": 0, "axes": [0]}, "axes"),
    ("Range", [np.array(0, F32), np.array(3, F32), np.array(1, F32)], 11, {"stash_type": 1}, "stash_type"),
], ids=["Relu-alpha", "Conv-stride", "Softmax-axes", "Range-11-stash_type-of-27"])
def test_unknown_attribute_is_an_attr_error_naming_node_and_attribute(op, inputs, opset, attrs, bad):
    model, _ = onnx_node_model(op, inputs, opset=opset, **attrs)
    with pytest.raises(onnx.checker.ValidationError, match=f"Unrecognized attribute: {bad}"):
        _check_node(model)  # the reference: onnx's checker refuses it too
    with pytest.raises(AttrError, match=rf"node '[^']*' \({op}\) attribute '{bad}': not an attribute of "
                                        rf"{op} \(opset {opset}\)"):
        ob.convert(model)


def test_double_underscore_attributes_are_skipped_as_the_checker_does():
    model, feeds = onnx_node_model("Relu", [_x(3)], opset=14, __note="exported by x")
    _check_node(model)
    g = ob.convert(model)
    np.testing.assert_array_equal(ob.interpret(g, feeds)["out0"], np.maximum(feeds["in0"], 0))


def test_ops_without_a_schema_are_left_to_their_mapping():
    reg = MappingRegistry()
    seen = {}

    @mapping(Framework.ONNX, "com.example::Scale", registry=reg)
    def scale(node, g):
        seen.update(node.attrs)
        return g.op("Mul", [g.input(0), g.constant(np.float32(node.get_attr("factor")))])

    model, _ = onnx_node_model("Scale", [_x(3)], opset=1, domain="com.example", factor=2.0)
    from opbridge.parsers.onnx import parse_model
    ob.mappers.convert_origin_graph(parse_model(model), registry=reg)
    assert seen == {"factor": 2.0}


def test_filling_leaves_the_origin_node_as_read():
    node = OriginNode("n", "LeakyRelu", ["x"], ["y"])
    filled = schema_defaults.with_schema_defaults(node, 16)
    assert node.attrs == {} and set(filled.attrs) == {"alpha"}


# -- the tables of exceptions stay honest -----------------------------------------------------
@pytest.mark.parametrize("key", list(schema_defaults.TEXT_DEFAULTS), ids=lambda k: f"{k[0]}-{k[1]}.{k[2]}")
def test_text_defaults_fill_only_what_the_schema_leaves_undeclared(key):
    op, since, name = key
    schema = defs.get_schema(op, since)
    assert schema.since_version == since
    assert name in schema.attributes and not schema.attributes[name].default_value.name


@pytest.mark.parametrize("key", list(schema_defaults.NOT_FILLED), ids=lambda k: f"{k[0]}.{k[1]}")
def test_not_filled_names_a_declared_default(key):
    op, name = key
    assert defs.get_schema(op).attributes[name].default_value.name


# -- no ONNX mapping repeats a default ---------------------------------------------------------
#: Mapping modules this rule covers; the others hold onnx-function expansion and control flow.
COVERED = sorted(p for p in MAPPERS.glob("*.py")
                 if p.name not in ("__init__.py", "control.py", "functions.py", "decompose.py", "rnn.py"))


def _literal_defaults(path: Path) -> list[str]:
    """``node.get_attr(name, <a literal other than None>)`` calls in ``path``."""
    out = []
    for call in ast.walk(ast.parse(path.read_text())):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "get_attr" and len(call.args) == 2):
            default = call.args[1]
            if not (isinstance(default, ast.Constant) and default.value is None):
                out.append(f"{path.name}:{call.lineno}: {ast.unparse(call)}")
    return out


def test_covered_modules_exist():
    assert len(COVERED) >= 12, [p.name for p in COVERED]


@pytest.mark.parametrize("path", COVERED, ids=lambda p: p.name)
def test_no_mapping_repeats_a_schema_default(path):
    assert _literal_defaults(path) == []


def test_unknown_attribute_error_from_a_file_names_the_file(tmp_path: Path) -> None:
    model, _ = onnx_node_model("Relu", [_x(3)], opset=14, alpha=0.2)
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    with pytest.raises(AttrError) as e:
        ob.convert(str(path))
    assert e.value.attribute == "alpha" and e.value.source is not None
    assert Path(str(e.value.source)).name == "relu.onnx"
