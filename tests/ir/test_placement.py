"""Where a node runs has one home: the IR node's ``placement``, defaulting from its op
definition, set by a mapping's ``imply_type``, kept in ``.obir`` and read by the simulator."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.errors import GraphError, ModelFormatError, RegistryError, SimulatorError
from opbridge.ir.io import graph_to_json
from opbridge.mappers import MappingRegistry, register_custom_op

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "onnx_custom_ops.py"


@pytest.fixture
def host_op():
    """A plugin-style op declared to run on the host, removed afterwards."""
    name = "PlacementTestHostOp"
    (ob.define_op(name).input("x", "T").output("y", "T").type_param("T", ("f32",))
     .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(lambda x: x[..., ::-1].copy())
     .placement("cpu"))
    yield name
    ob.ir.DEFAULT_OPS.remove(name)


def _vendor_relu_model(path: Path | None = None) -> object:
    """x -> com.example::VendorRelu -> Sigmoid: a custom op to be mapped onto the built-in Relu."""
    nodes = [helper.make_node("VendorRelu", ["x"], ["r"], name="vr", domain="com.example"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    g = helper.make_graph(nodes, "vendor", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


def _private_cpu_registry() -> MappingRegistry:
    """VendorRelu -> Relu on the host, and the built-in Sigmoid, in a registry of their own."""
    mine = MappingRegistry()
    sigmoid = ob.DEFAULT_MAPPINGS.find(ob.Framework.ONNX, "Sigmoid", "", 17)
    assert sigmoid is not None
    mine.register(ob.Framework.ONNX, "Sigmoid", sigmoid.fn, since_opset=sigmoid.since)
    (register_custom_op("Relu", registry=mine).framework_type(ob.Framework.ONNX)
     .origin_op_type("com.example::VendorRelu").imply_type(ob.ImplyType.CPU))
    return mine


# -- the op definition gives the default, a node may say otherwise ---------------------------
def test_node_placement_defaults_from_the_op_definition(host_op):
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2, 3))
    h = b.op(host_op, [x], name="h")
    r = b.op("Relu", [h], name="r")
    b.output(b.op(host_op, [r], name="h_on_tpu", placement="tpu"), b.op("Relu", [r], name="r_on_cpu",
                                                                          placement=ob.ImplyType.CPU))
    g = b.build()
    assert {n.name: n.placement for n in g.nodes} == {"h": "cpu", "r": "tpu", "h_on_tpu": "tpu",
                                                      "r_on_cpu": "cpu"}
    assert ob.ir.get_op("Relu").default_placement == "tpu"


def test_bad_placements_are_refused(host_op):
    with pytest.raises(RegistryError, match=r"op PlacementTestHostOp: placement 'gpu' is not one of tpu, cpu"):
        ob.ir.get_op(host_op).placement("gpu")
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2,))
    with pytest.raises(GraphError, match=r"'r' \(Relu\).*placement 'npu'"):
        b.op("Relu", [x], name="r", placement="npu")
    # the refused node claimed nothing: its name and its output's name are still free
    b.output(b.op("Relu", [x], name="r"))
    assert [n.name for n in b.build().nodes] == ["r"] and b.build().outputs[0].name == "r"
    with pytest.raises(RegistryError, match="placement 'host'"):
        register_custom_op("Relu", registry=MappingRegistry()).imply_type("host")


def test_declared_host_op_runs_on_the_host(host_op):
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (1, 2, 4, 4))
    b.output(b.op("Relu", [b.op(host_op, [b.op("Relu", [x])])]))
    g = b.build()
    prog = ob.compile(g, "bm1684")
    assert prog.profile().num_cpu_layers == 1
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)}
    want = np.maximum(np.maximum(feeds["x"], 0)[..., ::-1], 0)
    np.testing.assert_array_equal(prog.run(feeds)[g.outputs[0].name], want)


def test_placement_callable_overrides_and_is_checked():
    b = ob.GraphBuilder("g")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 2, 4, 4))], name="r"))
    g = b.build()
    assert ob.compile(g, "bm1684", placement=lambda n: "cpu").profile().num_cpu_layers == 1
    assert ob.compile(g, "bm1684", placement=lambda n: None).profile().num_cpu_layers == 0
    assert ob.compile(g, "bm1684", placement=lambda n: ob.ImplyType.CPU).profile().num_cpu_layers == 1
    # checked as every other placement is, with the same words
    with pytest.raises(SimulatorError, match=r"'r' \(Relu\): the placement callable: placement 'gpu' "
                       r"is not one of tpu, cpu") as err:
        ob.compile(g, "bm1684", placement=lambda n: "gpu")
    assert "None (keep the node's own)" in (err.value.hint or "")


# -- a mapping's imply_type places the nodes it emits -------------------------------------
def test_cpu_imply_type_in_a_non_default_registry_reaches_compile():
    g = ob.convert(_vendor_relu_model(), registry=_private_cpu_registry())
    assert [(n.op, n.placement) for n in g.nodes] == [("Relu", "cpu"), ("Sigmoid", "tpu")]
    assert ob.ir.get_op("Relu").default_placement == "tpu"  # the shared definition is untouched
    prog = ob.compile(g, "bm1684")
    assert prog.profile().num_cpu_layers == 1
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(prog.run({"x": x})["y"], 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    # the default registry's conversion of a plain Relu is not affected
    plain = ob.GraphBuilder("p")
    plain.output(plain.op("Relu", [plain.input("x", "f32", (1, 4, 6, 6))]))
    assert ob.compile(plain.build(), "bm1684").profile().num_cpu_layers == 0


def test_map_context_op_takes_a_placement():
    mine = MappingRegistry()

    @ob.mapping(ob.Framework.ONNX, "com.example::VendorRelu", registry=mine)
    def vendor_relu(node, g):
        return g.op("Relu", [g.input(0)], placement="cpu")

    mine.register(ob.Framework.ONNX, "Sigmoid", lambda node, g: g.op("Sigmoid", [g.input(0)]))
    g = ob.convert(_vendor_relu_model(), registry=mine)
    assert [n.placement for n in g.nodes] == ["cpu", "tpu"]


_FRESH = textwrap.dedent("""
    import json, sys
    import numpy as np
    import opbridge as ob
    from opbridge.mappers import DEFAULT_MAPPINGS
    if sys.argv[2] == "define-plugin-ops":  # the plugin's op definitions only, not its mappings
        (ob.define_op("FooScale").input("x", "T").output("y", "T").type_param("T", ("f32",))
         .param("scale", "float", default=1.0).param("bias", "float", default=0.0)
         .shape_fn(lambda ctx: ctx.same_as_input(0))
         .compute(lambda x, scale, bias: x * scale + bias))
        (ob.define_op("BarShift").input("x", "T").output("y", "T").type_param("T", ("f32",))
         .param("shift", "int", default=0)
         .shape_fn(lambda ctx: ctx.same_as_input(0))
         .compute(lambda x, shift: np.roll(x, shift, axis=-1)))
    custom = [e for e in DEFAULT_MAPPINGS.entries()
              if e.domain == "com.example" or e.op_type in ("VendorRelu", "FooScale", "BarShift")]
    assert not custom, f"a custom mapping is loaded: {custom}"
    g = ob.load(sys.argv[1])
    prog = ob.compile(g, "bm1684")
    print(json.dumps({"placement": {n.name: n.placement for n in g.nodes},
                      "cpu_layers": prog.profile().num_cpu_layers,
                      "program": json.dumps(prog.to_json(), sort_keys=True)}))
""")


def _in_fresh_process(path: Path, mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _FRESH, str(path), mode], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_saved_cpu_placement_compiles_the_same_in_a_process_without_the_mapping(tmp_path):
    """Built-in op placed on the host by a private registry's mapping: saved, then compiled
    by a process that has only the built-ins."""
    g = ob.convert(_vendor_relu_model(), registry=_private_cpu_registry())
    path = tmp_path / "vendor.obir"
    ob.save(g, path)
    got = _in_fresh_process(path, "builtins-only")
    assert got["placement"] == {"vr": "cpu", "sig": "tpu"}
    assert got["cpu_layers"] == 1
    assert got["program"] == json.dumps(ob.compile(g, "bm1684").to_json(), sort_keys=True)


def test_saved_plugin_cpu_placement_compiles_the_same_without_the_plugin_mapping(tmp_path):
    """The example plugin's BarShift (imply_type CPU): the loading process defines the ops
    (schemas only, no mapping, no imply_type) and still places BarShift on the host."""
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("FooScale", ["x"], ["f"], name="foo", domain="com.example", scale=2.0),
             helper.make_node("BarShift", ["f"], ["y"], name="bar", domain="com.example", shift=1)],
            "plug", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    g = ob.convert(model, plugins=[str(PLUGIN)])
    path = tmp_path / "plug.obir"
    ob.save(g, path)
    got = _in_fresh_process(path, "define-plugin-ops")
    assert got["placement"] == {"foo": "tpu", "bar": "cpu"}
    assert got["cpu_layers"] == 1
    assert got["program"] == json.dumps(ob.compile(g, "bm1684").to_json(), sort_keys=True)


# -- the file keeps it; old files take the op definition's -------------------------------
def test_obir_without_placement_takes_the_op_definition(host_op, tmp_path):
    from safetensors.numpy import save_file

    b = ob.GraphBuilder("old")
    b.output(b.op("Relu", [b.op(host_op, [b.input("x", "f32", (2, 3))], name="h")], name="r"))
    tensors: dict = {}
    doc = graph_to_json(b.build(), tensors)
    for nd in doc["nodes"]:
        del nd["placement"]
    path = tmp_path / "old.obir"
    save_file(tensors, str(path), metadata={"format": "opbridge.obir", "format_version": "1",
                                            "graph": json.dumps(doc)})
    assert [n.placement for n in ob.load(path).nodes] == ["cpu", "tpu"]
    doc["nodes"][1]["placement"] = "gpu"
    save_file(tensors, str(path), metadata={"format": "opbridge.obir", "format_version": "2",
                                            "graph": json.dumps(doc)})
    with pytest.raises(ModelFormatError, match=r"node 'r' \(Relu\): placement 'gpu'"):
        ob.load(path)


def test_show_prints_host_placement(host_op):
    b = ob.GraphBuilder("g")
    b.output(b.op("Relu", [b.op(host_op, [b.input("x", "f32", (2, 3))], name="h")], name="r"))
    lines = ob.format_graph(b.build()).splitlines()
    (h_line,) = [ln for ln in lines if ln.strip().startswith("# h ")]
    (r_line,) = [ln for ln in lines if ln.strip().startswith("# r ")]
    assert "runs on the host cpu" in h_line
    assert "host" not in r_line


def test_ssd_detection_output_is_a_host_op_by_definition():
    assert ob.ir.get_op("DetectionOutput").default_placement == "cpu"


# -- deprecated spellings write to, or read, the op definition ---------------------------
def test_deprecated_imply_type_of_and_set_imply_type_use_the_op_definition(host_op):
    from opbridge.mappers import set_imply_type

    with pytest.warns(DeprecationWarning, match="node.*placement"):
        assert ob.imply_type_of(host_op) == ob.ImplyType.CPU
    with pytest.warns(DeprecationWarning, match="placement"):
        assert ob.imply_type_of("Relu") == ob.ImplyType.TPU
    with pytest.warns(DeprecationWarning, match=r'define_op\(\.\.\.\)\.placement\("cpu"\)'):
        set_imply_type(host_op, ob.ImplyType.TPU)
    assert ob.ir.get_op(host_op).default_placement == "tpu"


def test_deprecated_kernel_cpu_needs_the_op_defined():
    reg = ob.simulator.KernelRegistry()
    with pytest.warns(DeprecationWarning), pytest.raises(RegistryError, match="'NoSuchOp' is not defined"):
        reg.register("NoSuchOp").cpu()


# -- layering ---------------------------------------------------------------------------
def _imported_modules(path: Path, package: str) -> list[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return out


def test_simulator_imports_nothing_from_mappers():
    sim = ROOT / "opbridge" / "simulator"
    files = sorted(sim.rglob("*.py"))
    assert len(files) > 5
    bad = []
    for f in files:
        rel = f.relative_to(ROOT).with_suffix("")
        package = ".".join(rel.parts[:-1]) if rel.name != "__init__" else ".".join(rel.parts[:-1])
        bad += [f"{rel}: {m}" for m in _imported_modules(f, package)
                if m == "opbridge.mappers" or m.startswith("opbridge.mappers.")]
    assert not bad, "the simulator imports from opbridge.mappers:\n" + "\n".join(bad)


def test_import_scan_sees_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from ..mappers.registry import imply_type_of\nfrom . import x\nimport opbridge.ir\n")
    mods = _imported_modules(f, "opbridge.simulator")
    assert "opbridge.mappers.registry" in mods and "opbridge.simulator" in mods and "opbridge.ir" in mods

