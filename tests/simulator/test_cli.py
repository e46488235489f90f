"""``opbridge compile``, ``run`` and ``profile``: in-process through ``cli.main``."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import opbridge as ob
from opbridge.cli import main

from .helpers import assert_close
from .models import resnet_onnx


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "resnet_small.onnx"
    onnx.save(resnet_onnx(depths=(1, 1, 1, 1), width=8, image=32, classes=10), p)
    return p


@pytest.fixture(scope="module")
def prog_path(onnx_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("p") / "m.obprog"
    assert main(["compile", str(onnx_path), "--lmem-kib", "4", "-o", str(out)]) == 0
    return out


def test_compile_summary(onnx_path, tmp_path, capsys):
    out = tmp_path / "m.obprog"
    assert main(["compile", str(onnx_path), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "layer groups" in text and "activations peak" in text and out.is_file()


def test_compile_from_obir_with_target_json(onnx_path, tmp_path):
    obir = tmp_path / "m.obir"
    ob.save(ob.convert(str(onnx_path)), obir)
    tj = tmp_path / "t.json"
    ob.Target.preset("bm1684", lmem_bytes_per_lane=8192).save(tj)
    out = tmp_path / "m.obprog"
    assert main(["compile", str(obir), "--target-json", str(tj), "-o", str(out)]) == 0
    assert ob.load_program(out).target.lmem_bytes_per_lane == 8192


def test_run_with_input_file_matches_interpreter(prog_path, tmp_path, capsys):
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "o.npz"
    assert main(["run", str(prog_path), "--input", f"data={tmp_path / 'x.npy'}", "-o", str(out)]) == 0
    assert "prob: float32[1, 10]" in capsys.readouterr().out
    got = np.load(out)["prob"]
    want = ob.interpret(ob.load_program(prog_path).graph, {"data": x})["prob"]
    assert_close(got, want)


def test_run_random_input_is_seeded(prog_path, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", str(prog_path), "--random-input", "-o", str(a)]) == 0
    assert main(["run", str(prog_path), "--random-input", "-o", str(b)]) == 0
    assert np.load(a)["prob"].tobytes() == np.load(b)["prob"].tobytes()


def test_profile_table_and_trace(prog_path, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    assert main(["profile", str(prog_path), "--trace", str(trace)]) == 0
    text = capsys.readouterr().out
    assert "estimated latency" in text and "group" in text and "bound" in text
    assert "shared buffers (reshapes, in-place layers) save" in text  # the Flatten before the Gemm
    assert json.loads(trace.read_text())["traceEvents"]


def test_profile_json(prog_path, capsys):
    assert main(["profile", str(prog_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("est_latency_ms", "gdma_bytes", "lmem_peak_bytes", "num_layer_groups", "num_tiles",
                "num_global_layers", "num_cpu_layers", "groups"):
        assert key in d
    assert d["lmem_peak_bytes"] <= 4096 and d["num_tiles"] > d["num_layer_groups"]
    # the Flatten before the classifier shares the pooled features' bytes
    (flat,) = [n for n in ob.load_program(prog_path).graph.nodes if n.op == "Flatten"]
    assert d["ddr_shared_bytes"] == 4 * int(np.prod(flat.outputs[0].shape)) and d["lmem_shared_bytes"] == 0


@pytest.mark.parametrize("argv,match", [
    (["run", "{prog}", "--input", "nope=x.npy"], "no input named 'nope'|cannot read"),
    (["run", "{prog}", "--input", "data"], "NAME=FILE.npy"),
    (["run", "/nonexistent.obprog", "--random-input"], "does not exist"),
    (["profile", "{onnx}"], "reads a compiled program \\(.obprog\\)"),
    (["compile", "{onnx}", "--target", "tpu9000", "-o", "x.obprog"], "unknown target preset"),
    (["compile", "{onnx}", "--lmem-kib", "0", "-o", "x.obprog"], "--lmem-kib: '0': give a whole number >= 1"),
], ids=["input=unknown-name", "input=no-file", "program=missing", "program=onnx", "target=unknown",
        "lmem=0"])
def test_user_errors_exit_2(argv, match, prog_path, onnx_path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [a.format(prog=prog_path, onnx=onnx_path) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors (a number below its floor)
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    import re

    assert re.search(match, err), err
