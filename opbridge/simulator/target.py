"""The simulated accelerator: a plain dataclass of the figures the compiler and cost model use.

Every figure of the two presets is either a published one (cited) or a fit to named rows of
``../shared/targets/chip-latency.md`` (Sophgo's measured per-image times, ``bench/bench_fidelity.py``
compares them; docs/simulator.md has the table and the residuals). The calibration rows are
ResNet-50, YOLOv3 608, LPRNet and BERT (batch 1) of each chip and precision, and ResNet-50's
and YOLOv3's int8 batch 4 (with their batch 1, for the int8 efficiencies); the DeepSORT ReID
net, C3D and the BERT batch-8 rows are held out as the check on networks not used to fit, but
for the ReID net's two BM1684 int8 rows, which set BM1684's split of launch and sync costs.

The ``bm1684`` preset (Sophgo BM1684):

- ``lanes = 64``, ``lmem_bytes_per_lane = 512 KiB``, ``eu_bytes = 128``, ``lmem_banks = 8``:
  TPU-MLIR, ``include/tpu_mlir/Backend/BM168x/BM1684.h`` (``NPU_NUM = 64``,
  ``EU_BYTES = 128``, ``LMEM_BYTES = 1 << 19``, ``LMEM_BANKS = 8``); the bmcompiler
  user-layer guide (``shared/seeds/000_*``) also gives local addresses "0-512K" for BM1684.
  The EU width per dtype is ``eu_bytes / itemsize``: 32 elements for f32, 128 for i8.
- Matrix throughput ``peak_tflops_f32 = 2.2`` and ``peak_tops_i8 = 17.6``: the Sophgo BM1684
  product brief (17.6 TOPS INT8, 2.2 TFLOPS FP32). No f16/bf16 (``dtypes`` has only i8/u8;
  TPU-MLIR's F16 mode is refused for bm1684 too). ``int8_batch_pack = 4``: BM1684 stores int8 tensors in
  its 4N layout, four batch items per element group, so a batch-1 int8 tile uses a quarter of
  the int8 EUs (the published ResNet-50 int8 gain is ~1.6x at batch 1 and ~5x at batch 4).
- ``clock_mhz = 550``: derived: the FP32 peak is 64 lanes x 32 f32 EUs x 2 FLOP x f, so
  f = 2.2e12 / 4096 = 537 MHz, rounded. The vector path (element-wise ops, pooling) does one
  element per EU per cycle: ``lanes * eu_elems * clock``.
- Fitted (calibration rows above; residuals in docs/simulator.md):
  ``efficiency`` conv 0.70 (3x3 and larger kernels: YOLOv3, whose FLOPs are ~90% 3x3; 0.981
  since one-tile groups may run global, not refitted: 0.69 would give 0.993), conv1x1
  0.90 (ResNet-50), matmul 0.13 (BERT b1: BM1684 has no matrix unit for fp32 matmuls and its
  published BERT runs at ~0.28 TFLOPS); ``ddr_bandwidth_gbps = 64`` (ResNet-50: its 102 MB of
  weights stream under its compute only above ~50 GB/s; LPDDR4X-4266 peaks at 68 GB/s on a
  128-bit bus: we found no published bus width, so this is a fit, not a datasheet figure);
  ``launch_us = 50`` per inference and ``sync_us = 50`` per unit (layer group or global
  layer), fitted together: LPRNet (14-15 units, 0.3 GFLOP in 1.14 ms) and the ReID net (4
  units, 0.99 ms in int8 at batch 1 and 4) need a fixed cost that grows with the units, not
  one per inference (a launch of 605 us fitted to LPRNet alone put ReID int8 at 1.47). The
  calibration rows alone barely tell the split (their mean |log(est / published)| is 0.075
  with 605 / 10 and 0.085 with 50 / 50: ResNet-50 fp32 1.011 -> 0.956, int8 b1 0.939 ->
  0.900, b4 0.790 -> 0.759, LPRNet 0.951 / 0.953 / 1.049 -> 0.956 / 0.995 / 1.086), so the
  ReID int8 rows set it (1.465 / 1.458 -> 1.026 / 1.022): on BM1684 they are no longer held
  out. Per unit that is ~27,500 lane cycles, as BM1684X's 25 us at 1 GHz (below);
  ``tiu_issue_us = 1`` per compute instruction (held: no row separates it; 0 to 2 us moves
  the mean |log| over all rows by less than 0.004).
- int8 (u8 takes the i8 figures): the product brief's 17.6 TOPS, the 4N packing, and
  ``efficiency`` conv/i8 0.62 and conv1x1/i8 0.60, fitted as the fp32 families are: conv/i8
  to YOLOv3 int8 at batch 1 and 4 together (the value with the smaller worst of the two and
  of the ReID int8 rows, which the 3x3 figure moves: 1.067 / 0.907, ReID 1.121 / 1.115; 0.60
  gave 1.097 / 0.929 and ReID 1.148), then conv1x1/i8 to ResNet-50 int8 at batch 1 and 4
  (1.096 / 0.915 balanced: 0.58 gave 1.112 / 0.927, 0.61 1.089 / 0.909). With the fp32
  figures (0.70 / 0.90) a full 4N pack ran faster than the chip at batch 4 (ResNet-50 0.755,
  YOLOv3 0.816) and batch 1 was 0.90 / 0.94: on the chip a batch of four costs 1.26x / 1.44x
  a batch of one, where a one-image pack costs what a full one does in the model; no public
  figure says how the fix8b convolution's rate depends on the pack, so one rate per family
  is fitted to both batch sizes, as on BM1684X. LPRNet and C3D int8 are the check (LPRNet
  1.01 / 1.10, C3D 1.10 / 1.05).
- Not calibrated (no buildable row exercises them): ``efficiency`` depthwise and vector (1.0:
  the vector rate above), ``gdma_latency_us = 0.5`` (a set-up cost per
  transfer; 0.25 to 1 us moves the mean |log| over all rows by less than 0.01, 2 us by 0.03), ``host_gflops = 20`` (the 8-core Cortex-A53 host, NEON f32).

The ``bm1684x`` preset (Sophgo BM1684X):

- ``lanes = 64``, ``eu_bytes = 64``, ``lmem_bytes_per_lane = 256 KiB``, ``lmem_banks = 16``,
  ``ic_parallel_bytes = 64``: TPU-MLIR ``include/tpu_mlir/Backend/BM168x/BM1684X.h``
  (``NPU_NUM = 64``, ``EU_BYTES = 64``, ``LMEM_BYTES = 1 << 18``, ``LMEM_BANKS = 16``,
  ``IC_PARALLEL = 64``): f32 16, f16 32, int8 64 elements per EU row, and a convolution
  step reduces 64 bytes of input channels (16 f32, 32 f16, 64 int8 channels; a first layer's
  few channels are folded with its kernel taps, as TPU-MLIR's 3-IC optimisation does).
- ``peak_tflops_f32 = 2``, ``peak_tflops_f16 = 16`` (f16 and bf16), ``peak_tops_i8 = 32``: the
  Sophgo BM1684X product brief. ``clock_mhz = 1000``: 2e12 / (64 x 16 x 2) = 977 MHz, rounded.
  ``int8_batch_pack = 1``: BM1684X has no 4N layout.
- Fitted: ``efficiency`` conv 0.50 / conv1x1 0.61 / matmul 0.27 for f32 (YOLOv3 / ResNet-50 /
  BERT b1: 1.003 / 1.001 / 0.999), conv/f16 0.52, conv1x1/f16 0.90, matmul/f16 0.62 (the same
  rows in fp16: 0.898 / 1.086 / 1.003); conv1x1, matmul and matmul/f16 refitted from 0.70 /
  0.28 / 0.60 when one-tile groups began to run global where the cost model estimates that
  faster (ResNet-50 fp32 0.990 -> 0.948, BERT fp32 / fp16 b1 0.976 / 1.044 -> 0.966 / 1.019
  before the refit); conv/f16 not refitted (YOLOv3 fp16 0.936 -> 0.898; 0.46 would fit it but
  raise ResNet-50 fp16 and C3D fp16 by 4-12%);
  ``launch_us = 25`` and ``sync_us = 25`` (the calibration rows of BM1684X together: the
  pair with the lowest mean |log(est / published)| over them, 0.074 against 0.078 with the
  255 / 10 fitted to LPRNet alone, whose worst row stays the worst, LPRNet int8 b1 1.175 ->
  1.165; LPRNet fp32 / fp16 / int8 b4 0.927 / 0.891 / 0.851, ResNet-50 fp16 1.174 -> 1.087,
  BERT fp16 b1 0.984 -> 1.044; the held-out ReID int8 rows 1.688 / 1.483 -> 1.127 / 1.153,
  fp16 b1 1.282 -> 0.951); ``ddr_bandwidth_gbps``, ``tiu_issue_us`` as BM1684's
  (the chips share the LPDDR4X-4266 memory system; no fp32/fp16 row separates them).
  conv/i8 and conv1x1/i8 0.77 (u8 takes the i8 figure): ResNet-50 and YOLOv3 int8 at batch 1
  and 4 together, the value that minimises the worst of the four (1.035, 0.874, 1.004, 1.134;
  0.78 gave 1.035, 0.869, 0.996, 1.125 with the group choice; see docs/simulator.md for what
  stays off).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelFormatError, SimulatorError

#: The most local memory (all lanes) a simulated target may have: it is allocated for real.
MAX_LMEM_TOTAL = 1 << 31

#: The largest DDR alignment a target may ask for (every DDR tensor is padded to it).
MAX_ALIGN = 1 << 16

#: Op families the cost model times differently (see ``cost.py``).
FAMILIES = ("conv", "conv1x1", "matmul", "depthwise", "vector")
#: Dtypes a chip may lack; a target lists those it has in ``dtypes``.
NARROW_DTYPES = frozenset({"f16", "bf16", "i8", "u8", "i4", "u4", "f8e4m3fn", "f8e4m3fnuz",
                           "f8e5m2", "f8e5m2fnuz", "f4e2m1"})
#: fitted to named rows of chip-latency.md (see the module doc)
#: Fields the cost model reads that ``.obprog`` format version 4 added to the target.
COST_FIELDS = ("peak_tflops_f16", "dtypes", "int8_batch_pack", "ic_parallel_bytes", "efficiency",
               "tiu_issue_us", "sync_us", "launch_us")
#: Half-precision dtypes a chip computes in only if its ``dtypes`` lists them.
HALF_DTYPES = frozenset({"f16", "bf16"})
#: Ops that move, select or convert elements without arithmetic in their dtype.
MOVE_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Slice",
                      "Gather", "GatherElements", "GatherND", "Concat", "Split", "Identity", "Cast", "CastLike",
                      "Tile", "Shape", "Size", "DepthToSpace", "SpaceToDepth", "BitCast"})
_BM1684_EFFICIENCY: dict[str, float] = {"conv": 0.70, "conv1x1": 0.90, "matmul": 0.13,
                                        "conv/i8": 0.62, "conv1x1/i8": 0.60,
                                        "depthwise": 1.0, "vector": 1.0}
_BM1684X_EFFICIENCY: dict[str, float] = {"conv": 0.50, "conv1x1": 0.61, "matmul": 0.27,
                                         "conv/f16": 0.52, "conv1x1/f16": 0.90, "matmul/f16": 0.62,
                                         "conv/bf16": 0.52, "conv1x1/bf16": 0.90,
                                         "matmul/bf16": 0.62, "conv/i8": 0.77, "conv1x1/i8": 0.77,
                                         "depthwise": 1.0, "vector": 1.0}

_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
             "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1,
             # the low-precision types sit one element a byte in memory, as ml_dtypes holds them
             # (int4/float4 pairs are not packed, so DDR and local memory sizes are upper bounds)
             "f8e4m3fn": 1, "f8e4m3fnuz": 1, "f8e5m2": 1, "f8e5m2fnuz": 1, "f8e8m0": 1,
             "f4e2m1": 1, "i4": 1, "u4": 1, "i2": 1, "u2": 1}


@dataclass
class Target:
    """A TPU-class target: lanes of local memory, EU widths, clock, DDR bandwidth, peaks."""

    name: str = "bm1684"
    lanes: int = 64
    lmem_bytes_per_lane: int = 512 * 1024
    lmem_banks: int = 8
    eu_bytes: int = 128
    lmem_align_bytes: int = 64
    clock_mhz: float = 550.0
    ddr_bandwidth_gbps: float = 64.0
    gdma_latency_us: float = 0.5
    peak_tflops_f32: float = 2.2
    peak_tops_i8: float = 17.6
    host_gflops: float = 20.0
    ddr_align_bytes: int = 256
    #: f16 / bf16 multiply-add peak in TFLOP/s; 0 when the chip has no half-precision arithmetic
    peak_tflops_f16: float = 0.0
    #: the narrow dtypes the lanes compute in (f32 and the integer types of index arithmetic
    #: always run); a graph with any other of :data:`NARROW_DTYPES` does not compile
    dtypes: list[str] = field(default_factory=lambda: ["i8", "u8"])
    #: batch items an int8 element group packs (BM1684's 4N layout): a tile of fewer items
    #: leaves the rest of the int8 EUs idle
    int8_batch_pack: int = 4
    #: bytes of input channels one convolution step reduces at once (IC_PARALLEL x itemsize);
    #: 0 when input channels are summed one at a time
    ic_parallel_bytes: int = 0
    #: fraction of the peak a full tile reaches, per op family ("conv", "matmul",
    #: "depthwise", "vector"), optionally per dtype ("conv/f16"); see the module doc
    efficiency: dict[str, float] = field(default_factory=lambda: dict(_BM1684_EFFICIENCY))
    #: set-up time of one compute instruction on the lanes (TIU command issue)
    tiu_issue_us: float = 1.0
    #: launch and synchronisation time of one unit (layer group, global layer): every unit
    #: starts when the previous one has finished on all engines, plus this
    sync_us: float = 50.0
    #: fixed time of one inference before its first unit starts (the runtime launching the
    #: program on the chip and waiting for its end)
    launch_us: float = 50.0
    notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SimulatorError(f"a target's name = {self.name!r} must be a non-empty string",
                                 hint="name the target in the JSON's 'name' field, e.g. \"mychip\"")
        for f in ("lanes", "lmem_bytes_per_lane", "lmem_banks", "eu_bytes", "lmem_align_bytes",
                  "ddr_align_bytes"):
            self._check_int(f, 1, "a positive integer")
        for f in ("clock_mhz", "ddr_bandwidth_gbps", "peak_tflops_f32", "peak_tops_i8", "host_gflops"):
            v = getattr(self, f)
            if not _finite(v) or not v > 0:
                raise self._field_error(f, v, "a positive number")
        if self.lanes * self.lmem_bytes_per_lane > MAX_LMEM_TOTAL:
            raise SimulatorError(
                f"target '{self.name}': {self.lanes} lanes x {self.lmem_bytes_per_lane} bytes of "
                f"local memory is more than the simulator holds ({MAX_LMEM_TOTAL >> 20} MiB)",
                hint="use fewer lanes or less local memory per lane",
            )
        # every DDR tensor and local buffer is padded to these: an absurd one would make the
        # simulator allocate gigabytes for a small model
        for f, most in (("ddr_align_bytes", MAX_ALIGN), ("lmem_align_bytes", self.lmem_bytes_per_lane)):
            if getattr(self, f) > most:
                raise self._field_error(f, getattr(self, f), f"at most {most} bytes")
        for f in ("gdma_latency_us", "tiu_issue_us", "sync_us", "launch_us", "peak_tflops_f16"):
            v = getattr(self, f)
            if not _finite(v) or not v >= 0:
                raise self._field_error(f, v, "a number >= 0")
        self._check_int("int8_batch_pack", 1, "an integer >= 1")
        self._check_int("ic_parallel_bytes", 0, "an integer >= 0")
        if not isinstance(self.notes, dict) or not all(isinstance(v, str) for v in self.notes.values()):
            raise self._field_error("notes", self.notes, "an object of text notes")
        self._check_dtypes_field()
        self._check_efficiency_field()

    def _field_error(self, f: str, v: Any, want: str) -> SimulatorError:
        return SimulatorError(f"target '{self.name}': {f} = {v!r} must be {want}",
                              hint=f"fix '{f}' in the target JSON or the preset override")

    def _check_int(self, f: str, least: int, want: str) -> None:
        v = getattr(self, f)
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise self._field_error(f, v, want)

    def _check_dtypes_field(self) -> None:
        if not isinstance(self.dtypes, list) or any(not isinstance(d, str) or d not in NARROW_DTYPES for d in self.dtypes):
            raise SimulatorError(
                f"target '{self.name}': dtypes = {self.dtypes!r} must be a list of "
                f"{', '.join(sorted(NARROW_DTYPES))}",
                hint="list the narrow dtypes the chip computes in, e.g. [\"f16\", \"bf16\", \"i8\"]")
        if any(d in ("f16", "bf16") for d in self.dtypes) and self.peak_tflops_f16 <= 0:
            raise SimulatorError(f"target '{self.name}': dtypes has f16/bf16 but peak_tflops_f16 is 0",
                                 hint="give the chip's half-precision peak in peak_tflops_f16")

    def _check_efficiency_field(self) -> None:
        if not isinstance(self.efficiency, dict):
            raise self._field_error("efficiency", self.efficiency, "an object of op family -> fraction")
        for k, v in self.efficiency.items():
            fam, sep, dtype = k.partition("/")
            if (fam not in FAMILIES or (sep and dtype not in _ITEMSIZE) or not _finite(v)
                    or not 0 < v <= 1):
                raise SimulatorError(
                    f"target '{self.name}': efficiency '{k}' = {v!r}: keys are an op family "
                    f"({', '.join(FAMILIES)}) or family/dtype, values in (0, 1]",
                    hint="fix 'efficiency' in the target JSON, e.g. {\"conv\": 0.7, \"conv/f16\": 0.5}")

    # -- figures derived from the fields -------------------------------------------------
    def eu_elems(self, dtype: str) -> int:
        """EU width in elements of ``dtype``: how a lane's H*W plane is aligned."""
        return max(1, self.eu_bytes // itemsize(dtype))

    def peak_flops(self, dtype: str) -> float:
        """Peak multiply-add throughput for ``dtype`` in FLOP/s (an op/s for integers); f16 and
        bf16 fall back to the f32 peak on a chip without them (compile refuses those graphs)."""
        if dtype in ("i8", "u8"):
            return self.peak_tops_i8 * 1e12
        if dtype in ("f16", "bf16") and self.peak_tflops_f16 > 0:
            return self.peak_tflops_f16 * 1e12
        return self.peak_tflops_f32 * 1e12

    def vector_ops(self, dtype: str) -> float:
        """Element operations per second of the lanes' vector path: one per EU per cycle."""
        return self.lanes * self.eu_elems(dtype) * self.clock_mhz * 1e6

    def family_efficiency(self, family: str, dtype: str) -> float:
        """The fraction of the peak a full tile of an op family reaches (``family/dtype``
        first, then ``family``, else 1); u8 takes the i8 figure (the same multipliers)."""
        eff = self.efficiency
        key = "i8" if dtype == "u8" else dtype
        return float(eff.get(f"{family}/{dtype}", eff.get(f"{family}/{key}", eff.get(family, 1.0))))

    def ic_parallel(self, dtype: str) -> int:
        """Input channels one convolution step reduces at once (1: one at a time)."""
        return max(1, self.ic_parallel_bytes // itemsize(dtype)) if self.ic_parallel_bytes else 1

    def check_dtypes(self, graph: Any) -> None:
        """Refuse a graph that computes in a half-precision dtype the chip lacks (f16 / bf16 on
        BM1684); ops that only move or reinterpret elements (:data:`MOVE_OPS`) are exempt."""
        for node in graph.nodes:
            if node.op in MOVE_OPS:
                continue
            for v in [*node.inputs, *node.outputs]:
                if v is not None and v.dtype in HALF_DTYPES and v.dtype not in self.dtypes:
                    have = ", ".join(["f32", *self.dtypes])
                    raise SimulatorError(
                        f"node '{node.name}' ({node.op}) computes in {v.dtype} (value '{v.name}'), "
                        f"which target '{self.name}' does not support (it computes in {have})",
                        hint=f"compile for a target with {v.dtype} (e.g. bm1684x), or keep the "
                        "graph in f32 / quantize it to int8")

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "target") -> Target:
        if not isinstance(d, dict):
            raise ModelFormatError(f"{where}: a target is a JSON object of its fields, not "
                                   f"{type(d).__name__}", hint="write one with opbridge.Target.save")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ModelFormatError(
                f"{where}: unknown target field '{unknown[0]}'",
                hint=f"the fields are: {', '.join(sorted(known))}",
            )
        return cls(**d)

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Target:
        """Read a target JSON file (as :meth:`save` writes it); errors name the file and field."""
        where = f"target file '{os.fspath(path)}'"
        from ..ir.io import read_json

        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as err:
            raise ModelFormatError(f"{where} cannot be read: {err.strerror}",
                                   hint="give the path of a target JSON file, or --target PRESET") from None
        d = read_json(text, where, hint="write one with opbridge.Target.save (a JSON object of the target's fields)")
        try:
            return cls.from_dict(d, where=where)
        except SimulatorError as err:  # a field's value: say which file holds it
            raise SimulatorError(f"{where}: {err.message}", hint=err.hint) from None

    @classmethod
    def preset(cls, name: str = "bm1684", **overrides: Any) -> Target:
        """A named preset (see :data:`PRESETS`), with fields overridden by keyword."""
        if name not in PRESETS:
            raise SimulatorError(
                f"unknown target preset '{name}'", hint=f"use one of {', '.join(sorted(PRESETS))}"
            )
        d = dict(PRESETS[name])
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise SimulatorError(f"Target.preset('{name}'): unknown field '{unknown[0]}'")
        d.update(overrides)
        return cls(**d)


#: Named presets; every figure's source is in this module's docstring.
PRESETS: dict[str, dict[str, Any]] = {
    "bm1684": {"name": "bm1684"},
    "bm1684x": {
        "name": "bm1684x", "lanes": 64, "lmem_bytes_per_lane": 256 * 1024, "lmem_banks": 16,
        "eu_bytes": 64, "clock_mhz": 1000.0, "peak_tflops_f32": 2.0, "peak_tflops_f16": 16.0,
        "peak_tops_i8": 32.0, "ddr_bandwidth_gbps": 64.0, "gdma_latency_us": 0.5,
        "dtypes": ["f16", "bf16", "i8", "u8"], "int8_batch_pack": 1, "ic_parallel_bytes": 64,
        "efficiency": dict(_BM1684X_EFFICIENCY), "tiu_issue_us": 1.0, "sync_us": 25.0,
        "launch_us": 25.0,
    },
}


def _finite(v: Any) -> bool:
    """A JSON number (not a bool) that is finite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def itemsize(dtype: str) -> int:
    """Bytes per element of an IR dtype."""
    try:
        return _ITEMSIZE[dtype]
    except KeyError:
        raise SimulatorError(f"dtype {dtype!r} has no size on the simulated target") from None


def resolve_target(target: str | os.PathLike[str] | Target | None) -> Target:
    """A Target from a preset name, a target JSON file (a path ending in .json, as the CLI's
    ``--target-json``), a Target, or None (the bm1684 preset)."""
    if target is None:
        return Target.preset("bm1684")
    if isinstance(target, Target):
        return target
    if isinstance(target, (str, os.PathLike)) and os.fspath(target).lower().endswith(".json"):
        return Target.load(target)
    if isinstance(target, str):
        return Target.preset(target)
    raise SimulatorError(f"target must be a preset name, a .json target file or a Target, "
                         f"got {type(target).__name__}", hint="a target file's name ends in .json")
