"""Structure-aware mutators: they decode a seed, change its fields, and re-encode it.

Byte flips of a protobuf or a safetensors header mostly fail at decoding; these mutants
decode fine, so they reach the parsers', mappers' and verifier's deeper checks.

- ONNX: the seed ModelProto is decoded and its dims, element types, raw data, attributes
  (types swapped, deleted, duplicated, edge values), node inputs/outputs, node order, opset
  imports, graph inputs/outputs, value_info and If/Loop subgraphs are mutated.
- ``.obir`` / ``.obprog``: see ``structured_json``.

Every case label is ``kind seed=S case=I``; the same (seed, case) re-creates the same mutant.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from .mutate import Outcome, judge

EDGE_INTS = (0, -1, -7, 1, 2**31, 2**31 - 1, 2**32, 10**12, 2**62, -(2**63))
JUNK_TYPES = (0, 8, 17, 23, 24, 25, 26, 99, 1000, -1, 2**31 - 1)


# -- ONNX --------------------------------------------------------------------------------------
def onnx_structured_seed() -> onnx.ModelProto:
    """A small valid model with many attribute kinds, a Constant node and an If with subgraphs."""
    rng = np.random.default_rng(1)
    f = TensorProto.FLOAT
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((5, 16)).astype(np.float32), "fc_w")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    cond = numpy_helper.from_array(np.array(True), "cond")

    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["g"], [f"{name}_out"], name=f"{name}_op")], name, [],
                                 [helper.make_tensor_value_info(f"{name}_out", f, [1, 5])])

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["r"], name="lrelu", alpha=0.1),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["t"], name="tr", perm=[0, 1, 3, 2]),
        helper.make_node("Reshape", ["t", "shape"], ["flat"], name="flat_op"),
        helper.make_node("Constant", [], ["k"], name="konst",
                         value=numpy_helper.from_array(np.full((1, 16), 0.5, np.float32))),
        helper.make_node("Slice", ["flat", "starts", "ends"], ["s"], name="slice"),
        helper.make_node("Mul", ["s", "k"], ["m"], name="mul"),
        helper.make_node("Gemm", ["m", "fc_w"], ["g"], name="gemm", alpha=1.0, beta=1.0, transB=1),
        helper.make_node("If", ["cond"], ["iy"], name="if", then_branch=branch("then", "Relu"),
                         else_branch=branch("else", "Sigmoid")),
        helper.make_node("Softmax", ["iy"], ["sm"], name="softmax", axis=-1),
        helper.make_node("Cast", ["sm"], ["y"], name="cast", to=f),
    ]
    starts = numpy_helper.from_array(np.array([0, 0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([1, 16], np.int64), "ends")
    g = helper.make_graph(nodes, "structured", [helper.make_tensor_value_info("x", f, [1, 3, 4, 8])],
                          [helper.make_tensor_value_info("y", f, [1, 5])],
                          initializer=[w, fc, shape, cond, starts, ends],
                          value_info=[helper.make_tensor_value_info("c", f, [1, 4, 4, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def onnx_structured_seed_ops() -> onnx.ModelProto:
    """A second seed: shape-computing and data-movement ops (Split, Gather, Pad, Expand, Tile,
    ConstantOfShape, Range, TopK, Resize, BatchNormalization, Loop), whose attributes and
    constant inputs feed shape functions."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64

    def c(name: str, arr: np.ndarray) -> TensorProto:
        return numpy_helper.from_array(arr, name)

    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body", [helper.make_tensor_value_info("iter", i64, []), helper.make_tensor_value_info("cond_in", 9, []),
                 helper.make_tensor_value_info("acc_in", f, [1, 2])],
        [helper.make_tensor_value_info("cond_out", 9, []), helper.make_tensor_value_info("acc_out", f, [1, 2])],
        initializer=[c("one", np.ones((1, 2), np.float32))])
    nodes = [
        helper.make_node("BatchNormalization", ["x", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn",
                         epsilon=1e-5),
        helper.make_node("Resize", ["bn", "", "scales"], ["rs"], name="resize", mode="nearest"),
        helper.make_node("Pad", ["rs", "pads"], ["pd"], name="pad", mode="constant"),
        helper.make_node("Split", ["pd", "split"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Concat", ["s1", "s0"], ["cc"], name="concat", axis=1),
        helper.make_node("ReduceMean", ["cc"], ["rm"], name="rmean", axes=[2, 3], keepdims=0),
        helper.make_node("Gather", ["rm", "gidx"], ["ga"], name="gather", axis=1),
        helper.make_node("Unsqueeze", ["ga", "uax"], ["us"], name="unsq"),
        helper.make_node("Flatten", ["us"], ["fl"], name="flatten", axis=1),
        helper.make_node("ConstantOfShape", ["cshape"], ["cs"], name="cos",
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Range", ["r0", "r1", "r2"], ["rg"], name="range"),
        helper.make_node("Cast", ["rg"], ["rgf"], name="rcast", to=f),
        helper.make_node("Expand", ["rgf", "eshape"], ["ex"], name="expand"),
        helper.make_node("Tile", ["cs", "reps"], ["tl"], name="tile"),
        helper.make_node("Add", ["fl", "ex"], ["a1"], name="add1"),
        helper.make_node("Mul", ["a1", "tl"], ["m1"], name="mul1"),
        helper.make_node("Clip", ["m1", "lo", "hi"], ["cl"], name="clip"),
        helper.make_node("TopK", ["cl", "k"], ["tv", "ti"], name="topk", axis=-1, largest=1),
        helper.make_node("Loop", ["trip", "cond", "tv"], ["y"], name="loop", body=body),
    ]
    inits = [
        c("bn_s", np.ones(3, np.float32)), c("bn_b", np.zeros(3, np.float32)),
        c("bn_m", np.zeros(3, np.float32)), c("bn_v", np.ones(3, np.float32)),
        c("scales", np.array([1, 1, 2, 2], np.float32)), c("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        c("split", np.array([1, 2], np.int64)), c("gidx", np.array([0, 1], np.int64)),
        c("uax", np.array([1], np.int64)), c("cshape", np.array([1, 2], np.int64)),
        c("r0", np.array(0, np.int64)), c("r1", np.array(2, np.int64)), c("r2", np.array(1, np.int64)),
        c("eshape", np.array([1, 2], np.int64)), c("reps", np.array([1, 1], np.int64)),
        c("lo", np.array(-5, np.float32)), c("hi", np.array(5, np.float32)), c("k", np.array([2], np.int64)),
        c("trip", np.array(2, np.int64)), c("cond", np.array(True)),
    ]
    g = helper.make_graph(nodes, "structured_ops", [helper.make_tensor_value_info("x", f, [1, 3, 4, 8])],
                          [helper.make_tensor_value_info("y", f, [1, 2])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def onnx_structured_seeds() -> list[onnx.ModelProto]:
    """Every ONNX seed the structured fuzzer mutates (cases alternate between them)."""
    return [onnx_structured_seed(), onnx_structured_seed_ops()]


def _graphs(g: onnx.GraphProto) -> list[onnx.GraphProto]:
    out = [g]
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out.extend(_graphs(a.g))
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    out.extend(_graphs(sub))
    return out


def _tensors(g: onnx.GraphProto) -> list[TensorProto]:
    out = list(g.initializer)
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.TENSOR:
                out.append(a.t)
    return out


def _names(g: onnx.GraphProto) -> list[str]:
    names = [vi.name for vi in g.input] + [t.name for t in g.initializer]
    return names + [o for n in g.node for o in n.output]


def _junk_graph(rng: random.Random, depth: int) -> onnx.GraphProto:
    """A subgraph that is junk in a random way (undefined input, no output, nested If)."""
    node = helper.make_node(rng.choice(["Relu", "Add", "Sigmoid", "If", "Nope"]), [rng.choice(["g", "ghost", ""])],
                            ["sub_out"], name=f"junk{depth}")
    if depth > 0 and rng.random() < 0.5:
        node.attribute.append(helper.make_attribute("then_branch", _junk_graph(rng, depth - 1)))
    outs = [] if rng.random() < 0.2 else [helper.make_tensor_value_info("sub_out", TensorProto.FLOAT, None)]
    return helper.make_graph([node], f"junk{depth}", [], outs)


def _attr_of_type(name: str, t: int, rng: random.Random) -> AttributeProto:
    A = AttributeProto
    values: dict[int, Callable[[], Any]] = {
        A.INT: lambda: rng.choice(EDGE_INTS),
        A.FLOAT: lambda: rng.choice([0.0, -1.0, 1e308, float("nan"), float("inf")]),
        A.STRING: lambda: rng.choice([b"", b"junk", b"\xff\xfe"]),
        A.INTS: lambda: [rng.choice(EDGE_INTS) for _ in range(rng.randrange(0, 6))],
        A.FLOATS: lambda: [rng.random() for _ in range(rng.randrange(0, 4))],
        A.TENSOR: lambda: numpy_helper.from_array(np.zeros(rng.choice([0, 1, 3]), np.float32), "at"),
        A.GRAPH: lambda: _junk_graph(rng, 2),
        A.STRINGS: lambda: [b"a", b""],
    }
    a = helper.make_attribute(name, values[t](), attr_type=t)
    return a


def _mut_dims(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    ts = _tensors(g)
    if ts and rng.random() < 0.6:
        t = rng.choice(ts)
        if t.dims and rng.random() < 0.8:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(EDGE_INTS)
        else:
            t.dims.append(rng.choice(EDGE_INTS))
        return
    vis = list(g.input) + list(g.output) + list(g.value_info)
    if vis:
        shp = rng.choice(vis).type.tensor_type.shape
        if shp.dim and rng.random() < 0.8:
            d = shp.dim[rng.randrange(len(shp.dim))]
            d.dim_value = rng.choice(EDGE_INTS)
        else:
            shp.dim.add().dim_value = rng.choice(EDGE_INTS)


def _mut_dtype(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    ts = _tensors(g)
    if ts and rng.random() < 0.6:
        rng.choice(ts).data_type = rng.choice(JUNK_TYPES + (TensorProto.INT64, TensorProto.FLOAT16,
                                                            TensorProto.BOOL, TensorProto.DOUBLE))
    else:
        vis = list(g.input) + list(g.output) + list(g.value_info)
        if vis:
            rng.choice(vis).type.tensor_type.elem_type = rng.choice(JUNK_TYPES)


def _mut_raw(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    ts = [t for t in _tensors(g) if t.raw_data]
    if not ts:
        return
    t = rng.choice(ts)
    k = rng.randrange(4)
    if k == 0:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data))]
    elif k == 1:
        t.raw_data = t.raw_data + bytes(rng.randrange(1, 64))
    elif k == 2:
        t.ClearField("raw_data")
    else:  # typed fields as well as raw data
        t.float_data.extend([1.0, 2.0])


def _pick_node(g: onnx.GraphProto, rng: random.Random) -> onnx.NodeProto | None:
    return rng.choice(g.node) if len(g.node) else None


def _mut_attr_type(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None:
        return
    A = AttributeProto
    kinds = [A.INT, A.FLOAT, A.STRING, A.INTS, A.FLOATS, A.TENSOR, A.GRAPH, A.STRINGS]
    if len(n.attribute) and rng.random() < 0.8:
        i = rng.randrange(len(n.attribute))
        old = n.attribute[i]
        new = _attr_of_type(old.name, rng.choice([k for k in kinds if k != old.type]), rng)
        n.attribute[i].CopyFrom(new)
    else:
        name = rng.choice(["alpha", "axis", "perm", "to", "pads", "then_branch", "value", "junk"])
        n.attribute.append(_attr_of_type(name, rng.choice(kinds), rng))


def _mut_attr_edge(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None or not len(n.attribute):
        return
    a = rng.choice(n.attribute)
    if a.type in (AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.INTS, AttributeProto.FLOATS,
                  AttributeProto.STRING):
        a.CopyFrom(_attr_of_type(a.name, a.type, rng))
    elif a.type == AttributeProto.TENSOR:
        a.t.dims.append(rng.choice(EDGE_INTS))
    else:
        a.type = rng.choice([0, 99, AttributeProto.INT])


def _mut_attr_del_dup(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None or not len(n.attribute):
        return
    i = rng.randrange(len(n.attribute))
    if rng.random() < 0.5:
        del n.attribute[i]
    else:
        n.attribute.append(copy.deepcopy(n.attribute[i]))


def _mut_inputs(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None:
        return
    names = _names(m.graph) + _names(g)
    choice = rng.choice(["ghost", "", rng.choice(names) if names else "x", "x"])
    if len(n.input) and rng.random() < 0.7:
        n.input[rng.randrange(len(n.input))] = choice
    elif rng.random() < 0.5 and len(n.input):
        del n.input[rng.randrange(len(n.input))]
    else:
        n.input.append(choice)


def _mut_outputs(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None:
        return
    names = _names(g)
    k = rng.randrange(4)
    if k == 0 and len(n.output):
        n.output[rng.randrange(len(n.output))] = rng.choice(names)
    elif k == 1:
        n.output.append(rng.choice(list(n.output) + names))
    elif k == 2 and len(n.output):
        n.output[0] = ""
    else:
        n.ClearField("output")


def _mut_order(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    nodes = list(g.node)
    if len(nodes) < 2:
        return
    k = rng.randrange(4)
    if k == 0:
        rng.shuffle(nodes)
    elif k == 1:
        i, j = rng.sample(range(len(nodes)), 2)
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif k == 2:  # a cycle: an early node reads a later node's output
        i, j = sorted(rng.sample(range(len(nodes)), 2))
        if len(nodes[i].input) and len(nodes[j].output):
            nodes[i].input[0] = nodes[j].output[0]
    else:  # a self-loop
        n = rng.choice(nodes)
        if len(n.input) and len(n.output):
            n.input[0] = n.output[0]
    del g.node[:]
    g.node.extend(nodes)


def _mut_opset(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    k = rng.randrange(4)
    if k == 0 and len(m.opset_import):
        m.opset_import[0].version = rng.choice([0, -1, 1, 6, 999, 2**62])
    elif k == 1:
        m.opset_import.add(domain=rng.choice(["ai.onnx", "junk.domain", "", "\u00e9"]),
                           version=rng.choice([0, -1, 999, 1]))
    elif k == 2:
        n = _pick_node(g, rng)
        if n is not None:
            n.domain = rng.choice(["junk.domain", "ai.onnx.ml", "com.microsoft", "ai.onnx"])
    else:
        n = _pick_node(g, rng)
        if n is not None:
            n.op_type = rng.choice(["If", "Loop", "Scan", "Constant", "Relu", "Conv", "", "Nope",
                                    rng.choice(g.node).op_type])


def _mut_io(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    k = rng.randrange(5)
    if k == 0 and len(g.input):
        del g.input[rng.randrange(len(g.input))]
    elif k == 1 and len(g.output):
        g.output[rng.randrange(len(g.output))].name = rng.choice(["ghost", "", "x", "w", "c"])
    elif k == 2 and len(g.initializer):
        g.input.append(helper.make_tensor_value_info(rng.choice(g.initializer).name, TensorProto.FLOAT,
                                                     [rng.choice(EDGE_INTS)]))
    elif k == 3:
        g.output.append(copy.deepcopy(g.output[0]) if len(g.output) else
                        helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    elif len(g.initializer):
        g.initializer.append(copy.deepcopy(rng.choice(g.initializer)))


def _mut_value_info(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    names = _names(g) or ["v"]
    shape = rng.choice([None, [], [rng.choice(EDGE_INTS)], ["N", -1, 0], [1] * rng.randrange(0, 40)])
    vi = helper.make_tensor_value_info(rng.choice(names), rng.choice(JUNK_TYPES + (1,)), shape)
    if rng.random() < 0.3:
        vi.type.ClearField("tensor_type")
        vi.type.sequence_type.elem_type.tensor_type.elem_type = 1
    rng.choice([g.value_info, g.input, g.output]).append(vi)


def _mut_subgraph(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    n = _pick_node(g, rng)
    if n is None:
        return
    depth = rng.choice([1, 3, 10, 25])  # protobuf refuses messages nested past ~100
    sub = _junk_graph(rng, 0)
    for level in range(depth):  # nested in then_branch only: the size stays linear in the depth
        wrap = helper.make_node("If", ["cond"], ["sub_out"], name=f"nest{level}", then_branch=sub,
                                else_branch=_junk_graph(rng, 0))
        sub = helper.make_graph([wrap], "nest", [], [helper.make_tensor_value_info("sub_out", 1, None)])
    n.attribute.append(helper.make_attribute(rng.choice(["then_branch", "else_branch", "body"]), sub))


def _mut_external(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    ts = _tensors(g)
    if not ts:
        return
    t = rng.choice(ts)
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for key, val in (("location", rng.choice(["../x.bin", "/dev/zero", "", "case.onnx", "nope.bin", "."])),
                     ("offset", rng.choice(["0", "-1", "x", str(2**40)])),
                     ("length", rng.choice(["0", "16", "-5", str(10**12)]))):
        if rng.random() < 0.85:
            t.external_data.add(key=key, value=val)


def _mut_sparse(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    vals = numpy_helper.from_array(np.ones(rng.choice([0, 2, 3]), np.float32), rng.choice(["w", "sp", "x"]))
    idx = rng.choice([[0, 1], [5, 2**40], [-1, 0], [[0, 0], [1, 1]], []])
    ind = numpy_helper.from_array(np.array(idx, np.int64), "")
    sp = helper.make_sparse_tensor(vals, ind, [rng.choice(EDGE_INTS) for _ in range(rng.choice([1, 2]))])
    g.sparse_initializer.append(sp)


def _mut_delete_node(m: onnx.ModelProto, g: onnx.GraphProto, rng: random.Random) -> None:
    if len(g.node):
        del g.node[rng.randrange(len(g.node))]


ONNX_MUTATORS: tuple[Callable[[onnx.ModelProto, onnx.GraphProto, random.Random], None], ...] = (
    _mut_dims, _mut_dtype, _mut_raw, _mut_attr_type, _mut_attr_edge, _mut_attr_del_dup, _mut_inputs,
    _mut_outputs, _mut_order, _mut_opset, _mut_io, _mut_value_info, _mut_subgraph, _mut_external,
    _mut_sparse, _mut_delete_node,
)


def onnx_mutants(seed_models: onnx.ModelProto | list[onnx.ModelProto], n: int,
                 seed: int) -> Iterator[tuple[str, bytes]]:
    """``n`` structured mutants, serialised; case ``i`` mutates ``seed_models[i % len]``.
    Each label (seed, case, the mutators applied) re-creates its case."""
    models = seed_models if isinstance(seed_models, list) else [seed_models]
    for i in range(n):
        rng = random.Random(f"onnx-structured:{seed}:{i}")
        m = copy.deepcopy(models[i % len(models)])
        done = []
        try:
            for _ in range(rng.randrange(1, 4)):
                graphs = _graphs(m.graph)
                g = m.graph if rng.random() < 0.7 else rng.choice(graphs)
                mut = rng.choice(ONNX_MUTATORS)
                mut(m, g, rng)
                done.append(mut.__name__[5:])
            data = m.SerializeToString()
        except Exception:  # a mutant protobuf itself refuses to build or encode is not a test case
            continue
        yield f"onnx-structured seed={seed} case={i} [{','.join(done)}]", data


def run_onnx_structured(load: Callable[[Path], Any], seed_model: onnx.ModelProto | list[onnx.ModelProto],
                        tmp: Path, n: int, seed: int) -> list[Outcome]:
    """Judge ``load`` on ``n`` structured ONNX mutants; returns the failures."""
    path = tmp / "case.onnx"
    failures = []
    for label, data in onnx_mutants(seed_model, n, seed):
        path.write_bytes(data)
        out = judge(label, lambda: load(path))  # noqa: B023 (called at once)
        if not out.ok:
            failures.append(out)
    return failures
