"""Every real Caffe net of ../shared/models/caffe, end to end on the command line, each stage a
fresh process: ``opbridge random-weights`` -> ``convert`` (saves a .obir) -> ``compile``
(loads it) -> ``run --random-input``. Every command must exit 0, and the simulator's outputs
must be finite and match the reference interpreter run on the loaded .obir with the same
inputs. Faster R-CNN takes the example proposal plugin at every stage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli.run import random_feeds
from opbridge.parsers.caffe import parse_caffe
from opbridge.plugins_loader import load_plugins
from tests.conftest import SHARED_MODELS, requires_shared_models

pytestmark = requires_shared_models

ROOT = Path(__file__).resolve().parents[2]
CAFFE = SHARED_MODELS / "caffe"
PLUGINS = {"faster_rcnn_vgg16": [ROOT / "examples" / "plugins" / "frcnn_proposal.py"]}

#: Nets that run on the simulator in seconds; the others (large convolutions on numpy tiles)
#: are marked slow.
LIGHT = ("mobilenet_v1", "mobilenet_ssd")


def _models() -> list[Any]:
    names = sorted(p.name for p in CAFFE.iterdir() if (p / "deploy.prototxt").is_file()) \
        if CAFFE.is_dir() else []
    return [pytest.param(n, marks=() if n in LIGHT else (pytest.mark.slow,), id=n) for n in names]


def _cli(*args: Any) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "opbridge", *map(str, args)], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, f"opbridge {args[0]} exited {r.returncode}:\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r


def test_every_shared_net_is_listed() -> None:
    """The parametrization below found the nets (an empty folder would test nothing)."""
    assert len(_models()) >= 18


@pytest.mark.parametrize("model", _models())
def test_random_weights_convert_compile_run(model: str, tmp_path: Path) -> None:
    prototxt = CAFFE / model / "deploy.prototxt"
    # batch 1 (some deploy nets declare 10), through the CLI's own option
    shapes = {t.name: (1, *t.shape[1:]) for t in parse_caffe(prototxt).inputs if t.shape}
    shape_args = [a for n, s in shapes.items() for a in ("--input-shape", f"{n}={','.join(map(str, s))}")]
    plugin_args = [a for p in PLUGINS.get(model, []) for a in ("--plugin", p)]
    weights, obir = tmp_path / "net.caffemodel", tmp_path / "net.obir"
    prog, outs = tmp_path / "net.obprog", tmp_path / "outs.npz"

    _cli("random-weights", prototxt, "-o", weights, "--seed", 7, *shape_args, *plugin_args)
    _cli("convert", prototxt, "--weights", weights, *shape_args, *plugin_args, "-o", obir)
    _cli("compile", obir, *plugin_args, "-o", prog)
    _cli("run", prog, "--random-input", "--seed", 3, *plugin_args, "-o", outs)

    load_plugins(PLUGINS.get(model, []))
    g = ob.load(obir)
    want = ob.interpret(g, random_feeds(g, 3))
    with np.load(outs) as got:
        assert sorted(got.files) == sorted(v.name for v in g.outputs)
        for v in g.outputs:
            ref, out = want[v.name], got[v.name]
            assert np.isfinite(out).all(), f"{model}: output '{v.name}' is not finite"
            assert out.shape == ref.shape, f"{model}: output '{v.name}': {out.shape} vs {ref.shape}"
            scale = max(float(np.abs(ref).max()), 1e-6)
            err = float(np.abs(out.astype(np.float64) - ref).max()) / scale
            assert err <= 1e-4, f"{model}: output '{v.name}' differs from the interpreter by {err:.3g}"
