"""Whole models of different kinds: exported with torch, converted and run in a subprocess that
never imports torch, compared with torch within 1e-4 relative."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import requires_torch

from .helpers import RTOL, assert_close, to_tuple
from .models import MODELS, build

pytestmark = requires_torch
ROOT = Path(__file__).resolve().parents[2]
#: Every model traced, and the CNN also scripted (torch.jit.script, then frozen).
CASES = (*MODELS, "resnet_scripted")


@pytest.fixture(scope="module")
def converted(tmp_path_factory: Any) -> tuple[Path, dict[str, list[np.ndarray]]]:
    """Export every model, then convert them all in one torch-free subprocess."""
    import torch

    from opbridge.export.torchscript import export_torchscript

    folder = tmp_path_factory.mktemp("models")
    refs: dict[str, list[np.ndarray]] = {}
    for name in CASES:
        model, inputs = build(name.replace("_scripted", ""))
        mode = "script" if name.endswith("_scripted") else "trace"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = export_torchscript(model, inputs, folder / f"{name}.ts.json", mode=mode)
        with torch.no_grad():
            refs[name] = [t.numpy() for t in to_tuple(model(*inputs))]
        from opbridge.parsers.torchscript_json import parse_torchscript_json

        names = [t.name for t in parse_torchscript_json(path).inputs]
        np.savez(folder / f"{name}.inputs.npz", **{n: t.numpy() for n, t in zip(names, inputs)})
    script = Path(__file__).with_name("_convert_without_torch.py")
    r = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return folder, refs


@pytest.mark.parametrize("name", CASES)
def test_model_matches_torch(converted: tuple[Path, dict[str, list[np.ndarray]]], name: str) -> None:
    folder, refs = converted
    err = folder / f"{name}.error.txt"
    assert not err.exists(), err.read_text() if err.exists() else ""
    got = np.load(folder / f"{name}.outputs.npz")
    outs = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(outs) == len(refs[name])
    worst = max(assert_close(o, r, RTOL, what=f"{name} output {i}")
                for i, (o, r) in enumerate(zip(outs, refs[name])))
    print(f"{name}: max relative error {worst:.2e}")
