"""Every size and rate of a Target must be positive (or >= 0 where 0 means none): a clean
SimulatorError naming the field, whether the Target comes from Python, a preset override, a
JSON file or `opbridge compile --target-json`."""

from __future__ import annotations

import json

import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError, SimulatorError


@pytest.mark.parametrize("field,value", [
    ("lmem_banks", 0), ("lmem_banks", -2), ("lmem_banks", 1.5), ("lmem_banks", True),
    ("clock_mhz", float("nan")), ("ddr_bandwidth_gbps", float("nan")), ("sync_us", float("nan")),
], ids=["banks=0", "banks<0", "banks=float", "banks=bool", "clock=nan", "bandwidth=nan", "sync=nan"])
def test_constructor_names_the_field(field: str, value: object) -> None:
    with pytest.raises(SimulatorError, match=rf"target 'bm1684': {field} = .* must be"):
        ob.Target(**{field: value})
    with pytest.raises(SimulatorError, match=rf"{field} = .* must be"):
        ob.Target.preset("bm1684x", **{field: value})


def test_json_target_with_no_banks_is_a_clean_cli_error(tmp_path, capsys) -> None:
    from opbridge.cli import main

    chip = tmp_path / "chip.json"
    chip.write_text(json.dumps({"name": "nobanks", "lmem_banks": 0}))
    with pytest.raises(OpbridgeError, match="lmem_banks = 0 must be a positive integer"):
        ob.Target.load(chip)
    b = ob.GraphBuilder("g")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 4))]))
    ob.save(b.build(), tmp_path / "g.obir")
    assert main(["compile", str(tmp_path / "g.obir"), "--target-json", str(chip),
                 "-o", str(tmp_path / "g.obprog")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "lmem_banks = 0" in err and "Traceback" not in err
    assert ob.Target(lmem_banks=1).lmem_banks == 1  # the smallest valid count still loads
