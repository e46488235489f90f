"""MapContext.map_subgraph, the public hook for nested graphs, used by a plugin; and the rule
that built-in mappings use public hooks only (no private converter access)."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.mappers import DEFAULT_MAPPINGS, Framework

F = TensorProto.FLOAT
MAPPERS = Path(ob.__file__).parent / "mappers"

#: A plugin that maps If with a condition known only at run time: both branches are mapped with
#: the public hook and the outputs selected with Where (the built-in If needs a constant one).
PLUGIN = '''
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "If", since_opset=1, override=True)
def if_at_run_time(node, g):
    cond = g.input(0)
    then = g.map_subgraph(node.get_attr("then_branch"), [], prefix=f"{node.name}/then/")
    other = g.map_subgraph(node.get_attr("else_branch"), [], prefix=f"{node.name}/else/")
    return [g.op("Where", [cond, t, e]) for t, e in zip(then, other)]
'''


def _if_model() -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    # the branches read x and w from the enclosing graph (ONNX scoping) and have an initializer
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["xt"]), helper.make_node("Relu", ["xt"], ["t"])],
        "then", [], [vi("t", F, [2, 3])],
        initializer=[helper.make_tensor("two", F, [], [2.0])])
    else_g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Neg", ["s"], ["e"])],
        "else", [], [vi("e", F, [2, 3])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(
        nodes, "m", [vi("x", F, [2, 3]), vi("c", TensorProto.BOOL, [])], [vi("y", F, [2, 3])],
        initializer=[helper.make_tensor("w", F, [3], [0.5, -1.0, 2.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def restore_if() -> Iterator[None]:
    """The plugin overrides the built-in If in the default registry: put the built-in back."""
    old = {v: DEFAULT_MAPPINGS.find(Framework.ONNX, "If", "", v) for v in DEFAULT_MAPPINGS.versions("onnx", "If")}
    yield
    for v, e in old.items():
        assert e is not None
        DEFAULT_MAPPINGS.register(Framework.ONNX, "If", e.fn, since_opset=v, override=True, defined_at=e.defined_at)


@pytest.mark.parametrize("cond", [True, False], ids=["cond=true", "cond=false"])
def test_plugin_maps_if_with_run_time_condition_through_map_subgraph(tmp_path, restore_if, cond):
    plugin = tmp_path / "if_plugin.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    model = _if_model()
    g = ob.convert(model, plugins=[plugin])
    assert "Where" in {n.op for n in g.nodes} and {n.origin.name for n in g.nodes} == {"branch"}
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    feeds = {"x": x, "c": np.array(cond)}
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(ob.interpret(g, feeds)["y"], ref, rtol=1e-6)


def test_map_subgraph_refuses_a_wrong_number_of_inputs():
    reg = ob.mappers.MappingRegistry()

    def bad(node, g):
        return g.map_subgraph(node.get_attr("then_branch"), [g.input(0)])

    reg.register("onnx", "If", bad)
    for e in DEFAULT_MAPPINGS.entries("onnx"):
        if e.op_type != "If":
            reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    with pytest.raises(ob.MappingError, match=r"\[onnx\] node 'branch' \(If\): its subgraph 'then' takes 0 "
                                              r"inputs, 1 given"):
        ob.convert(_if_model(), registry=reg)


def _private_accesses(path: Path) -> list[str]:
    """``x._name`` (x not self/cls) and imports of the converter or of underscore names."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
            if not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
                found.append(f"{path.name}:{n.lineno}: .{n.attr}")
        elif isinstance(n, ast.ImportFrom) and n.module != "__future__":
            parts = (n.module or "").split(".")
            names = [a.name for a in n.names]
            if parts[-1] == "converter" or any(p.startswith("_") for p in parts + names):
                found.append(f"{path.name}:{n.lineno}: from {'.' * n.level}{n.module} import {', '.join(names)}")
    return found


@pytest.mark.parametrize("family", ["onnx", "caffe", "torchscript"])
def test_builtin_mappings_use_public_hooks_only(family):
    files = sorted((MAPPERS / family).rglob("*.py"))
    assert files
    bad = [hit for f in files for hit in _private_accesses(f)]
    assert not bad, "built-in mappings must use what a plugin can use (MapContext's public API): " + "; ".join(bad)


def test_private_access_check_catches_g_conv(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def m(node, g):\n    return g._conv.values\n")
    assert _private_accesses(f) == ["m.py:2: ._conv"]
