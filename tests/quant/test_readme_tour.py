"""The README's quantization tour runs as written: calibrate -> quantize -> validate -> compile ->
profile, on the bundled small CNN and calibration arrays standing in for model.onnx and calib/."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

from tests.quant.helpers import cnn_model, feeds

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _tour() -> list[list[str]]:
    block = re.search(r"Post-training quantization.*?```sh\n(.*?)```", README, re.S).group(1)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.strip()]


def test_readme_quantization_tour(tmp_path):
    onnx.save(cnn_model(), tmp_path / "model.onnx")
    (tmp_path / "calib").mkdir()
    for i, f in enumerate(feeds(6)):
        np.save(tmp_path / "calib" / f"{i}.npy", f["image"])
    commands = _tour()
    assert [c[1] for c in commands] == ["calibrate", "quantize", "validate", "compile", "profile", "quantize"]
    for argv in commands:
        r = subprocess.run([sys.executable, "-m", "opbridge", *argv[1:]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-2000:])
    assert (tmp_path / "model.int8.obprog").is_file() and (tmp_path / "model.f16.obir").is_file()
