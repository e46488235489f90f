"""Sequences whose tensors conversion knows one by one (built by SequenceConstruct / Insert /
Erase at constant positions): SequenceAt, SequenceLength and ConcatFromSequence take the tensors
themselves, each with its own shape, against onnxruntime (and torch for torch.tensor_split,
which torch.onnx writes as a Loop filling a sequence)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from tests.conftest import requires_ort, requires_torch

pytestmark = requires_ort

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(pos_insert: int, pos_erase: int, pos_at: int, new_axis: int) -> object:
    """a (1, 3), b (2, 3) and c (3, 3) of different lengths in one sequence."""
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "c", "pi"], ["s2"]),
        helper.make_node("SequenceErase", ["s2", "pe"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "pa"], ["picked"]),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["joined"], axis=0, new_axis=new_axis),
    ]
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("pi", pos_insert), ("pe", pos_erase), ("pa", pos_at))]
    ins = [helper.make_tensor_value_info(k, F, [n, 3]) for k, n in (("a", 1), ("b", 2), ("c", 3))]
    outs = [helper.make_tensor_value_info("picked", F, None), helper.make_tensor_value_info("n", I64, []),
            helper.make_tensor_value_info("joined", F, None)]
    g = helper.make_graph(nodes, "seq", ins, outs, initializer=consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("pi", "pe", "pa"), [(0, -1, 0), (1, 0, -1), (2, 2, 1), (-2, -3, -2)],
                         ids=["front,last,0", "middle,first,-1", "end,2,1", "negative"])
def test_known_sequence_matches_onnxruntime(pi: int, pe: int, pa: int) -> None:
    import onnxruntime as ort

    model = _model(pi, pe, pa, new_axis=0)
    rng = np.random.default_rng(1)
    feeds = {k: rng.standard_normal((n, 3)).astype(np.float32) for k, n in (("a", 1), ("b", 2), ("c", 3))}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    g = ob.convert(model)
    assert not [n.op for n in g.nodes if n.op.startswith("Sequence")]
    assert [v.shape for v in g.outputs] == [w.shape for w in want]  # static: each tensor's own
    for got, ref in zip(ob.interpret(g, feeds).values(), want):
        np.testing.assert_array_equal(got, ref)


def test_known_sequence_stacked_new_axis() -> None:
    """new_axis=1 stacks: tensors of one shape (the a/b/c of the first case are cut to one row)."""
    import onnxruntime as ort

    model = _model(1, 0, 0, new_axis=1)
    feeds = {k: np.full((n, 3), i, np.float32) for i, (k, n) in enumerate((("a", 1), ("b", 2), ("c", 3)))}
    for node in model.graph.node:  # make every tensor (1, 3): one row of each
        if node.op_type == "SequenceConstruct":
            node.input[:] = ["a", "a"]
        if node.op_type == "SequenceInsert":
            node.input[1] = "a"
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = list(ob.interpret(ob.convert(model), feeds).values())
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@requires_torch
def test_tensor_split_export_converts_with_static_shapes(tmp_path: Path) -> None:
    """torch.onnx writes tensor_split as a Loop inserting each piece into a sequence; the pieces
    (1 and 4 long here) come back with their own lengths, so the sum with a (5,)-long tensor
    types (MViT-V2's pooling splits its class token off so)."""
    import onnxruntime as ort
    import torch

    class Split(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = torch.tensor_split(x, (1,), dim=2)
            return torch.cat((a, b * 2), dim=2) + torch.arange(5.0).reshape(1, 1, 5, 1)

    x = torch.randn(1, 2, 5, 3)
    path = tmp_path / "split.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Split(), (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    g = ob.convert(str(path))
    assert g.outputs[0].shape == (1, 2, 5, 3)
    got = list(ob.interpret(g, {"x": x.numpy()}).values())[0]
    np.testing.assert_allclose(got, Split()(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(got, ort.InferenceSession(str(path)).run(None, {"x": x.numpy()})[0], rtol=1e-6)


def _one_element_concat(axis: int) -> object:
    nodes = [helper.make_node("SequenceConstruct", ["a"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis)]
    g = helper.make_graph(nodes, "one", [helper.make_tensor_value_info("a", F, [4])],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_one_known_tensor_joined_keeps_the_outputs_name_and_checks_the_axis() -> None:
    """ConcatFromSequence of a one-tensor sequence: the output is the model's 'y' (not the
    input's name), and an axis the tensor lacks is refused, as onnxruntime refuses it."""
    import onnxruntime as ort

    x = np.arange(4, dtype=np.float32)
    g = ob.convert(_one_element_concat(0))
    assert [o.name for o in g.outputs] == ["y"]
    np.testing.assert_array_equal(ob.interpret(g, {"a": x})["y"], x)
    bad = _one_element_concat(5)
    with pytest.raises(Exception):  # noqa: B017 - the outside reference refuses it
        ort.InferenceSession(bad.SerializeToString()).run(None, {"a": x})
    with pytest.raises(ob.OpbridgeError):
        ob.convert(bad)


def test_an_empty_constant_position_is_left_to_sequence_at() -> None:
    """A constant position with no element (a malformed model) is not read as an index: the
    conversion keeps SequenceAt (its own checks), no IndexError from the known-tensor path."""
    nodes = [helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
             helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    g = helper.make_graph(nodes, "empty_pos", [helper.make_tensor_value_info("a", F, [2])],
                          [helper.make_tensor_value_info("y", F, None)],
                          initializer=[numpy_helper.from_array(np.zeros((0,), np.int64), "p")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    try:
        graph = ob.convert(model)
    except ob.OpbridgeError as err:
        assert "bug in that mapping" not in (err.hint or "")
    else:
        assert [n.op for n in graph.nodes if n.op == "SequenceAt"] == ["SequenceAt"]
