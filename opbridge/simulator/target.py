"""The simulated accelerator: a plain dataclass of the figures the compiler and cost model use.

The ``bm1684`` preset follows the public figures of the Sophgo BM1684:

- ``lanes = 64``, ``lmem_bytes_per_lane = 512 KiB``, ``eu_bytes = 128``, ``lmem_banks = 8``:
  TPU-MLIR, ``include/tpu_mlir/Backend/BM168x/BM1684.h`` (``NPU_NUM = 64``,
  ``EU_BYTES = 128``, ``LMEM_BYTES = 1 << 19``, ``LMEM_BANKS = 8``); the bmcompiler
  user-layer guide (``shared/seeds/000_*``) also gives local addresses "0-512K" for BM1684.
  The EU width per dtype is ``eu_bytes / itemsize``: 32 lanes-elements for f32, 64 for
  f16/bf16, 128 for i8.
- ``peak_tflops_f32 = 2.2`` and ``peak_tops_i8 = 17.6``: the Sophgo BM1684 product brief
  (17.6 TOPS INT8, 2.2 TFLOPS FP32).
- ``clock_mhz = 550``: derived, not published here: the FP32 peak of the brief is
  64 lanes x 32 f32 EUs x 2 FLOP (multiply-add) x f, so f = 2.2e12 / 4096 = 537 MHz, rounded
  to 550 MHz (the cost model uses ``peak_tflops_f32`` directly; the clock is informative).
- ``ddr_bandwidth_gbps = 32``: a modelling assumption for the *effective* GDMA bandwidth. The
  BM1684 products pair it with LPDDR4X at 4266 MT/s, whose theoretical peak is higher; GDMA
  transfers of strided tensor slices reach a fraction of it.
- ``gdma_latency_us``: a fixed set-up cost per GDMA transfer; ``host_gflops``: the host CPU
  that runs CPU-placed ops (an 8-core Cortex-A53 at 2.3 GHz, NEON f32: about 20 GFLOP/s
  sustained). These two are modelling assumptions, not published figures.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelFormatError, SimulatorError

#: The most local memory (all lanes) a simulated target may have: it is allocated for real.
MAX_LMEM_TOTAL = 1 << 31

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
    ddr_bandwidth_gbps: float = 32.0
    gdma_latency_us: float = 0.5
    peak_tflops_f32: float = 2.2
    peak_tops_i8: float = 17.6
    host_gflops: float = 20.0
    ddr_align_bytes: int = 256
    notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in ("lanes", "lmem_bytes_per_lane", "eu_bytes", "lmem_align_bytes", "ddr_align_bytes"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SimulatorError(
                    f"target '{self.name}': {f} = {v!r} must be a positive integer",
                    hint=f"fix '{f}' in the target JSON or the preset override",
                )
        for f in ("clock_mhz", "ddr_bandwidth_gbps", "peak_tflops_f32", "peak_tops_i8", "host_gflops"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                raise SimulatorError(f"target '{self.name}': {f} = {v!r} must be a positive number")
        if self.lanes * self.lmem_bytes_per_lane > MAX_LMEM_TOTAL:
            raise SimulatorError(
                f"target '{self.name}': {self.lanes} lanes x {self.lmem_bytes_per_lane} bytes of "
                f"local memory is more than the simulator holds ({MAX_LMEM_TOTAL >> 20} MiB)",
                hint="use fewer lanes or less local memory per lane",
            )
        if self.gdma_latency_us < 0:
            raise SimulatorError(f"target '{self.name}': gdma_latency_us must be >= 0")

    # -- figures derived from the fields -------------------------------------------------
    def eu_elems(self, dtype: str) -> int:
        """EU width in elements of ``dtype``: how a lane's H*W plane is aligned."""
        return max(1, self.eu_bytes // itemsize(dtype))

    def peak_flops(self, dtype: str) -> float:
        """Peak multiply-add throughput for ``dtype`` in FLOP/s (an op/s for integers)."""
        if dtype in ("i8", "u8"):
            return self.peak_tops_i8 * 1e12
        scale = 4 // min(4, itemsize(dtype)) if dtype in ("f16", "bf16") else 1
        return self.peak_tflops_f32 * 1e12 * scale

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "target") -> Target:
        if not isinstance(d, dict):
            raise ModelFormatError(f"{where}: a target is a JSON object")
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
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except OSError as err:
            raise ModelFormatError(f"target file '{path}' cannot be read: {err.strerror}") from None
        except json.JSONDecodeError as err:
            raise ModelFormatError(f"target file '{path}' is not valid JSON: {err}") from None
        return cls.from_dict(d, where=f"target file '{path}'")

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
}


def itemsize(dtype: str) -> int:
    """Bytes per element of an IR dtype."""
    try:
        return _ITEMSIZE[dtype]
    except KeyError:
        raise SimulatorError(f"dtype {dtype!r} has no size on the simulated target") from None


def resolve_target(target: str | Target | None) -> Target:
    """A Target from a preset name, a Target, or None (the bm1684 preset)."""
    if target is None:
        return Target.preset("bm1684")
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return Target.preset(target)
    raise SimulatorError(f"target must be a preset name or a Target, got {type(target).__name__}")
