"""The cost model: fields, per-group figures, overlap of the engines, the trace file."""

from __future__ import annotations

import json

import numpy as np
import pytest

import opbridge as ob

from .helpers import assert_close, audit_local_memory
from .test_run import residual_block


@pytest.fixture(scope="module")
def tiled() -> ob.Program:
    return ob.compile(residual_block(), ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))


def test_fields(tiled):
    p = tiled.profile()
    assert p.est_latency_ms > 0 and p.gdma_bytes > 0
    assert p.num_layer_groups == len(tiled.groups) == len(p.groups)
    assert p.num_tiles == sum(g.tiles for g in tiled.groups) > p.num_layer_groups
    assert 0 < p.lmem_peak_bytes <= 4096
    assert p.num_cpu_layers == 0
    for g in p.groups:
        assert g.bound in ("gdma", "compute") and g.est_ms > 0 and g.ops and g.tiles >= 1
    assert p.ddr_peak_bytes <= p.ddr_no_reuse_bytes


def test_gdma_bytes_cover_inputs_outputs_and_weights(tiled):
    p = tiled.profile()
    g = tiled.graph
    weights = sum(c.data.nbytes for c in g.constants.values())
    io = sum(v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3] * 4 for v in g.inputs + g.outputs)
    assert p.gdma_bytes >= weights + io


def _pointwise_chain() -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("pointwise")
    x = b.input("x", "f32", (1, 32, 64, 64))
    y = b.op("Conv", [x, b.constant("w", (rng.standard_normal((32, 32, 1, 1)) * 0.2).astype(np.float32))])
    y = b.op("Relu", [y])
    b.output(b.op("Add", [y, b.constant("c", rng.standard_normal((1, 32, 1, 1)).astype(np.float32))]))
    return b.build()


def test_engines_overlap():
    """With ping-pong buffers, the next tile's loads run while this tile computes, so the
    estimate is below the sum of every instruction's time."""
    g = _pointwise_chain()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=16384))
    assert prog.groups[0].double_buffered and prog.groups[0].tiles > 2
    x = {"x": np.random.default_rng(1).standard_normal((1, 32, 64, 64)).astype(np.float32)}
    assert_close(prog.run(x)["add_3"], ob.interpret(g, x)["add_3"])
    audit_local_memory(prog)
    p = prog.profile()
    serial = sum(e["dur"] for e in p.events) / 1e3
    assert p.groups[0].est_ms < serial
    t = prog.target
    assert p.est_latency_ms == pytest.approx(p.groups[0].est_ms + (t.launch_us + t.sync_us) / 1e3)
    gdma = [e for e in p.events if e["tid"] == 1]
    tpu = [e for e in p.events if e["tid"] == 2]
    assert any(a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"] for a in gdma for b in tpu)


def test_less_bandwidth_more_latency():
    g = residual_block()
    fast = ob.compile(g, ob.Target.preset("bm1684", ddr_bandwidth_gbps=64.0)).profile()
    slow = ob.compile(g, ob.Target.preset("bm1684", ddr_bandwidth_gbps=4.0)).profile()
    assert slow.est_latency_ms > fast.est_latency_ms


def test_trace_file(tiled, tmp_path):
    p = tiled.profile()
    path = tmp_path / "trace.json"
    p.write_trace(path)
    doc = json.loads(path.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert names == {"gdma", "tpu", "host"}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 and {"ts", "pid", "tid", "name"} <= set(e) for e in spans)
