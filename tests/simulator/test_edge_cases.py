"""Graphs at the edges of what the compiler plans: symbolic shapes, several outputs per node,
outputs that are inputs or constants, integer tensors, unused results."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import GlobalUnit, Store

from .helpers import audit_local_memory


def _run_both(g: ob.Graph, feeds: dict, lmem: int = 2048) -> None:
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    out = prog.run(feeds)
    ref = ob.interpret(g, feeds)
    assert list(out) == list(ref)
    for k in ref:
        np.testing.assert_array_equal(out[k], ref[k], err_msg=k)
    audit_local_memory(prog)


def test_symbolic_shape_is_a_clear_error():
    b = ob.GraphBuilder("dyn")
    x = b.input("x", "f32", ("batch", 3, 8, 8))
    b.output(b.op("Relu", [x]))
    g = b.build(require_static=False)
    with pytest.raises(ob.SimulatorError, match=r"'x'.*symbolic.*\n.*--input-shape"):
        ob.compile(g, "bm1684")


def test_multi_output_node_runs_as_global_layer():
    b = ob.GraphBuilder("split")
    x = b.input("x", "f32", (1, 8, 6, 6))
    r = b.op("Relu", [x])
    a, c = b.op("Split", [r], axis=1, split=(3, 5))
    b.output(b.op("Sigmoid", [a]), c)
    g = b.build()
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)}
    prog = ob.compile(g, "bm1684")
    assert any(isinstance(u, GlobalUnit) and u.op == "Split" for u in prog.units)
    _run_both(g, feeds)


def test_output_is_an_input_and_a_constant():
    b = ob.GraphBuilder("passthrough")
    x = b.input("x", "f32", (1, 2, 4, 4))
    k = b.constant("k", np.arange(4, dtype=np.float32))
    b.output(x, k, b.op("Relu", [x]))
    g = b.build()
    _run_both(g, {"x": np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)})


def test_integer_tensors_in_a_group():
    b = ob.GraphBuilder("ints")
    x = b.input("x", "i32", (1, 70, 9, 5))
    y = b.op("Add", [b.op("Relu", [x]), b.constant("one", np.ones((1, 70, 1, 1), np.int32))])
    b.output(y)
    g = b.build()
    feeds = {"x": np.random.default_rng(2).integers(-50, 50, (1, 70, 9, 5)).astype(np.int32)}
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    assert prog.groups and prog.num_tiles > 1
    _run_both(g, feeds, lmem=1024)


def test_unused_result_is_not_stored():
    b = ob.GraphBuilder("dead")
    x = b.input("x", "f32", (1, 4, 8, 8))
    b.op("Sigmoid", [x])  # used by nobody
    b.output(b.op("Relu", [x]))
    g = b.build()
    prog = ob.compile(g, "bm1684")
    assert all(not isinstance(i, Store) or i.tensor != "sigmoid_1" for i in prog.instrs)
    _run_both(g, {"x": np.random.default_rng(3).standard_normal((1, 4, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("const_shape", [(1, 1, 12, 7), (2, 1, 12, 7), (2, 5, 1, 7)],
                         ids=["const=1x1xHxW", "const=NxHxW", "const=NxCx1xW"])
def test_constant_operand_shaped_like_activations_is_tiled(const_shape):
    """A broadcast constant with the activations' H (or N) is read at each tile's rows. At 768
    bytes a lane the Relu and the Mul share a group (at 256 each would be a group of its own,
    and a layer alone runs as a global layer)."""
    rng = np.random.default_rng(4)
    b = ob.GraphBuilder("const_mul")
    x = b.input("x", "f32", (2, 5, 12, 7))
    c = b.constant("c", rng.standard_normal(const_shape).astype(np.float32))
    b.output(b.op("Mul", [b.op("Relu", [x]), c]))
    g = b.build()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=768))
    assert prog.num_tiles > 2 and prog.profile().num_global_layers == 0
    _run_both(g, {"x": rng.standard_normal((2, 5, 12, 7)).astype(np.float32)}, lmem=768)


@pytest.mark.parametrize("const_shape", [(12, 7), (5, 12, 7), (1, 7), (7,)],
                         ids=["const=HxW", "const=CxHxW", "const=1xW", "const=W"])
def test_lower_rank_constant_broadcast_along_rows(const_shape):
    """A rank-2/3 constant that varies along H (an attention mask) is added whole: the tiles
    must not cut rows it would have to be sliced at (only rank-4 constants are sliced). At
    1536 bytes a lane the Relu and the Add share a group of several tiles."""
    rng = np.random.default_rng(5)
    b = ob.GraphBuilder("mask_add")
    x = b.input("x", "f32", (2, 5, 12, 7))
    c = rng.standard_normal(const_shape).astype(np.float32)
    b.output(b.op("Add", [b.op("Relu", [x]), b.constant("mask", c)]))
    g = b.build()
    feeds = {"x": rng.standard_normal((2, 5, 12, 7)).astype(np.float32)}
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1536))
    assert prog.num_tiles > 1 and prog.profile().num_global_layers == 0
    out = prog.run(feeds)[g.outputs[0].name]
    np.testing.assert_allclose(out, np.maximum(feeds["x"], 0) + c, rtol=1e-6)  # numpy broadcasting
    audit_local_memory(prog)
