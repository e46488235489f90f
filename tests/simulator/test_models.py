"""Whole models built with onnx.helper (random weights): the simulator against onnxruntime.

ResNet-50 runs at 512 KiB and at 64 KiB per lane (about 7 s each); a small ResNet, two MobileNetV2
blocks and a transformer encoder layer run in the default suite.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob

from ..conftest import requires_ort
from .helpers import assert_close, audit_local_memory
from .models import encoder_onnx, mobilenet_v2_onnx, resnet_onnx, to_ir

KIB = 1024

pytestmark = requires_ort


def _ort(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _feeds(model, seed=3):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out[i.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def _check(model, lmem_kib: int) -> ob.Program:
    g = to_ir(model)
    feeds = _feeds(model)
    want = _ort(model, feeds)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem_kib * KIB))
    got = prog.run(feeds)
    for name, w in want.items():
        assert_close(got[name], w, f"{model.graph.name} @ {lmem_kib} KiB: {name}")
    audit_local_memory(prog)
    return prog


SMALL = {
    "resnet_small": lambda: resnet_onnx(depths=(1, 1, 1, 1), width=8, image=64, classes=10),
    "mobilenet_v2_blocks": lambda: mobilenet_v2_onnx(),
    "encoder": lambda: encoder_onnx(),
}


@pytest.mark.parametrize("lmem_kib", [512, 64, 4], ids=["lmem=512KiB", "lmem=64KiB", "lmem=4KiB"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_models_match_onnxruntime(name, lmem_kib):
    prog = _check(SMALL[name](), lmem_kib)
    if lmem_kib == 4 and name != "encoder":
        p = prog.profile()
        assert p.num_tiles > p.num_layer_groups


@pytest.fixture(scope="module")
def resnet50():
    return resnet_onnx()


@pytest.mark.parametrize("lmem_kib", [512, 64], ids=["lmem=512KiB", "lmem=64KiB"])
def test_resnet50_matches_onnxruntime(resnet50, lmem_kib):
    prog = _check(resnet50, lmem_kib)
    p = prog.profile()
    assert p.num_layer_groups >= 1 and p.lmem_peak_bytes <= lmem_kib * KIB
    if lmem_kib == 64:
        assert p.num_tiles > p.num_layer_groups
