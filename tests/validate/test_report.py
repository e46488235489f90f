"""The report object: pass/fail, first divergence, JSON, the table's row selection."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rich.console import Console

from opbridge.validate.compare import compare
from opbridge.validate.report import Report, Row

GOOD = compare(np.ones(4, np.float32), np.ones(4, np.float32))
BAD = compare(np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32))


def _report(statuses, outputs=()):
    rows = [Row(f"t{i}", f"n{i}", "Conv", "onnxruntime", "interpreter", GOOD if ok else BAD,
                is_output=i in outputs, inputs=(f"t{i - 1}", "x") if i else ("x",))
            for i, ok in enumerate(statuses)]
    return Report("m.onnx", "onnx", ["onnxruntime", "interpreter"], None, rows)


def test_all_pass():
    r = _report([True, True])
    assert r.passed and r.first_divergence is None and r.failures == []
    assert r.summary() == "PASS: 2 comparisons of m.onnx within tolerance"


def test_first_divergence_is_earliest_failure():
    r = _report([True, False, False])
    fd = r.first_divergence
    assert not r.passed and (fd.tensor, fd.node, fd.op_type) == ("t1", "n1", "Conv")
    assert (fd.reference, fd.candidate, fd.status) == ("onnxruntime", "interpreter", "different")
    assert str(fd).startswith("node 'n1' (Conv), tensor 't1': interpreter vs onnxruntime: values:")
    # t0 was compared and agreed; the graph input x is not a comparison
    assert fd.inputs_matched == ("t0",) and str(fd).endswith("; its input(s) 't0' agree")
    assert r.summary().startswith("FAIL: 2 of 3 comparisons out of tolerance; first divergence: node 'n1'")


def test_inputs_agree_per_candidate():
    # t0 agreed for the simulator only: the interpreter's failure at t1 claims no agreeing input
    rows = [Row("t0", "n0", "Conv", "onnxruntime", "simulator", GOOD, inputs=("x",)),
            Row("t1", "n1", "Relu", "onnxruntime", "interpreter", BAD, inputs=("t0",))]
    fd = Report("m.onnx", "onnx", ["onnxruntime", "interpreter", "simulator"], None, rows).first_divergence
    assert fd.tensor == "t1" and fd.inputs_matched == ()


def test_no_rows_is_not_a_pass():
    assert not _report([]).passed


def test_runner_error_fails():
    r = _report([True])
    r.errors.append("simulator (bm1684): no kernel")
    assert not r.passed and r.summary() == "FAIL: simulator (bm1684): no kernel"


def test_json_round_trip(tmp_path):
    r = _report([True, False])
    r.notes.append("a note")
    r.write_json(tmp_path / "r.json")
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["passed"] is False and d["first_divergence"]["tensor"] == "t1"
    assert d["tolerance"] == "per-dtype defaults" and d["notes"] == ["a note"]
    assert d["rows"][1]["euclid"] == -1.0 and d["rows"][0]["sqnr_db"] == "inf"


@pytest.mark.parametrize("n,bad", [(10, 3), (100, 50), (100, None)],
                         ids=["short", "long-fail-mid", "long-pass"])
def test_table_rows(n, bad):
    r = _report([i != bad for i in range(n)], outputs={n - 1})
    console = Console(width=200, record=True, color_system=None)
    r.print(console, max_rows=40)
    text = console.export_text()
    if bad is None:
        assert "DIFFERENT" not in text
    else:
        assert f" t{bad} " in text and "DIFFERENT" in text  # the failing row is always shown
    assert f"t{n - 1} (out)" in text
    assert ("rows not shown" in text) == (n > 40)


def test_max_rows_0_shows_all():
    r = _report([True] * 60)
    console = Console(width=200, record=True, color_system=None)
    r.print(console, max_rows=0)
    text = console.export_text()
    assert "rows not shown" not in text and " t30 " in text
