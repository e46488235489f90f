"""User errors of conversion and running that used to have no hint: the CLI prints one
`error:` line naming the file's input and a `hint:` line saying what to do (exit 2, no
traceback); the Python API raises the same OpbridgeError with the hint."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

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


# -- errors raised without a hint of their own: each case a real damaged or bad input ---------
def _onnx(path, nodes, inputs, inits=()):
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, [y], initializer=list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def _x(shape=(2, 3), name="x"):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def test_an_attribute_the_op_refuses_points_at_the_model_and_at_a_plugin(tmp_path, capsys):
    """A mapping's (or IR op's) AttrError without a hint: the converter says where to fix it."""
    model = _onnx(tmp_path / "c.onnx", [helper.make_node("Concat", ["x", "x"], ["y"], axis=5, name="cat")],
                  [_x()])
    error, hint = _cli_error(capsys, ["convert", model, "-o", str(tmp_path / "c.obir")])
    assert error == "error: [onnx] node 'cat' (Concat) param 'axis' = 5: out of range for rank 2"
    assert "correct this value of the node in the model" in hint
    assert "opbridge plugin new Concat --framework onnx --override writes a plugin" in hint
    assert "--plugin FILE loads it" in hint


def test_an_unsupported_form_without_a_hint_says_how_to_map_it(tmp_path, capsys):
    from onnx import TypeProto

    seq_of_optional = TypeProto()
    seq_of_optional.optional_type.elem_type.tensor_type.elem_type = TensorProto.FLOAT
    node = helper.make_node("Optional", [], ["o"], type=seq_of_optional, name="opt")
    has = helper.make_node("OptionalHasElement", ["o"], ["y"], name="has")
    model = _onnx(tmp_path / "o.onnx", [node, has], [])
    error, hint = _cli_error(capsys, ["convert", model, "-o", str(tmp_path / "o.obir")])
    assert "node 'opt' (Optional)" in error and "an Optional of anything but a tensor" in error
    assert "tensors and sequences of tensors" in hint


def test_missing_external_data_says_to_keep_the_files_beside_the_model(tmp_path, capsys):
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                                                [_x((2, 64))], [y], initializer=[w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    (tmp_path / "ext.data").unlink()
    error, hint = _cli_error(capsys, ["convert", str(path), "-o", str(tmp_path / "e.obir")])
    assert "initializer 'w' external data location 'ext.data': cannot be read" in error
    assert "keep the external data files the exporter wrote beside the .onnx" in hint


def test_an_onnx_tensor_of_no_type_says_to_run_the_checker(tmp_path, capsys):
    b = numpy_helper.from_array(np.ones((2, 3), np.float32), "b")
    b.data_type = TensorProto.UNDEFINED
    model = _onnx(tmp_path / "u.onnx", [helper.make_node("Add", ["x", "b"], ["y"], name="add")], [_x()], [b])
    error, hint = _cli_error(capsys, ["convert", model, "-o", str(tmp_path / "u.obir")])
    assert "tensor 'b' has an undefined element type" in error
    assert "onnx.checker.check_model(PATH, full_check=True)" in hint


def test_a_torchscript_json_of_the_wrong_structure_says_to_export_again(tmp_path, capsys):
    import json

    doc = {"format": "opbridge.torchscript-json", "version": 1, "name": "m",
           "inputs": [{"name": "x", "dtype": "float32", "shape": [3]}],
           "outputs": [{"name": "x", "dtype": "float32", "shape": [3]}], "nodes": {"relu": {}}}
    (tmp_path / "m.ts.json").write_text(json.dumps(doc))
    error, hint = _cli_error(capsys, ["convert", str(tmp_path / "m.ts.json"), "-o", str(tmp_path / "m.obir")])
    assert "'nodes' must be a list" in error
    assert "export the model again (opbridge export-torchscript" in hint


def test_a_caffe_input_declared_twice_says_how_to_fix_the_prototxt(tmp_path, capsys):
    proto = tmp_path / "net.prototxt"
    proto.write_text('name: "net"\n'
                     'layer { name: "in1" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 } } }\n'
                     'layer { name: "in2" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 } } }\n'
                     'layer { name: "relu" type: "ReLU" bottom: "data" top: "out" }\n')
    error, hint = _cli_error(capsys, ["convert", str(proto), "-o", str(tmp_path / "net.obir")])
    assert "input 'data' is declared twice" in error
    assert "rename the second top, or drop the duplicate" in hint


def test_a_damaged_obir_graph_says_to_convert_again(tmp_path, capsys):
    import json

    from opbridge.ir import tensorfile

    good = tmp_path / "g.obir"
    ob.save(ob.convert(_relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, [2, 3])), good)
    meta, get = tensorfile.read(good)
    graph = json.loads(meta["graph"])
    graph["outputs"] = ["nowhere"]
    bad = tmp_path / "bad.obir"
    tensorfile.write(bad, {}, {**meta, "graph": json.dumps(graph)})
    error, hint = _cli_error(capsys, ["show", str(bad)])
    assert "graph output 'nowhere' is not defined" in error
    assert "convert the model again (opbridge convert MODEL -o OUT.obir)" in hint


def _relu_plugin(path, name: str, *body: str):
    """A plugin file overriding ONNX Relu with ``name`` (decorated on line 5) running ``body``."""
    path.write_text("from opbridge.mappers import mapping\n"
                    "from opbridge.parsers.origin import Framework\n\n\n"
                    "@mapping(Framework.ONNX, 'Relu', since_opset=1, override=True)\n"
                    f"def {name}(node, g):\n" + "".join(f"    {line}\n" for line in body))
    return path


@pytest.mark.usefixtures("isolated_registries")
def test_a_mapping_that_breaks_the_graph_is_blamed_with_a_hint(tmp_path, capsys):
    """A plugin mapping that edits its output behind the builder's back: the graph does not
    verify after every node mapped, and the hint says whose fault it is."""
    plugin = _relu_plugin(tmp_path / "bad_relu.py", "bad_relu", "y = g.op('Relu', [g.input(0)])",
                          "y.kind = 'sequence'", "return y")
    model = _relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, [2, 3])
    error, hint = _cli_error(capsys, ["convert", model, "--plugin", str(plugin), "-o", str(tmp_path / "r.obir")])
    assert "output 'y' is declared a sequence; the op gives a tensor" in error
    assert "a mapping (a plugin's, if one is loaded) emitted IR" in hint and "--debug" in hint


@pytest.mark.usefixtures("isolated_registries")  # its plugin overrides Relu for the process
def test_a_mapping_that_gives_an_op_the_wrong_number_of_inputs_is_blamed(tmp_path, capsys):
    """The number of inputs an IR op gets is the mapping's choice: the hint names the mapping's
    definition, not the model's input shapes; --debug shows the traceback through it."""
    plugin = _relu_plugin(tmp_path / "two_relu.py", "two_relu", "a = g.input(0)", "return g.op('Relu', [a, a])")
    model = _relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, [2, 3])
    argv = ["convert", model, "--plugin", str(plugin), "-o", str(tmp_path / "r.obir")]
    error, hint = _cli_error(capsys, argv)
    assert error == "error: [onnx] node 'Relu_0' (Relu): takes 1 inputs, got 2"
    assert hint == (f"hint: the mapping at {plugin}:5 (a plugin's, if one is loaded) passes Relu the wrong "
                    "number of inputs: correct it; rerun with --debug for the traceback")
    with pytest.raises(ob.ShapeError) as err:  # --debug lets the error through, with its traceback
        main(["--debug", *argv])
    assert any(entry.name == "two_relu" for entry in err.traceback)


_REFUSED_HINT = ("opbridge does not convert this form of the op: change the model to a form it does, or "
                 "opbridge plugin new Relu --framework onnx --override writes a plugin that maps it your "
                 "way, --plugin FILE loads it")


def _if_of_relus():
    def branch(n):
        return helper.make_graph([helper.make_node("Relu", ["x"], [f"{n}o"], name=f"{n}relu")], n, [],
                                 [helper.make_tensor_value_info(f"{n}o", TensorProto.FLOAT, [2, 3])])
    return [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("t"), else_branch=branch("e"))]


@pytest.mark.usefixtures("isolated_registries")  # its plugin overrides Relu for the process
@pytest.mark.parametrize("nodes,inputs,cases", [
    ([helper.make_node("Relu", ["x"], ["y"], name="r1")], [_x()], ["node 'r1' (Relu)"]),
    (_if_of_relus(), [helper.make_tensor_value_info("c", TensorProto.BOOL, []), _x()],
     ["node 'if' (If), in its subgraph 't': node 'if/then_branch/trelu' (Relu)"]),
    ([helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["x"], ["b"], name="r2"),
      helper.make_node("Add", ["a", "b"], ["y"], name="add")], [_x()], ["node 'r1' (Relu)", "node 'r2' (Relu)"]),
], ids=["one-case", "one-case-in-a-subgraph", "two-cases"])
def test_a_refused_case_without_a_hint_says_how_to_map_it_once(tmp_path, capsys, nodes, inputs, cases):
    """A case a mapping refuses without a hint gets the converter's: on its own error, or once
    for the report that lists several (not again on every line); it names the refused op, also
    inside a subgraph."""
    plugin = _relu_plugin(tmp_path / "refuse.py", "refuse", "raise g.unsupported('this form of Relu is refused')")
    model = _onnx(tmp_path / "m.onnx", nodes, inputs)
    assert main(["convert", model, "--plugin", str(plugin), "-o", str(tmp_path / "m.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    if len(cases) == 1:
        assert lines == [f"error: [onnx] {cases[0]}: this form of Relu is refused", f"hint: {_REFUSED_HINT}"]
        return
    assert lines[0] == f"error: [onnx] 2 unsupported cases of mapped op types in '{model}':"
    assert lines[1:3] == [f"  - [onnx] {c}: this form of Relu is refused" for c in cases]
    assert lines[-1] == f"hint: for a case listed without a hint: {_REFUSED_HINT}"
    assert len(lines) == 5 and lines[3] == "  (1 node(s) that read their outputs were not checked)"


@pytest.mark.usefixtures("isolated_registries")  # its plugin overrides Relu for the process
def test_a_mapping_that_names_two_values_alike_is_blamed_not_the_user(tmp_path, capsys):
    """The graph's own check finds the clash after mapping: its hint for hand-built graphs
    ("give every value a unique name") would blame the user, so the mapping is blamed."""
    plugin = _relu_plugin(tmp_path / "rename.py", "rename", "y = g.op('Relu', [g.input(0)])",
                          "y.name = node.inputs[0]", "return y")
    model = _relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, [2, 3])
    error, hint = _cli_error(capsys, ["convert", model, "--plugin", str(plugin), "-o", str(tmp_path / "r.obir")])
    assert error == "error: value name 'x' is used twice (graph input 'x' and output of node 'Relu_0' (Relu))"
    assert hint == ("hint: a mapping (a plugin's, if one is loaded) emitted IR that does not fit together: "
                    "rerun with --debug for the traceback, and please report it")


def test_a_caffe_param_the_layer_refuses_points_at_the_prototxt(tmp_path, capsys):
    proto = tmp_path / "net.prototxt"
    proto.write_text('name: "net"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n'
                     'layer { name: "rs" type: "Reshape" bottom: "data" top: "out" '
                     "reshape_param { shape { dim: -1 dim: -1 } } }\n")
    error, hint = _cli_error(capsys, ["convert", str(proto), "-o", str(tmp_path / "net.obir")])
    assert error == ("error: [caffe] layer 'rs' (Reshape) param 'reshape_param.shape' = [-1, -1]: "
                     "at most one -1")
    assert hint.startswith("hint: correct this value of the layer in the prototxt")
    assert "opbridge plugin new Reshape --framework caffe --override" in hint


def test_a_shape_the_op_cannot_take_points_at_the_input_shapes(tmp_path, capsys):
    model = _onnx(tmp_path / "d.onnx", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, name="d2s")],
                  [_x((4, 8, 3))])
    error, hint = _cli_error(capsys, ["convert", model, "-o", str(tmp_path / "d.obir")])
    assert "node 'd2s' (DepthToSpace): input has rank 3; DepthToSpace needs NCHW (rank 4)" in error
    assert hint == "hint: the op takes NCHW input: check the input's shape (--input-shape) and the layer before"


def test_validate_with_a_mean_that_is_not_numbers_says_what_to_write(tmp_path, capsys):
    model = _relu_model(tmp_path / "r.onnx", TensorProto.FLOAT, [1, 3, 4, 4])
    image = tmp_path / "x.ppm"
    image.write_bytes(b"P6\n4 4 255\n" + bytes(4 * 4 * 3))
    error, hint = _cli_error(capsys, ["validate", model, "--image", str(image), "--mean", "104,green,123"])
    assert error == "error: --mean '104,green,123': not a comma-separated list of numbers"
    assert hint == "hint: give one number, or one per channel: --mean 104,117,123"


def test_demo_of_a_file_that_is_no_model_names_the_kinds_it_takes(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model\n")
    error, hint = _cli_error(capsys, ["demo", str(notes), "--out-dir", str(tmp_path / "out")])
    assert "not an .onnx, .prototxt or .ts.json file" in error
    assert "a Caffe net (.prototxt, with --weights W for its .caffemodel)" in hint
