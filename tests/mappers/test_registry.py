"""The mapping registry: registration, duplicates, versions, domains, the builder, pre-flight."""

from __future__ import annotations

import json
import pkgutil
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge.mappers.onnx as onnx_mappers
from opbridge.errors import RegistryError, UnsupportedOpError
from opbridge.ir import get_op, interpret
from opbridge.mappers import (
    DEFAULT_MAPPINGS,
    Framework,
    ImplyType,
    MappingError,
    MappingRegistry,
    OriginNode,
    convert_origin_graph,
    mapping,
    register_custom_op,
)
from opbridge.parsers.onnx import parse_model


def _relu(node, g):
    return g.op("Relu", [g.input(0)])


def _model(nodes, opsets, inputs=("x",), outputs=("y",)):
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])


def test_duplicate_names_both_places():
    reg = MappingRegistry()

    @mapping(Framework.ONNX, "Relu", registry=reg)
    def first(node, g):
        return _relu(node, g)

    first_line = first.__code__.co_firstlineno
    with pytest.raises(RegistryError) as info:
        @mapping(Framework.ONNX, "Relu", registry=reg)
        def second(node, g):  # noqa: F841
            return _relu(node, g)
    msg = str(info.value)
    sites = re.findall(r"test_registry\.py:(\d+)", msg)
    assert len(sites) == 2 and int(sites[0]) == first_line and int(sites[1]) > first_line, msg
    assert "override=True" in msg


def test_override_replaces():
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu)

    def other(node, g):
        return _relu(node, g)

    reg.register("onnx", "Relu", other, override=True)
    assert reg.lookup("onnx", "Relu", "", 13).fn is other


@pytest.mark.parametrize("opset,expected", [(6, 6), (12, 6), (13, 13), (21, 13)],
                         ids=["opset=6", "opset=12", "opset=13", "opset=21"])
def test_versioned_lookup_picks_highest_not_above(opset, expected):
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu, since_opset=6)
    reg.register("onnx", "Relu", _relu, since_opset=13)
    assert reg.lookup("onnx", "Relu", "", opset).since == expected


def test_no_version_below_opset_is_an_error_listing_versions():
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu, since_opset=6)
    reg.register("onnx", "Relu", _relu, since_opset=13)
    with pytest.raises(UnsupportedOpError, match=r"Relu: no mapping version <= 5; registered since-versions: 6, 13"):
        reg.lookup("onnx", "Relu", "", 5)


@pytest.mark.parametrize("domain,expected", [("com.example", "pinned"), ("org.other", "plain")],
                         ids=["domain=pinned", "domain=other"])
def test_domain_pinning_wins(domain, expected):
    reg = MappingRegistry()

    def plain(node, g):
        return _relu(node, g)

    def pinned(node, g):
        return _relu(node, g)

    reg.register("onnx", "FooScale", plain)
    reg.register("onnx", "com.example::FooScale", pinned)
    fn = reg.lookup("onnx", "FooScale", domain, 1).fn
    assert fn is {"pinned": pinned, "plain": plain}[expected]


def test_plain_registration_matches_any_declared_domain():
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu)
    node = helper.make_node("MyRelu", ["x"], ["y"], name="r", domain="com.vendor")
    reg.register("onnx", "MyRelu", _relu)
    m = _model([node], {"": 17, "com.vendor": 1})
    g = convert_origin_graph(parse_model(m), registry=reg)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(interpret(g, {"x": x})["y"], np.maximum(x, 0))


def test_custom_op_builder_one_to_one_and_imply_type():
    reg = MappingRegistry()
    seen = {}

    def parse(src, dst):
        seen["alpha"] = src.get_attr("alpha", None)

    (register_custom_op("Relu", registry=reg).framework_type(Framework.ONNX)
        .origin_op_type("com.example::VendorRelu").parse_params_by_operator_fn(parse)
        .imply_type(ImplyType.CPU))
    node = helper.make_node("VendorRelu", ["x"], ["y"], name="vr", domain="com.example", alpha=0.5)
    g = convert_origin_graph(parse_model(_model([node], {"": 17, "com.example": 1})), registry=reg)
    assert seen == {"alpha": 0.5}
    (n,) = g.nodes
    assert (n.op, n.origin.framework, n.origin.op_type, n.origin.name) == ("Relu", "onnx", "VendorRelu", "vr")
    assert n.placement == "cpu"  # on the node, not on the shared Relu definition
    assert get_op("Relu").default_placement == "tpu"
    assert g.outputs[0].name == "y"


def test_custom_op_builder_duplicate_raises_with_both_places():
    reg = MappingRegistry()
    register_custom_op("Relu", registry=reg).framework_type("onnx").origin_op_type("X")
    with pytest.raises(RegistryError, match=r"test_registry\.py:\d+.*test_registry\.py:\d+"):
        register_custom_op("Relu", registry=reg).framework_type("onnx").origin_op_type("X")


def test_preflight_reports_every_unknown_op_at_once():
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu)
    nodes = [
        helper.make_node("FooScale", ["x"], ["a"], name="foo_node", domain="com.example"),
        helper.make_node("Relu", ["a"], ["b"], name="ok"),
        helper.make_node("BarShift", ["b"], ["y"], name="bar_node", domain="com.example"),
    ]
    m = _model(nodes, {"": 17, "com.example": 2})
    with pytest.raises(UnsupportedOpError) as info:
        convert_origin_graph(parse_model(m), registry=reg)
    msg = str(info.value)
    assert "2 unsupported op types" in msg
    for needle in ("com.example::FooScale (opset 2)", "'foo_node'", "com.example::BarShift (opset 2)",
                   "'bar_node'",
                   '@opbridge.mapping(opbridge.Framework.ONNX, "com.example::FooScale", since_opset=2)'):
        assert needle in msg


def test_preflight_names_nearest_versions():
    reg = MappingRegistry()
    reg.register("onnx", "Relu", _relu, since_opset=14)
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], {"": 13})
    with pytest.raises(UnsupportedOpError, match=r"registered since-versions 14, none <= 13"):
        convert_origin_graph(parse_model(m), registry=reg)


def test_mapping_bug_is_reported_with_the_node():
    reg = MappingRegistry()

    def broken(node, g):
        return {}["nope"]

    reg.register("onnx", "Relu", broken)
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="relu7")], {"": 17})
    with pytest.raises(MappingError, match=r"\[onnx\] node 'relu7' \(Relu\): the mapping at .*test_registry.py:\d+ "
                                           r"failed: KeyError"):
        convert_origin_graph(parse_model(m), registry=reg)


def test_values_are_named_after_origin_tensors_and_nodes_keep_origin():
    reg = MappingRegistry()

    def relu_via_two(node, g):  # one-to-many: Relu then Add of zero
        r = g.op("Relu", [g.input(0)])
        return g.op("Add", [r, g.constant(np.zeros((), np.float32))])

    reg.register("onnx", "Relu", relu_via_two)
    m = _model([helper.make_node("Relu", ["x"], ["mid"], name="a"),
                helper.make_node("Relu", ["mid"], ["y"], name="b")], {"": 17})
    g = convert_origin_graph(parse_model(m), registry=reg)
    names = {v.name for n in g.nodes for v in n.outputs}
    assert {"mid", "y"} <= names
    assert all(n.origin.framework == "onnx" and n.origin.name in ("a", "b") for n in g.nodes)
    assert [n.origin.op_type for n in g.nodes] == ["Relu"] * 4


def test_every_onnx_mapping_module_is_listed():
    names = {m.name for m in pkgutil.iter_modules(onnx_mappers.__path__)} - {"schema_defaults"}
    missing = sorted(names - set(onnx_mappers.FAMILIES))
    assert names and not missing, f"not listed in FAMILIES of opbridge/mappers/onnx/__init__.py: {missing}"


def test_builtin_onnx_plumbing_is_registered():
    from opbridge.mappers import DEFAULT_MAPPINGS

    for op in ("Constant", "Identity", "Dropout"):
        assert DEFAULT_MAPPINGS.find(Framework.ONNX, op, "", onnx.defs.onnx_opset_version()) is not None


def test_fallback_expands_onnx_function_ops_only_when_unmapped():
    from opbridge.mappers.onnx.functions import expand_function, function_fallback

    rms = OriginNode("n", "RMSNormalization", ["x", "s"], ["y"])
    conv = OriginNode("c", "Conv", ["x", "w"], ["y"])
    assert function_fallback(rms, 23) is expand_function  # context-dependent body in onnx.defs
    assert function_fallback(conv, 22) is None  # Conv is primitive: no body
    reg = MappingRegistry()
    reg.register("onnx", "RMSNormalization", _relu, since_opset=23)
    assert reg.find("onnx", "RMSNormalization", "", 23).fn is _relu  # an explicit mapping wins


def test_function_body_ir_nodes_keep_the_users_node_as_origin():
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    node = helper.make_node("Shrink", ["x"], ["y"], name="shrink_me", lambd=0.7, bias=0.1)
    m = _model([node], {"": 18})
    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("onnx"):
        if e.op_type != "Shrink":
            reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    from opbridge.mappers.onnx.functions import install

    install(reg)
    g = convert_origin_graph(parse_model(m), registry=reg)
    assert len(g.nodes) > 1 and {n.origin.name for n in g.nodes} == {"shrink_me"}
    assert {n.origin.op_type for n in g.nodes} == {"Shrink"} and g.outputs[0].name == "y"
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(interpret(g, {"x": x})["y"], ref, rtol=1e-6)


#: The ops opbridge maps by decomposing them into IR primitives.
DECOMPOSED = ("CumProd", "DFT", "RNN", "GRU", "LSTM")


@pytest.mark.parametrize("op", DECOMPOSED)
def test_decompositions_are_versioned_mappings_at_onnx_since_versions(op):
    ours = DEFAULT_MAPPINGS.versions("onnx", op)
    onnx_since = {s.since_version for s in onnx.defs.get_all_schemas_with_history()
                  if s.name == op and s.domain == ""}
    assert ours and set(ours) <= onnx_since, f"{op}: registered at {ours}, onnx.defs has {sorted(onnx_since)}"
    entry = DEFAULT_MAPPINGS.find("onnx", op, "", max(ours))
    assert entry is not None and re.search(r"opbridge/mappers/onnx/(decompose|rnn)\.py:\d+$", entry.defined_at)


def test_a_second_registration_of_a_decomposition_is_refused():
    entry = DEFAULT_MAPPINGS.find("onnx", "LSTM", "", 22)
    with pytest.raises(RegistryError, match=r"LSTM since_opset=22 is registered twice: first at .*rnn\.py:\d+"):
        DEFAULT_MAPPINGS.register("onnx", "LSTM", entry.fn, since_opset=22)


def test_only_the_onnx_function_bodies_remain_a_fallback():
    assert DEFAULT_MAPPINGS.fallback_names("onnx") == ["onnx function body (onnx.defs)"]
    assert DEFAULT_MAPPINGS.fallback_names("caffe") == []
    lstm = OriginNode("l", "LSTM", ["x", "w", "r"], ["y"])
    assert DEFAULT_MAPPINGS.fallback(lstm, 22) is None  # LSTM has no onnx.defs function body


def test_ops_lists_the_recurrent_ops_with_versions_ranges_and_sites(capsys):
    from opbridge.cli import main

    assert main(["ops", "--framework", "onnx", "--format", "json"]) == 0
    rows = {r["op_type"]: r for r in json.loads(capsys.readouterr().out)}
    for op in ("RNN", "GRU", "LSTM"):
        assert rows[op]["versions"] == [7, 14, 22]
        assert rows[op]["ranges"] == [[7, 13], [14, 21], [22, None]]
        assert all(re.search(r"opbridge/mappers/onnx/rnn\.py:\d+$", s) for s in rows[op]["defined_at"])
    assert main(["ops", "--framework", "onnx"]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")}
    for op in ("RNN", "GRU", "LSTM", "DFT"):
        assert re.fullmatch(rf"  {op} +[\d, ]+ at opbridge/mappers/onnx/(rnn|decompose)\.py:\d+", lines[op]), lines[op]
