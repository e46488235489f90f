"""Hostile target JSON (``ob.Target.load``, ``--target-json FILE``): every bad field is an
OpbridgeError that names the file and the field, with a hint; absurd sizes are refused before
anything is allocated."""

from __future__ import annotations

import json
import tracemalloc

import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError

from .conftest import assert_one_error_and_hint, cli
from .drivers import drive, dumps, json_mutants, text_mutants


def _write(tmp_path, **fields):
    doc = {**ob.Target.preset("bm1684").to_dict(), **fields}
    p = tmp_path / "chip.json"
    p.write_text(dumps(doc))
    return p


def _refused(p, *names):
    with pytest.raises(OpbridgeError) as err:
        ob.Target.load(p)
    assert str(p) in err.value.message and err.value.hint, err.value
    for name in names:
        assert name in err.value.message
    return err.value


# an absurd DDR alignment padded every DDR tensor to it: 2**26 took 672 MiB and 2**31 20 GiB
# for the small CNN (numpy allocated the plan)
@pytest.mark.parametrize("field, value", [("ddr_align_bytes", 1 << 26), ("ddr_align_bytes", 1 << 31),
                                          ("lmem_align_bytes", 1 << 31)],
                         ids=["ddr=64MiB", "ddr=2GiB", "lmem=2GiB"])
def test_absurd_alignment_is_refused_before_allocating(tmp_path, cnn, field, value):
    p = _write(tmp_path, **{field: value})
    tracemalloc.start()
    try:
        _refused(p, field)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 16 << 20


# json.load's ValueError past the digit limit and RecursionError escaped
@pytest.mark.parametrize("text", ['{"lanes": ' + "1" * 5000 + "}", "[" * 100000], ids=["huge-int", "deep-nesting"])
def test_json_the_parser_refuses_otherwise(tmp_path, text):
    p = tmp_path / "chip.json"
    p.write_text(text)
    assert "not valid JSON" in _refused(p).message


# non-finite figures passed (inf > 0): the cost model then divided by them
@pytest.mark.parametrize("field", ["clock_mhz", "ddr_bandwidth_gbps", "gdma_latency_us", "sync_us"])
def test_infinite_figure(tmp_path, field):
    _refused(_write(tmp_path, **{field: float("inf")}), field)


# name and notes took any JSON value; an efficiency key's dtype part was not checked
@pytest.mark.parametrize("fields, named", [
    ({"name": 5}, "name"), ({"name": ""}, "name"), ({"notes": [1]}, "notes"), ({"notes": {"a": 1}}, "notes"),
    ({"efficiency": {"conv/xyz": 0.5}}, "conv/xyz"), ({"efficiency": {"conv/": 0.5}}, "conv/"),
], ids=["name=int", "name=empty", "notes=list", "notes=int-value", "efficiency=conv/xyz", "efficiency=conv/"])
def test_field_of_the_wrong_kind(tmp_path, fields, named):
    _refused(_write(tmp_path, **fields), named)


# the field errors had no hint, and a file's named neither the file nor only the target
@pytest.mark.parametrize("field, value", [("clock_mhz", "550"), ("int8_batch_pack", 0), ("ic_parallel_bytes", -1),
                                          ("efficiency", {"conv": 2}), ("efficiency", []), ("launch_us", None)])
def test_field_error_names_the_file_with_a_hint(tmp_path, field, value, capsys):
    p = _write(tmp_path, **{field: value})
    _refused(p, field)
    obir = tmp_path / "g.obir"
    b = ob.GraphBuilder("g")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 4))]))
    ob.save(b.build(), obir)
    rc, err = cli(["compile", str(obir), "--target-json", str(p), "-o", str(tmp_path / "g.obprog")], capsys)
    assert_one_error_and_hint(rc, err, str(p), field)


@pytest.mark.parametrize("preset", ["bm1684", "bm1684x"])
def test_mutation_driver(tmp_path, cnn, preset):
    """Every field x every edge value, deletions, truncations: each target loads, compiles, runs
    and profiles the small CNN, or is refused with a hint (and no case takes 512 MiB)."""
    _, g, feed = cnn
    doc = {**ob.Target.preset(preset).to_dict(), "notes": {"a": "b"}}
    p = tmp_path / "t.json"

    def use(case):
        p.write_text(case if isinstance(case, str) else dumps(case))
        prog = ob.compile(g, target=ob.Target.load(p))
        prog.run(feed)
        prog.profile()

    n, failures = drive(json_mutants(doc), use)
    n2, failures2 = drive(text_mutants(json.dumps(doc)), use)
    assert n + n2 > 700
    assert not failures + failures2, "\n".join(f"{f.case}: {f.detail}" for f in (failures + failures2)[:10])
