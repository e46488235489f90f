"""Executing a Program: a numpy DDR byte buffer, per-lane local memory, GDMA copies, kernels.

DDR is one ``uint8`` buffer laid out by the program's DDR plan (weights, then activations).
Local memory is ``lanes x lmem_bytes_per_lane`` bytes. A tile tensor allocated at per-lane
address ``A`` with per-lane footprint ``F`` owns the byte range ``[A, A + F)`` of every
lane; the simulator stores its elements, in NCHW order, in the ``lanes * F`` bytes of the
flat bank ``[A * lanes, (A + F) * lanes)``, so two tensors share bytes exactly when their
per-lane ranges overlap, and every range is checked against the lane's size. (Channels are
not scattered lane by lane: the footprint and addresses are those of the channel-over-lanes
layout, the element order inside the region is plain NCHW so kernels see ordinary arrays.)

Every instruction is turned once into a prepared step (numpy views of the two buffers and
the function to call), so a run is a loop of copies and kernel calls at tile granularity.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelFormatError, OpbridgeError, SimulatorError
from ..ir.interpret import check_feeds, checked_result, run_node
from ..ir.types import to_numpy_dtype
from .kernels import DEFAULT_KERNELS, WeightMemo
from .memory import constant_lane_bytes, tile_lane_bytes, view4
from .schema import (
    RECOMPILE_HINT,
    Compute,
    GlobalOp,
    GroupUnit,
    HostOp,
    Instruction,
    Load,
    Store,
)
from .target import itemsize

if TYPE_CHECKING:
    from .program import Program
    from .schema import DdrTensor, Unit

#: A prepared instruction: ("copy", dst, src) or (kind, fn, args, attrs, outs, node).
Step = tuple[Any, ...]



def node_function(prog: Any, node: Any, into: bool = False) -> tuple[Any, bool, bool]:
    """The function a compute of ``node`` runs (its kernel's own, else the op's compute; None
    when it has neither), whether it writes into its output tile, and whether it is the
    kernel's own. The executor and the program's load checks both ask this."""
    reg = prog.kernels if prog.kernels is not None else DEFAULT_KERNELS
    k = reg.get(node.op)
    own = None if k is None else k.kernel_for(node, into)
    if own is not None:
        return own[0], own[1], True
    return prog.graph.registry.get(node.op).compute_function, False, False

class Executor:
    """The prepared form of a Program; ``run`` executes it on feeds."""

    def __init__(self, prog: Program) -> None:
        try:
            self._build(prog)
        except OpbridgeError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
            # a program that loaded but whose plan does not hold together (a tampered file)
            raise ModelFormatError(
                f"program '{prog.graph.name}': its memory plan or units are malformed: "
                f"{type(err).__name__}: {err}",
                hint=RECOMPILE_HINT) from None

    def _build(self, prog: Program) -> None:
        self.prog = prog
        t = prog.target
        self.lanes = t.lanes
        self.budget = t.lmem_bytes_per_lane
        ddr = prog.ddr
        self.ddr = np.zeros(ddr.total_bytes, np.uint8)
        self.lmem = np.zeros(t.lanes * t.lmem_bytes_per_lane, np.uint8)
        self.act_start = ddr.weights_bytes
        self.nodes = {n.name: n for n in prog.graph.nodes}
        self.views: dict[str, np.ndarray] = {}
        for name, d in ddr.tensors.items():
            self.views[name] = self._ddr_view(name, d)
        for name, c in prog.graph.constants.items():
            if name in self.views:
                self.views[name][...] = c.data
        #: what kernels derive from constants (kernels/registry.py WeightMemo), and which
        #: constant (DDR tensor, slice) each local address last received while preparing
        self.memo: dict[Hashable, Any] = {}
        self._const_at: dict[int, tuple[str, tuple[int, int, int] | None]] = {}
        self.steps: list[Step] = []
        for idx, ins in enumerate(prog.instrs):
            try:
                self.steps.append(self._prepare(ins))
            except OpbridgeError:
                raise
            except (KeyError, IndexError, TypeError, ValueError) as err:
                raise ModelFormatError(
                    f"program '{prog.graph.name}': instruction {idx} ({ins.TAG}) is "
                    f"malformed: {type(err).__name__}: {err}", hint=RECOMPILE_HINT) from None
        #: per unit: its last step and the tensors it leaves in DDR (for keep_intermediates)
        self.unit_ends = [(u.instrs[1], self._ddr_outputs(u)) for u in prog.units]

    def _ddr_outputs(self, u: Unit) -> list[str]:
        """The tensors a unit leaves in DDR: a group's stored outputs, else its node's outputs."""
        if isinstance(u, GroupUnit):
            return list(u.outputs)
        return [v.name for n in u.nodes for v in self.nodes[n].outputs]

    # -- views ---------------------------------------------------------------------------
    def _ddr_view(self, name: str, d: DdrTensor) -> np.ndarray:
        dt = to_numpy_dtype(d.dtype)
        shape = tuple(d.shape)
        n = math.prod(shape) * dt.itemsize
        a = d.addr
        if a < 0 or a + n > self.ddr.size:
            raise SimulatorError(f"tensor '{name}' at DDR {a} + {n} bytes lies outside the DDR")
        return self.ddr[a:a + n].view(dt).reshape(shape)

    def _lmem_view(self, addr: int, shape: list[int], dtype: str, what: str,
                   const: bool = False, rows: bool = False) -> np.ndarray:
        """The local-memory view of a tile (or a constant) at per-lane address ``addr``;
        ``rows``: a tile of a rank-1-to-3 tensor (the row layout, ``memory.row_lane_bytes``)."""
        dt = to_numpy_dtype(dtype)
        if const:
            lane = constant_lane_bytes(self.prog.target, shape, dtype)
        else:
            lane = tile_lane_bytes(self.prog.target, shape, dtype, rows)
        if addr < 0 or addr + lane > self.budget:
            raise SimulatorError(
                f"{what}: local range [{addr}, {addr + lane}) exceeds the lane's "
                f"{self.budget} bytes", hint="the program was compiled for a larger local memory")
        n = math.prod(shape) * itemsize(dtype)
        off = addr * self.lanes
        return self.lmem[off:off + n].view(dt).reshape(shape)

    def _kernel(self, node: Any) -> Any:
        reg = self.prog.kernels if self.prog.kernels is not None else DEFAULT_KERNELS
        return reg.get(node.op)

    def _memo(self, node: Any, keys: list[Hashable | None]) -> WeightMemo | None:
        """The memo a kernel that asks for one gets, with its inputs' constant keys."""
        k = self._kernel(node)
        return WeightMemo(self.memo, keys) if k is not None and k.wants_memo else None

    def _fn(self, node_name: str, into: bool = False) -> tuple[Any, bool, bool]:
        """The function that computes a node, whether it writes into its output tile, and
        whether it is the kernel's own (which takes a scratch buffer)."""
        node = self.nodes[node_name]
        k = self._kernel(node)
        if k is not None:
            k.check_dtype(node)
        fn, writes_into, own = node_function(self.prog, node, into)
        if fn is None:
            raise SimulatorError(f"{node.where}: op has no compute function",
                                 hint="give its define_op a .compute(fn)")
        return fn, writes_into, own

    @staticmethod
    def _copy(dst: np.ndarray, src: np.ndarray, ins: Load | Store) -> Step:
        """A GDMA step; both sides must be the same slice shape."""
        if dst.shape != src.shape:
            raise ModelFormatError(
                f"{ins.TAG} of '{ins.tensor}': slice {list(src.shape)} does not match "
                f"{list(dst.shape)}", hint=RECOMPILE_HINT)
        return ("copy", dst, src)

    def _prepare(self, ins: Instruction) -> Step:
        """The prepared step of one instruction, by its kind."""
        match ins:
            case Load():
                return self._prepare_load(ins)
            case Store():
                return self._prepare_store(ins)
            case Compute():
                return self._prepare_compute(ins)
            case GlobalOp() | HostOp():
                return self._prepare_whole(ins)
        raise TypeError(f"not an instruction: {ins!r}")

    def _prepare_load(self, ins: Load) -> Step:
        src = self.views[ins.tensor]
        if ins.sel is not None:  # a slice of a constant along one axis
            axis, lo, hi = ins.sel
            src = src[(slice(None),) * axis + (slice(lo, hi),)]
        if ins.n is not None:
            if ins.h is None:
                raise ModelFormatError(f"load of '{ins.tensor}' gives batch items but no rows",
                                       hint=RECOMPILE_HINT)
            c = slice(*ins.c) if ins.c is not None else slice(None)
            w = slice(*ins.w) if ins.w is not None else slice(None)
            src = src.reshape(view4(src.shape))[ins.n[0]:ins.n[1], c, ins.h[0]:ins.h[1], w]
        if ins.const:
            self._const_at[ins.lmem] = (ins.tensor, None if ins.sel is None else tuple(ins.sel))
        d = self.prog.ddr.tensors[ins.tensor]
        dst = self._lmem_view(ins.lmem, list(src.shape), d.dtype, f"load of '{ins.tensor}'", ins.const,
                              len(d.shape) < 4)
        return self._copy(dst, src, ins)

    def _prepare_store(self, ins: Store) -> Step:
        d = self.prog.ddr.tensors[ins.tensor]
        tile = self._lmem_view(ins.lmem, list(ins.tile_shape), d.dtype, f"store of '{ins.tensor}'",
                               rows=len(d.shape) < 4)
        h0 = ins.tile_h0
        s0, s1 = ins.h
        w, tw = slice(None), slice(None)
        if ins.w is not None:
            w = slice(*ins.w)
            tw = slice(ins.w[0] - ins.tile_w0, ins.w[1] - ins.tile_w0)
        src = tile[:, :, s0 - h0:s1 - h0, tw]
        c = slice(*ins.c) if ins.c is not None else slice(None)
        full = self.views[ins.tensor]
        dst = full.reshape(view4(full.shape))[ins.n[0]:ins.n[1], c, s0:s1, w]
        return self._copy(dst, src, ins)

    def _prepare_compute(self, ins: Compute) -> Step:
        node = self.nodes[ins.node]
        fn, into, own = self._fn(node.name, into=len(node.outputs) == 1)
        attrs = dict(node.attrs)
        attrs.update({k: tuple(v) if isinstance(v, list) else v for k, v in ins.attrs.items()})
        args: list[np.ndarray | None] = []
        keys: list[Hashable | None] = []
        for v, a in zip(node.inputs, ins.ins):
            src = self._const_at.get(a.lmem) if a is not None and a.const else None
            # the part of the loaded constant the operand takes is part of what it is
            keys.append((*src, a.n, a.h, a.w) if a is not None and src is not None and src[0] == a.tensor
                        else None)
            if a is None or v is None:
                args.append(None)
                continue
            view = self._lmem_view(a.lmem, list(a.shape), v.dtype, node.where, a.const,
                                   len(v.shape) < 4)
            if a.n is not None:
                view = view[a.n[0]:a.n[1]]
            if a.h is not None:
                view = view[:, :, a.h[0]:a.h[1], :]
            if a.w is not None:  # columns of a rank-4 tile, rows H of a volume's (N, C, D, H, W)
                view = view[:, :, :, a.w[0]:a.w[1]]
            args.append(view)
        o = ins.out
        out = self._lmem_view(o.lmem, list(o.shape), node.outputs[0].dtype, node.where,
                              rows=len(node.outputs[0].shape) < 4)
        if o.w is not None:  # a chunk of output features (a streamed weight's chunk)
            out = out[..., o.w[0]:o.w[1]]
        if ins.scratch is not None and own:
            lo, hi = ins.scratch
            if lo < 0 or hi < lo or hi > self.budget:
                raise ModelFormatError(f"{node.where}: scratch range [{lo}, {hi}) lies outside "
                                       f"the lane's {self.budget} bytes", hint=RECOMPILE_HINT)
            attrs["scratch"] = self.lmem[lo * self.lanes:hi * self.lanes]
        memo = self._memo(node, keys) if own else None
        if memo is not None:
            attrs["memo"] = memo
        return ("into" if into else "compute", fn, args, attrs, [out], node)

    def _prepare_whole(self, ins: GlobalOp | HostOp) -> Step:
        """A global layer or host op: the node on whole tensors in DDR (nothing to run for a
        reshape whose output shares its input's bytes)."""
        node = self.nodes[ins.node]
        if isinstance(ins, GlobalOp) and ins.alias:
            return ("noop",)
        if isinstance(ins, HostOp) and any(v is not None and v.name not in self.views
                                           for v in (*node.inputs, *node.outputs)):
            # a tensor sized by the run lives in host memory: resolved when the step runs
            fn = self.prog.graph.registry.get(node.op).compute_function
            return ("host", fn, list(node.inputs), dict(node.attrs), list(node.outputs), node)
        fn, into, own = self._fn(node.name, into=len(node.outputs) == 1)
        args = [self.views[v.name] if v is not None else None for v in node.inputs]
        outs = [self.views[v.name] for v in node.outputs]
        attrs = dict(node.attrs)
        memo = self._memo(node, [(v.name, None) if v is not None and v.name in self.prog.graph.constants
                                 else None for v in node.inputs]) if own else None
        if memo is not None:
            attrs["memo"] = memo
        scratch = ins.scratch if isinstance(ins, GlobalOp) else None
        if scratch is not None and own:
            attrs["scratch"] = self.views[scratch]
        elif isinstance(ins, HostOp) and own:
            # on the host the buffer is host memory, sized as a global layer's would be
            k = self._kernel(node)
            if k is not None and k.scratch_fn is not None:
                shape = tuple(int(d) for d in node.outputs[0].shape)
                attrs["scratch"] = np.zeros(k.scratch_lane_bytes(node, shape, self.lanes) * self.lanes,
                                            np.uint8)
        return ("into" if into else "compute", fn, args, attrs, outs, node)

    def _run_host(self, step: Step, host: dict[str, np.ndarray], dims: dict[str, int]) -> None:
        """A host layer that reads or writes tensors sized by the run: inputs from host memory
        or DDR, outputs checked as the interpreter checks them, into host memory or DDR."""
        _, fn, ins, attrs, outs, node = step
        args = [None if v is None else host[v.name] if v.name in host else self.views[v.name] for v in ins]
        results = run_node(self.prog.graph, node, args, dims)
        for v, r in zip(outs, results):
            if v.name in self.views:
                self.views[v.name][...] = r
            else:
                host[v.name] = r

    # -- running -------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any], *, keep_intermediates: bool = False
            ) -> dict[str, np.ndarray]:
        """Run on ``feeds``; ``keep_intermediates`` adds every tensor that passes through DDR
        (group outputs, global-layer outputs), copied when its unit ends."""
        g = self.prog.graph
        arrays = check_feeds(g, feeds)
        self.ddr[self.act_start:] = 0
        for name, arr in arrays.items():
            if name in self.views:
                self.views[name][...] = arr
        kept: dict[str, np.ndarray] = {}
        host: dict[str, np.ndarray] = {}  # this run's tensors whose size the run decided
        dims: dict[str, int] = {}
        ends = iter(self.unit_ends) if keep_intermediates else iter(())
        next_end = next(ends, None)
        for si, step in enumerate(self.steps):
            while next_end is not None and si >= next_end[0]:
                kept.update({n: (host[n] if n in host else self.views[n]).copy() for n in next_end[1]
                             if n in host or n in self.views})
                next_end = next(ends, None)
            if step[0] == "copy":
                np.copyto(step[1], step[2])
                continue
            if step[0] == "noop":
                continue
            if step[0] == "host":
                self._run_host(step, host, dims)
                continue
            kind, fn, args, attrs, outs, node = step
            try:
                if kind == "into":
                    fn(outs[0], *args, **attrs)
                    continue
                res = fn(*args, **attrs)
            except OpbridgeError:
                raise
            except Exception as err:
                raise SimulatorError(
                    f"{node.where}: kernel failed on a tile of shapes "
                    f"{[None if a is None else a.shape for a in args]}: {type(err).__name__}: {err}",
                    hint="a program read from an edited or damaged .obprog fails so: compile the model "
                    "again; if it was compiled just now, this is a bug: rerun with --debug and report it",
                ) from err
            results = res if isinstance(res, (tuple, list)) else (res,)
            if len(results) != len(outs):
                raise SimulatorError(f"{node.where}: kernel returned {len(results)} outputs, "
                                     f"expected {len(outs)}")
            for i, (o, r) in enumerate(zip(outs, results)):
                if np.shape(r) != o.shape and view4(np.shape(r)) == o.shape:
                    # operands taken whole (constants) keep their rank below 4; the tile of a
                    # rank-1-to-3 output is that shape's rank-4 view, the same bytes
                    r = np.reshape(r, o.shape)
                if np.shape(r) != o.shape:
                    raise SimulatorError(
                        f"{node.where}: kernel returned shape {np.shape(r)} for a tile of "
                        f"{o.shape}", hint="the kernel's input_slice/tile_attrs disagree with its compute")
                if np.asarray(r).dtype != o.dtype:  # never cast in silence: name what was promised
                    v = node.outputs[i]
                    checked_result(node.where, g.registry.get(node.op), i, v.name, v.dtype, o.shape, r,
                                   part="a tile of " if o.shape != tuple(v.shape) else "",
                                   error=SimulatorError)
                o[...] = r
        while next_end is not None:
            kept.update({n: (host[n] if n in host else self.views[n]).copy() for n in next_end[1]
                         if n in host or n in self.views})
            next_end = next(ends, None)
        out: dict[str, np.ndarray] = {}
        for v in g.outputs:
            if v.name in host:
                out[v.name] = host[v.name].copy()
            elif v.name in self.views:
                out[v.name] = self.views[v.name].copy()
            elif v.name in arrays:
                out[v.name] = arrays[v.name].copy()
            else:
                raise SimulatorError(f"graph output '{v.name}' has no place in DDR")
        for name, a in kept.items():
            out.setdefault(name, a)
        return out
