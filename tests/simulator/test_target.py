"""Target presets, overrides and JSON files."""

from __future__ import annotations

import json

import pytest

import opbridge as ob
from opbridge.errors import ModelFormatError, SimulatorError


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
