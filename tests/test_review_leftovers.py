"""Leftovers of earlier reviews: a framework tag rendered once, the builder's ``owns``, and the
wording for a sequence of 0-d tensors."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import ModelFormatError

ROOT = Path(__file__).resolve().parents[1]


def _external_data_model(tmp_path: Path) -> Path:
    """A MatMul whose weight is stored in 'missing.bin', a file that is not there."""
    w = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "missing.bin"), ("offset", "0"), ("length", "16")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [w])
    path = tmp_path / "ext.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def test_external_data_error_names_the_framework_once(tmp_path, capsys):
    path = _external_data_model(tmp_path)
    assert main(["convert", str(path), "-o", str(tmp_path / "ext.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: [onnx] node 'mm' (MatMul): initializer 'w' external data "
                               "location 'missing.bin': cannot be read"), lines[0]
    assert lines[0].count("[onnx]") == 1
    assert lines[-1].startswith("hint: keep the external data files")
    assert "Traceback" not in err


@pytest.mark.parametrize("framework", ["onnx", "caffe", "torchscript"])
def test_a_framework_tag_in_the_text_is_the_framework_field(framework):
    err = ModelFormatError(f"[{framework}] tensor 't' is damaged")
    assert err.framework == framework
    assert err.message == f"[{framework}] tensor 't' is damaged"  # alone: rendered as written
    err.add_context(framework=framework, node="n1", op_type="Conv", kind="node")
    assert err.message == f"[{framework}] node 'n1' (Conv): tensor 't' is damaged"


def test_a_bracketed_word_that_is_no_framework_stays_in_the_text():
    err = ModelFormatError("[abc] tensor 't' is damaged")
    assert err.framework is None and err.message == "[abc] tensor 't' is damaged"


def test_graph_builder_owns_its_own_values_only():
    outer, inner = ob.GraphBuilder("outer"), ob.GraphBuilder("inner")
    x = outer.input("x", "f32", (2,))
    c = outer.constant("c", np.ones(2, np.float32))
    y = outer.op("Add", [x, c])
    assert outer.owns(x) and outer.owns(c) and outer.owns(y)
    assert not inner.owns(x) and not inner.owns(c) and not inner.owns(y)
    z = inner.input("x", "f32", (2,))  # same name, another builder's value
    assert inner.owns(z) and not outer.owns(z)


def test_the_converter_reads_no_private_field_of_the_builder():
    builder_fields = {"_inputs", "_outputs", "_nodes", "_constants", "_names", "_node_names", "_counter"}
    tree = ast.parse((ROOT / "opbridge/mappers/converter.py").read_text())
    private = [f"line {n.lineno}: .{n.attr}" for n in ast.walk(tree)
               if isinstance(n, ast.Attribute) and n.attr in builder_fields
               and not (isinstance(n.value, ast.Name) and n.value.id == "self")]
    assert private == []


def _concat_of_scalars() -> onnx.ModelProto:
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"], name="mk"),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [])
                                           for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_concat_of_a_constructed_sequence_of_scalars_says_they_are_0d(tmp_path, capsys):
    """ONNX's ConcatFromSequence without new_axis needs a dim to join along: onnx.reference
    refuses 0-d tensors too; the error says they are 0-d, not that their shape is unknown."""
    from onnx.reference import ReferenceEvaluator

    model = _concat_of_scalars()
    with pytest.raises(Exception):  # noqa: B017 - the outside reference refuses it as well
        ReferenceEvaluator(model).run(None, {"a": np.float32(1), "b": np.float32(2)})
    path = tmp_path / "seq0.onnx"
    onnx.save(model, str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "s.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == ("error: [onnx] node 'cat' (ConcatFromSequence): axis 0 joins the tensors along "
                        "one of their dims, but the tensors of sequence 's' (made by SequenceConstruct) "
                        "are 0-d")
    assert "no known shape" not in lines[0]
    assert lines[-1].startswith("hint: 0-d tensors have no dim to join along: only new_axis=1 stacks them")


def test_ir_concat_of_scalars_says_0d_or_of_no_known_shape():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", ())
    s = b.op("SequenceConstruct", [x, x])
    with pytest.raises(ob.ShapeError, match=r"node 'cat' \(ConcatFromSequence\): axis 0 joins .* the "
                                             r"sequence's tensors are 0-d as far as the graph knows") as err:
        b.op("ConcatFromSequence", [s], axis=0, name="cat")
    assert err.value.hint.startswith("0-d tensors have no dim to join along: new_axis=1 stacks them")
