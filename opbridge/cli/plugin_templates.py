"""The text ``opbridge plugin new`` writes (``string.Template``: ``$name`` placeholders)."""

from __future__ import annotations

PLUGIN = '''\
"""opbridge plugin: the custom op $NAME, mapped from $title.

Load it with ``opbridge convert MODEL --plugin $file`` (or put it on OPBRIDGE_PLUGIN_PATH, or
ship it in a package under the ``opbridge.plugins`` entry-point group). It makes three
registrations:

1. the op definition: inputs, typed parameters with defaults, a shape function, and the numpy
   reference that the interpreter runs (and the simulator, where no tile kernel is given);
2. the mapping from the $title op onto it;
3. the simulator kernel: how the layer-group compiler may tile the op, and what it costs.

To fuse several ops of a model into this one, add a pattern pass in this file
(``ob.register_pass``, run with ``--pass NAME``; see docs/custom-ops.md, "Fusing several ops").

The example semantics are y = x * alpha + beta: replace them with your op's, and keep
its test passing (``python -m pytest $test_path``; the test lives in a tests/ folder so
that a plugin folder on OPBRIDGE_PLUGIN_PATH never imports it as a plugin).$override_doc
"""

from __future__ import annotations

${math}import numpy as np
import opbridge as ob
$imports

#: The IR op's name: the same name for the op, its mapping, its kernel and its test.
OP = "$NAME"


# 1. The op definition ---------------------------------------------------------------------------
def ${snake}_shape(ctx: ob.ShapeContext):
    """The output's dtype and shape: those of input 0 (the op is elementwise)."""
    return ctx.same_as_input(0)


def ${snake}_compute(x: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    """The reference semantics, numpy over whole tensors."""
    return (x * np.asarray(alpha, x.dtype) + np.asarray(beta, x.dtype)).astype(x.dtype)


(
    ob.define_op(OP$override_op)
    .doc("y = x * alpha + beta")
    .input("x", "T")
    .output("y", "T")
    .param("alpha", "float", default=1.0)
    .param("beta", "float", default=0.0)
    .type_param("T", ("f32", "f16"))
    .shape_fn(${snake}_shape)
    .compute(${snake}_compute)$placement
)


$rule
$mapping


# 3. The simulator kernel ------------------------------------------------------------------------
$kernel
'''

IMPORTS = {
    "caffe": "from opbridge.mappers import Framework, ImplyType, register_custom_op",
    "onnx": "from opbridge.mappers import Framework, mapping",
    "torchscript": "from opbridge.mappers import Framework, mapping\n"
                   "from opbridge.mappers.torchscript.common import Args",
}

MAPPINGS = {
    "caffe": '''\
def parse_${snake}(src, dst) -> None:
    """Copy the layer's parameters (``${snake}_param { alpha: 2 beta: 0.5 }``) onto the op.

    Parameter blocks the lite caffe.proto does not know are read generically, so a custom layer
    needs no recompiled .proto. Absent fields take the defaults written here.
    """
    dst.set_attr("alpha", float(src.get_attr("alpha", 1.0)))
    dst.set_attr("beta", float(src.get_attr("beta", 0.0)))


(
    register_custom_op(OP$override_map)
    .framework_type(Framework.CAFFE)
    .origin_op_type("$NAME")
    .parse_params_by_operator_fn(parse_${snake})
    .imply_type($imply)
)''',
    "onnx": '''\
@mapping(Framework.ONNX, "com.example::$NAME", since_opset=1$override_map)
def map_${snake}(node, g):
    """``com.example::$NAME`` (domain version 1 and later): float attributes alpha and beta.

    A plain "$NAME" would match the op in whatever domain the model declares it.
    """
    alpha = float(node.get_attr("alpha", 1.0))
    beta = float(node.get_attr("beta", 0.0))
    return g.op(OP, [g.input(0)], alpha=alpha, beta=beta)''',
    "torchscript": '''\
@mapping(Framework.TORCHSCRIPT, "myops::${snake}"$override_map)
def map_${snake}(node, g):
    """``myops::${snake}(Tensor x, float alpha=1.0, float beta=0.0)``.

    In TorchScript the scalars are arguments, not attributes; ``Args`` gives each schema
    argument as a Value (tensors) or as the Python value known while converting (constants).
    """
    a = Args(node, g)
    alpha = float(a.py(1, 1.0, "alpha"))
    beta = float(a.py(2, 0.0, "beta"))
    return g.op(OP, [g.input(0)], alpha=alpha, beta=beta)''',
}

KERNEL = '''\
def ${snake}_cost(node, out_shape) -> float:
    """FLOPs of one output tile: a multiply and an add per element."""
    return 2.0 * math.prod(out_shape)


# Elementwise: an output tile needs the same tile of the input, so N, H and W may all be split,
# with no halo (.input_slice) and no scratch buffer (.scratch). Without .split() the op would
# run as a global layer, on whole tensors.
register_kernel(OP$override_kernel).split("N", "H", "W").cost(${snake}_cost)'''

GLOBAL_KERNEL = '''\
def ${snake}_cost(node, out_shape) -> float:
    """FLOPs of the whole output: a multiply and an add per element."""
    return 2.0 * math.prod(out_shape)


# No tiling hints (no .split()): the op never joins a layer group and runs as a global layer,
# its compute on whole tensors in DDR; the cost feeds the profile's timeline. Add
# .split("N", "H", ...) (and .input_slice for a halo) to let it run on tiles in local memory.
register_kernel(OP$override_kernel).cost(${snake}_cost)'''

CPU_KERNEL = '''\
# None: the op runs on the host (the definition's .placement("cpu")$cpu_mapping),
# between TPU segments, with its numpy compute; a host op needs no simulator kernel.'''

KERNELS = {"tiled": KERNEL, "global": GLOBAL_KERNEL, "cpu": CPU_KERNEL}

NO_KERNEL = """\
# This opbridge's simulator has no kernel API: the op runs as a global layer on whole tensors."""


def kernel_block(have_kernels: bool, kind: str = "tiled") -> str:
    if kind == "cpu":
        return CPU_KERNEL
    return KERNELS[kind] if have_kernels else NO_KERNEL


KERNEL_IMPORT = "from opbridge.simulator.kernels import register_kernel"

TEST = '''\
"""Tests of the $NAME plugin ($file): the op against numpy, the mapping end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import opbridge as ob
import pytest
from opbridge.plugins_loader import load_plugins

# the plugin is one folder up: tests/ beside it is never on OPBRIDGE_PLUGIN_PATH's file list
load_plugins([Path(__file__).resolve().parents[1] / "$file"], env=False)

X = np.random.default_rng(0).standard_normal((1, 3, 4, 4)).astype(np.float32)
CASES = [({}, 1.0, 0.0), ({"alpha": 2.0}, 2.0, 0.0), ({"alpha": -0.5, "beta": 3.0}, -0.5, 3.0)]
IDS = ["attrs=absent", "alpha=2", "alpha=-0.5,beta=3"]


def build(**attrs):
    b = ob.GraphBuilder("t")
    x = b.input("x", "f32", X.shape)
    b.output(b.op("$NAME", [x], name="op", **attrs))
    return b.build()


@pytest.mark.parametrize("attrs,alpha,beta", CASES, ids=IDS)
def test_compute(attrs, alpha, beta):
    y = ob.interpret(build(**attrs), {"x": X})["op"]
    np.testing.assert_allclose(y, X * alpha + beta, rtol=1e-6)


def test_shape_and_dtype():
    g = build()
    assert g.outputs[0].shape == X.shape and g.outputs[0].dtype == "f32"


$origin_test


def test_simulator_matches_interpreter():
    compile_ = getattr(ob, "compile", None)
    if compile_ is None:
        pytest.skip("this opbridge has no simulator (ob.compile)")
    g = build(alpha=2.0, beta=0.5)
    prog = compile_(g, target="bm1684")
    out = prog.run({"x": X})
    np.testing.assert_allclose(out["op"], X * 2.0 + 0.5, rtol=1e-6)
    p = prog.profile()
    assert $where_check, "where the op runs: see the kernel section of the plugin"
'''

ORIGIN_TESTS = {
    "caffe": '''\
PROTOTXT = """
name: "t"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }
layer { name: "layer1" type: "$NAME" bottom: "data" top: "out" %s }
"""


@pytest.mark.parametrize("attrs,alpha,beta", CASES, ids=IDS)
def test_mapping_from_caffe(tmp_path, attrs, alpha, beta):
    block = " ".join(f"{k}: {v}" for k, v in attrs.items())
    (tmp_path / "net.prototxt").write_text(PROTOTXT % (f"${snake}_param {{ {block} }}" if attrs else ""))
    g = ob.convert(str(tmp_path / "net.prototxt"))
    assert [n.op for n in g.nodes] == ["$NAME"]
    y = ob.interpret(g, {"data": X})["out"]
    np.testing.assert_allclose(y, X * alpha + beta, rtol=1e-6)''',
    "onnx": '''\
@pytest.mark.parametrize("attrs,alpha,beta", CASES, ids=IDS)
def test_mapping_from_onnx(tmp_path, attrs, alpha, beta):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("$NAME", ["x"], ["y"], name="node1", domain="com.example", **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, X.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = ob.convert(str(tmp_path / "m.onnx"))
    assert [n.op for n in g.nodes] == ["$NAME"]
    y = ob.interpret(g, {"x": X})["y"]
    np.testing.assert_allclose(y, X * alpha + beta, rtol=1e-6)''',
    "torchscript": '''\
def _ts_json(path, attrs):
    """A TorchScript-json file (docs/torchscript-json.md) with one myops::${snake} node; its
    scalar arguments are prim::Constant nodes, as in a frozen graph."""
    import json

    names = [k for k in ("alpha", "beta") if k in attrs]
    if names == ["beta"]:
        names = ["alpha", "beta"]
    consts = [{"name": f"const_{k}", "kind": "prim::Constant", "inputs": [], "outputs": [k],
               "types": ["float"], "value": float(attrs.get(k, 1.0 if k == "alpha" else 0.0))}
              for k in names]
    node = {"name": "node1", "kind": "myops::${snake}", "inputs": ["x", *names], "outputs": ["y"],
            "types": ["Tensor"]}
    io = {"dtype": "float32", "shape": list(X.shape)}
    doc = {"format": "opbridge.torchscript-json", "version": 1, "name": "t", "producer": {},
           "inputs": [{"name": "x", **io}], "outputs": [{"name": "y", **io}], "nodes": [*consts, node]}
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("attrs,alpha,beta", CASES, ids=IDS)
def test_mapping_from_torchscript(tmp_path, attrs, alpha, beta):
    g = ob.convert(_ts_json(tmp_path / "m.ts.json", attrs))
    assert [n.op for n in g.nodes] == ["$NAME"]
    y = ob.interpret(g, {"x": X})["y"]
    np.testing.assert_allclose(y, X * alpha + beta, rtol=1e-6)''',
}
