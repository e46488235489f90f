"""Fuzz every input kind: each mutant converts/loads or raises an OpbridgeError.

CI runs a short run (``OPBRIDGE_FUZZ_CASES``, default 150 per kind); the long run is
``python scripts/fuzz.py --cases 5000``.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import opbridge as ob

from ..conftest import requires_torch
from . import seeds
from .mutate import run_file_cases

CASES = int(os.environ.get("OPBRIDGE_FUZZ_CASES", "150"))


def _report(failures):
    return "\n".join(f"{f.case}: {f.detail}" for f in failures[:10])


def test_fuzz_onnx(tmp_path):
    seed = seeds.write_onnx(tmp_path).read_bytes()
    failures = run_file_cases(ob.convert, seed, ".onnx", tmp_path, CASES, seed=2, text=False)
    assert not failures, _report(failures)


def test_fuzz_prototxt(tmp_path):
    proto, model = seeds.write_caffe(tmp_path)
    failures = run_file_cases(lambda p: ob.convert(p, weights=model), proto.read_bytes(), ".prototxt",
                              tmp_path, CASES, seed=3, text=True)
    assert not failures, _report(failures)


def test_fuzz_caffemodel(tmp_path):
    proto, model = seeds.write_caffe(tmp_path)
    failures = run_file_cases(lambda p: ob.convert(proto, weights=p), model.read_bytes(), ".caffemodel",
                              tmp_path, CASES, seed=4, text=False)
    assert not failures, _report(failures)


def test_fuzz_obprog(tmp_path):
    seed = seeds.write_obprog(tmp_path).read_bytes()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)

    def load_and_run(p):
        prog = ob.load_program(p)
        prog.run({"x": x})

    failures = run_file_cases(load_and_run, seed, ".obprog", tmp_path, CASES, seed=5, text=False)
    assert not failures, _report(failures)


@requires_torch
def test_fuzz_ts_json(tmp_path):
    src = seeds.write_ts_json(tmp_path)
    weights = src.with_name("seed.ts.safetensors")
    # mutants are written as case.ts.json; the weights file they name must sit beside them
    shutil.copy(weights, tmp_path / "case.ts.safetensors")
    text = src.read_bytes().replace(b"seed.ts.safetensors", b"case.ts.safetensors")
    failures = run_file_cases(ob.convert, text, ".ts.json", tmp_path, CASES, seed=6, text=True)
    assert not failures, _report(failures)


@pytest.mark.parametrize("suffix", [".onnx", ".prototxt", ".ts.json", ".obir"])
@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 8], ids=["empty", "binary-junk"])
def test_empty_and_junk_files(tmp_path, suffix, content):
    p = tmp_path / f"junk{suffix}"
    p.write_bytes(content)
    load = ob.load if suffix == ".obir" else ob.convert
    with pytest.raises(ob.OpbridgeError) as info:
        load(p)
    assert str(info.value).strip()
