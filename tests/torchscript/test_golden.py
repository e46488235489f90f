"""The committed golden TorchScript-json files (tests/torchscript/golden/) convert and run to
torch's stored outputs, with or without torch installed, so the TorchScript frontend (parser and
mappers) is tested on every machine. golden/make_golden.py writes them (needs torch, by hand).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from tests.conftest import requires_torch

from .helpers import RTOL, assert_close

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parents[2]
NAMES = sorted(p.name[: -len(".ts.json")] for p in GOLDEN.glob("*.ts.json"))
#: Kept small so the repository stays light: each model's files together stay under this.
MAX_BYTES_PER_MODEL = 16 * 1024


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _expected(name: str) -> list[np.ndarray]:
    exp = _npz(GOLDEN / f"{name}.expected.npz")
    return [exp[f"out{i}"] for i in range(len(exp))]


def test_golden_set_covers_the_mapper_families() -> None:
    assert len(NAMES) >= 8, NAMES
    kinds = set()
    for name in NAMES:
        kinds |= {n["kind"] for n in json.loads((GOLDEN / f"{name}.ts.json").read_text())["nodes"]}
    for kind in ("aten::_convolution", "aten::batch_norm", "aten::max_pool2d", "aten::linear",
                 "aten::layer_norm", "aten::group_norm", "aten::instance_norm", "aten::softmax",
                 "aten::matmul", "aten::where", "aten::chunk", "aten::permute", "aten::mean",
                 "aten::argmax", "aten::upsample_bilinear2d", "prim::ListUnpack", "aten::size"):
        assert kind in kinds, f"no golden model records {kind}"
    modes = {json.loads((GOLDEN / f"{n}.ts.json").read_text())["producer"]["mode"] for n in NAMES}
    assert modes == {"trace", "script"}


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_is_small(name: str) -> None:
    size = sum(p.stat().st_size for p in GOLDEN.glob(f"{name}.*"))
    assert size <= MAX_BYTES_PER_MODEL, f"{name}: {size} bytes of golden files"


@pytest.mark.parametrize("name", NAMES)
def test_golden_model_matches_torch_output(name: str) -> None:
    graph = convert(str(GOLDEN / f"{name}.ts.json"))
    outs = list(ob.interpret(graph, _npz(GOLDEN / f"{name}.inputs.npz")).values())
    ref = _expected(name)
    assert len(outs) == len(ref), f"{len(outs)} outputs, torch gave {len(ref)}"
    for i, (o, r) in enumerate(zip(outs, ref)):
        assert_close(np.asarray(o), r, RTOL, what=f"{name} output {i}")


_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # any 'import torch' now raises ImportError
from pathlib import Path
from opbridge.convert import convert
for p in sorted(Path(sys.argv[1]).glob("*.ts.json")):
    convert(str(p))
print("ok")
"""


def test_golden_files_convert_where_torch_cannot_be_imported() -> None:
    r = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH, str(GOLDEN)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@requires_torch
@pytest.mark.parametrize("name", NAMES)
def test_golden_outputs_are_torch_outputs_of_make_golden(name: str) -> None:
    """Fresh: the stored inputs and outputs are still what torch computes for the model
    make_golden.py writes (else: python -m tests.torchscript.golden.make_golden)."""
    from .golden.make_golden import build, torch_outputs

    model, inputs, _ = build(name)
    stored = _npz(GOLDEN / f"{name}.inputs.npz")
    assert len(stored) == len(inputs)
    for t, (key, arr) in zip(inputs, stored.items()):
        np.testing.assert_array_equal(t.numpy(), arr, err_msg=f"{name} input '{key}' is stale")
    for i, (o, r) in enumerate(zip(torch_outputs(model, inputs), _expected(name), strict=True)):
        assert_close(o, r, RTOL, what=f"{name} output {i} (stale golden file?)")
