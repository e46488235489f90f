"""Hostile ``.obprog`` files: a compute instruction edited (operands dropped, swapped, tiles
outside their tensor) is refused by ``load_program`` naming the file and the instruction, with
the hint to recompile, instead of failing inside a numpy kernel at run time; and metadata JSON
the parser cannot hold (an integer past Python's digit limit) is a ModelFormatError in .obprog
and .obir alike."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import opbridge as ob

from .drivers import drive, edited, json_mutants


@pytest.fixture(scope="module")
def seed(cnn, tmp_path_factory):
    _, g, feed = cnn
    d = tmp_path_factory.mktemp("obprog")
    ob.compile(g).save(d / "seed.obprog")
    ob.save(g, d / "seed.obir")
    with safe_open(str(d / "seed.obprog"), framework="numpy") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    doc = json.loads(meta["program"])
    conv = next(i for i, ins in enumerate(doc["instructions"]) if ins["op"] == "compute")
    return d, meta, tensors, doc, conv, feed


def _save(seed, path, program=None, **meta_edits):
    _, meta, tensors, _, _, _ = seed
    meta = {**meta, **meta_edits}
    if program is not None:
        meta["program"] = json.dumps(program)
    save_file(tensors, str(path), metadata=meta)


# each loaded, then failed at run time inside the kernel ("kernel failed on a tile of shapes
# ...: ValueError/TypeError/AttributeError") with no hint
@pytest.mark.parametrize("edit", [
    ("ins", [], False), ("ins/0", None, True), ("ins/0", None, False), ("ins/1", None, True),
    ("ins/0/shape/1", 0, False), ("ins/1/shape", [1], False), ("ins/1/shape/0", 0, False),
    ("ins/0/h/0", -1, False), ("ins/0/h/1", 2**31, False), ("out/shape/1", 0, False), ("out/shape/2", 65535, False),
    ("ins/0/tensor", "conv1_out", False),
], ids=lambda e: f"{e[0]}={'deleted' if e[2] else e[1]}")
def test_edited_compute_is_refused_on_load(seed, tmp_path, edit):
    _, _, _, doc, conv, feed = seed
    where, value, delete = edit
    path = ("instructions", conv, *(int(k) if k.isdigit() else k for k in where.split("/")))
    bad = tmp_path / "bad.obprog"
    _save(seed, bad, edited(doc, path, value, delete))
    with pytest.raises(ob.ModelFormatError, match=rf"bad\.obprog.*instruction {conv} \(compute\)") as err:
        ob.load_program(bad).run(feed)
    assert "compile" in (err.value.hint or "")


# json.loads' ValueError past the digit limit escaped read_json, the shared metadata reader
@pytest.mark.parametrize("kind, key", [("obprog", "program"), ("obprog", "graph"), ("obir", "graph")])
def test_integer_past_the_digit_limit(seed, tmp_path, kind, key):
    d = seed[0]
    with safe_open(str(d / f"seed.{kind}"), framework="numpy") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta[key] = '{"a": ' + "1" * 5000 + "}"
    bad = tmp_path / f"bad.{kind}"
    save_file(tensors, str(bad), metadata=meta)
    with pytest.raises(ob.ModelFormatError, match=rf"bad\.{kind}.*malformed") as err:
        (ob.load_program if kind == "obprog" else ob.load)(bad)
    assert err.value.hint


def test_mutation_driver_on_a_compute(seed, tmp_path):
    """Every field of one compute instruction x every edge value, and deletions: the program
    loads, runs and profiles, or is refused with a hint."""
    _, _, _, doc, conv, feed = seed
    out = tmp_path / "case.obprog"

    def use(case):
        _save(seed, out, case)
        prog = ob.load_program(out)
        prog.run(feed)
        prog.profile()

    skip = lambda path: path[0] != "instructions" or len(path) > 1 and path[1] != conv  # noqa: E731
    n, failures = drive(json_mutants(doc, skip), use)
    assert n > 400
    assert not failures, "\n".join(f"{f.case}: {f.detail}" for f in failures[:10])
