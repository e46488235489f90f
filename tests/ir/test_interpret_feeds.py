"""Feeds of sequence and optional graph inputs: every bad feed is an InterpretError that names
the input (and the item) and says what it wants; good feeds are cast as tensor feeds are and
give what onnx.reference gives for the same model."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob


def _graph(kind: str) -> ob.Graph:
    """One input ``s`` of ``kind`` (f32 tensors) and an op that reads it."""
    b = ob.GraphBuilder(f"feeds_{kind}")
    s = b.input("s", "f32", ("K",), kind=kind)
    if kind == "sequence":
        b.output(b.op("ConcatFromSequence", [s], axis=0))
    else:
        b.output(b.op("OptionalHasElement", [s]))
    return b.build(require_static=False)


#: (kind, feed, the message's pattern): the input named, with the item and what is wanted
BAD = {
    "sequence-of-strings": ("sequence", ["a", "b"],
                            r"item 0 of graph input 's' \(a sequence of f32\) wants f32, got <U1"),
    "sequence-item-ragged": ("sequence", [np.zeros(2, np.float32), [[1.0], [2.0, 3.0]]],
                             r"item 1 of graph input 's' \(a sequence of f32\) wants an array of f32"),
    "sequence-item-object": ("sequence", [np.array([{}], dtype=object)],
                             r"item 0 of graph input 's' .* wants f32, got object"),
    "sequence-none": ("sequence", None, r"graph input 's' \(a sequence of f32\) was fed None"),
    "sequence-an-array": ("sequence", np.zeros((2, 2), np.float32),
                          r"graph input 's' \(a sequence of f32\) was fed a ndarray"),
    "sequence-a-string": ("sequence", "ab", r"graph input 's' \(a sequence of f32\) was fed a str"),
    "optional-string": ("optional", "x", r"graph input 's' \(a optional of f32\) wants f32, got <U1"),
    "optional-ragged": ("optional", [[1.0], [2.0, 3.0]],
                        r"graph input 's' \(a optional of f32\) wants an array of f32"),
    "optional-sequence-a-dict": ("optional_sequence", {"a": 1},
                                 r"graph input 's' \(a optional_sequence of f32\) was fed a dict"),
    "optional-sequence-item-string": ("optional_sequence", [np.ones(1, np.float32), "z"],
                                      r"item 1 of graph input 's' .* wants f32, got <U1"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_container_feed_is_a_clean_error(case: str) -> None:
    kind, feed, pattern = BAD[case]
    with pytest.raises(ob.InterpretError, match=pattern) as err:
        ob.interpret(_graph(kind), {"s": feed})
    assert err.value.hint  # says what to feed


def _onnx_concat_from_sequence() -> onnx.ModelProto:
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)
    return helper.make_model(helper.make_graph([node], "g", [seq], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("items", [
    [np.array([1.5, -2.0]), np.array([3.0])],            # float64 items: cast to f32
    [np.array([1, 2], np.int32), np.array([True])],      # safe casts, as for a tensor feed
    [[0.25, 0.5], (1.0,)],                               # lists numpy makes arrays of
], ids=["f64", "i32-bool", "lists"])
def test_good_sequence_feed_matches_onnx_reference(items: list[Any]) -> None:
    got = next(iter(ob.interpret(_graph("sequence"), {"s": items}).values()))
    want = ReferenceEvaluator(_onnx_concat_from_sequence()).run(
        None, {"s": [np.asarray(a, np.float32) for a in items]})[0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind,feed,want", [
    ("optional", None, False), ("optional", np.zeros(3), True),
    ("optional_sequence", None, False), ("optional_sequence", [], True),
], ids=["optional-none", "optional-array", "optional-sequence-none", "optional-sequence-empty"])
def test_good_optional_feed(kind: str, feed: Any, want: bool) -> None:
    """An empty optional is None; an empty sequence in an optional is still an element (ONNX
    OptionalHasElement: true whenever the optional holds a value)."""
    got = next(iter(ob.interpret(_graph(kind), {"s": feed}).values()))
    assert bool(got) is want
