"""TensorScatter-24 against onnxruntime and onnx.reference (axes, modes, write indices absent
or given, dtypes), the simulator against the interpreter, and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main

CODES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
         np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int8): TensorProto.INT8,
         np.dtype(np.bool_): TensorProto.BOOL}


def _model(cache: tuple[int, ...], upd: tuple[int, ...], dtype: np.dtype, with_idx: bool,
           **attrs: object) -> onnx.ModelProto:
    ins = ["cache", "upd"] + (["idx"] if with_idx else [])
    node = helper.make_node("TensorScatter", ins, ["y"], name="ts", **attrs)
    vis = [helper.make_tensor_value_info("cache", CODES[dtype], cache),
           helper.make_tensor_value_info("upd", CODES[dtype], upd)]
    if with_idx:
        vis.append(helper.make_tensor_value_info("idx", TensorProto.INT64, [cache[0]]))
    graph = helper.make_graph([node], "ts", vis, [helper.make_tensor_value_info("y", CODES[dtype], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def _feeds(cache: tuple[int, ...], upd: tuple[int, ...], dtype: np.dtype, idx: np.ndarray | None,
           seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = {"cache": (rng.standard_normal(cache) * 10).astype(dtype),
         "upd": (rng.standard_normal(upd) * 10).astype(dtype)}
    if idx is not None:
        f["idx"] = idx
    return f


CASES = {
    # id: (cache shape, update shape, axis or None (absent), mode or None, write indices)
    "axis=absent,mode=absent,idx=absent": ((2, 3, 8, 4), (2, 3, 3, 4), None, None, None),
    "axis=absent,linear,idx": ((3, 2, 7, 5), (3, 2, 2, 5), None, "linear", [0, 5, 3]),
    "axis=1,circular,wraps": ((2, 6, 3), (2, 4, 3), 1, "circular", [4, 5]),
    "axis=-1,circular": ((2, 3, 5), (2, 3, 5), -1, "circular", [2, 0]),
    "axis=2,rank5": ((2, 2, 9, 2, 3), (2, 2, 4, 2, 3), 2, "linear", [5, 1]),
    "batch=1,rank2": ((1, 6), (1, 2), 1, None, [4]),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_matches_onnxruntime_and_reference(case: str) -> None:
    cache, upd, axis, mode, idx = CASES[case]
    attrs = {k: v for k, v in (("axis", axis), ("mode", mode)) if v is not None}
    dt = np.dtype(np.float32)
    model = _model(cache, upd, dt, idx is not None, **attrs)
    feeds = _feeds(cache, upd, dt, None if idx is None else np.array(idx, np.int64), seed=len(case))
    got = np.asarray(ob.interpret(ob.convert(model), feeds)["y"])
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, feeds)[0])
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the second reference")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, sess.run(None, feeds)[0])


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.int8, np.bool_],
                         ids=["f16", "i64", "i8", "bool"])
def test_dtypes_match_reference(dtype: type) -> None:
    dt = np.dtype(dtype)
    model = _model((2, 5, 3), (2, 2, 3), dt, True, mode="circular")
    feeds = _feeds((2, 5, 3), (2, 2, 3), dt, np.array([4, 1], np.int64), seed=2)
    got = np.asarray(ob.interpret(ob.convert(model), feeds)["y"])
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_simulator_matches_interpreter() -> None:
    g = ob.convert(_model((2, 4, 6, 8), (2, 4, 2, 8), np.dtype(np.float32), True, mode="circular"))
    feeds = _feeds((2, 4, 6, 8), (2, 4, 2, 8), np.dtype(np.float32), np.array([5, 2], np.int64), 3)
    want = np.asarray(ob.interpret(g, feeds)["y"])
    np.testing.assert_array_equal(ob.compile(g, target="bm1684").run(feeds)["y"], want)


def test_linear_write_past_the_end_is_an_error_naming_the_node() -> None:
    g = ob.convert(_model((2, 4, 3), (2, 2, 3), np.dtype(np.float32), True))
    feeds = _feeds((2, 4, 3), (2, 2, 3), np.dtype(np.float32), np.array([0, 3], np.int64), 4)
    with pytest.raises(ob.OpbridgeError, match=r"'ts'.*batch row 1: write index 3"):
        ob.interpret(g, feeds)


@pytest.mark.parametrize(("attrs", "cache", "upd", "match"), [
    ({"axis": 0}, (2, 4, 3), (2, 2, 3), r"param 'axis'.*batch axis"),
    ({"axis": 3}, (2, 4, 3), (2, 2, 3), r"param 'axis' = 3: out of range"),
    ({"mode": "ring"}, (2, 4, 3), (2, 2, 3), r"param 'mode'.*must be one of"),
    ({}, (2, 4, 3), (2, 5, 3), r"sequence length 5 exceeds the cache's 4"),
    ({}, (2, 4, 3), (2, 2, 2), r"may differ only on axis 1"),
], ids=["axis=0", "axis=3", "mode=ring", "update=longer", "update=other-shape"])
def test_bad_attributes_and_shapes_are_refused(attrs: dict, cache: tuple, upd: tuple, match: str) -> None:
    with pytest.raises(ob.OpbridgeError, match=r"node 'ts' \(TensorScatter\)") as err:
        ob.convert(_model(cache, upd, np.dtype(np.float32), False, **attrs))
    assert err.match(match)


def test_cli_refuses_the_batch_axis_with_error_and_hint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "ts.onnx"
    model = _model((2, 4, 3), (2, 2, 3), np.dtype(np.float32), False, axis=0)
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((2, 4, 3), np.float32), "cache"))
    onnx.save(model, str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "ts.obir")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert any(line.startswith("error:") and "'axis'" in line for line in lines)
    assert any(line.startswith("hint:") and "sequence axis" in line for line in lines)
