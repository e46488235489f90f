"""Hostile calibration tables (the JSON of ``opbridge calibrate`` / ``CalibrationTable.save``),
read by ``ob.quantize`` and ``opbridge quantize --table``: every malformed one is a QuantError
that names the file, the tensor and the field, with a hint."""

from __future__ import annotations

import json

import numpy as np
import pytest

import opbridge as ob
from opbridge.quant import CalibrationTable, QuantError

from .conftest import assert_one_error_and_hint, cli
from .drivers import drive, dumps, json_mutants, text_mutants


@pytest.fixture(scope="module")
def table_doc(cnn):
    _, g, feed = cnn
    return ob.calibrate(g, [feed], channel_activations=True).to_dict()


def _edit(doc, path, value):
    d = json.loads(json.dumps(doc))
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return d


def _first(doc):
    return next(n for n, r in doc["tensors"].items() if "channel_max" in r)


def _refused(tmp_path, text, *names):
    p = tmp_path / "table.json"
    p.write_text(text)
    with pytest.raises(QuantError) as err:
        CalibrationTable.load(p)
    assert str(p) in err.value.message and err.value.hint
    for name in names:
        assert name in err.value.message
    return err.value


# 'samples' of the wrong type reached int() bare: TypeError, ValueError or OverflowError
@pytest.mark.parametrize("value", ["x", [1], None, True, -1, float("nan"), float("inf"), 2.5],
                         ids=["str", "list", "null", "bool", "negative", "nan", "inf", "float"])
def test_samples_of_the_wrong_type(tmp_path, table_doc, value):
    _refused(tmp_path, dumps(_edit(table_doc, ("samples",), value)), "'samples'")


# json.load's other errors: an integer past Python's digit limit (ValueError) and deep nesting
# (RecursionError) escaped as themselves
@pytest.mark.parametrize("text", ['{"a": ' + "1" * 5000 + "}", "[" * 100000], ids=["huge-int", "deep-nesting"])
def test_json_the_parser_refuses_otherwise(tmp_path, text):
    assert "not valid JSON" in _refused(tmp_path, text).message


# the field errors had no hint; strings and booleans passed as numbers (float("1"), float(True))
@pytest.mark.parametrize("field, value, named", [
    ("min", "1", "min"), ("min", True, "min"), ("max", None, "max"), ("threshold", "nan", "threshold"),
    ("threshold", -1.0, "threshold"), ("threshold", float("nan"), "threshold"),
    ("min", 10**400, "min"), ("channel_max", "123", "channel_max"), ("channel_max", {}, "channel_max"),
    ("channel_max", [], "channel_max"),
], ids=["min=str", "min=bool", "max=null", "threshold=str-nan", "threshold<0", "threshold=nan",
        "min=huge-int", "channel_max=str", "channel_max=object", "channel_max=empty"])
def test_field_of_a_tensor_names_it_with_a_hint(tmp_path, table_doc, field, value, named):
    name = _first(table_doc)
    text = dumps(_edit(table_doc, ("tensors", name, field), value))
    _refused(tmp_path, text, f"tensor '{name}'", named)


@pytest.mark.parametrize("value", ["x", None, -1.0, [1.0], True], ids=["str", "null", "negative", "list", "bool"])
def test_a_channel_entry_is_named_by_its_index(tmp_path, table_doc, value):
    name = _first(table_doc)
    text = dumps(_edit(table_doc, ("tensors", name, "channel_max", 1), value))
    _refused(tmp_path, text, f"tensor '{name}' channel_max[1]")


# a threshold whose int8 scale (threshold / 127) overflowed to an infinite scale (1e308) reached
# QuantParams as a GraphError naming neither the table nor the tensor
@pytest.mark.parametrize("field, value", [("threshold", 1e308), ("threshold", 1e39)],
                         ids=["threshold=1e308", "threshold=1e39"])
def test_threshold_whose_scale_is_not_a_float32(tmp_path, cnn, table_doc, field, value, capsys):
    model, g, _ = cnn
    p = tmp_path / "table.json"
    p.write_text(dumps(_with_all(table_doc, field, value)))
    with pytest.raises(QuantError, match=field) as err:
        ob.quantize(g, p)
    assert str(p) in err.value.message and err.value.hint
    rc, out = cli(["quantize", str(model), "--table", str(p), "-o", str(tmp_path / "q.obir")], capsys)
    assert_one_error_and_hint(rc, out, str(p), field)


# a threshold too small for its int8 scale to be a normal float32 (1e-300 gave scale 0) is a
# zero range: calibration writes such values itself (tests/hostile/test_review_mends_new.py)
@pytest.mark.parametrize("field", ["threshold", "channel_max"])
def test_tiny_threshold_is_a_zero_range(tmp_path, cnn, table_doc, field):
    _, g, feed = cnn
    p = tmp_path / "table.json"
    p.write_text(dumps(_with_all(table_doc, field, 1e-300)))
    got = ob.interpret(ob.quantize(g, p), feed)
    assert all(np.isfinite(v).all() for v in got.values())


def _with_all(doc, field, value):
    d = json.loads(json.dumps(doc))
    for rec in d["tensors"].values():
        if field == "threshold":
            rec["threshold"] = value
        elif "channel_max" in rec:
            rec["channel_max"] = [value] * len(rec["channel_max"])
    return d


# unknown fields were dropped in silence (a hand edit's typo: 'channel_maxx', 'equalised')
@pytest.mark.parametrize("where", ["top", "tensor"])
def test_unknown_fields_are_named(tmp_path, table_doc, where):
    d = json.loads(json.dumps(table_doc))
    (d if where == "top" else d["tensors"][_first(d)])["equalised"] = True
    _refused(tmp_path, dumps(d), "unknown field 'equalised'")


def test_mutation_driver(tmp_path, cnn, table_doc):
    """Every leaf of one tensor's record and of the top level x every edge value, deletions,
    truncations: each loads and quantizes, or is a QuantError with a hint."""
    _, g, _ = cnn
    keep = _first(table_doc)
    p = tmp_path / "t.json"

    def use(case):
        p.write_text(case if isinstance(case, str) else dumps(case))
        ob.quantize(g, p)

    n, failures = drive(json_mutants(table_doc, lambda path: len(path) >= 2 and path[1] != keep), use)
    n2, failures2 = drive(text_mutants(json.dumps(table_doc)), use)
    assert n + n2 > 300
    assert not failures + failures2, "\n".join(f"{f.case}: {f.detail}" for f in (failures + failures2)[:10])
