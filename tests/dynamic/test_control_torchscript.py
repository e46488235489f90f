"""Scripted TorchScript control flow (prim::If / prim::Loop on run-time values) and scalar
forward() arguments: export, convert, run with ob.interpret, compare with torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError, UnsupportedOpError

torch = pytest.importorskip("torch", reason="torch is the reference (and the exporter) for these tests")

from ..torchscript import _scripted as m  # noqa: E402  (needs torch)


def _export(tmp_path: Path, module: Any, example: tuple[Any, ...]) -> Path:
    from opbridge.export.torchscript import export_torchscript

    return export_torchscript(module, example, tmp_path / "m.ts.json", mode="script")


def _check(graph: Any, module: Any, x: np.ndarray, *args: Any) -> None:
    """ob.interpret on (x, args) against the module itself."""
    feeds = {"x": x}
    names = [v.name for v in graph.inputs][1:]
    feeds.update({k: np.asarray(a) for k, a in zip(names, args)})
    with torch.no_grad():
        want = module(torch.from_numpy(x), *args).numpy()
    got = list(ob.interpret(graph, feeds).values())[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


POS = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
NEG = -POS - 0.5


def test_tensor_condition_takes_both_branches(tmp_path: Path) -> None:
    path = _export(tmp_path, m.Branchy(), (torch.from_numpy(POS),))
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    assert any(n["kind"] == "prim::If" and len(n["blocks"]) == 2 for n in doc["nodes"])
    g = ob.convert(path)
    assert [n.op for n in g.nodes if n.op == "If"] == ["If"]
    for x in (POS, NEG):
        _check(g, m.Branchy(), x)


def test_int_argument_is_a_graph_input(tmp_path: Path) -> None:
    path = _export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), 3))
    entry = json.loads(path.read_text())["inputs"][1]
    assert entry == {"name": "n", "dtype": "int64", "shape": [], "type": "int"}
    g = ob.convert(path)
    assert (g.inputs[1].dtype, g.inputs[1].shape) == ("i64", ())
    for n in (0, 2, 3, 7):
        _check(g, m.IntBranch(), POS, n)


@pytest.mark.parametrize("cls", [m.ForLoop, m.WhileLoop, m.NestedIfInLoop])
def test_runtime_loops(tmp_path: Path, cls: Any) -> None:
    g = ob.convert(_export(tmp_path, cls(), (torch.from_numpy(POS), 2)))
    assert any(n.op == "Loop" for n in g.nodes)
    for n in (0, 1, 2, 5):
        for x in (POS, NEG, POS * 8):
            _check(g, cls(), x, n)


def test_input_values_bakes_the_argument_in(tmp_path: Path) -> None:
    """A known trip count unrolls and a known condition picks its branch, as before."""
    path = _export(tmp_path, m.NestedIfInLoop(), (torch.from_numpy(POS), 2))
    g = ob.convert(path, input_values={"n": 3})
    assert [v.name for v in g.inputs] == ["x"]
    assert not any(n.op == "Loop" for n in g.nodes)
    assert sum(n.op == "If" for n in g.nodes) == 3
    for x in (POS, NEG, POS * 8):
        _check(g, lambda t: m.NestedIfInLoop()(t, 3), x)
    g = ob.convert(_export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), 3)), input_values={"n": 1})
    assert not any(n.op == "If" for n in g.nodes)
    _check(g, lambda t: m.IntBranch()(t, 1), POS)


def test_float_and_bool_arguments(tmp_path: Path) -> None:
    path = _export(tmp_path, m.ScalarArgs(), (torch.from_numpy(POS), 1.5, True))
    g = ob.convert(path)
    assert [(v.dtype, v.shape) for v in g.inputs[1:]] == [("f64", ()), ("bool", ())]
    for s, flag in ((1.5, True), (-2.0, False), (0.25, True)):
        _check(g, m.ScalarArgs(), POS, s, flag)


def test_list_argument_needs_its_value(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32)
    path = _export(tmp_path, m.ListArg(), (torch.from_numpy(x), [2, 3]))
    assert json.loads(path.read_text())["inputs"][1]["shape"] == [2]
    with pytest.raises(OpbridgeError, match=r"node 'reshape\S*' .*computed at run time"):
        ob.convert(path)
    g = ob.convert(path, input_values={"shape": [3, 2]})
    got = list(ob.interpret(g, {"x": x}).values())[0]
    np.testing.assert_array_equal(got, m.ListArg()(torch.from_numpy(x), [3, 2]).numpy())


def test_inplace_write_in_a_block_is_refused(tmp_path: Path) -> None:
    path = _export(tmp_path, m.InplaceInLoop(), (torch.from_numpy(POS), 2))
    with pytest.raises(UnsupportedOpError, match=r"aten::add_ inside the block of prim::Loop") as info:
        ob.convert(path)
    assert info.value.node is not None and "block0" in info.value.node
