"""The calibration table: per tensor the range seen on the calibration samples and the chosen
threshold, saved as versioned JSON.

It plays the part of TPU-MLIR's calibration table (``# op_name threshold min max``, one line
per tensor; ``python/calibration`` in sophgo/tpu-mlir): ``threshold`` is the absolute value
that maps to 127 in symmetric int8 (``scale = threshold / 127``), ``min``/``max`` are the
extremes seen.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import OpbridgeError

TABLE_FORMAT = "opbridge-calibration"
TABLE_VERSION = 1
METHODS = ("minmax", "percentile", "kl", "mse")


class QuantError(OpbridgeError, ValueError):
    """Calibration or quantization was given something it cannot use (samples, table, dtype)."""


@dataclass(frozen=True)
class TensorRange:
    """What calibration found for one tensor."""

    min: float
    max: float
    threshold: float
    #: The largest |x| of each channel (axis 1) of a tensor of rank 3 or more, or None: the
    #: per-channel activation scales of :func:`opbridge.quant.int8.channel_points` come from it.
    channels: tuple[float, ...] | None = None

    @property
    def scale(self) -> float:
        """The symmetric int8 scale, ``threshold / 127`` (1.0 for an all-zero tensor)."""
        return self.threshold / 127.0 if self.threshold > 0 else 1.0


@dataclass
class CalibrationTable:
    """Per-tensor ranges of one graph's float tensors (graph inputs and node outputs)."""

    graph: str
    method: str
    samples: int
    tensors: dict[str, TensorRange] = field(default_factory=dict)
    #: Calibrated on the graph after cross-layer equalisation (``calibrate(equalize=True)``):
    #: its ranges are the equalised graph's, and quantizing takes that graph too.
    equalized: bool = False
    #: In memory only, never saved: per calibration sample (keyed by the graph's and the
    #: sample's digests, :func:`opbridge.quant.quantize.sample_key`), the float graph's
    #: scored tensors on it, so a mixed-precision search on the same samples does not run the
    #: float model again.
    reference: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, name: str) -> TensorRange:
        return self.tensors[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": TABLE_FORMAT, "version": TABLE_VERSION, "graph": self.graph,
            "method": self.method, "samples": self.samples,
        }
        if self.equalized:
            data["equalized"] = True
        data["tensors"] = {k: _record(r) for k, r in self.tensors.items()}
        return data

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the table as JSON (atomically: a temporary file renamed over ``path``)."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<table>") -> CalibrationTable:
        if not isinstance(data, Mapping) or data.get("format") != TABLE_FORMAT:
            raise QuantError(f"'{source}' is not an opbridge calibration table",
                             hint="make one with 'opbridge calibrate MODEL --data PATH -o table.json'")
        if data.get("version") != TABLE_VERSION:
            raise QuantError(f"'{source}': calibration table version {data.get('version')!r}; this "
                             f"opbridge reads version {TABLE_VERSION}",
                             hint="calibrate again with this opbridge")
        tensors = data.get("tensors")
        if not isinstance(tensors, Mapping):
            raise QuantError(f"'{source}': 'tensors' must be an object of name -> range")
        out: dict[str, TensorRange] = {}
        for name, rec in tensors.items():
            out[name] = _range(rec, name, source)
        equalized = data.get("equalized", False)
        if not isinstance(equalized, bool):
            raise QuantError(f"'{source}': 'equalized' must be true or false, not {equalized!r}")
        return cls(str(data.get("graph", "")), str(data.get("method", "")),
                   int(data.get("samples", 0)), out, equalized)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibrationTable:
        """Read a table written by :meth:`save`; a malformed file is a QuantError naming it."""
        p = os.fspath(path)
        try:
            with open(p, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise QuantError(f"calibration table '{p}' does not exist",
                             hint="make one with 'opbridge calibrate MODEL --data PATH -o table.json'") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise QuantError(f"calibration table '{p}' is not valid JSON: {err}",
                             hint="give the table.json that 'opbridge calibrate MODEL --data PATH -o "
                             "table.json' wrote") from None
        return cls.from_dict(data, p)


def _record(r: TensorRange) -> dict[str, Any]:
    rec: dict[str, Any] = {"min": r.min, "max": r.max, "threshold": r.threshold}
    if r.channels is not None:
        rec["channel_max"] = list(r.channels)
    return rec


def _range(rec: Any, name: str, source: str) -> TensorRange:
    try:
        lo, hi, th = (float(rec[k]) for k in ("min", "max", "threshold"))
    except (KeyError, TypeError, ValueError):
        raise QuantError(f"'{source}': tensor '{name}' needs numbers min, max and threshold") from None
    if not all(math.isfinite(v) for v in (lo, hi, th)) or th < 0 or lo > hi:
        raise QuantError(f"'{source}': tensor '{name}' has min {lo}, max {hi}, threshold {th}; "
                         "want finite numbers, min <= max, threshold >= 0")
    channels = rec.get("channel_max")
    if channels is None:
        return TensorRange(lo, hi, th)
    try:
        per = tuple(float(c) for c in channels) if isinstance(channels, list) else ()
    except (TypeError, ValueError):
        per = ()
    if not per or not all(math.isfinite(c) and c >= 0 for c in per):
        raise QuantError(f"'{source}': tensor '{name}' has channel_max {channels!r}; want a list of "
                         "finite numbers >= 0, one per channel")
    return TensorRange(lo, hi, th, per)


def as_table(table: CalibrationTable | str | os.PathLike[str] | Mapping[str, Any]) -> CalibrationTable:
    """A table from a table, a path to its JSON, or its dict."""
    if isinstance(table, CalibrationTable):
        return table
    if isinstance(table, Mapping):
        return CalibrationTable.from_dict(table)
    if isinstance(table, (str, os.PathLike)):
        return CalibrationTable.load(table)
    raise QuantError(f"a calibration table is a CalibrationTable, a path or a dict, not "
                     f"{type(table).__name__}", hint="pass the result of ob.calibrate")
