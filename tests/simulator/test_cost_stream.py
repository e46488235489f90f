"""Streamed weights through two chunk buffers: the next chunk's load overlaps this chunk's
compute (the program's addresses allow it; the cost model's scheduler follows them)."""

from __future__ import annotations

import numpy as np

import opbridge as ob
from opbridge.simulator.schema import Compute, Load

from .helpers import audit_local_memory


def _linear(rows: int, k: int, n: int) -> tuple[ob.Graph, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    b = ob.GraphBuilder("linear")
    x = b.input("x", "f32", (rows, k))
    b.output(b.op("Relu", [b.op("MatMul", [x, b.constant("w", w)])]))
    return b.build(), w, rng.standard_normal((rows, k)).astype(np.float32)


def test_streamed_chunks_alternate_buffers_and_overlap_compute():
    """A 1024 x 1536 f32 weight (96 KiB a lane) in 64 KiB lanes streams: its chunks go to the
    even and odd buffers in turn, the result is right, and every chunk after the first starts
    loading before the compute of the chunk before it has ended."""
    g, w, x = _linear(128, 1024, 1536)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=65536))
    np.testing.assert_allclose(prog.run({"x": x})[g.outputs[0].name], np.maximum(x @ w, 0),
                               rtol=1e-4, atol=1e-4)
    audit_local_memory(prog)
    (grp,) = prog.groups
    assert {"stream/matmul_1/1", "stream/matmul_1/1/odd"} <= set(grp.alloc)
    seq = [i for i in prog.instrs if (isinstance(i, Load) and i.tensor == "w") or
           (isinstance(i, Compute) and i.node == "matmul_1")]
    bufs = [i.buf for i in seq if isinstance(i, Load)]
    assert len(bufs) > 2 and bufs[0::2] == [bufs[0]] * len(bufs[0::2]) and set(bufs[1::2]) == {bufs[1]}
    assert bufs[0] != bufs[1]
    p = prog.profile()
    loads = [e for e in p.events if e["tid"] == 1 and e["name"] == "load w"]
    comps = [e for e in p.events if e["tid"] == 2 and e["name"].startswith("MatMul")]
    assert len(loads) == len(comps) > 2
    overlapped = [ld["ts"] < c["ts"] + c["dur"] for ld, c in zip(loads[1:], comps)]
    assert all(overlapped)
