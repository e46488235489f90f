"""The README's examples work as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

PROTOTXT = """name: "withcustom"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "ss" type: "ScaleShift" bottom: "conv" top: "ss" scale_shift_param { alpha: 2.0 beta: 0.5 } }
layer { name: "relu" type: "ReLU" bottom: "ss" top: "out" }
"""

CHECK = """
import sys
import numpy as np
import opbridge as ob
g = ob.convert(sys.argv[1], weights=sys.argv[2])
x = np.random.default_rng(0).standard_normal((1, 3, 4, 4)).astype(np.float32)
got = ob.interpret(g, {"data": x}, keep_intermediates=True)
expected = np.maximum(got["conv"] * 2.0 + 0.5, 0)  # the layer's meaning, written here independently
np.testing.assert_allclose(got["out"], expected, rtol=1e-6)
prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=16384))
np.testing.assert_allclose(prog.run({"data": x})["out"], expected, rtol=1e-5, atol=1e-6)
assert prog.profile().num_global_layers == 0, "the kernel hint should put ScaleShift in a layer group"
print("ok")
"""


def _block_after(heading: str) -> str:
    section = README.split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_custom_op_plugin_converts_compiles_and_runs(tmp_path):
    plugin = tmp_path / "scale_shift.py"
    plugin.write_text(_block_after("## Add a custom op"))
    proto = tmp_path / "net.prototxt"
    proto.write_text(PROTOTXT)
    weights = tmp_path / "net.caffemodel"
    r = subprocess.run([sys.executable, "-m", "opbridge", "random-weights", str(proto), "-o", str(weights),
                        "--plugin", str(plugin)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    script = tmp_path / "check.py"
    script.write_text(f"import opbridge\nopbridge.load_plugins([{str(plugin)!r}])\n" + CHECK)
    r = subprocess.run([sys.executable, str(script), str(proto), str(weights)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_readme_quick_start_is_two_make_targets():
    block = re.search(r"## Quick start.*?```sh\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
