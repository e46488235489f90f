"""3-D convolutions and the ops around them as local layers in layer groups, against outside
references.

A rank-5 tensor (N, C, D, H, W) joins a layer group through the view (N, C, D, H*W): the group
cuts its batch, its depth and its rows (whole rows of W), each tile reading the slices and rows
its 3-D window covers (the halos, with the pads at the edges), and the kernels compute on
rank-5 tiles. Each float case is an ONNX graph compiled at a small local memory, so the volume
must be cut along D (and, where one depth slice does not fit, along H), and compared with
onnxruntime; the int8 cases (``ob.quantize``: ConvInteger and Requantize) must equal the
interpreter bit for bit; a reduced mmaction2 C3D (``bench/fidelity_models.py``) is compared
with torch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.simulator import GlobalUnit, GroupUnit, Load, load_program

from ..conftest import requires_ort, requires_torch
from .helpers import assert_close, audit_local_memory

#: (batch, channels, D, H, W): one channel a lane, 10 x 10 planes: 400 bytes a depth slice in a lane
SHAPE = (2, 8, 12, 10, 10)
LMEM = 4096


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None,
           shape: tuple[int, ...] = SHAPE) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "volume", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _with_relu(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """``node`` followed by a ReLU: a volume alone would run as a global layer (see
    ``test_lone_conv3d_runs_as_a_global_layer``), so each case groups it with one."""
    node.output[0] = "c"
    return [node, helper.make_node("Relu", ["c"], ["y"])]


def _groups_with(prog: ob.Program, op: str) -> list[GroupUnit]:
    return [u for u in prog.groups if any(prog.graph.node(n).op == op for n in u.nodes)]


def _check(model: onnx.ModelProto, lmem: int = LMEM, op: str = "Conv",
           shape: tuple[int, ...] = SHAPE) -> ob.Program:
    """Compile at ``lmem`` bytes a lane, run, compare with onnxruntime; ``op`` must run in a
    layer group cut along D (``k > 1``) or H (``kw > 1``). Returns the program."""
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    groups = _groups_with(prog, op)
    assert groups, f"the 3-D {op} should be a local layer in a layer group"
    assert any(u.k > 1 or u.kw > 1 for u in groups), "the volume should not fit the lane uncut"
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")
    audit_local_memory(prog)
    return prog


def _conv(rng: np.random.Generator, cin: int, cout: int, kernel: tuple[int, ...], group: int = 1,
          name: str = "w", **attrs) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    w = (rng.standard_normal((cout, cin // group, *kernel)) * 0.2).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    inits = [numpy_helper.from_array(w, name), numpy_helper.from_array(b, name + "_b")]
    return helper.make_node("Conv", ["x", name, name + "_b"], ["y"], kernel_shape=list(kernel),
                            group=group, **attrs), inits


CONV = [
    pytest.param(((3, 3, 3), {"pads": [1] * 6}, 1), id="k=3,pads=1"),
    pytest.param(((3, 3, 3), {}, 1), id="k=3,pads=absent"),
    pytest.param(((3, 3, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}, 1), id="k=3,s=2,1,2"),
    pytest.param(((3, 3, 1), {"dilations": [2, 1, 1], "pads": [2, 1, 0, 1, 1, 0]}, 1),
                 id="k=3,3,1,d=2,asym-pads"),
    pytest.param(((2, 3, 3), {"strides": [3, 2, 2], "pads": [0, 1, 1, 1, 1, 1]}, 1), id="k=2,s=3"),
    pytest.param(((1, 1, 1), {"strides": [2, 1, 1]}, 1), id="k=1,s=2"),
    pytest.param(((3, 3, 3), {"pads": [1] * 6}, 2), id="group=2"),
    pytest.param(((3, 3, 3), {"pads": [1] * 6, "dilations": [1, 2, 2]}, 8), id="depthwise,d=1,2,2"),
]


@requires_ort
@pytest.mark.parametrize("geometry", CONV)
def test_conv3d_tiled_along_depth(geometry):
    kernel, attrs, group = geometry
    node, inits = _conv(np.random.default_rng(1), SHAPE[1], SHAPE[1], kernel, group, **attrs)
    _check(_model(_with_relu(node), inits))


#: a volume whose depth slices are big (one channel a lane, 40 x 40 planes: 6400 bytes a slice
#: in a lane), so that even one depth slice with its halo does not fit: the rows H are cut too
TALL = (2, 8, 4, 40, 40)

ROWS = [
    pytest.param(((3, 3, 3), {"pads": [1] * 6}, 1), id="k=3,pads=1"),
    pytest.param(((3, 3, 3), {"strides": [1, 2, 1], "dilations": [1, 2, 1], "pads": [1, 2, 0, 1, 1, 0]}, 1),
                 id="k=3,s=1,2,1,d=1,2,1,asym-pads"),
    pytest.param(((1, 5, 3), {"strides": [1, 3, 1], "pads": [0, 2, 1, 0, 0, 1]}, 1), id="k=1,5,3,s=3"),
    pytest.param(((3, 3, 3), {"pads": [1] * 6}, 8), id="depthwise"),
]


@requires_ort
@pytest.mark.parametrize("geometry", ROWS)
def test_conv3d_tiled_along_rows(geometry):
    """No depth tiling fits: the tiles cut the rows H as well (whole rows of W), each with the
    rows its window covers and the top / bottom pads at the edges."""
    kernel, attrs, group = geometry
    node, inits = _conv(np.random.default_rng(8), TALL[1], TALL[1], kernel, group, **attrs)
    prog = _check(_model(_with_relu(node), inits, TALL), lmem=2 * LMEM, shape=TALL)
    assert any(u.kw > 1 for u in _groups_with(prog, "Conv"))


@requires_ort
@pytest.mark.parametrize("pool", [
    pytest.param(("MaxPool", {"kernel_shape": [2, 3, 3], "strides": [2, 2, 2], "pads": [0, 1, 1, 0, 1, 1]}),
                 id="max,k=2,3,3,s=2"),
    pytest.param(("AveragePool", {"kernel_shape": [1, 3, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 0, 1, 1],
                                  "count_include_pad": 1}), id="avg,count_include_pad=1"),
])
def test_pool3d_tiled_along_rows(pool):
    op, attrs = pool
    prog = _check(_model(_with_relu(helper.make_node(op, ["x"], ["y"], **attrs)), shape=TALL),
                  lmem=LMEM, op=op, shape=TALL)
    assert any(u.kw > 1 for u in _groups_with(prog, op))


def test_conv3d_depth_halo_is_loaded_by_neighbouring_tiles():
    """A 3-tap depth window cut into depth tiles: neighbouring tiles load overlapping depth
    slices of the input (the halo), the first and last keep the front / back padding."""
    node, inits = _conv(np.random.default_rng(2), SHAPE[1], SHAPE[1], (3, 3, 3), pads=[1] * 6)
    prog = ob.compile(ob.convert(_model(_with_relu(node), inits)),
                      ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    (g,) = _groups_with(prog, "Conv")
    lo, hi = g.instrs
    ranges = [ins.h for ins in prog.instrs[lo:hi]
              if isinstance(ins, Load) and ins.tensor == "x" and ins.n == (0, 1)]
    assert len(ranges) > 1
    assert ranges[0][0] == 0 and ranges[-1][1] == SHAPE[2]
    # each tile of output slices [a, b) reads input slices [a - 1, b + 1), clipped to the volume
    assert all(r1[0] < r0[1] for r0, r1 in zip(ranges, ranges[1:])), ranges
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    assert_close(prog.run({"x": x})["y"], ob.interpret(prog.graph, {"x": x})["y"], "vs interpreter")


POOL = [
    pytest.param(("MaxPool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}), id="max,k=2,s=2"),
    pytest.param(("MaxPool", {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1] * 6}),
                 id="max,k=3,s=2,pads=1"),
    pytest.param(("MaxPool", {"kernel_shape": [1, 2, 2], "strides": [1, 2, 2]}), id="max,k=1,2,2"),
    pytest.param(("MaxPool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2],
                              "pads": [0, 1, 1, 0, 1, 1]}), id="max,c3d-pool5"),
    pytest.param(("MaxPool", {"kernel_shape": [3, 2, 2], "strides": [2, 2, 2], "ceil_mode": 1}),
                 id="max,k=3,s=2,ceil=1"),
    pytest.param(("AveragePool", {"kernel_shape": [3, 3, 3], "strides": [2, 1, 1],
                                  "pads": [1, 1, 1, 0, 1, 1]}), id="avg,k=3,s=2,asym-pads"),
    pytest.param(("AveragePool", {"kernel_shape": [3, 3, 3], "strides": [2, 1, 1], "pads": [1] * 6,
                                  "count_include_pad": 1}), id="avg,count_include_pad=1"),
]


@requires_ort
@pytest.mark.parametrize("pool", POOL)
def test_pool3d_tiled_along_depth(pool):
    op, attrs = pool
    _check(_model(_with_relu(helper.make_node(op, ["x"], ["y"], **attrs))), lmem=2048, op=op)


@requires_ort
def test_lone_conv3d_runs_as_a_global_layer():
    """A volume that would make a group of its own runs as a global layer, as TPU-MLIR runs a
    one-op group; the result is the same."""
    import onnxruntime as ort

    node, inits = _conv(np.random.default_rng(1), SHAPE[1], SHAPE[1], (3, 3, 3), pads=[1] * 6)
    model = _model([node], inits)
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    (unit,) = prog.units
    assert isinstance(unit, GlobalUnit) and unit.op == "Conv" and not unit.fits_no_tile
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")


@requires_ort
def test_conv3d_bn_relu_pool_conv_chain_in_one_group():
    """Halos compose across a group of volumes: conv, BatchNorm, ReLU, an element-wise Add
    of a per-channel constant, a pool and a second conv, cut along D together."""
    rng = np.random.default_rng(3)
    c = SHAPE[1]
    n1, i1 = _conv(rng, c, c, (3, 3, 3), name="w1", pads=[1] * 6)
    n2, i2 = _conv(rng, c, c, (3, 1, 3), name="w2", pads=[1, 0, 1, 1, 0, 1])
    n1.output[0], n2.input[0] = "a", "p"
    bn = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), nm)
          for nm in ("s", "m", "v")] + [numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "bb")]
    bias = numpy_helper.from_array(rng.standard_normal((1, c, 1, 1, 1)).astype(np.float32), "cb")
    nodes = [n1, helper.make_node("BatchNormalization", ["a", "s", "bb", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]), helper.make_node("Add", ["r", "cb"], ["ad"]),
             helper.make_node("MaxPool", ["ad"], ["p"], kernel_shape=[2, 2, 2], strides=[1, 2, 2],
                              pads=[0, 0, 0, 1, 0, 0]), n2]
    model = _model(nodes, [*i1, *i2, *bn, bias])
    prog = _check(model, lmem=2 * LMEM)
    assert any(len(u.nodes) >= 4 and u.k > 1 for u in prog.groups)
    # the per-layer program (validate --per-layer) stores every volume of the same tiles
    every = ob.compile(prog.graph, prog.target, per_layer=True)
    x = {"x": np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)}
    got = every.run(x, keep_intermediates=True)
    want = ob.interpret(prog.graph, x, keep_intermediates=True)
    for nd in prog.graph.nodes:
        name = nd.outputs[0].name
        assert_close(got[name], want[name], f"{nd.op} {name}")


@requires_ort
def test_conv3d_with_a_global_softmax_after_it():
    """A rank-5 op without a volume kernel (Softmax over W) stays a global layer; the
    convolution and ReLU before it still run in a group."""
    node, inits = _conv(np.random.default_rng(4), SHAPE[1], SHAPE[1], (3, 3, 3), pads=[1] * 6)
    nodes = _with_relu(node)
    nodes[1].output[0] = "r"
    prog = _check(_model([*nodes, helper.make_node("Softmax", ["r"], ["y"], axis=-1)], inits))
    assert any(isinstance(u, GlobalUnit) and u.op == "Softmax" for u in prog.units)


# -- int8 ------------------------------------------------------------------------------------
def _int8_program(model: onnx.ModelProto, shape: tuple[int, ...], target: ob.Target
                  ) -> tuple[ob.Graph, ob.Program, dict[str, np.ndarray]]:
    g = ob.convert(model)
    rng = np.random.default_rng(5)
    table = ob.calibrate(g, [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)])
    q = ob.quantize(g, table, dtype="int8")
    x = {"x": rng.standard_normal(shape).astype(np.float32)}
    return q, ob.compile(q, target), x


@pytest.mark.parametrize("target,n,volume", [("bm1684", 1, SHAPE), ("bm1684", 4, SHAPE),
                                             ("bm1684x", 2, SHAPE), ("bm1684", 4, TALL)],
                         ids=["bm1684,n=1", "bm1684,n=4", "bm1684x,n=2", "bm1684,n=4,rows-cut"])
def test_int8_conv3d_group_is_bit_exact(target: str, n: int, volume: tuple[int, ...]):
    """ConvInteger, its bias Add, Requantize, ReLU and a 3-D MaxPool, as ``ob.quantize`` writes
    them, cut along D (and H for the tall volume) in one group (BM1684's 4N layout at batch
    4): the simulator's bytes are the interpreter's."""
    rng = np.random.default_rng(6)
    shape = (n, *volume[1:])
    c = shape[1]
    n1, i1 = _conv(rng, c, 16, (3, 3, 3), name="w1", pads=[1] * 6)
    n2, i2 = _conv(rng, 16, c, (3, 3, 3), name="w2", pads=[1, 1, 1, 1, 1, 1], strides=[2, 1, 1])
    n1.output[0], n2.input[0] = "a", "p"
    nodes = [n1, helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[1, 2, 2], strides=[1, 2, 2]), n2]
    tgt = ob.Target.preset(target, lmem_bytes_per_lane=2 * LMEM)
    q, prog, x = _int8_program(_model(nodes, [*i1, *i2], shape), shape, tgt)
    assert {"ConvInteger", "Requantize"} <= {nd.op for nd in q.nodes}
    groups = _groups_with(prog, "ConvInteger")
    assert groups and any((u.kw if volume == TALL else u.k) > 1 for u in groups)
    assert any("Requantize" in {prog.graph.node(nm).op for nm in u.nodes} for u in groups)
    out = q.outputs[0].name
    np.testing.assert_array_equal(prog.run(x)[out], ob.interpret(q, x)[out])
    audit_local_memory(prog)


# -- mmaction2's C3D, reduced ---------------------------------------------------------------
def _small_c3d(torch):
    """mmaction2's C3D (``mmaction/models/backbones/c3d.py``, as ``bench/fidelity_models.py``
    writes it) with an eighth of its channels, for a 16 x 32 x 32 clip."""
    nn = torch.nn

    def conv(cin: int, cout: int):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU())

    features = nn.Sequential(
        conv(3, 8), nn.MaxPool3d((1, 2, 2), (1, 2, 2)), conv(8, 16), nn.MaxPool3d(2, 2),
        conv(16, 32), conv(32, 32), nn.MaxPool3d(2, 2), conv(32, 64), conv(64, 64),
        nn.MaxPool3d(2, 2), conv(64, 64), conv(64, 64), nn.MaxPool3d(2, 2, padding=(0, 1, 1)))
    head = nn.Sequential(nn.Flatten(1), nn.Linear(64 * 1 * 2 * 2, 32), nn.ReLU(), nn.Linear(32, 11))
    return nn.Sequential(features, head)


@pytest.fixture(scope="module")
def c3d():
    torch = pytest.importorskip("torch", reason="torch is not installed (optional extra)")
    torch.manual_seed(0)
    module = _small_c3d(torch).eval()
    x = torch.randn(2, 3, 16, 32, 32)
    with torch.no_grad():
        want = module(x).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        g = ob.convert(str(ob.export_torchscript(module, x, Path(tmp) / "c3d.ts.json")))
    return g, x.numpy(), want


@requires_torch
@pytest.mark.parametrize("target,lmem", [("bm1684", None), ("bm1684x", None), ("bm1684x", 16 * 1024)],
                         ids=["bm1684", "bm1684x", "bm1684x,lmem=16KiB"])
def test_small_c3d_runs_its_convolutions_in_groups(c3d, target: str, lmem: int | None):
    """Every 3-D convolution in a layer group; at 16 KiB a lane the first ones are cut along
    the batch, the depth and the rows."""
    g, x, want = c3d
    prog = ob.compile(g, ob.Target.preset(target, **({"lmem_bytes_per_lane": lmem} if lmem else {})))
    convs = [nd.name for nd in prog.graph.nodes if nd.op in ("Conv", "FusedConv")]
    grouped = {nm for u in prog.groups for nm in u.nodes}
    assert len(convs) == 8 and set(convs) <= grouped
    if lmem:
        assert any(u.k > 1 and u.kw > 1 and u.n_per == 1 for u in prog.groups)
    name = g.inputs[0].name
    assert_close(prog.run({name: x})[g.outputs[0].name], want, "simulator vs torch")
    audit_local_memory(prog)


@requires_torch
def test_small_c3d_int8_is_bit_exact(c3d):
    g, x, _ = c3d
    name = g.inputs[0].name
    rng = np.random.default_rng(7)
    table = ob.calibrate(g, [{name: rng.standard_normal(x.shape).astype(np.float32)}])
    q = ob.quantize(g, table, dtype="int8")
    prog = ob.compile(q, "bm1684x")
    grouped = {nm for u in prog.groups for nm in u.nodes}
    assert {nd.name for nd in q.nodes if nd.op == "ConvInteger"} <= grouped
    out = q.outputs[0].name
    np.testing.assert_array_equal(prog.run({name: x})[out], ob.interpret(q, {name: x})[out])


def test_volume_program_saves_and_loads(tmp_path):
    """An .obprog whose group computes on rank-5 tiles loads (its plan checked against the
    stored target) and runs to the same bytes."""
    node, inits = _conv(np.random.default_rng(9), TALL[1], TALL[1], (3, 3, 3), pads=[1] * 6)
    prog = ob.compile(ob.convert(_model(_with_relu(node), inits, TALL)),
                      ob.Target.preset("bm1684", lmem_bytes_per_lane=2 * LMEM))
    assert any(u.kw > 1 for u in prog.groups)
    path = tmp_path / "volume.obprog"
    prog.save(path)
    x = {"x": np.random.default_rng(0).standard_normal(TALL).astype(np.float32)}
    np.testing.assert_array_equal(load_program(path).run(x)["y"], prog.run(x)["y"])


@requires_ort
def test_volume_residual_add_and_prelu_broadcasts():
    """Element-wise volumes in one group: a residual Add of two convolutions' outputs, one of
    them reduced to a single depth slice (broadcast along D), and a PRelu whose per-channel
    slope broadcasts as (C, 1, 1, 1); cut along D and H."""
    rng = np.random.default_rng(10)
    c = TALL[1]
    n1, i1 = _conv(rng, c, c, (3, 3, 3), name="w1", pads=[1] * 6)
    n2, i2 = _conv(rng, c, c, (TALL[2], 1, 1), name="w2")
    n1.output[0], n2.output[0] = "a", "b"
    slope = numpy_helper.from_array(rng.uniform(0.1, 0.3, (c, 1, 1, 1)).astype(np.float32), "slope")
    nodes = [n1, n2, helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("PRelu", ["s", "slope"], ["y"])]
    prog = _check(_model(nodes, [*i1, *i2, slope], TALL), lmem=2 * LMEM, shape=TALL)
    assert _groups_with(prog, "Add") and _groups_with(prog, "PRelu")


@requires_ort
def test_pool3d_overhang_of_the_depth_is_not_cut():
    """A ceil-mode average pool counting pads whose last depth window hangs past the back pad
    (pads d0, h0, w0, d1, h1, w1: the depth's end pad is pads[3], not pads[2]): the depth must
    not be cut there, and the result is onnxruntime's."""
    import onnxruntime as ort

    node = helper.make_node("AveragePool", ["x"], ["c"], kernel_shape=[3, 1, 3], strides=[2, 1, 1],
                            pads=[0, 0, 1, 0, 0, 1], ceil_mode=1, count_include_pad=1)
    model = _model([node, helper.make_node("Relu", ["c"], ["y"])])
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=2048))
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")
