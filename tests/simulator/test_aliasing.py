"""Shared memory: reshapes (bmcompiler's ``just_reshape``) and in-place layers (``can_inplace``)
take their input's bytes instead of copying, in DDR and in local memory; results still match
the reference interpreter, and the profile counts the bytes saved."""

from __future__ import annotations

import json

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.opdef import DEFAULT_OPS
from opbridge.simulator import DEFAULT_KERNELS, GlobalOp

from .helpers import assert_close, audit_local_memory


def _run_both(g: ob.Graph, prog: ob.Program, tmp_path=None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}
    want = ob.interpret(g, feeds, keep_intermediates=True)
    got = prog.run(feeds, keep_intermediates=True)
    for name, arr in got.items():
        assert_close(arr, want[name], name)
    if tmp_path is not None:
        prog.save(tmp_path / "p.obprog")
        again = ob.load_program(tmp_path / "p.obprog").run(feeds)
        for v in g.outputs:
            assert_close(again[v.name], want[v.name], f"reloaded {v.name}")
    return got


def _reshapes() -> ob.Graph:
    b = ob.GraphBuilder("reshapes")
    x = b.input("x", "f32", (2, 8, 4, 6))
    r = b.op("Relu", [x])
    f = b.op("Flatten", [r], axis=1)                                       # (2, 192)
    u = b.op("Unsqueeze", [f], axes=(2, 3))                                # (2, 192, 1, 1)
    s = b.op("Squeeze", [u], axes=(3,))                                    # (2, 192, 1)
    y = b.op("Reshape", [s], shape=(2, 16, 12, 1))
    b.output(b.op("Sigmoid", [y]))
    b.output(r)
    return b.build()


def test_reshapes_share_ddr_bytes(tmp_path):
    g = _reshapes()
    prog = ob.compile(g)
    _run_both(g, prog, tmp_path)
    reshaped = [n for n in g.nodes if n.op in ("Flatten", "Unsqueeze", "Squeeze", "Reshape")]
    assert len(reshaped) == 4
    relu_out = next(n for n in g.nodes if n.op == "Relu").outputs[0].name
    for n in reshaped:
        t = prog.ddr.tensors[n.outputs[0].name]
        assert t.alias_of == relu_out and t.addr == prog.ddr.tensors[relu_out].addr
    ops = {i.node: i for i in prog.instrs if isinstance(i, GlobalOp)}
    assert all(ops[n.name].alias and ops[n.name].bytes == 0 for n in reshaped)
    p = prog.profile()
    assert p.ddr_shared_bytes == 4 * 2 * 8 * 4 * 6 * 4
    assert prog.format_version() == 3


@pytest.fixture
def add_one():
    """A plugin op ``x + 1``; the kernel is registered by each test."""
    if "TestAddOne" not in DEFAULT_OPS:
        (ob.define_op("TestAddOne").input("x", "T").output("y", "T").type_param("T", allowed=("f32",))
         .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(lambda x: x + np.float32(1)))
    yield
    DEFAULT_KERNELS.remove("TestAddOne")


def _chain(branch: bool) -> ob.Graph:
    """x -> Sigmoid -> TestAddOne -> Tanh (and, with ``branch``, Sigmoid's output read again)."""
    b = ob.GraphBuilder("inplace")
    x = b.input("x", "f32", (1, 8, 16, 16))
    s = b.op("Sigmoid", [x])
    a = b.op("TestAddOne", [s])
    y = b.op("Tanh", [a])
    b.output(b.op("Add", [y, s]) if branch else y)
    return b.build()


@pytest.mark.parametrize("branch", [False, True], ids=["last-use", "read-later"])
def test_inplace_global_layer_shares_ddr(add_one, branch, tmp_path):
    ob.register_kernel("TestAddOne").inplace()
    g = _chain(branch)
    prog = ob.compile(g)
    _run_both(g, prog, tmp_path)
    node = next(n for n in g.nodes if n.op == "TestAddOne")
    t = prog.ddr.tensors[node.outputs[0].name]
    if branch:  # its input is read afterwards: it must keep its own bytes
        assert t.alias_of is None
        assert prog.profile().ddr_shared_bytes == 0
    else:
        assert t.alias_of == node.inputs[0].name
        assert prog.profile().ddr_shared_bytes == 8 * 16 * 16 * 4


@pytest.mark.parametrize("branch", [False, True], ids=["last-use", "read-later"])
def test_inplace_local_layer_shares_its_tile(add_one, branch, tmp_path):
    ob.register_kernel("TestAddOne").split("N", "H", "W").inplace()
    g = _chain(branch)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    _run_both(g, prog, tmp_path)
    node = next(n for n in g.nodes if n.op == "TestAddOne")
    (group,) = prog.groups
    assert group.k > 1 and node.name in group.nodes
    audit_local_memory(prog)
    out = node.outputs[0].name
    if branch:
        assert group.aliases == {} and group.lmem_saved == 0
    else:
        assert group.aliases == {out: node.inputs[0].name}
        assert group.alloc[out] == group.alloc[node.inputs[0].name]
        assert prog.profile().lmem_shared_bytes == group.lmem_saved > 0


def test_without_the_hint_nothing_is_shared(add_one):
    ob.register_kernel("TestAddOne").split("N", "H", "W")
    g = _chain(False)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    assert all(not u.aliases for u in prog.groups)
    assert prog.format_version() == 2


def _tamper(prog: ob.Program, tmp_path, edit) -> ob.Program:
    from .test_program_io import _rewrite

    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    edit(doc)
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    return bad


def test_version_3_fields_are_checked_on_load(tmp_path):
    """A shared tensor must sit at its owner's address; a scratch entry must be plain bytes."""
    prog = ob.compile(_reshapes())
    name = next(k for k, t in prog.ddr.tensors.items() if t.alias_of is not None)

    def move(doc):
        doc["ddr"]["tensors"][name]["addr"] += 64

    with pytest.raises(ob.ModelFormatError, match=f"'{name}' shares the bytes of"):
        ob.load_program(_tamper(prog, tmp_path, move))

    def scratch(doc):
        doc["ddr"]["tensors"]["scratch/x"] = {"addr": 0, "shape": [8, 8], "dtype": "u8", "nbytes": 64,
                                              "region": "scratch"}

    with pytest.raises(ob.ModelFormatError, match="scratch buffer 'scratch/x'"):
        ob.load_program(_tamper(prog, tmp_path, scratch))

    def unknown(doc):
        doc["units"][0]["kw2"] = 1

    with pytest.raises(ob.ModelFormatError, match="unknown field 'kw2'"):
        ob.load_program(_tamper(prog, tmp_path, unknown))
