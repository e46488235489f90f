"""The parser's functionalisation on a hand-written file (no torch): a write through a view of a
view reaches the base and a view made before the write; the expected values are numpy's own
in-place semantics on the same steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import opbridge as ob
from opbridge.parsers.torchscript_json import parse_torchscript_json

_HEAD = {"format": "opbridge.torchscript-json", "version": 1}


def _const(name: str, value: object, typ: str) -> dict[str, object]:
    return {"name": f"c_{name}", "kind": "prim::Constant", "inputs": [], "outputs": [name],
            "types": [typ], "value": value}


def _node(kind: str, ins: list[str], out: str) -> dict[str, object]:
    return {"name": out + "_node", "kind": kind, "inputs": ins, "outputs": [out], "types": ["Tensor"]}


def _file(tmp_path: Path) -> Path:
    # y = x.clone(); col = y[:, 1]; inner = y[1:3][:, ::2]; inner.fill_(5.0); y.mul_(2.0)
    # outputs: col + 0 (col made before both writes), y
    nodes = [
        _const("i0", 0, "int"), _const("i1", 1, "int"), _const("i2", 2, "int"),
        _const("i3", 3, "int"), _const("none", None, "NoneType"), _const("f5", 5.0, "float"),
        _const("f2", 2.0, "float"), _const("f0", 0.0, "float"),
        _node("aten::clone", ["x", "none"], "y"),
        _node("aten::select", ["y", "i1", "i1"], "col"),
        _node("aten::slice", ["y", "i0", "i1", "i3", "i1"], "rows"),
        _node("aten::slice", ["rows", "i1", "none", "none", "i2"], "inner"),
        _node("aten::fill_", ["inner", "f5"], "filled"),
        _node("aten::mul_", ["y", "f2"], "doubled"),
        _node("aten::add", ["col", "f0", "i1"], "col_out"),
    ]
    doc = {**_HEAD, "inputs": [{"name": "x", "dtype": "float32", "shape": [4, 5]}],
           "outputs": [{"name": "col_out", "dtype": "float32", "shape": [4]},
                       {"name": "y", "dtype": "float32", "shape": [4, 5]}],
           "nodes": nodes}
    path = tmp_path / "w.ts.json"
    path.write_text(json.dumps(doc))
    return path


def test_writes_reach_the_base_and_earlier_views(tmp_path: Path) -> None:
    path = _file(tmp_path)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    y = x.copy()
    col = y[:, 1]                 # numpy views alias like torch's
    y[1:3][:, ::2].fill(5.0)
    y *= 2.0
    expected = [col + 0.0, y]
    g = ob.convert(str(path))
    got = list(ob.interpret(g, {"x": x}).values())
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_written_graph_output_is_renamed_to_its_newest_value(tmp_path: Path) -> None:
    g = parse_torchscript_json(_file(tmp_path))
    assert g.outputs[0].name == "col_out"
    assert g.outputs[1].name != "y"  # y was written after it was made
    kinds = [f"{n.domain}::{n.op_type}" for n in g.nodes]
    assert kinds.count("opbridge::update_view") == 1 and kinds.count("opbridge::positions") == 1
