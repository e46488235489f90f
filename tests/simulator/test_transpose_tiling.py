"""Transpose under layer-group tiling: every permutation of rank 3 to 5, odd sizes, f32 / f16 /
int8, against onnxruntime (onnx.reference where onnxruntime is absent), and the GDMA bytes a
tiled head split reads: a Transpose that moves the rows (a transformer's heads split
[B, S, H, D] -> [B, H, S, D]) loads each tile's slice of its input along the axis the rows
come from, so the group reads every input byte once, whatever its row tiles."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.simulator import GroupUnit, Load

from .helpers import audit_local_memory

ONNX_DTYPE = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16, "i8": TensorProto.INT8}
NP_DTYPE = {"f32": np.float32, "f16": np.float16, "i8": np.int8}
#: odd sizes, a batch of 3 (not a whole 4N group of int8 items on the BM1684)
SHAPES = {3: (3, 203, 131), 4: (3, 37, 5, 67), 5: (3, 5, 7, 3, 11)}
#: small enough that the row tiles are several (each tensor takes a few KiB per lane whole),
#: large enough for one channel of every rank-4 input
LMEM = 2048


def _transpose_model(shape: tuple[int, ...], perm: tuple[int, ...], dtype: str,
                     relu_first: bool = False) -> onnx.ModelProto:
    """x -> [Relu ->] Transpose(perm) -> Identity -> y; with ``relu_first`` the Transpose reads
    a tensor computed inside its layer group, else the graph input (loaded from DDR). The
    Identity keeps the Transpose out of a group of its own, which would run as a global layer
    (a one-op group, as TPU-MLIR runs it)."""
    nodes, src = [], "x"
    if relu_first:
        nodes.append(helper.make_node("Relu", ["x"], ["r"], name="/relu"))
        src = "r"
    nodes.append(helper.make_node("Transpose", [src], ["t"], name="/transpose", perm=list(perm)))
    nodes.append(helper.make_node("Identity", ["t"], ["y"], name="/identity"))
    out_shape = [shape[p] for p in perm]
    graph = helper.make_graph(nodes, "transpose",
                              [helper.make_tensor_value_info("x", ONNX_DTYPE[dtype], list(shape))],
                              [helper.make_tensor_value_info("y", ONNX_DTYPE[dtype], out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    try:
        import onnxruntime as ort
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, {"x": x})[0]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _sample(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if dtype == "i8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(NP_DTYPE[dtype])


def _check(shape: tuple[int, ...], perm: tuple[int, ...], dtype: str, target: str,
           relu_first: bool = False) -> ob.Program:
    model = _transpose_model(shape, perm, dtype, relu_first)
    x = _sample(shape, dtype)
    prog = ob.compile(ob.convert(model), ob.Target.preset(target, lmem_bytes_per_lane=LMEM))
    (got,) = prog.run({"x": x}).values()
    want = _reference(model, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, err_msg=f"perm {perm} {dtype} on {target}")
    audit_local_memory(prog)
    return prog


def _tiled(prog: ob.Program) -> bool:
    """Whether the Transpose ran in a layer group of several tiles."""
    nodes = {n.name: n.op for n in prog.graph.nodes}
    return any(u.tiles > 1 and "Transpose" in {nodes[n] for n in u.nodes}
               for u in prog.units if isinstance(u, GroupUnit))


def _perms(rank: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(rank)))


@pytest.mark.parametrize("perm", _perms(4), ids=lambda p: "perm=" + "".join(map(str, p)))
@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_rank4_every_permutation(perm, dtype):
    """Those that keep the batch axis first run tiled (with f16 on the BM1684X, which has
    it); the others are global layers. Bit-exact: a transpose moves bytes."""
    target = "bm1684x" if dtype == "f16" else "bm1684"
    prog = _check(SHAPES[4], perm, dtype, target)
    assert _tiled(prog) == (perm[0] == 0)


@pytest.mark.parametrize("perm", _perms(3), ids=lambda p: "perm=" + "".join(map(str, p)))
@pytest.mark.parametrize("dtype", ["f32", "i8"])
def test_rank3_every_permutation(perm, dtype):
    prog = _check(SHAPES[3], perm, dtype, "bm1684")
    assert _tiled(prog) == (perm[0] == 0)


@pytest.mark.parametrize("perm", [(0, 1, 2, 3, 4), (0, 2, 1, 3, 4), (0, 4, 3, 2, 1), (4, 0, 2, 1, 3),
                                  (1, 0, 2, 3, 4)], ids=lambda p: "perm=" + "".join(map(str, p)))
def test_rank5(perm):
    """Rank 5 has no rank-4 view: a global layer, on whole tensors."""
    prog = _check(SHAPES[5], perm, "f32", "bm1684")
    assert not _tiled(prog)


@pytest.mark.parametrize("perm", [p for p in _perms(4) if p[0] == 0],
                         ids=lambda p: "perm=" + "".join(map(str, p)))
def test_input_computed_in_the_group(perm):
    """A Transpose whose input is computed in its group holds that input whole (the tile
    kernel cuts its rows): still the reference's bytes."""
    _check(SHAPES[4], perm, "f32", "bm1684", relu_first=True)


def _loaded_bytes(prog: ob.Program, tensor: str) -> int:
    return sum(i.bytes for i in prog.instrs if isinstance(i, Load) and i.tensor == tensor)


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 2, 3, 1)], ids=["heads-split", "keys-split"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_tiled_head_split_reads_its_input_once(perm, dtype):
    """[B, S, H, D] = [2, 50, 4, 16] split into heads, the tokens moved off the rows (to the
    channels, or to the columns for the keys' [B, H, D, S]): several row tiles, and the GDMA
    loads of x add up to x's bytes, 2 * 50 * 4 * 16 elements (2 or 4 bytes each), not that
    once per tile."""
    elems = 2 * 50 * 4 * 16
    model = _transpose_model((2, 50, 4, 16), perm, dtype)
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684x", lmem_bytes_per_lane=LMEM))
    assert _tiled(prog)
    assert _loaded_bytes(prog, "x") == elems * {"f32": 4, "f16": 2}[dtype]
    x = _sample((2, 50, 4, 16), dtype)
    np.testing.assert_array_equal(prog.run({"x": x})["y"], x.transpose(perm))


def test_bert_head_split_after_linear_reads_once():
    """The BERT pattern, Linear -> Reshape [B, S, 4 * 16] -> [B, S, 4, 16] -> Transpose
    (0, 2, 1, 3) -> Softmax: the Transpose's group loads the reshaped projection once,
    2 * 64 * 64 f32 elements, and the profile counts those bytes in its group."""
    b, s, f = 2, 64, 64
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((f, f)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["q"], name="/q"),
             helper.make_node("Reshape", ["q", "split"], ["q4"], name="/split"),
             helper.make_node("Transpose", ["q4"], ["qt"], name="/heads", perm=[0, 2, 1, 3]),
             helper.make_node("Softmax", ["qt"], ["y"], name="/softmax", axis=-1)]
    graph = helper.make_graph(
        nodes, "head_split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, f])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, 4, s, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([b, s, 4, 16], np.int64), "split")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    x = rng.standard_normal((b, s, f)).astype(np.float32)
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684x", lmem_bytes_per_lane=LMEM))
    assert _tiled(prog)
    assert _loaded_bytes(prog, "q4") == b * s * f * 4
    want = _reference(model, x)
    np.testing.assert_allclose(prog.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    audit_local_memory(prog)
    group = next(i for i, u in enumerate(prog.units) if isinstance(u, GroupUnit) and "/heads" in u.nodes)
    p = prog.profile()
    loads = [e for e in p.events if e["args"]["unit"] == group and e["name"] == "load q4"]
    assert len(loads) == prog.units[group].tiles > 1
    # its loads plus the stores of its output, [2, 4, 64, 16] f32: nothing read twice
    assert p.units[group].gdma_bytes == 2 * b * s * f * 4
