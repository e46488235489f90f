"""User errors of conversion and running that used to have no hint: the CLI prints one
`error:` line naming the file's input and a `hint:` line saying what to do (exit 2, no
traceback); the Python API raises the same OpbridgeError with the hint."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.cli import main


def _relu_model(path, elem_type: int, shape: list) -> str:
    x = helper.make_tensor_value_info("x", elem_type, shape)
    y = helper.make_tensor_value_info("y", elem_type, shape)
    node = helper.make_node("Identity" if elem_type == TensorProto.STRING else "Relu", ["x"], ["y"])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def _cli_error(capsys, argv: list[str]) -> tuple[str, str]:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    error = next(line for line in lines if line.startswith("error:"))
    hint = next(line for line in lines if line.startswith("hint:"))
    return error, hint


def test_caffe_input_shape_of_zero_says_what_to_give(tmp_path, capsys):
    proto = tmp_path / "net.prototxt"
    proto.write_text('name: "net"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     'layer { name: "relu" type: "ReLU" bottom: "data" top: "out" }\n')
    error, hint = _cli_error(capsys, ["convert", str(proto), "--input-shape", "data=0,3,8,8",
                                      "-o", str(tmp_path / "net.obir")])
    assert "input_shapes['data'] = [0, 3, 8, 8]: dims must be >= 1" in error
    assert "--input-shape data=1,3,224,224" in hint


def test_onnx_element_type_opbridge_cannot_read(tmp_path):
    """A number the file holds that is no TensorProto type: the parser names it."""
    model = _relu_model(tmp_path / "u.onnx", TensorProto.FLOAT, [2])
    m = onnx.load(str(model))
    m.graph.input[0].type.tensor_type.elem_type = 99
    with pytest.raises(ob.UnsupportedOpError,
                       match=r"\[onnx\] graph input 'x': element type 99 is not supported") as err:
        ob.convert(m)
    assert "bool, integer and floating-point" in err.value.hint


def test_input_value_of_the_wrong_rank_says_what_to_give(tmp_path, capsys):
    model = _relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, ["N", 3])
    error, hint = _cli_error(capsys, ["convert", model, "--input-value", "x=1,2,3",
                                      "-o", str(tmp_path / "r.obir")])
    assert "input_values['x'] has shape [3]; input 'x' is declared [N,3] (rank 2)" in error
    assert "give an array of rank 2" in hint and "x=FILE.npy" in hint


def test_input_value_that_is_not_a_number(tmp_path):
    model = _relu_model(tmp_path / "n.onnx", TensorProto.FLOAT, [1])
    with pytest.raises(ob.ShapeError, match=r"input_values\['x'\] = 'abc': input 'x' is float32, "
                                            r"and the value is not a number") as err:
        ob.convert(model, input_values={"x": "abc"})
    assert err.value.hint


def test_input_value_that_is_a_ragged_list(tmp_path):
    model = _relu_model(tmp_path / "g.onnx", TensorProto.FLOAT, [2, 2])
    with pytest.raises(ob.ShapeError, match=r"input_values\['x'\]: not a number or a rectangular array") as err:
        ob.convert(model, input_values={"x": [[1, 2], [3]]})
    assert "equal lengths" in err.value.hint


@pytest.mark.parametrize("shape,match", [((1, "three"), "not a list of ints"), ((1, -3), "dims must be >= 0")],
                         ids=["dim=str", "dim<0"])
def test_bad_input_shapes_have_hints(tmp_path, shape, match):
    model = _relu_model(tmp_path / "b.onnx", TensorProto.FLOAT, ["N", 3])
    with pytest.raises(ob.ShapeError, match=match) as err:
        ob.convert(model, input_shapes={"x": shape})
    assert err.value.hint


def test_interpret_feeds_not_a_dict_and_unknown_stop_after(tmp_path):
    g = ob.convert(_relu_model(tmp_path / "i.onnx", TensorProto.FLOAT, [2, 3]))
    with pytest.raises(ob.InterpretError, match="not a list") as err:
        ob.interpret(g, [1.0])
    assert err.value.hint == "pass {'x': array}"
    with pytest.raises(ob.InterpretError, match="has no node named 'nope'") as err:
        ob.interpret(g, {"x": [[1.0] * 3] * 2}, stop_after="nope")
    assert "opbridge show" in err.value.hint


def test_dynamic_program_run_on_a_wrong_shape_says_what_to_feed(tmp_path, capsys):
    from tests.dynamic.test_shapes_symbolic import cnn_model

    prog = ob.compile(ob.convert(cnn_model()), "bm1684", dynamic=True, max_shapes={"x": (4, 3, 8, 8)})
    prog.save(tmp_path / "d.obprog")
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 9, 8), np.float32))
    error, hint = _cli_error(capsys, ["run", str(tmp_path / "d.obprog"), "--input",
                                      f"x={tmp_path / 'x.npy'}"])
    assert "input 'x' has shape [2, 3, 9, 8]; the program takes [batch,3,8,8] up to [4, 3, 8, 8]" in error
    assert "fixed dims match" in hint


def test_graph_builder_misuse_has_hints():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (1, 2))
    b.op("Relu", [x], name="r")
    with pytest.raises(ob.GraphError, match="node name used twice") as err:
        b.op("Relu", [x], name="r")
    assert "its own name" in err.value.hint
    with pytest.raises(ob.GraphError, match=r"input 0 is ndarray, not a Value") as err:
        b.op("Relu", [np.zeros((1, 2), np.float32)])
    assert "constant()" in err.value.hint
