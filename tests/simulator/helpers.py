"""Shared checks for the simulator tests: tolerances and the local-memory budget audit."""

from __future__ import annotations

import numpy as np

from opbridge.simulator import Program
from opbridge.simulator.memory import activation_lane_bytes, constant_lane_bytes

COSINE_MIN = 0.99999
REL_ERR_MAX = 1e-3


def assert_close(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Cosine >= 0.99999 and max error relative to the reference's range <= 1e-3."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g = got.astype(np.float64).ravel()
    w = want.astype(np.float64).ravel()
    assert np.all(np.isfinite(g)), f"{what}: non-finite values"
    denom = np.linalg.norm(g) * np.linalg.norm(w)
    cos = float(g @ w / denom) if denom else float(np.array_equal(g, w))
    rel = float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-12)) if w.size else 0.0
    assert cos >= COSINE_MIN and rel <= REL_ERR_MAX, f"{what}: cosine {cos:.8f}, max rel err {rel:.2e}"


def audit_local_memory(prog: Program) -> int:
    """Check every tile against its group's allocation and the lane's budget; returns the
    number of tile accesses checked."""
    t = prog.target
    budget = t.lmem_bytes_per_lane
    checked = 0
    for g in (u for u in prog.units if "alloc" in u):  # layer groups and streamed layers
        alloc = g["alloc"]
        # buffers live at the same time never share bytes
        items = list(alloc.items())
        for i, (ka, (a0, asz, af, al)) in enumerate(items):
            assert 0 <= a0 and a0 + asz <= budget, f"{ka} at {a0}+{asz} exceeds {budget}"
            for kb, (b0, bsz, bf, bl) in items[i + 1:]:
                if af <= bl and bf <= al:
                    assert a0 + asz <= b0 or b0 + bsz <= a0, f"{ka} and {kb} overlap while both live"
        lo, hi = g["instrs"]
        for ins in prog.instrs[lo:hi]:
            accesses = []
            if ins["op"] == "load":
                accesses.append((ins.get("buf", ins["tensor"]), ins["lmem"], ins["lane_bytes"]))
            elif ins["op"] == "compute":
                node = prog.graph.node(ins["node"])
                o = ins["out"]
                accesses.append((o.get("buf", o["tensor"]), o["lmem"],
                                 activation_lane_bytes(t, o["shape"], node.outputs[0].dtype)))
                for v, a in zip(node.inputs, ins["ins"]):
                    if a is None:
                        continue
                    lb = (constant_lane_bytes(t, a["shape"], v.dtype) if a.get("const")
                          else activation_lane_bytes(t, a["shape"], v.dtype))
                    accesses.append((a.get("buf", a["tensor"]), a["lmem"], lb))
            for key, addr, lane_bytes in accesses:
                a0, asz, _, _ = alloc[key]
                assert addr == a0, f"{key}: tile at {addr}, allocated at {a0}"
                assert lane_bytes <= asz, f"{key}: tile needs {lane_bytes} B/lane, has {asz}"
                assert addr + lane_bytes <= budget
                checked += 1
    return checked
