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


#: The smallest threshold (or channel maximum) quantized with its own scale: below it the
#: scale, threshold / 127 (i8) or / 255 (u8), would not be a normal float32 (numpy's
#: finfo(float32).tiny), so such a tensor is quantized as an all-zero one (scale 1; its values
#: round to 0 anyway).
MIN_THRESHOLD = 255 * 1.1754943508222875e-38


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
        """The symmetric int8 scale, ``threshold / 127`` (1.0 for an all-zero tensor, and for a
        threshold below :data:`MIN_THRESHOLD`, whose scale would not be a normal float32)."""
        return self.threshold / 127.0 if self.threshold >= MIN_THRESHOLD else 1.0


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
        """A table from its JSON document, every field checked; a malformed one is a QuantError
        naming ``source``, the tensor and the field."""
        if not isinstance(data, Mapping) or data.get("format") != TABLE_FORMAT:
            raise QuantError(f"'{source}' is not an opbridge calibration table",
                             hint="make one with 'opbridge calibrate MODEL --data PATH -o table.json'")
        if data.get("version") != TABLE_VERSION:
            raise QuantError(f"'{source}': calibration table version {_show(data.get('version'))}; this "
                             f"opbridge reads version {TABLE_VERSION}",
                             hint="calibrate again with this opbridge")
        unknown = sorted(str(k) for k in set(data) - set(_TABLE_FIELDS))
        if unknown:
            raise _bad(source, f"unknown field '{unknown[0]}'; a table has {', '.join(_TABLE_FIELDS)}")
        tensors = data.get("tensors")
        if not isinstance(tensors, Mapping):
            raise _bad(source, f"'tensors' is {_show(tensors)}; want an object of tensor name -> range")
        out = {str(name): _range(rec, str(name), source) for name, rec in tensors.items()}
        equalized = data.get("equalized", False)
        if not isinstance(equalized, bool):
            raise _bad(source, f"'equalized' must be true or false, not {_show(equalized)}")
        graph, method = data.get("graph", ""), data.get("method", "")
        if not isinstance(graph, str) or not isinstance(method, str):
            raise _bad(source, f"'graph' and 'method' are names, not {_show(graph)} and {_show(method)}")
        samples = data.get("samples", 0)
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise _bad(source, f"'samples' is {_show(samples)}; want a whole number >= 0")
        return cls(graph, method, samples, out, equalized)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibrationTable:
        """Read a table written by :meth:`save`; a malformed file is a QuantError naming it."""
        from ..ir.io import read_json

        p = os.fspath(path)
        try:
            with open(p, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            raise QuantError(f"calibration table '{p}' does not exist",
                             hint="make one with 'opbridge calibrate MODEL --data PATH -o table.json'") from None
        except OSError as err:
            raise QuantError(f"calibration table '{p}' cannot be read: {err.strerror or err}",
                             hint="give the path of the table.json file 'opbridge calibrate' wrote") from None
        data = read_json(text, f"calibration table '{p}'", QuantError,
                         hint="give the table.json that 'opbridge calibrate MODEL --data PATH -o table.json' wrote")
        return cls.from_dict(data, p)


#: the fields of a saved table and of one tensor's record
_TABLE_FIELDS = ("format", "version", "graph", "method", "samples", "equalized", "tensors")
_RANGE_FIELDS = ("min", "max", "threshold", "channel_max")
#: ranges are float32 values (numpy's finfo(float32).max)
_F32_MAX = 3.4028234663852886e38
_FIX_HINT = ("calibrate again ('opbridge calibrate MODEL --data PATH -o table.json'), or correct the "
             "field in the file")


def _bad(source: str, detail: str) -> QuantError:
    return QuantError(f"'{source}': {detail}", hint=_FIX_HINT)


def _show(value: Any) -> str:
    """A short rendering of a bad value for a message (a list of thousands stays one line)."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return text if isinstance(value, (int, float)) and not isinstance(value, bool) else \
        f"{text} (a {type(value).__name__})"


def _record(r: TensorRange) -> dict[str, Any]:
    rec: dict[str, Any] = {"min": r.min, "max": r.max, "threshold": r.threshold}
    if r.channels is not None:
        rec["channel_max"] = list(r.channels)
    return rec


def _number(value: Any, where: str, source: str) -> float:
    """A JSON number that is a finite float32 value (booleans and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(source, f"{where} is {_show(value)}; want a number")
    if not (isinstance(value, float) and math.isnan(value)) and abs(value) <= _F32_MAX:
        return float(value)
    raise _bad(source, f"{where} = {_show(value)}: want a finite number within float32's range "
               f"(|x| <= {_F32_MAX:.4g})")


def _magnitude(value: Any, where: str, source: str) -> float:
    """A threshold or channel maximum: a number >= 0. Calibration writes subnormal ones (an
    Exp fed -100, a channel that is almost always 0); they are read as they are and the
    quantizer treats any below :data:`MIN_THRESHOLD` as a zero range."""
    v = _number(value, where, source)
    if v < 0:
        raise _bad(source, f"{where} = {v!r}: want a number >= 0 (a largest |x|)")
    return v


def _range(rec: Any, name: str, source: str) -> TensorRange:
    if not isinstance(rec, Mapping):
        raise _bad(source, f"tensor '{name}' is {_show(rec)}; want an object with min, max and threshold")
    missing = [k for k in ("min", "max", "threshold") if k not in rec]
    if missing:
        raise _bad(source, f"tensor '{name}' needs numbers min, max and threshold ('{missing[0]}' is missing)")
    unknown = sorted(str(k) for k in set(rec) - set(_RANGE_FIELDS))
    if unknown:
        raise _bad(source, f"tensor '{name}' has unknown field '{unknown[0]}'; a range has "
                   f"{', '.join(_RANGE_FIELDS)}")
    lo, hi = (_number(rec[k], f"tensor '{name}' {k}", source) for k in ("min", "max"))
    th = _magnitude(rec["threshold"], f"tensor '{name}' threshold", source)
    if lo > hi:
        raise _bad(source, f"tensor '{name}' has min {lo} > max {hi}; want min <= max")
    channels = rec.get("channel_max")
    if channels is None:
        return TensorRange(lo, hi, th)
    if not isinstance(channels, list) or not channels:
        raise _bad(source, f"tensor '{name}' channel_max is {_show(channels)}; want a list of "
                   "numbers >= 0, one per channel")
    per = tuple(_magnitude(c, f"tensor '{name}' channel_max[{i}]", source) for i, c in enumerate(channels))
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
