"""Sequence and optional values, against onnxruntime; bad positions name the node and values."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import InterpretError

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _seq_vi(name, shape, t=F):
    return helper.make_tensor_sequence_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _compare(model, feeds):
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = list(ob.interpret(ob.convert(model), feeds).values())
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, list):
            assert isinstance(a, list) and len(a) == len(b)
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_array_equal(a, b)


def _build_and_read_model():
    """Builds a sequence from three tensors (insert, erase) and reads it back (at, length,
    concat): every sequence op on one path from tensors to tensors."""
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "c", "p"], ["s2"]),
        helper.make_node("SequenceErase", ["s2", "e"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "q"], ["picked"], name="pick"),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s3"], ["joined"], axis=0),
        helper.make_node("ConcatFromSequence", ["s3"], ["stacked"], axis=1, new_axis=1),
    ]
    ins = [_vi("a", [2, 3]), _vi("b", [2, 3]), _vi("c", [2, 3]), _vi("p", [], I64),
           _vi("e", [], I64), _vi("q", [], I64)]
    outs = [_vi("picked", None), _vi("n", [], I64), _vi("joined", None), _vi("stacked", None)]
    return _model(nodes, ins, outs)


@pytest.mark.parametrize(("p", "e", "q"), [(0, -1, 0), (1, 0, 1), (2, 2, -1), (-2, -3, -2)])
def test_sequence_ops_build_and_read(p, e, q):
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((2, 3)).astype(np.float32) for k in "abc"}
    feeds.update(p=np.array(p, np.int64), e=np.array(e, np.int64), q=np.array(q, np.int64))
    _compare(_build_and_read_model(), feeds)


def test_sequence_position_out_of_range_names_the_node_and_values():
    g = ob.convert(_build_and_read_model())
    feeds = {k: np.ones((2, 3), np.float32) for k in "abc"}
    feeds.update(p=np.array(0, np.int64), e=np.array(0, np.int64), q=np.array(5, np.int64))
    with pytest.raises(InterpretError, match=r"node 'pick' \(SequenceAt\): position 5 is out of "
                                             r"range for a sequence of 2 tensors \(valid: -2 to 1\)"):
        ob.interpret(g, feeds)


@pytest.mark.parametrize("split", [None, 2, [1, 4]], ids=["absent", "scalar", "sizes"])
def test_split_to_sequence(split):
    inits = [] if split is None else [numpy_helper.from_array(np.array(split, np.int64), "split")]
    node = helper.make_node("SplitToSequence", ["x", *(["split"] if split is not None else [])], ["s"],
                            axis=1, keepdims=0 if split is None else 1)
    m = _model([node, helper.make_node("SequenceLength", ["s"], ["n"])], [_vi("x", [3, 5])],
               [_seq_vi("s", None), _vi("n", [], I64)], inits)
    _compare(m, {"x": np.arange(15, dtype=np.float32).reshape(3, 5)})


def test_sequence_inputs_and_outputs_and_sequence_map():
    body = helper.make_graph([helper.make_node("Shape", ["x"], ["shape"]),
                              helper.make_node("Mul", ["x", "w"], ["y"])],
                             "body", [_vi("x", ["n"])], [_vi("shape", [1], I64), _vi("y", ["n"])])
    node = helper.make_node("SequenceMap", ["xs"], ["shapes", "ys"], body=body)
    m = _model([node], [_seq_vi("xs", ["n"])], [_seq_vi("shapes", [1], I64), _seq_vi("ys", ["n"])],
               [numpy_helper.from_array(np.array(3.0, np.float32), "w")])
    xs = [np.arange(k, dtype=np.float32) for k in (1, 4, 2)]
    _compare(m, {"xs": xs})


@pytest.mark.parametrize("present", [True, False], ids=["present", "empty"])
def test_optional_input_and_loop_with_a_carried_sequence(present):
    """onnx's test_loop16_seq_none (a carried optional sequence, an If on whether it holds one),
    which the ONNX runner cannot compare; rebuilt here (trip count and condition initializers: the body
    slices by the iteration number, so it unrolls) and compared with onnxruntime."""
    then = helper.make_graph([helper.make_node("SequenceConstruct", ["zero"], ["fresh"])], "then", [],
                             [_seq_vi("fresh", None)])
    other = helper.make_graph([helper.make_node("OptionalGetElement", ["opt_in"], ["held"])], "else", [],
                              [_seq_vi("held", None)])
    body = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["opt_in"], ["has"]),
         helper.make_node("Not", ["has"], ["none"]),
         helper.make_node("If", ["none"], ["seq"], then_branch=then, else_branch=other),
         helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["ends"]),
         helper.make_node("Slice", ["x", "starts", "ends"], ["part"]),
         helper.make_node("SequenceInsert", ["seq", "part"], ["seq_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [_vi("i", [], I64), _vi("cond", [], B),
                 helper.make_tensor_value_info("opt_in", TensorProto.UNDEFINED, None)],
        [_vi("cond_out", [], B), _seq_vi("seq_out", None)])
    body.input[2].type.CopyFrom(helper.make_optional_type_proto(helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(F, None))))
    inits = [numpy_helper.from_array(np.array([1, 2, 3, 4, 5], np.float32), "x"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([0], np.int64), "starts"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
             numpy_helper.from_array(np.array(3, np.int64), "M"),
             numpy_helper.from_array(np.array(True), "c")]
    opt = helper.make_value_info("opt0", helper.make_optional_type_proto(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))))
    m = _model([helper.make_node("Loop", ["M", "c", "opt0"], ["res"], body=body)],
               [opt], [_seq_vi("res", None)], inits, opset=16)
    feeds = {
             "opt0": [np.array([7.0], np.float32)] if present else None}
    _compare(m, feeds)


def test_sequences_save_load_and_show(tmp_path):
    g = ob.convert(_build_and_read_model())
    ob.save(g, tmp_path / "seq.obir")
    again = ob.load(tmp_path / "seq.obir")
    assert [v.kind for v in again.nodes[0].outputs] == ["sequence"]
    assert "seq<f32[2,3]>" in ob.format_graph(again)


def test_the_simulator_refuses_sequences_by_name():
    from opbridge.errors import SimulatorError

    # the position is an input: at a constant one, conversion takes the tensor itself
    m = _model([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                helper.make_node("SequenceAt", ["s", "q"], ["y"])],
               [_vi("a", [2]), _vi("b", [2]), _vi("q", [], I64)], [_vi("y", [2])])
    with pytest.raises(SimulatorError, match=r"value 's' is a sequence; the simulator compiles tensors only"):
        ob.compile(ob.convert(m))


def _concat_of_input(axis, new_axis=0):
    node = helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis, name="cat")
    return _model([node], [_seq_vi("s", None)], [_vi("y", None)])


def test_concat_of_a_sequence_input_without_shape_says_to_give_it(tmp_path, capsys):
    """The element shape of an undeclared sequence input is unknown: the CLI names the node and
    the input, and says which --input-shape gives it; given, the result is onnxruntime's."""
    import onnx

    from opbridge.cli import main

    model = _concat_of_input(axis=1)
    path = tmp_path / "cat.onnx"
    onnx.save(model, str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "cat.obir")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0] == ("error: [onnx] node 'cat' (ConcatFromSequence): axis 1 joins the tensors along "
                        "one of their dims, but the tensors of sequence 's' (a graph input) have no known shape")
    assert lines[-1] == ("hint: give the shape of its tensors: --input-shape s=2,3 on the command line "
                         "(input_shapes={'s': (2, 3)} in Python)")
    assert main(["convert", str(path), "--input-shape", "s=2,3", "-o", str(tmp_path / "cat.obir")]) == 0
    g = ob.load(str(tmp_path / "cat.obir"))
    assert g.inputs[0].shape == (2, 3)
    feeds = {"s": [np.arange(6, dtype=np.float32).reshape(2, 3), -np.ones((2, 3), np.float32)]}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ob.interpret(g, feeds)["y"], want)


def test_concat_of_an_empty_sequence_says_to_insert_first():
    nodes = [helper.make_node("SequenceEmpty", [], ["s"], dtype=F),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")]
    with pytest.raises(ob.MappingError, match=r"node 'cat' \(ConcatFromSequence\): axis 0 joins .* sequence "
                                               r"'s' \(made by SequenceEmpty\) have no known shape") as err:
        ob.convert(_model(nodes, [], [_vi("y", None)]))
    assert "SequenceInsert" in err.value.hint


def test_concat_shape_function_refuses_an_unknown_element_shape_with_a_hint():
    """Built by hand (no mapping to catch it first): a ShapeError naming the node, not a failed
    shape function."""
    b = ob.GraphBuilder("g")
    s = b.op("SequenceEmpty", [], dtype="f32")
    with pytest.raises(ob.ShapeError, match=r"node 'cat' \(ConcatFromSequence\): axis 0 joins .* the "
                                             r"sequence's tensors are 0-d as far as the graph knows "
                                             r"\(scalars, or of no known shape") as err:
        b.op("ConcatFromSequence", [s], axis=0, name="cat")
    assert "--input-shape SEQ=2,3" in err.value.hint and "shape inference failed" not in str(err.value)


def test_a_sequence_input_shape_must_match_its_declared_rank():
    model = _model([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                   [_seq_vi("s", [2, "N"])], [_vi("y", None)])
    with pytest.raises(ob.ShapeError, match=r"input 's' has rank 2 \(\[2,N\]\); input_shapes gives 3 dims"):
        ob.convert(model, input_shapes={"s": (2, 3, 4)})
    g = ob.convert(model, input_shapes={"s": (2, 5)})
    feeds = {"s": [np.ones((2, 5), np.float32), np.zeros((2, 5), np.float32)]}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ob.interpret(g, feeds)["y"], want)


def _at_of_input(shape):
    nodes = [helper.make_node("SequenceAt", ["s", "p"], ["t"], name="at"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    return _model(nodes, [_seq_vi("s", shape)], [_vi("y", None)],
                  [numpy_helper.from_array(np.array(-1, np.int64), "p")])


@pytest.mark.parametrize("model,what", [
    (lambda: _at_of_input(None), "the tensor it picks is typed by the sequence's tensors"),
    (lambda: _concat_of_input(axis=0, new_axis=1), "the result is typed by the sequence's tensors"),
], ids=["SequenceAt", "ConcatFromSequence-new_axis"])
def test_reading_an_undeclared_sequence_input_names_it(model, what):
    """Without a declared shape the graph would type what these ops give as 0-d and fail at run
    time; they say so at conversion, naming the input, and run as onnxruntime once it is given."""
    m = model()
    with pytest.raises(ob.MappingError, match=rf"{what}, but the tensors of sequence 's' \(a graph input\) "
                                               r"have no known shape") as err:
        ob.convert(m)
    assert "--input-shape s=2,3" in err.value.hint
    feeds = {"s": [np.arange(6, dtype=np.float32).reshape(2, 3) - 2, np.ones((2, 3), np.float32)]}
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ob.interpret(ob.convert(m, input_shapes={"s": (2, 3)}), feeds)["y"], want)


def test_a_declared_sequence_of_scalars_is_read_as_it_is():
    """A sequence input declared to hold 0-d tensors has shape () too, and is no error."""
    m = _at_of_input([])
    feeds = {"s": [np.array(-2.0, np.float32), np.array(3.0, np.float32)]}
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ob.interpret(ob.convert(m), feeds)["y"], want)


def test_concat_of_declared_scalars_along_an_axis_says_only_stacking_joins_them(tmp_path, capsys):
    """0-d tensors have no axis to join along (onnxruntime refuses the model too): the error says
    they are declared 0-d and that new_axis=1 stacks them, not to give a shape the input cannot
    take; with new_axis=1 the result is onnxruntime's."""
    import onnx

    from opbridge.cli import main

    def model(new_axis):
        node = helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=new_axis, name="cat")
        return _model([node], [_seq_vi("s", [])], [_vi("y", None)])

    with pytest.raises(Exception, match=r"Invalid value of attribute 'axis'"):  # onnxruntime's own type
        ort.InferenceSession(model(0).SerializeToString())
    path = tmp_path / "cat.onnx"
    onnx.save(model(0), str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "cat.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "error: [onnx] node 'cat' (ConcatFromSequence): axis 0 joins the tensors along one of their dims, "
        "but the tensors of sequence 's' (a graph input) are declared 0-d",
        "hint: 0-d tensors have no dim to join along: only new_axis=1 stacks them (into a 1-d tensor); or "
        "declare the tensors' real shape in the model"]
    feeds = {"s": [np.array(1.5, np.float32), np.array(-2.0, np.float32)]}
    want = ort.InferenceSession(model(1).SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ob.interpret(ob.convert(model(1)), feeds)["y"], want)


def test_concatenating_an_empty_sequence_at_run_time_says_what_to_check():
    """onnxruntime refuses an empty sequence too; the interpreter names the node and says where to
    look."""
    m = _concat_of_input(axis=0)
    with pytest.raises(Exception, match=r"Name:'cat' .*Must have 1 or more inputs"):  # onnxruntime's own type
        ort.InferenceSession(m.SerializeToString()).run(None, {"s": []})
    g = ob.convert(m, input_shapes={"s": (2, 3)})
    with pytest.raises(InterpretError, match=r"node 'cat' \(ConcatFromSequence\): the sequence is empty") as err:
        ob.interpret(g, {"s": []})
    assert "check what fills it before this node" in err.value.hint
