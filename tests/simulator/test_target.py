"""Target presets, overrides and JSON files."""

from __future__ import annotations

import json
import sys

import pytest

import opbridge as ob
from opbridge.errors import ModelFormatError, SimulatorError
from tests.conftest import ROOT


def test_bm1684_preset_public_figures():
    t = ob.Target.preset("bm1684")
    assert (t.lanes, t.lmem_bytes_per_lane, t.eu_bytes) == (64, 512 * 1024, 128)
    assert t.eu_elems("f32") == 32 and t.eu_elems("f16") == 64 and t.eu_elems("i8") == 128
    # 64 lanes x 32 f32 EUs x 2 FLOP x 550 MHz is the published 2.2 TFLOPS (within 3 %)
    assert abs(t.lanes * t.eu_elems("f32") * 2 * t.clock_mhz * 1e6 / t.peak_flops("f32") - 1) < 0.03


def test_preset_override():
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=65536)
    assert t.lmem_bytes_per_lane == 65536 and t.lanes == 64


@pytest.mark.parametrize("bad", [{"name": "nope"}, {"field": "colour"}], ids=["preset=unknown", "field=unknown"])
def test_preset_errors(bad):
    with pytest.raises(SimulatorError):
        if "name" in bad:
            ob.Target.preset(bad["name"])
        else:
            ob.Target.preset("bm1684", colour=1)


@pytest.mark.parametrize("field,value,match", [
    ("lanes", 0, "lanes"), ("lmem_bytes_per_lane", -1, "lmem_bytes_per_lane"),
    ("ddr_bandwidth_gbps", 0.0, "ddr_bandwidth_gbps"), ("lmem_bytes_per_lane", 1 << 40, "more than"),
    ("lanes", "64", "lanes"),
], ids=["lanes=0", "lmem=-1", "bandwidth=0", "lmem=1TiB", "lanes=str"])
def test_invalid_values(field, value, match):
    with pytest.raises(SimulatorError, match=match):
        ob.Target.preset("bm1684", **{field: value})


def test_json_round_trip(tmp_path):
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=32768, clock_mhz=400.0)
    p = tmp_path / "t.json"
    t.save(p)
    assert ob.Target.load(p) == t


@pytest.mark.parametrize("text", ["{not json", json.dumps({"lanes": 64, "colour": 1}), "[1, 2]"],
                         ids=["malformed", "unknown-field", "not-object"])
def test_json_errors(tmp_path, text):
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.raises(ModelFormatError):
        ob.Target.load(p)


def test_bm1684x_preset_published_figures():
    """TPU-MLIR's BM1684X.h (NPU_NUM 64, EU_BYTES 64, LMEM_BYTES 1 << 18, LMEM_BANKS 16,
    IC_PARALLEL 64) and the product brief (2 TFLOPS fp32, 16 TFLOPS fp16/bf16, 32 TOPS int8)."""
    t = ob.Target.preset("bm1684x")
    assert (t.lanes, t.eu_bytes, t.lmem_bytes_per_lane, t.lmem_banks) == (64, 64, 256 * 1024, 16)
    assert (t.eu_elems("f32"), t.eu_elems("f16"), t.eu_elems("i8")) == (16, 32, 64)
    assert (t.ic_parallel("f32"), t.ic_parallel("f16"), t.ic_parallel("i8")) == (16, 32, 64)
    assert (t.peak_flops("f32"), t.peak_flops("f16"), t.peak_flops("bf16"), t.peak_flops("i8")) == (
        2e12, 16e12, 16e12, 32e12)
    # 64 lanes x 16 f32 EUs x 2 FLOP x 1 GHz is the published 2 TFLOPS (within 3 %)
    assert abs(t.lanes * t.eu_elems("f32") * 2 * t.clock_mhz * 1e6 / t.peak_flops("f32") - 1) < 0.03
    assert t.int8_batch_pack == 1 and ob.Target.preset("bm1684").int8_batch_pack == 4
    assert "f16" in t.dtypes and "f16" not in ob.Target.preset("bm1684").dtypes


def _half_graph(dtype: str) -> ob.Graph:
    b = ob.GraphBuilder("half")
    x = b.input("x", dtype, (1, 8, 4, 4))
    b.output(b.op("Relu", [b.op("Reshape", [x], shape=(1, 8, 16, 1))], name="act"))
    return b.build()


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_precision_on_bm1684_is_a_compile_error(dtype):
    """BM1684 has no f16/bf16 arithmetic: the error names the node, its op and the dtype (the
    Reshape before it only moves elements and is not the one named)."""
    g = _half_graph(dtype)
    with pytest.raises(SimulatorError, match=rf"node 'act' \(Relu\) computes in {dtype}.*'bm1684' does not"):
        ob.compile(g, "bm1684")
    prog = ob.compile(g, "bm1684x")
    assert prog.profile().est_latency_ms > 0


def test_half_precision_cli_error(tmp_path, capsys):
    from opbridge.cli import main

    src = tmp_path / "half.obir"
    ob.save(_half_graph("f16"), src)
    assert main(["compile", str(src), "-o", str(tmp_path / "h.obprog")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "(Relu) computes in f16" in err and "hint:" in err
    assert "Traceback" not in err
    assert main(["compile", str(src), "--target", "bm1684x", "-o", str(tmp_path / "h.obprog")]) == 0
    assert ob.load_program(tmp_path / "h.obprog").target.name == "bm1684x"


@pytest.mark.parametrize("field,value,match", [
    ("efficiency", {"conv": 1.5}, "efficiency 'conv'"), ("efficiency", {"systolic": 0.5}, "systolic"),
    ("dtypes", ["f16"], "peak_tflops_f16 is 0"), ("dtypes", ["f64"], "dtypes"),
    ("int8_batch_pack", 0, "int8_batch_pack"), ("launch_us", -1.0, "launch_us"),
], ids=["eff>1", "eff-family", "f16-no-peak", "dtype-f64", "pack=0", "launch<0"])
def test_invalid_cost_fields(field, value, match):
    with pytest.raises(SimulatorError, match=match):
        ob.Target.preset("bm1684", **{field: value})


def test_custom_chip_json(tmp_path):
    """A custom chip as docs/simulator.md describes it: a JSON object of Target fields, the
    rest taken from the bm1684 defaults; ob.compile takes the loaded Target."""
    p = tmp_path / "chip.json"
    p.write_text(json.dumps({"name": "mychip", "lanes": 32, "eu_bytes": 64, "peak_tflops_f32": 1.0,
                             "peak_tflops_f16": 4.0, "dtypes": ["f16", "i8"],
                             "efficiency": {"conv": 0.6, "vector": 1.0}}))
    t = ob.Target.load(p)
    assert (t.name, t.lanes, t.eu_elems("f16"), t.family_efficiency("conv", "f16")) == ("mychip", 32, 32, 0.6)
    assert t.family_efficiency("matmul", "f32") == 1.0  # families left out run at their peak
    prog = ob.compile(_half_graph("f16"), t)
    assert prog.target == t and prog.profile().est_latency_ms > 0


CHIP_TABLE = ROOT.parent / "shared" / "targets" / "chip-latency.md"


@pytest.mark.skipif(not CHIP_TABLE.is_file(), reason=f"{CHIP_TABLE} is absent (a fresh clone has no shared/)")
def test_every_chip_of_the_calibration_table_is_a_preset():
    """bench/bench_fidelity.py compiles each row of chip-latency.md for the preset named by its
    chip column: every chip there is a preset, and its precisions are dtypes the preset has."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from bench_fidelity import read_rows
    finally:
        sys.path.remove(str(ROOT / "bench"))
    rows = read_rows(CHIP_TABLE)
    assert len(rows) >= 40 and {r.chip for r in rows} == {"BM1684", "BM1684X"}
    for r in rows:
        t = ob.Target.preset(r.chip.lower())
        if r.precision == "fp16":
            assert "f16" in t.dtypes and t.peak_tflops_f16 > 0
        elif r.precision == "int8":
            assert "i8" in t.dtypes


def test_fidelity_roles_follow_the_preset_docs():
    """The bench's calibration / held-out split is the one target.py's docstring states (the
    rows its fitted figures name), and a row is out of bound past 15% / 20% by role."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from bench_fidelity import Row, role, within
    finally:
        sys.path.remove(str(ROOT / "bench"))
    doc = ob.Target.__module__
    text = sys.modules[doc].__doc__ or ""
    assert "ReID" in text and "held out" in text
    cases = {("ResNet-50", "fp32", 1, "BM1684"): "calibration",
             ("ResNet-50", "int8", 4, "BM1684"): "calibration",
             ("YOLOv3", "int8", 4, "BM1684X"): "calibration",
             ("LPRNet", "int8", 4, "BM1684X"): "held out",
             ("BERT (bert4torch NER)", "fp16", 8, "BM1684X"): "held out",
             ("DeepSORT ReID extractor", "int8", 4, "BM1684"): "calibration",
             ("DeepSORT ReID extractor", "fp32", 1, "BM1684"): "held out",
             ("C3D", "fp16", 1, "BM1684X"): "held out"}
    for (model, prec, batch, chip), want in cases.items():
        r = Row(model, "", prec, batch, chip, 1.0)
        assert role(r) == want, (model, prec, batch, chip)
    cal, held = Row("YOLOv3", "", "fp32", 1, "BM1684", 1.0), Row("C3D", "", "fp32", 4, "BM1684", 1.0)
    assert within(cal, 1.15) and not within(cal, 1.16) and within(cal, 0.85) and not within(cal, 0.84)
    assert within(held, 1.20) and not within(held, 1.21) and not within(held, 0.79)


def _format_version(path) -> str:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return f.metadata()["format_version"]


def test_obprog_version_4_only_for_cost_fields_off_the_bm1684_defaults(tmp_path):
    """A bm1684 program keeps the cost-model fields at their defaults and stays a version 2
    file (older readers take it); a bm1684x program needs them and is version 4, and both load
    back with the target they were compiled for."""
    from opbridge.simulator.target import COST_FIELDS

    g = _half_graph("f16")
    x = ob.compile(g, "bm1684x")
    x.save(tmp_path / "x.obprog")
    assert _format_version(tmp_path / "x.obprog") == "4"
    assert ob.load_program(tmp_path / "x.obprog").target == ob.Target.preset("bm1684x")
    b = ob.GraphBuilder("f32")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 8, 4, 4))]))
    p = ob.compile(b.build(), "bm1684")
    p.save(tmp_path / "p.obprog")
    assert _format_version(tmp_path / "p.obprog") == "2"
    assert not set(COST_FIELDS) & set(p.to_json()["target"])
    assert ob.load_program(tmp_path / "p.obprog").target == ob.Target.preset("bm1684")


def test_profile_cli_bound_column_on_bm1684x(tmp_path, capsys):
    """`opbridge compile --target bm1684x` then `opbridge profile`: the per-unit table says
    which engine bounds each unit (the Relu on a whole 8x4x4 tensor: its two transfers)."""
    from opbridge.cli import main

    b = ob.GraphBuilder("relu")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 8, 4, 4))]))
    src = tmp_path / "relu.obir"
    ob.save(b.build(), src)
    out = tmp_path / "relu.obprog"
    assert main(["compile", str(src), "--target", "bm1684x", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["profile", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [u["bound"] for u in d["units"]] == ["gdma"]
    assert main(["profile", str(out)]) == 0
    text = capsys.readouterr().out
    assert "on bm1684x" in text and "gdma" in text
