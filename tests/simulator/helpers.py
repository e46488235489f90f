"""Shared checks for the simulator tests: tolerances and the local-memory budget audit."""

from __future__ import annotations

import math

import numpy as np

import opbridge as ob
from opbridge.simulator import Compute, GroupUnit, Load, Program, Store, StreamUnit

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


#: Bytes per element, written out here rather than taken from the simulator under audit.
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
            "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1}


def lane_bytes(target: ob.Target, shape, dtype: str, const: bool = False, rows: bool = False) -> int:
    """Per-lane footprint, derived from DESIGN.md independently of ``simulator.memory``: an
    (N, C, H, W) tile takes ``N * ceil(C / lanes) * align(H * W, EU) * bytes`` in every lane,
    with ``EU = eu_bytes / bytes``; a constant held whole (docs/obprog.md) is spread over the
    lanes by its first axis, ``ceil(d0 / lanes) * align(d1 * d2 * ..., EU) * bytes``, except a
    (1, C, H, W) constant, which takes the activation layout. ``rows``: a tile of a rank-2/3
    tensor, laid out as TPU-MLIR lays out a local MatMul's operands (sophgo/tpu-mlir,
    lib/Dialect/Tpu/Interfaces/BM1684X/MatMul.cpp, getBufferSize_bm1684x:
    ``ceiling_func(rows, NPU_NUM) * align_up(K, eu_num)``): rows over the lanes, features
    along the EU. An 8-bit integer activation on a target that packs batch items
    (``int8_batch_pack``, 4 on the BM1684) takes TPU-MLIR's 4N layout
    (``Arch::get_tensor_lmem_bytes`` under ``ALIGN_4N``): ``ceil(N / 4)`` groups of four
    items, 4-byte elements, EU of 4 bytes."""
    size = ITEMSIZE[dtype]
    eu = target.eu_bytes // size
    shape = tuple(int(d) for d in shape)
    if const and not (len(shape) == 4 and shape[0] == 1):
        d0, rest = (shape[0], int(np.prod(shape[1:]))) if shape else (1, 1)
        return math.ceil(d0 / target.lanes) * (math.ceil(rest / eu) * eu) * size
    if len(shape) == 5:  # a volume (N, C, D, H, W): each channel's D x H x W aligned once
        shape = (shape[0], shape[1], shape[2], shape[3] * shape[4])
    n, c, h, w = shape
    if rows:
        return math.ceil(n * c * h / target.lanes) * (math.ceil(w / eu) * eu) * size
    pack = getattr(target, "int8_batch_pack", 1)
    if not const and size == 1 and dtype in ("i8", "u8") and pack > 1:
        eu_p = target.eu_bytes // pack
        return math.ceil(n / pack) * math.ceil(c / target.lanes) * (math.ceil(h * w / eu_p) * eu_p) * pack
    return n * math.ceil(c / target.lanes) * (math.ceil(h * w / eu) * eu) * size


def _moved_shape(prog: Program, ins: Load) -> tuple[int, ...]:
    """The shape a load brings into local memory, from the DDR tensor and the ranges."""
    shape = list(prog.graph.values()[ins.tensor].shape)
    if ins.n is not None and len(shape) < 4:  # a rank-2/3 tensor, seen as (batch, 1, tokens, features)
        shape = [shape[0], 1, *shape[1:]] if len(shape) == 3 else [1] * (4 - len(shape)) + shape
    if ins.sel is not None:
        axis, lo, hi = ins.sel
        shape[axis] = hi - lo
    if ins.n is not None:
        shape[0] = ins.n[1] - ins.n[0]
        shape[2] = ins.h[1] - ins.h[0]
        if ins.c is not None:
            shape[1] = ins.c[1] - ins.c[0]
        if ins.w is not None:  # a volume's columns are whole rows of W elements
            shape[3] = (ins.w[1] - ins.w[0]) // (shape[4] if len(shape) == 5 else 1)
    return tuple(shape)


def _accesses(prog: Program, ins) -> list[tuple[str, int, int, int]]:
    """(buffer, per-lane address, lane bytes derived here, lane bytes the program records)
    of every local-memory access of one instruction."""
    t = prog.target
    if isinstance(ins, (Load, Store)):
        v = prog.graph.values()[ins.tensor]
        rows = len(v.shape) < 4
        if isinstance(ins, Store):
            return [(ins.buf, ins.lmem, lane_bytes(t, ins.tile_shape, v.dtype, rows=rows), ins.lane_bytes)]
        return [(ins.buf, ins.lmem, lane_bytes(t, _moved_shape(prog, ins), v.dtype, ins.const, rows),
                 ins.lane_bytes)]
    if not isinstance(ins, Compute):
        return []
    node = prog.graph.node(ins.node)
    o = ins.out
    out = [(o.buf, o.lmem, lane_bytes(t, o.shape, node.outputs[0].dtype,
                                      rows=len(node.outputs[0].shape) < 4), o.lane_bytes)]
    for v, a in zip(node.inputs, ins.ins):
        if a is not None:
            out.append((a.buf, a.lmem, lane_bytes(t, a.shape, v.dtype, a.const, len(v.shape) < 4),
                        a.lane_bytes))
    return out


def audit_local_memory(prog: Program) -> int:
    """Check every tile against its group's allocation and the lane's budget, with lane
    footprints derived here (:func:`lane_bytes`); returns the number of accesses checked."""
    budget = prog.target.lmem_bytes_per_lane
    checked = 0
    for g in (u for u in prog.units if isinstance(u, (GroupUnit, StreamUnit))):
        # buffers live at the same time never share bytes
        # an in-place layer's output shares its input's buffer on purpose
        shared = getattr(g, "aliases", {})
        items = [(k, a) for k, a in g.alloc.items() if k not in shared]
        for i, (ka, a) in enumerate(items):
            assert 0 <= a.addr and a.addr + a.size <= budget, f"{ka} at {a.addr}+{a.size} exceeds {budget}"
            for kb, b in items[i + 1:]:
                if a.first <= b.last and b.first <= a.last:
                    assert a.addr + a.size <= b.addr or b.addr + b.size <= a.addr, \
                        f"{ka} and {kb} overlap while both live"
        lo, hi = g.instrs
        for ins in prog.instrs[lo:hi]:
            for key, addr, derived, recorded in _accesses(prog, ins):
                a = g.alloc[key]
                assert recorded == derived, f"{key}: the program records {recorded} B/lane, the layout gives {derived}"
                assert addr == a.addr, f"{key}: tile at {addr}, allocated at {a.addr}"
                assert derived <= a.size, f"{key}: tile needs {derived} B/lane, has {a.size}"
                assert addr + derived <= budget
                checked += 1
    return checked


def check_run_against_onnxruntime(model, prog: Program) -> None:
    """Run ``prog`` on a seeded normal input ``x`` and compare its output ``y`` with onnxruntime
    running ``model`` (an ``onnx.ModelProto`` of one input ``x``, one output ``y``)."""
    import onnxruntime as ort

    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")
