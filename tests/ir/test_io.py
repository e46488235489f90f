"""The .obir file format: round trips and bad files."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import opbridge as ob


def _graph():
    b = ob.GraphBuilder("rt")
    x = b.input("x", "f32", (2, 3))
    c = b.constant("c", np.arange(3, dtype=np.float32))
    b.output(b.op("Relu", [b.op("Add", [x, c], name="add")], name="relu", outputs=["y"]))
    return b.build()


def test_round_trip(tmp_path):
    g = _graph()
    p = tmp_path / "m.obir"
    ob.save(g, p)
    g2 = ob.load(p)
    assert [n.op for n in g2.nodes] == ["Add", "Relu"]
    assert [(v.name, v.dtype, v.shape) for v in g2.inputs] == [("x", "f32", (2, 3))]
    assert g2.nodes[1].origin == g.nodes[1].origin
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(ob.interpret(g, {"x": x})["y"], ob.interpret(g2, {"x": x})["y"])


def test_bf16_and_bool_constants_round_trip(tmp_path):
    b = ob.GraphBuilder("dt")
    x = b.input("x", "bf16", (3,))
    c = b.constant("c", np.array([1, 2, 3], dtype=ml_dtypes.bfloat16))
    b.constant("flags", np.array([True, False]))
    b.output(b.op("Add", [x, c]))
    g = b.build()
    ob.save(g, tmp_path / "d.obir")
    g2 = ob.load(tmp_path / "d.obir")
    assert g2.constants["c"].data.dtype == ml_dtypes.bfloat16
    assert g2.constants["flags"].data.dtype == np.bool_


def test_truncated_file(tmp_path):
    p = tmp_path / "m.obir"
    ob.save(_graph(), p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ob.ModelFormatError, match="not a valid .obir file"):
        ob.load(p)


def test_not_opbridge_safetensors(tmp_path):
    p = tmp_path / "w.safetensors"
    save_file({"a": np.zeros(2, np.float32)}, str(p))
    with pytest.raises(ob.ModelFormatError, match="not an opbridge .obir"):
        ob.load(p)


def test_newer_version(tmp_path):
    p = tmp_path / "new.obir"
    save_file({}, str(p), metadata={"format": "opbridge.obir", "format_version": "99", "graph": "{}"})
    with pytest.raises(ob.ModelFormatError, match="format version 99; this opbridge reads up to 2"):
        ob.load(p)


def test_unknown_op_in_file(tmp_path):
    g = _graph()
    tensors = {}
    from opbridge.ir.io import graph_to_json

    doc = graph_to_json(g, tensors)
    doc["nodes"][1]["op"] = "MyCustom"
    p = tmp_path / "c.obir"
    save_file(tensors, str(p), metadata={"format": "opbridge.obir", "format_version": "1",
                                         "graph": json.dumps(doc)})
    with pytest.raises(ob.UnsupportedOpError, match="'MyCustom' is not defined"):
        ob.load(p)


def test_junk_file(tmp_path):
    p = tmp_path / "junk.obir"
    p.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(ob.ModelFormatError):
        ob.load(p)


def test_save_is_atomic_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "m.obir"
    ob.save(_graph(), p)
    before = p.read_bytes()

    from opbridge.ir import tensorfile

    def boom(path, tensors, metadata=None):
        with open(path, "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(tensorfile, "write", boom)
    with pytest.raises(KeyboardInterrupt):
        ob.save(_graph(), p)
    assert p.read_bytes() == before
    assert [x.name for x in tmp_path.iterdir()] == ["m.obir"]


def test_non_finite_float_attrs_are_strict_json(tmp_path):
    b = ob.GraphBuilder("clip")
    x = b.input("x", "f32", (3,))
    b.output(b.op("Clip", [x], name="clip"))  # min/max default to -inf/+inf
    p = tmp_path / "c.obir"
    ob.save(b.build(), p)
    from safetensors import safe_open

    text = safe_open(str(p), framework="numpy").metadata()["graph"]
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    g = ob.load(p)
    assert g.nodes[0].attrs["min"] == float("-inf") and g.nodes[0].attrs["max"] == float("inf")


def test_branch_constant_named_like_another_graphs_constant_is_refused(tmp_path):
    """Sub-graph constants are stored beside the enclosing graph's by name: two of one name
    with other data would load as one, so saving refuses them (naming the constant)."""
    from opbridge.ir.graph import GraphBuilder

    def branch(val: float, name: str):
        b = GraphBuilder(name)
        x = b.input("bx", "f32", (3,))
        b.output(b.op("Add", [x, b.constant("c", np.full(3, val, np.float32))], name="add"))
        return b.build()

    b = GraphBuilder("g")
    x, cond = b.input("x", "f32", (3,)), b.input("cond", "bool", ())
    y = b.op("Add", [x, b.constant("c", np.full(3, 100, np.float32))], name="outer")
    b.output(b.op("If", [cond, y], name="if", then_branch=branch(1, "t"), else_branch=branch(2, "e")))
    with pytest.raises(ob.GraphError, match="constant 'c' of graph 't' has the name of another"):
        ob.save(b.build(), str(tmp_path / "g.obir"))
