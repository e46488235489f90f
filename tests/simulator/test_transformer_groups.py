"""Transformers on the simulated TPU: rank-2/3 MatMul / Gemm / FusedMatMul, LayerNorm, Softmax,
GELU, element-wise ops and attention in layer groups (row layout: tokens over lanes, features
along the EU), tiled along the tokens, with weights streamed in chunks of output features when
they do not fit local memory.

References: the IR interpreter for the BERT-like encoder (tests/ir/transformer_models.py, the
node sequence torch.onnx exports), onnxruntime where installed, and numpy written here for the
single ops."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.simulator import GroupUnit, Load
from tests.ir.transformer_models import bert_feeds, bert_onnx

from .helpers import assert_close, audit_local_memory

PASSES = {"unfused": ("default",), "fused": ("default", "fusions")}


def _bert(tmp_path, passes, **kw):
    model = bert_onnx(layers=2, **kw)
    path = tmp_path / "bert.onnx"
    onnx.save(model, str(path))
    return ob.convert(str(path), passes=passes), bert_feeds(model), model


def _group_share(prog: ob.Program) -> float:
    units = prog.profile().units
    return sum(u.est_ms for u in units if u.kind == "group") / sum(u.est_ms for u in units)


def _grouped_ops(prog: ob.Program) -> set[str]:
    nodes = {n.name: n.op for n in prog.graph.nodes}
    return {nodes[n] for u in prog.units if isinstance(u, GroupUnit) for n in u.nodes}


@pytest.mark.parametrize("passes", PASSES.values(), ids=PASSES.keys())
def test_bert_default_target_runs_in_layer_groups(tmp_path, passes):
    g, feeds, _ = _bert(tmp_path, passes, hidden=64, heads=4, seq=32)
    prog = ob.compile(g, target="bm1684")
    assert_close(prog.run(feeds)["last_hidden_state"], ob.interpret(g, feeds)["last_hidden_state"],
                 "bert on bm1684")
    audit_local_memory(prog)
    want = {"FusedMatMul", "LayerNormalization", "ScaledDotProductAttention", "Add"} \
        if "fusions" in passes else {"MatMul", "Softmax", "Erf", "Add", "Div", "Mul", "Sqrt", "Pow"}
    assert want <= _grouped_ops(prog)
    assert _group_share(prog) > 0.5


@pytest.mark.parametrize("passes", PASSES.values(), ids=PASSES.keys())
@pytest.mark.parametrize("lmem", [2048, 6144])
def test_bert_small_local_memory_tiles_and_streams(tmp_path, passes, lmem):
    """Local memory so small that the tokens are cut into several tiles and the weights
    stream; batch 2 so that batch items are cut too."""
    g, feeds, _ = _bert(tmp_path, passes, hidden=64, heads=4, seq=256, batch=2)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    assert_close(prog.run(feeds)["last_hidden_state"], ob.interpret(g, feeds)["last_hidden_state"],
                 f"bert @ {lmem} B/lane")
    audit_local_memory(prog)
    groups = prog.groups
    assert max(u.tiles for u in groups) > 1
    assert any(k.startswith("stream/") for u in groups for k in u.alloc)


def test_bert_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is an optional extra")
    g, feeds, model = _bert(tmp_path, PASSES["fused"], hidden=64, heads=4, seq=128)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, feeds)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    assert max(u.tiles for u in prog.groups) > 1
    assert_close(prog.run(feeds)["last_hidden_state"], want, "bert vs onnxruntime")


def _linear_model(op: str, rows: tuple[int, ...], k: int, n: int, rng) -> tuple[onnx.ModelProto, dict]:
    """x [rows..., k] -> op(x, w, b) -> Relu, with w [k, n] (Gemm: transposed, [n, k])."""
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    if op == "Gemm":
        node = helper.make_node("Gemm", ["x", "wt", "b"], ["y"], transB=1, alpha=0.5, beta=2.0)
        inits = [numpy_helper.from_array(w.T.copy(), "wt"), numpy_helper.from_array(b, "b")]
    else:
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        inits = [numpy_helper.from_array(w, "w")]
    graph = helper.make_graph(
        [node, helper.make_node("Relu", ["y"], ["z"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*rows, k])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [*rows, n])], inits)
    x = rng.standard_normal((*rows, k)).astype(np.float32)
    y = 0.5 * (x @ w) + 2.0 * b if op == "Gemm" else x @ w
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), {"x": x, "z": np.maximum(y, 0)}


@pytest.mark.parametrize("op, rows", [("MatMul", (2, 200)), ("MatMul", (300,)), ("Gemm", (300,))])
def test_streamed_weight_is_loaded_once_per_row_tile(op, rows):
    """A weight of 256 x 384 f32 (384 KiB) in 4 KiB lanes: it streams in chunks of output
    features, every chunk loaded again for each row tile; the GDMA counts every load."""
    rng = np.random.default_rng(0)
    model, data = _linear_model(op, rows, 256, 384, rng)
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    out = prog.run({"x": data["x"]})["z"]
    assert_close(out, data["z"], op)
    audit_local_memory(prog)
    (g,) = prog.groups
    weight = "wt" if op == "Gemm" else "w"
    loads = [i for i in prog.instrs if isinstance(i, Load) and i.tensor == weight]
    row_tiles = g.tiles
    assert row_tiles > 1 and len(loads) > row_tiles
    assert sum(i.bytes for i in loads) == 256 * 384 * 4 * row_tiles
    assert all(i.sel is not None for i in loads)


def test_activation_tile_uses_row_layout():
    """An activation [1, 128, 768] f32 in a group takes ceil(128 / 64) rows x 768 features
    per lane (tokens over the 64 lanes, features along the EU), not one lane's 128 x 768."""
    b = ob.GraphBuilder("ln")
    x = b.input("x", "f32", (1, 128, 768))
    y = b.op("LayerNormalization", [x, b.constant("s", np.ones(768, np.float32))], axis=-1)
    b.output(b.op("Relu", [y]))
    prog = ob.compile(b.build(), target="bm1684")
    (g,) = prog.groups
    assert g.alloc["x"].size == math.ceil(128 / 64) * 768 * 4


@pytest.mark.parametrize("op, attrs", [("LayerNormalization", {"axis": 1}),
                                       ("LayerNormalization", {"axis": -1}),
                                       ("Softmax", {"axis": 1}), ("Softmax", {"axis": 2})])
def test_norm_axes_of_rank3_in_groups(op, attrs):
    """A normalisation over the tokens (axis 1) is not cut along them; over the features it
    is; numpy written here is the reference."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 96, 48)).astype(np.float32)
    b = ob.GraphBuilder("norm")
    xv = b.input("x", "f32", x.shape)
    ins = [xv] + ([b.constant("s", np.full(x.shape[attrs["axis"]:], 1.5, np.float32))]
                  if op == "LayerNormalization" else [])
    b.output(b.op("Add", [b.op(op, ins, **attrs), xv]))
    # a LayerNormalization over the tokens and the Add after it share a group of two tiles at
    # 2 KiB a lane; at 1 KiB each would be a group of its own, which runs as a global layer
    lmem = 2048 if (op, attrs["axis"]) == ("LayerNormalization", 1) else 1024
    prog = ob.compile(b.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    axis = attrs["axis"] % 3
    if op == "Softmax":
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        want = e / e.sum(axis=axis, keepdims=True)
    else:
        axes = tuple(range(axis, 3))
        want = 1.5 * (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    (out,) = prog.run({"x": x}).values()
    assert_close(out, want + x, f"{op} {attrs}")
    assert prog.groups and max(u.tiles for u in prog.groups) > 1


@pytest.mark.parametrize("shape, perm", [((2, 96, 40), (0, 2, 1)), ((1, 96, 6, 16), (0, 2, 1, 3)),
                                         ((1, 96, 6, 16), (0, 2, 3, 1)), ((2, 6, 96, 16), (0, 1, 3, 2)),
                                         ((2, 6, 96, 16), (0, 2, 1, 3)), ((96, 40), (1, 0))])
def test_transpose_in_groups(shape, perm):
    """Transposes that keep the batch axis first join layer groups (a transformer's heads
    split and merge), cut along the output's rows; numpy's transpose is the reference."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    b = ob.GraphBuilder("transpose")
    xv = b.input("x", "f32", shape)
    y = b.op("Transpose", [b.op("Relu", [xv])], perm=perm)
    b.output(b.op("Mul", [y, y]))
    prog = ob.compile(b.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=16384))
    want = np.square(np.maximum(x, 0).transpose(perm))
    (out,) = prog.run({"x": x}).values()
    assert_close(out, want, f"transpose {perm}")
    assert "Transpose" in _grouped_ops(prog)
    audit_local_memory(prog)


def test_transpose_moving_the_batch_axis_stays_global():
    b = ob.GraphBuilder("transpose")
    xv = b.input("x", "f32", (2, 8, 16))
    b.output(b.op("Transpose", [xv], perm=(1, 0, 2)))
    prog = ob.compile(b.build(), target="bm1684")
    assert not prog.groups


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("axes, grouped", [((-1,), True), ((2,), True), ((1,), False), ((1, 2), False)])
def test_reductions_of_the_last_axis_in_groups(op, axes, grouped):
    """LayerNorm spelt out reduces the last axis with keepdims: such reductions tile along the
    rows; any other reduction stays a global layer."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 96, 40)).astype(np.float32)
    b = ob.GraphBuilder("reduce")
    xv = b.input("x", "f32", x.shape)
    b.output(b.op("Sub", [xv, b.op(op, [xv], axes=axes, keepdims=1)]))
    prog = ob.compile(b.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    red = np.mean if op == "ReduceMean" else np.max
    (out,) = prog.run({"x": x}).values()
    assert_close(out, x - red(x, axis=tuple(a % 3 for a in axes), keepdims=True), f"{op} {axes}")
    assert (op in _grouped_ops(prog)) == grouped


def test_profile_prints_the_share_of_time_in_layer_groups(tmp_path, capsys):
    from opbridge.cli import main

    g, _, _ = _bert(tmp_path, PASSES["fused"], hidden=64, heads=4, seq=32)
    prog = ob.compile(g, target="bm1684")
    path = tmp_path / "bert.obprog"
    prog.save(path)
    assert main(["profile", str(path)]) == 0
    text = capsys.readouterr().out
    units = prog.profile().units
    share = sum(u.est_ms for u in units if u.kind == "group") / sum(u.est_ms for u in units)
    assert f"{100 * share:.0f}% of the time in layer groups" in text
    assert share > 0.9  # only the Reshapes (which move nothing) and the mask's Unsqueeze are global
