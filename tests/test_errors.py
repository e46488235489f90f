"""Errors carry their context as fields, filled on the way up and rendered once."""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import AttrError, MappingError, OpbridgeError, ShapeError
from opbridge.mappers import DEFAULT_MAPPINGS, MappingRegistry

F = TensorProto.FLOAT


def test_fields_render_in_the_house_format():
    err = AttrError("must be >= 1", framework="caffe", node="conv1", op_type="Convolution",
                    kind="layer", attribute="group", value=0)
    assert err.message == "[caffe] layer 'conv1' (Convolution) param 'group' = 0: must be >= 1"
    assert err.detail == "must be >= 1" and err.attribute == "group" and err.value == 0
    onnx_err = AttrError("out of range", framework="onnx", node="x", op_type="Conv", attribute="axis")
    assert onnx_err.message == "[onnx] node 'x' (Conv) attribute 'axis': out of range"


def test_add_context_fills_only_unknown_fields_and_renders_them_once():
    err = AttrError("bad", attribute="alpha")
    err.add_context(framework="onnx", node="n", op_type="Elu", opset=17, source="m.onnx")
    err.add_context(framework="caffe", node="other", op_type="X", opset=3)  # a second layer up
    assert str(err) == "[onnx] node 'n' (Elu) attribute 'alpha': bad"
    assert (err.framework, err.node, err.op_type, err.opset, err.source) == ("onnx", "n", "Elu", 17, "m.onnx")


def test_a_located_detail_is_not_given_its_location_again():
    err = ShapeError("[onnx] node 'n' (Relu): already says where", located=True, framework="onnx",
                     node="n", op_type="Relu")
    err.add_context(framework="onnx", node="n", op_type="Relu")
    assert err.message == "[onnx] node 'n' (Relu): already says where" and err.node == "n"


def test_only_the_framework_known():
    assert ShapeError("x", framework="onnx").message == "[onnx] x"
    assert ShapeError("x").message == "x"
    with pytest.raises(TypeError, match="unknown context field"):
        ShapeError("x", nod="typo")


def test_fields_survive_pickling():  # batch jobs send errors between processes
    err = AttrError("bad", hint="fix it", framework="onnx", node="n", op_type="Elu", attribute="alpha")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.context == err.context


def test_mapping_error_lives_with_the_others():
    from opbridge.mappers.registry import MappingError as OldPath

    assert OldPath is MappingError is ob.MappingError and issubclass(MappingError, (OpbridgeError, ValueError))


# -- errors raised while converting --------------------------------------------------------------
def _model(path, op="Foo", name="n1", opset=17):
    x = helper.make_tensor_value_info("x", F, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", F, None)
    node = helper.make_node(op, ["x"], ["y"], name=name)
    m = helper.make_model(helper.make_graph([node], "m", [x], [y]),
                          opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, path)
    return path


def _w(g):
    return g.constant(np.ones((2, 3, 1, 1), np.float32))


def _raise_g_error(node, g):
    raise g.error("must be >= 1", attr="alpha")


def _raise_bare(node, g):
    raise AttrError("something about alpha is wrong")


def _missing_attr(node, g):
    return g.op("Elu", [g.input(0)], alpha=node.get_attr("alpha"))


def _ir_error_first_op(node, g):  # the IR node is named after the origin node
    return g.op("Conv", [g.input(0), _w(g)], group=0)


def _ir_error_second_op(node, g):  # the IR node is 'n1/Conv'
    return g.op("Conv", [g.op("Relu", [g.input(0)]), _w(g)], group=0)


def _bug(node, g):
    return {}["nope"]


CASES = {
    "g.error": (_raise_g_error, AttrError, "[onnx] node 'n1' (Foo) attribute 'alpha': must be >= 1"),
    "bare": (_raise_bare, AttrError, "[onnx] node 'n1' (Foo): something about alpha is wrong"),
    "get_attr": (_missing_attr, AttrError, "[onnx] node 'n1' (Foo) attribute 'alpha': required but absent"),
    "ir-first-op": (_ir_error_first_op, AttrError, "[onnx] node 'n1' (Conv) param 'group'"),
    "ir-second-op": (_ir_error_second_op, AttrError, "[onnx] node 'n1' (Foo): node 'n1/Conv' (Conv) param 'group'"),
    "bug": (_bug, MappingError, "[onnx] node 'n1' (Foo): the mapping at "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conversion_errors_name_the_node_once_and_carry_fields(tmp_path, case):
    fn, cls, start = CASES[case]
    reg = MappingRegistry()
    reg.register("onnx", "Foo", fn)
    path = _model(tmp_path / "m.onnx")
    with pytest.raises(cls) as info:
        ob.convert(path, registry=reg)
    err = info.value
    assert err.message.startswith(start), err.message
    assert err.message.count("[onnx]") == 1 and err.message.count("'n1'") == 1, err.message
    assert (err.framework, err.node, err.op_type, err.opset) == ("onnx", "n1", "Foo", 17)
    assert err.source == str(tmp_path / "m.onnx")


def test_caffe_param_error_in_house_format(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     'layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"\n'
                     '  convolution_param { num_output: 4 kernel_size: 3 stride: 0 } }\n')
    with pytest.raises(AttrError) as info:
        ob.convert(proto)
    assert info.value.message == ("[caffe] layer 'conv1' (Convolution) param 'convolution_param.stride' "
                                  "= [0, 0]: must be >= 1")
    assert (info.value.node, info.value.op_type, info.value.framework) == ("conv1", "Convolution", "caffe")


def _if_model(cond_is_input: bool, then_op: str = "Relu") -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node(then_op, ["x"], ["t"], name="inner")], "then", [],
                               [vi("t", F, [1, 3, 4, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [1, 3, 4, 4])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    inputs = [vi("x", F, [1, 3, 4, 4])] + ([vi("c", TensorProto.BOOL, [])] if cond_is_input else [])
    inits = [] if cond_is_input else [helper.make_tensor("c", TensorProto.BOOL, [], [True])]
    graph = helper.make_graph([node], "m", inputs, [vi("y", F, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_error_inside_a_subgraph_names_the_inner_node_once():
    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("onnx"):
        reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    reg.register("onnx", "Foo", _raise_g_error)
    with pytest.raises(AttrError) as info:
        ob.convert(_if_model(False, then_op="Foo"), registry=reg)
    assert info.value.message == "[onnx] node 'branch/then_branch/inner' (Foo) attribute 'alpha': must be >= 1"


def test_cli_prints_the_message_once_with_its_hint(tmp_path, capsys):
    # a run-time If whose branches give different dtypes
    model = _if_model(True)
    else_g = next(a.g for a in model.graph.node[0].attribute if a.name == "else_branch")
    else_g.node[0].CopyFrom(helper.make_node("Cast", ["x"], ["e"], to=TensorProto.INT32))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["convert", str(path), "-o", str(tmp_path / "o.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == ("error: [onnx] node 'branch' (If) param 'else_branch': output 0 is tensor f32 in "
                        "then_branch but tensor i32 in else_branch"), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("hint: ")), err
