"""Fuzz the .obir reader: every mutant loads or raises an OpbridgeError."""

from __future__ import annotations

import time

import numpy as np

import opbridge as ob

from .mutate import judge, run_file_cases

CASES = 300


def _seed_file(tmp_path):
    b = ob.GraphBuilder("fz")
    x = b.input("x", "f32", (1, 4))
    c = b.constant("c", np.arange(4, dtype=np.float32))
    b.output(b.op("Relu", [b.op("Add", [x, c])]))
    p = tmp_path / "seed.obir"
    ob.save(b.build(), p)
    return p.read_bytes()


def test_fuzz_obir_mutants(tmp_path):
    failures = run_file_cases(ob.load, _seed_file(tmp_path), ".obir", tmp_path, CASES, seed=1, text=False)
    assert not failures, "\n".join(f"{f.case}: {f.detail}" for f in failures[:10])


def test_empty_and_junk(tmp_path):
    for name, data in [("empty", b""), ("junk", bytes(range(256)) * 4), ("huge-header", b"\xff" * 8 + b"{}")]:
        p = tmp_path / f"{name}.obir"
        p.write_bytes(data)
        out = judge(name, lambda p=p: ob.load(p))
        assert out.ok, f"{name}: {out.detail}"
        assert out.detail.startswith("OpbridgeError"), out.detail


def test_harness_flags_non_opbridge_errors_and_hangs():
    def hang():
        while True:
            pass

    assert not judge("keyerror", lambda: {}["x"]).ok
    assert not judge("hang", hang, seconds=1).ok
    assert not judge("blocked", lambda: time.sleep(30), seconds=0.5).ok  # no CPU used: wall limit
    assert not judge("memory", lambda: np.ones(1 << 26), max_bytes=1 << 20).ok
    assert judge("fine", lambda: None).ok
