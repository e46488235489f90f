"""Scan-8 (a batch axis and sequence_lens) against onnxruntime's Scan-8: full and shorter
per-row lengths, reversed scan inputs, two scan inputs; the simulator against the
interpreter; run-time sequence_lens and bad lengths refused (CLI exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.cli import main

F = TensorProto.FLOAT
B, T, D = 3, 4, 2


def _body() -> onnx.GraphProto:
    """s' = s + x1 * x2; y = s' * 2 (one state, two scan inputs, one scan output)."""
    nodes = [helper.make_node("Mul", ["x1", "x2"], ["p"]), helper.make_node("Add", ["s", "p"], ["s2"]),
             helper.make_node("Add", ["s2", "s2"], ["y"])]
    return helper.make_graph(nodes, "body", [helper.make_tensor_value_info(n, F, [D]) for n in ("s", "x1", "x2")],
                             [helper.make_tensor_value_info(n, F, [D]) for n in ("s2", "y")])


def _model(lens: list[int] | None, directions: list[int] | None, runtime_lens: bool = False,
           seq: int | str = T) -> onnx.ModelProto:
    attrs: dict[str, Any] = {"body": _body(), "num_scan_inputs": 2}
    if directions is not None:
        attrs["directions"] = directions
    node = helper.make_node("Scan", ["lens" if lens is not None or runtime_lens else "", "s0", "x1", "x2"],
                            ["s", "y"], name="scan", **attrs)
    inputs = [helper.make_tensor_value_info("s0", F, [B, D]), helper.make_tensor_value_info("x1", F, [B, seq, D]),
              helper.make_tensor_value_info("x2", F, [B, seq, D])]
    inits = []
    if runtime_lens:
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT64, [B]))
    elif lens is not None:
        inits.append(helper.make_tensor("lens", TensorProto.INT64, [B], lens))
    graph = helper.make_graph([node], "scan8", inputs, [helper.make_tensor_value_info("s", F, None),
                                                        helper.make_tensor_value_info("y", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=7)


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"s0": rng.standard_normal((B, D)).astype(np.float32),
            "x1": rng.standard_normal((B, T, D)).astype(np.float32),
            "x2": rng.standard_normal((B, T, D)).astype(np.float32)}


CASES = {"lens=absent": (None, None), "lens=full": ([4, 4, 4], None), "lens=short": ([4, 2, 3], None),
         "directions=absent-vs-0": (None, [0, 0]), "directions=reverse-one": ([3, 4, 1], [1, 0]),
         "directions=reverse-both": (None, [1, 1])}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_onnxruntime(case: str) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime's Scan-8 is the reference")
    model = _model(*CASES[case])
    feeds = _feeds()
    got = ob.interpret(ob.convert(model), feeds)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip(("s", "y"), sess.run(None, feeds), strict=True))
    for name in ("s", "y"):
        assert np.asarray(got[name]).shape == want[name].shape
        np.testing.assert_allclose(np.asarray(got[name]), want[name], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("directions", [None, [1, 0]], ids=["directions=absent", "directions=reverse-one"])
def test_runtime_sequence_length_matches_onnxruntime(directions: list[int] | None) -> None:
    """A symbolic sequence dim: a Scan node per batch row instead of unrolled steps."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime's Scan-8 is the reference")
    model = _model(None, directions, seq="T")
    g = ob.convert(model)
    assert any(n.op == "Scan" for n in g.nodes)
    feeds = _feeds()
    got = ob.interpret(g, feeds)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for name, want in zip(("s", "y"), sess.run(None, feeds), strict=True):
        np.testing.assert_allclose(np.asarray(got[name]), want, rtol=1e-6, atol=1e-6)


def test_simulator_matches_interpreter() -> None:
    g = ob.convert(_model([4, 2, 3], [1, 0]))
    feeds = _feeds()
    want = ob.interpret(g, feeds)
    got = ob.compile(g, target="bm1684").run(feeds)
    for name in ("s", "y"):
        np.testing.assert_array_equal(got[name], np.asarray(want[name]))


@pytest.mark.parametrize("case,match", [("runtime-lens", "computed at run time"),
                                        ("lens-with-symbolic-seq", "known only at run time"),
                                        ("directions-too-few", "directions"),
                                        ("lens-too-long", "sequence_lens"), ("lens-zero", "sequence_lens")])
def test_refused(case: str, match: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = {"runtime-lens": _model(None, None, runtime_lens=True), "lens-too-long": _model([4, 5, 4], None),
             "lens-zero": _model([4, 0, 4], None),
             "lens-with-symbolic-seq": _model([4, 4, 4], None, seq="T"),
             "directions-too-few": _model(None, [1])}[case]
    path = tmp_path / "scan.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ob.OpbridgeError, match=rf"'scan' \(Scan\).*{match}|{match}.*") as err:
        ob.convert(str(path))
    assert "scan" in str(err.value) and err.value.hint
    assert main(["convert", str(path), "-o", str(tmp_path / "s.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") and "Scan" in line for line in lines)
    assert any(line.startswith("hint:") for line in lines)


def test_unroll_limit_counts_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch row is unrolled, so the limit holds batch x steps: past it each row runs a
    Scan node at run time (matching the unrolled result); with sequence_lens (which the run-time
    Scan does not take) rows still unroll up to the limit a row, and past that the refusal says
    how many steps, not that the length is unknown."""
    from opbridge.mappers.onnx import control

    unrolled = ob.convert(_model(None, None))
    monkeypatch.setattr(control, "MAX_UNROLL", B * T - 1)  # each row fits, the batch does not
    g = ob.convert(_model(None, None))
    assert any(n.op == "Scan" for n in g.nodes) and not any(n.op == "Scan" for n in unrolled.nodes)
    feeds = _feeds()
    want, got = ob.interpret(unrolled, feeds), ob.interpret(g, feeds)
    for name in ("s", "y"):
        np.testing.assert_allclose(np.asarray(got[name]), np.asarray(want[name]), rtol=1e-6)
    assert not any(n.op == "Scan" for n in ob.convert(_model([4, 2, 3], None)).nodes)  # still unrolls
    monkeypatch.setattr(control, "MAX_UNROLL", T - 1)
    with pytest.raises(ob.OpbridgeError, match=f"{B} rows of {T} steps"):
        ob.convert(_model([4, 4, 4], None))


def test_a_one_dim_scan_input_is_a_shape_error() -> None:
    """A scan input without its [batch, seq] axes is refused as a model error naming the
    shapes, not reported as a bug of the mapping."""
    node = helper.make_node("Scan", ["", "s0", "x1", "x2"], ["s", "y"], name="scan", body=_body(),
                            num_scan_inputs=2)
    graph = helper.make_graph([node], "scan8", [helper.make_tensor_value_info("s0", F, [B, D]),
                                                helper.make_tensor_value_info("x1", F, [T]),
                                                helper.make_tensor_value_info("x2", F, [T])],
                              [helper.make_tensor_value_info("s", F, None), helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=7)
    with pytest.raises(ob.OpbridgeError, match=r"\[batch, seq") as err:
        ob.convert(model)
    assert "bug" not in str(err.value) + str(err.value.hint)
