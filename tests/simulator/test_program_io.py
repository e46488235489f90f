"""``.obprog`` files: round trip, versioning, malformed files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import opbridge as ob

from .test_run import residual_block


@pytest.fixture(scope="module")
def prog() -> ob.Program:
    return ob.compile(residual_block(), ob.Target.preset("bm1684", lmem_bytes_per_lane=8192))


def test_round_trip_same_program_same_bytes(prog, tmp_path):
    path = tmp_path / "m.obprog"
    prog.save(path)
    back = ob.load_program(path)
    assert back.instrs == prog.instrs
    assert back.units == prog.units
    assert back.target == prog.target
    x = {"x": np.random.default_rng(0).standard_normal((1, 32, 30, 30)).astype(np.float32)}
    a, b = prog.run(x), back.run(x)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes()


def test_file_is_safetensors_with_json_metadata(prog, tmp_path):
    path = tmp_path / "m.obprog"
    prog.save(path)
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
        keys = set(f.keys())
    assert meta["format"] == "opbridge.obprog" and meta["format_version"] == "1"
    doc = json.loads(meta["program"])
    assert set(doc) == {"target", "units", "ddr", "instructions"}
    assert keys == set(prog.graph.constants)


def _rewrite(src, dst, **meta_changes):
    from safetensors import safe_open

    with safe_open(str(src), framework="numpy") as f:
        meta = dict(f.metadata())
    meta.update(meta_changes)
    save_file(load_file(str(src)), str(dst), metadata=meta)


@pytest.mark.parametrize("change,match", [
    ({"format": "opbridge.obir"}, "not an opbridge .obprog"),
    ({"format_version": "99"}, "version 99"),
    ({"format_version": "x"}, "not a number"),
    ({"program": "{broken"}, "malformed"),
    ({"program": json.dumps({"target": {}, "units": []})}, "not a valid .obprog"),
], ids=["format=obir", "version=future", "version=nan", "program=malformed", "program=incomplete"])
def test_bad_metadata(prog, tmp_path, change, match):
    good = tmp_path / "good.obprog"
    prog.save(good)
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, **change)
    with pytest.raises(ob.ModelFormatError, match=match):
        ob.load_program(bad)


def test_unknown_instruction(prog, tmp_path):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    doc["instructions"] = doc["instructions"] + [{"op": "teleport"}]
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match="teleport"):
        ob.load_program(bad)


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, b"not a file at all" * 10], ids=["empty", "short", "garbage"])
def test_truncated_or_garbage(tmp_path, content):
    p = tmp_path / "x.obprog"
    p.write_bytes(content)
    with pytest.raises(ob.ModelFormatError):
        ob.load_program(p)


def test_truncated_real_file(prog, tmp_path):
    good = tmp_path / "good.obprog"
    prog.save(good)
    data = good.read_bytes()
    bad = tmp_path / "cut.obprog"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ob.ModelFormatError):
        ob.load_program(bad)


def test_missing_file(tmp_path):
    with pytest.raises(ob.ModelFormatError, match="does not exist"):
        ob.load_program(tmp_path / "none.obprog")


@pytest.mark.parametrize("field,value", [("h", [0, 9999]), ("n", [3, 1]), ("lmem", 10**9), ("tensor", 5)],
                         ids=["rows=out-of-range", "batch=reversed", "lmem=beyond-lane", "tensor=not-a-name"])
def test_tampered_instruction_is_an_error_not_a_crash(prog, tmp_path, field, value):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    i = next(j for j, ins in enumerate(doc["instructions"]) if ins["op"] == "store")
    doc["instructions"][i] = dict(doc["instructions"][i], **{field: value})
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    x = {"x": np.zeros((1, 32, 30, 30), np.float32)}
    with pytest.raises(ob.OpbridgeError):
        ob.load_program(bad).run(x)
