"""Hostile ``.obprog`` files, second part: a compute's weight tile whose shape is not what the
program loaded at its address (or a constant load whose slice lies outside its tensor), and a
tile attribute the node's op and kernel do not know or whose value has the wrong type, are
refused by ``load_program`` naming the file and the instruction, with the hint to recompile,
instead of failing (or computing with the wrong weights) inside a kernel at run time. Through
the CLI: one ``error:`` line, one ``hint:`` line, exit 2."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import opbridge as ob

from .conftest import assert_one_error_and_hint, cli
from .drivers import edited


@pytest.fixture(scope="module")
def seed(cnn, tmp_path_factory):
    _, g, feed = cnn
    d = tmp_path_factory.mktemp("obprog_tiles")
    ob.compile(g).save(d / "seed.obprog")
    with safe_open(str(d / "seed.obprog"), framework="numpy") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    doc = json.loads(meta["program"])
    # the first compute with a constant (weight) operand, and the first constant load
    conv = next(i for i, ins in enumerate(doc["instructions"])
                if ins["op"] == "compute" and any(a and a["const"] for a in ins["ins"]))
    w = next(j for j, a in enumerate(doc["instructions"][conv]["ins"]) if a and a["const"])
    load = next(i for i, ins in enumerate(doc["instructions"]) if ins["op"] == "load" and ins["const"])
    return d, meta, tensors, doc, conv, w, load, feed


def _save(seed, path, program):
    _, meta, tensors, *_ = seed
    save_file(tensors, str(path), metadata={**meta, "program": json.dumps(program)})


def _weight_shape_edits(doc, conv, w):
    """A weight tile one smaller along each axis (inside the tensor, so the tile-inside
    check passes: only the comparison with what was loaded catches it)."""
    shape = doc["instructions"][conv]["ins"][w]["shape"]
    return [(axis, shape[axis] - 1) for axis in range(len(shape)) if shape[axis] > 1]


def test_seed_loads_and_runs(seed):
    d, *_, feed = seed
    prog = ob.load_program(d / "seed.obprog")
    assert list(prog.run(feed)) == [v.name for v in prog.graph.outputs]


@pytest.mark.parametrize("axis", [0, 1, 2, 3], ids=lambda a: f"weight-axis={a}")
def test_weight_tile_not_what_was_loaded_is_refused_on_load(seed, tmp_path, axis):
    _, _, _, doc, conv, w, _, _ = seed
    edits = dict(_weight_shape_edits(doc, conv, w))
    if axis not in edits:
        pytest.skip(f"the seed's weight has extent 1 along axis {axis}: nothing smaller to write")
    bad = tmp_path / "bad.obprog"
    _save(seed, bad, edited(doc, ("instructions", conv, "ins", w, "shape", axis), edits[axis], False))
    with pytest.raises(ob.ModelFormatError,
                       match=rf"bad\.obprog.*instruction {conv} \(compute\): the weight tile .* not what "
                             r"the program loaded there") as err:
        ob.load_program(bad)
    assert "compile" in (err.value.hint or "")


def test_weight_tile_at_an_address_nothing_was_loaded_to(seed, tmp_path):
    _, _, _, doc, conv, w, _, _ = seed
    lmem = doc["instructions"][conv]["ins"][w]["lmem"]
    bad = tmp_path / "bad.obprog"
    moved = edited(doc, ("instructions", conv, "ins", w, "lmem"), lmem + 4096, False)
    _save(seed, bad, moved)
    with pytest.raises(ob.ModelFormatError, match=rf"instruction {conv} \(compute\).*\(nothing\)"):
        ob.load_program(bad)


@pytest.mark.parametrize("sel", [[9, 0, 1], [0, 0, 10**6], [0, 3, 1], [0, -1, 1]],
                         ids=["axis=beyond-rank", "hi=beyond-extent", "range=reversed", "lo=negative"])
def test_constant_load_slice_outside_its_tensor(seed, tmp_path, sel):
    _, _, _, doc, _, _, load, _ = seed
    bad = tmp_path / "bad.obprog"
    _save(seed, bad, edited(doc, ("instructions", load, "sel"), sel, False))
    with pytest.raises(ob.ModelFormatError, match=rf"instruction {load} \(load\): the slice .* does not lie "
                                                  r"inside the tensor"):
        ob.load_program(bad)


@pytest.mark.parametrize("attrs, match", [
    ({"bogus": 1}, r"unknown tile attribute 'bogus': not a parameter of node '[^']+' \(Conv"),
    ({"pads": "wide"}, r"tile attribute of node '[^']+' \(Conv\) param 'pads' = .*expected ints"),
    ({"group": 0}, r"param 'group' = 0: must be >= 1"),
], ids=["name=unknown", "pads=string", "group=0"])
def test_bad_tile_attribute_is_refused_on_load(seed, tmp_path, attrs, match):
    _, _, _, doc, conv, _, _, _ = seed
    bad = tmp_path / "bad.obprog"
    ins = dict(doc["instructions"][conv])
    ins["attrs"] = {**ins.get("attrs", {}), **attrs}
    _save(seed, bad, edited(doc, ("instructions", conv), ins, False))
    with pytest.raises(ob.ModelFormatError, match=rf"bad\.obprog.*instruction {conv} \(compute\).*{match}"):
        ob.load_program(bad)


def test_cli_names_instruction_with_one_error_and_hint(seed, tmp_path, capsys):
    _, _, _, doc, conv, _, _, _ = seed
    ins = dict(doc["instructions"][conv])
    ins["attrs"] = {"bogus": 1}
    bad = tmp_path / "bad.obprog"
    _save(seed, bad, edited(doc, ("instructions", conv), ins, False))
    rc, err = cli(["run", str(bad), "--random-input"], capsys)
    assert_one_error_and_hint(rc, err, "bad.obprog", f"instruction {conv}", "bogus")
