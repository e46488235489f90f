"""``.obprog`` files: round trip, versioning, malformed files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import opbridge as ob
from opbridge.simulator import (
    Compute,
    GlobalOp,
    GlobalUnit,
    GroupUnit,
    HostOp,
    HostUnit,
    Load,
    Store,
    StreamUnit,
)
from opbridge.simulator.program import INSTRUCTIONS, UNITS, DdrPlan

from .test_run import KIB, residual_block


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
    assert meta["format"] == "opbridge.obprog" and meta["format_version"] == "2"
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


def test_old_format_version_asks_to_recompile(prog, tmp_path):
    """A version-1 file (the untyped instruction dicts) is refused before its JSON is read,
    with the command that re-compiles it."""
    good = tmp_path / "good.obprog"
    prog.save(good)
    old = tmp_path / "old.obprog"
    doc = prog.to_json()
    for ins in doc["instructions"]:  # the version-1 spelling of a few fields
        if "group" in ins:
            ins["g"], ins["t"] = ins.pop("group"), ins.pop("tile")
    _rewrite(good, old, format_version="1", program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match=r"old\.obprog.*format version 1.*older opbridge") as err:
        ob.load_program(old)
    assert "opbridge compile MODEL -o OUT.obprog" in str(err.value)


def _all_kinds_program() -> ob.Program:
    """Layer groups, streamed convolutions (1 KiB lanes), a global layer and a host op."""
    b = ob.GraphBuilder("all_kinds")
    x = b.input("x", "f32", (1, 32, 10, 12))
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((256, 32, 3, 3)) * 0.05).astype(np.float32)
    y = b.op("Conv", [x, b.constant("w", w)], pads=(1, 1, 1, 1))
    y = b.op("Relu", [y])
    y = b.op("Sigmoid", [y])
    b.output(b.op("Flatten", [y], axis=1))
    g = b.build()
    return ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=2 * KIB),
                      placement=lambda n: "cpu" if n.op == "Sigmoid" else None)


def test_every_kind_round_trips_through_json(tmp_path):
    prog = _all_kinds_program()
    unit_kinds = {type(u) for u in prog.units}
    assert {StreamUnit, HostUnit} <= unit_kinds and (GroupUnit in unit_kinds or GlobalUnit in unit_kinds)
    assert {Load, Store, Compute, HostOp} <= {type(i) for i in prog.instrs}
    for ins in prog.instrs:
        assert INSTRUCTIONS[ins.TAG].from_json(json.loads(json.dumps(ins.to_json())), "x") == ins
    for u in prog.units:
        assert UNITS[u.TAG].from_json(json.loads(json.dumps(u.to_json())), "x") == u
    assert DdrPlan.from_json(json.loads(json.dumps(prog.ddr.to_json())), "x") == prog.ddr
    path = tmp_path / "k.obprog"
    prog.save(path)
    back = ob.load_program(path)
    assert back.units == prog.units and back.instrs == prog.instrs and back.ddr == prog.ddr
    x = {"x": np.random.default_rng(0).standard_normal((1, 32, 10, 12)).astype(np.float32)}
    want = ob.interpret(prog.graph, x)
    for k, v in back.run(x).items():
        np.testing.assert_allclose(v, want[k], rtol=1e-4, atol=1e-5)


def test_global_op_round_trips():
    ins = GlobalOp(node="n", bytes=10, flops=2.5, eff=0.5)
    assert GlobalOp.from_json(ins.to_json(), "x") == ins
    assert ins.to_json() == {"op": "global", "node": "n", "bytes": 10, "flops": 2.5, "eff": 0.5}


def _first(doc, part, tag):
    key = "op" if part == "instructions" else "kind"
    return next(i for i, d in enumerate(doc[part]) if d[key] == tag)


@pytest.mark.parametrize("part,tag,change,match", [
    ("instructions", "store", {"tile_h0": None}, r"instruction \d+ \(store\) field 'tile_h0': expected an integer"),
    ("instructions", "store", {"h": [1, 2, 3]}, r"\(store\) field 'h': expected a list of 2"),
    ("instructions", "load", {"bytes": "12"}, r"\(load\) field 'bytes': expected an integer"),
    ("instructions", "load", {"const": 1}, r"\(load\) field 'const': expected true or false"),
    ("instructions", "compute", {"flops": float("nan")}, r"\(compute\) field 'flops': expected a finite number"),
    ("instructions", "compute", {"out": {"tensor": "y"}}, r"\(compute\) field 'out': missing field 'buf'"),
    ("instructions", "compute", {"lane_bytes": 64}, r"\(compute\): unknown field 'lane_bytes'"),
    ("units", "group", {"alloc": {"x": [0, 1, 2]}}, r"unit 0 \(group\) field 'alloc'\['x'\]: expected a list of 4"),
    ("units", "group", {"kind": "layer"}, r"unit 0: unknown kind 'layer'"),
    ("instructions", "compute", {"eff": 0}, r"\(compute\): flops .* efficiency 0.0 out of range"),
    ("instructions", "load", {"lane_bytes": 10**9}, r"\(load\): local range .* outside the lane"),
    ("instructions", "load", {"bytes": -1}, r"\(load\): negative byte count"),
], ids=["store.tile_h0=null", "store.h=3", "load.bytes=str", "load.const=int", "compute.flops=nan",
        "compute.out=partial", "compute.extra-field", "group.alloc=short", "unit.kind=unknown",
        "compute.eff=0", "load.lane_bytes=huge", "load.bytes=-1"])
def test_strict_schema_names_file_and_field(prog, tmp_path, part, tag, change, match):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    i = _first(doc, part, tag)
    doc[part][i] = dict(doc[part][i], **change)
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match=r"bad\.obprog.*" + match):
        ob.load_program(bad)


@pytest.mark.parametrize("drop", ["tile_h0", "lane_bytes"])
def test_missing_field_is_an_error_not_recomputed(prog, tmp_path, drop):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    i = _first(doc, "instructions", "store")
    del doc["instructions"][i][drop]
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match=rf"bad\.obprog.*\(store\): missing field '{drop}'"):
        ob.load_program(bad)


@pytest.mark.parametrize("span,match", [
    (lambda lo, hi: [lo, hi - 1], r"the units cover \d+ of \d+ instructions"),
    (lambda lo, hi: [lo + 1, hi], r"unit 0 covers instructions \[1, \d+\), not the next ones from 0"),
    (lambda lo, hi: [lo, hi + 1], r"unit 0 covers instructions"),
], ids=["short", "gap", "past-the-end"])
def test_units_must_cover_the_instructions_in_order(prog, tmp_path, span, match):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    doc["units"][0]["instrs"] = span(*doc["units"][0]["instrs"])
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match=match):
        ob.load_program(bad)


def test_dict_spelling_is_deprecated(prog):
    """Scripts written against format version 1's dicts keep working, with a warning."""
    g = prog.groups[0]
    with pytest.warns(DeprecationWarning, match=r"use \.tiles instead of \['tiles'\]"):
        assert g["tiles"] == g.tiles
    with pytest.warns(DeprecationWarning):
        assert g["kind"] == "group"
    with pytest.warns(DeprecationWarning):
        assert prog.ddr["total_bytes"] == prog.ddr.total_bytes
    load = next(i for i in prog.instrs if isinstance(i, Load))
    with pytest.warns(DeprecationWarning, match=r"use \.group instead of \['g'\]"):
        assert load["g"] == load.group == 0
    with pytest.warns(DeprecationWarning, match=r"use isinstance\(x, Load\) instead of \['op'\]"):
        assert load["op"] == "load"


@pytest.mark.parametrize("field,value,match", [
    ("lmem_bytes_per_lane", 1024, r"outside the lane's 1024 bytes \(the stored target's lmem_bytes_per_lane\)"),
    ("lanes", 2, r"under the stored target's lanes = 2, eu_bytes = \d+, the tile .* bytes per lane; "
                 r"its plan reserves \d+"),
    ("lmem_align_bytes", 1 << 12, r"not a multiple of the stored target's lmem_align_bytes \(4096\)"),
    ("ddr_align_bytes", 1 << 16, r"not a multiple of the stored target's ddr_align_bytes \(65536\)"),
], ids=["lmem_bytes_per_lane", "lanes", "lmem_align_bytes", "ddr_align_bytes"])
def test_stored_target_that_the_plan_does_not_fit_is_refused_on_load(prog, tmp_path, field, value, match):
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    doc["target"][field] = value
    bad = tmp_path / "bad.obprog"
    _rewrite(good, bad, program=json.dumps(doc))
    with pytest.raises(ob.ModelFormatError, match=r"bad\.obprog.*" + match) as err:
        ob.load_program(bad)
    assert "recompile" in (err.value.hint or "")


def test_stored_target_with_room_to_spare_still_loads(prog, tmp_path):
    """More lanes or local memory than the plan needs: the plan still fits, and runs the same."""
    good = tmp_path / "good.obprog"
    prog.save(good)
    doc = prog.to_json()
    doc["target"].update(lanes=128, lmem_bytes_per_lane=1 << 20)
    roomy = tmp_path / "roomy.obprog"
    _rewrite(good, roomy, program=json.dumps(doc))
    feeds = {v.name: np.random.default_rng(0).standard_normal(v.shape).astype(np.float32)
             for v in prog.graph.inputs}
    want = prog.run(feeds)
    got = ob.load_program(roomy).run(feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
