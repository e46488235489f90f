"""Structure-aware fuzzing: decoded-and-mutated ONNX models, .obir and .obprog files.

Each mutant converts/loads or raises an OpbridgeError with a message. The short run here
takes ``OPBRIDGE_FUZZ_STRUCTURED_CASES`` (default 150) cases per kind; the long run is
``python scripts/fuzz.py --kind onnx-structured --kind obir-structured --kind obprog-structured``.
The crafted cases below pin what the structured fuzzer found, each checked against onnx's
own checker (an outside reference) where it is an ONNX model.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper
from safetensors import safe_open
from safetensors.numpy import save_file

import opbridge as ob

from .mutate import judge
from .structured import onnx_mutants, onnx_structured_seed, onnx_structured_seeds, run_onnx_structured
from .structured_json import run_json_structured

CASES = int(os.environ.get("OPBRIDGE_FUZZ_STRUCTURED_CASES", "150"))
X = np.random.default_rng(0).standard_normal((1, 3, 4, 8)).astype(np.float32)

def _report(failures):
    return "\n".join(f"{f.case}: {f.detail}" for f in failures[:10])


@pytest.fixture
def seed_files(tmp_path):
    p = tmp_path / "seed.onnx"
    p.write_bytes(onnx_structured_seed().SerializeToString())
    g = ob.convert(p)
    ob.save(g, tmp_path / "seed.obir")
    ob.compile(g, target="bm1684").save(tmp_path / "seed.obprog")
    return tmp_path


@pytest.mark.parametrize("index", [0, 1], ids=["seed=conv-if", "seed=shape-ops-loop"])
def test_seed_is_valid_and_matches_the_reference(tmp_path, index):
    from onnx.reference import ReferenceEvaluator

    m = onnx_structured_seeds()[index]
    onnx.checker.check_model(m, full_check=True)
    p = tmp_path / "seed.onnx"
    p.write_bytes(m.SerializeToString())
    want = ReferenceEvaluator(m).run(None, {"x": X})[0]
    got = ob.interpret(ob.convert(p), {"x": X})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_onnx_mutants_are_reproducible():
    a = list(onnx_mutants(onnx_structured_seed(), 20, seed=9))
    b = list(onnx_mutants(onnx_structured_seed(), 20, seed=9))
    assert a == b
    assert len({data for _, data in a}) > 15


def test_fuzz_onnx_structured(tmp_path):
    failures = run_onnx_structured(ob.convert, onnx_structured_seeds(), tmp_path, CASES, seed=21)
    assert not failures, _report(failures)


def test_fuzz_obir_structured(seed_files):
    failures = run_json_structured(ob.load, seed_files / "seed.obir", ("graph",), ".obir", seed_files,
                                   CASES, seed=22)
    assert not failures, _report(failures)


def _load_run_profile(path):
    """What a user does with a program file: load it, run it, profile it."""
    prog = ob.load_program(path)
    prog.run({"x": X})
    prog.profile()


def test_fuzz_obprog_structured(seed_files):
    failures = run_json_structured(_load_run_profile, seed_files / "seed.obprog",
                                   ("graph", "program"), ".obprog", seed_files, CASES, seed=23)
    assert not failures, _report(failures)


def _resave(src, dst, key, text):
    with safe_open(str(src), framework="numpy") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta[key] = text
    save_file(tensors, str(dst), metadata=meta)


@pytest.mark.parametrize("text", ["[" * 100000, '{"a":' * 5000 + "1" + "}" * 5000, "[]", "null", "7"],
                         ids=["nested-list", "nested-object", "list", "null", "number"])
def test_obir_graph_json_deep_or_not_an_object(seed_files, text):
    p = seed_files / "bad.obir"
    _resave(seed_files / "seed.obir", p, "graph", text)
    with pytest.raises(ob.ModelFormatError, match="graph JSON"):
        ob.load(p)


@pytest.mark.parametrize("key", ["graph", "program"])
def test_obprog_deeply_nested_json(seed_files, key):
    p = seed_files / "bad.obprog"
    _resave(seed_files / "seed.obprog", p, key, "[" * 100000)
    out = judge("deep", lambda: ob.load_program(p))
    assert out.ok, out.detail


# -- crafted ONNX cases found by the structured fuzzer ----------------------------------------
def _seed_with(edit):
    m = onnx_structured_seeds()[1] if edit is _loop_body_extra_input else onnx_structured_seed()
    nodes = {n.name: n for n in m.graph.node}
    edit(m, nodes)
    return m


def _pool_kernel_as_graph(m, nodes):
    a = next(a for a in nodes["pool"].attribute if a.name == "kernel_shape")
    a.CopyFrom(helper.make_attribute("kernel_shape", helper.make_graph([], "g", [], [])))


def _if_branch_as_tensor(m, nodes):
    a = next(a for a in nodes["if"].attribute if a.name == "then_branch")
    a.CopyFrom(helper.make_attribute("then_branch", numpy_helper.from_array(np.zeros(1, np.float32))))


def _alpha_twice(m, nodes):
    nodes["lrelu"].attribute.append(helper.make_attribute("alpha", 0.3))


def _relu_no_output(m, nodes):
    del nodes["lrelu"].output[:]


def _gemm_four_inputs(m, nodes):
    nodes["gemm"].input.extend(["fc_w", "fc_w"])


def _cast_without_to(m, nodes):
    del nodes["cast"].attribute[:]


def _attr_type_undefined(m, nodes):
    nodes["softmax"].attribute[0].type = AttributeProto.UNDEFINED


def _then_branch_two_outputs(m, nodes):
    then = next(a for a in nodes["if"].attribute if a.name == "then_branch").g
    then.output.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 5]))


def _loop_body_extra_input(m, nodes):
    body = next(a for a in nodes["loop"].attribute if a.name == "body").g
    body.input.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, [1]))


CRAFTED = {
    "attr-graph-for-ints": (_pool_kernel_as_graph, r"'pool'.*'kernel_shape'.*INTS"),
    "subgraph-attr-as-tensor": (_if_branch_as_tensor, r"'if'.*'then_branch'.*GRAPH"),
    "attr-duplicated": (_alpha_twice, r"'lrelu'.*'alpha'.*twice"),
    "no-outputs": (_relu_no_output, r"'lrelu'.*output\(s\), the node has 0"),
    "too-many-inputs": (_gemm_four_inputs, r"'gemm'.*2 to 3 input\(s\), the node has 4"),
    "required-attr-absent": (_cast_without_to, r"'cast'.*'to'.*required"),
    "attr-type-undefined": (_attr_type_undefined, r"'softmax'.*'axis'.*type 0"),
    "if-branch-outputs": (_then_branch_two_outputs, r"'if'.*'then_branch'.*2 outputs, the node has 1"),
    "loop-body-inputs": (_loop_body_extra_input, r"'loop'.*'body'.*needs 3 inputs"),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_crafted_schema_violation(tmp_path, case):
    edit, match = CRAFTED[case]
    m = _seed_with(edit)
    # the outside reference rejects the model too (its checker, or its shape inference)
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError)):
        onnx.checker.check_model(m, full_check=True)
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(ob.OpbridgeError, match=match):
        ob.convert(p)


@pytest.mark.parametrize("dims,indices,match", [
    ([2**31], [0, 1], "limit"),
    ([0, 2**62], [0, 1], "too large"),
    ([10**12], [0, 1], "limit"),
    ([4], [0, 9], "outside"),
    ([4], [-1, 0], "outside"),
    ([2, 2], [[0, 0], [2, 1]], "outside"),
    ([4], [0, 1, 2], "do not fit"),
    ([-3], [0, 1], "negative"),
], ids=["dims=2^31", "dims=0x2^62", "dims=10^12", "index-past-end", "index-negative", "coord-past-end", "count-mismatch",
        "dims-negative"])
def test_crafted_sparse_initializer(tmp_path, dims, indices, match):
    vals = numpy_helper.from_array(np.ones(2, np.float32), "sp")
    ind = numpy_helper.from_array(np.array(indices, np.int64), "")
    g = helper.make_graph([helper.make_node("Relu", ["sp"], ["y"], name="r")], "sparse", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          sparse_initializer=[helper.make_sparse_tensor(vals, ind, dims)])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    out = judge("sparse", lambda: ob.convert(p))
    assert out.ok, out.detail
    with pytest.raises(ob.ModelFormatError, match=match):
        ob.convert(p)


def test_sparse_initializer_in_range_densifies(tmp_path):
    # onnx.reference cannot evaluate sparse initializers (external_data_helper asks a
    # SparseTensorProto for data_location), so the dense value is written out by hand
    vals = numpy_helper.from_array(np.array([-2.0, 3.0], np.float32), "sp")
    ind = numpy_helper.from_array(np.array([[0, 1], [1, 0]], np.int64), "")
    g = helper.make_graph([helper.make_node("Relu", ["sp"], ["y"], name="r")], "sparse", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          sparse_initializer=[helper.make_sparse_tensor(vals, ind, [2, 2])])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    got = ob.interpret(ob.convert(p), {})["y"]
    np.testing.assert_array_equal(got, np.array([[0.0, 0.0], [3.0, 0.0]], np.float32))


@pytest.mark.parametrize("imports,match", [
    ([("", 2**62)], "version 4611686018427387904"),
    ([("", -1)], "version -1"),
    ([("", 17), ("ai.onnx", 13)], "twice"),
], ids=["version=2^62", "version=-1", "domain-twice"])
def test_crafted_opset_import(tmp_path, imports, match):
    m = onnx_structured_seed()
    del m.opset_import[:]
    for domain, version in imports:
        m.opset_import.add(domain=domain, version=version)
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(ob.ModelFormatError, match=match):
        ob.convert(p)


@pytest.mark.parametrize("shape", [[0, 2**62], [0, 2**33, 2**33]], ids=["0x2^62", "0x2^33x2^33"])
def test_crafted_empty_input_with_huge_dims(tmp_path, shape):
    # numpy cannot describe such an array even though it is empty, so nothing could feed it
    with pytest.raises(ValueError):
        np.empty(shape, np.float32)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "z",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(ob.ShapeError, match="input 'x'.*(too large|above the limit)"):
        ob.convert(p)
