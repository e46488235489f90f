"""QuantParams: the real-number meaning of an integer IR value (``Value.quant``).

``real = (q - zero_point) * scale``, per tensor (scalar scale and zero point) or per channel
(one of each per entry of ``axis``). The IR ops do not read it (their inputs carry the scales
they need); passes, the printer, the ``.obir`` file and calibration tools do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import GraphError

if TYPE_CHECKING:
    from .graph import Node


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Scale and zero point of a quantized tensor; ``axis`` is None per tensor."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None

    def __post_init__(self) -> None:
        scale = np.asarray(self.scale, dtype=np.float32)
        zp = np.asarray(self.zero_point if self.zero_point is not None else 0, dtype=np.int64)
        if scale.ndim > 1 or zp.ndim > 1:
            raise GraphError(f"QuantParams: scale {scale.shape} and zero point {zp.shape} must be "
                             "scalars or vectors")
        if scale.size == 1 and self.axis is None:
            scale = scale.reshape(())
        if zp.shape != scale.shape:
            if zp.size != 1:
                raise GraphError(f"QuantParams: zero point shape {zp.shape} != scale shape {scale.shape}")
            zp = np.full(scale.shape, int(zp.reshape(-1)[0]), np.int64)
        if scale.ndim == 1 and self.axis is None:
            raise GraphError("QuantParams: a per-channel scale needs an axis")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise GraphError(f"QuantParams: scales must be finite and > 0, got {scale.ravel()[:4]}")
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)
        object.__setattr__(self, "axis", None if scale.ndim == 0 else int(self.axis))  # type: ignore[arg-type]

    @classmethod
    def of_constants(cls, scale: Any, zero_point: Any, axis: int, rank: int) -> QuantParams | None:
        """The params a QuantizeLinear's constant ``scale`` and ``zero_point`` (None: 0) give
        its output of rank ``rank``; None where they do not describe one (a blocked or
        multi-dimensional scale, non-positive scales)."""
        s = np.asarray(scale, np.float32)
        if s.ndim > 1 or not np.all(np.isfinite(s)) or np.any(s <= 0):
            return None
        z = np.zeros(s.shape, np.int64) if zero_point is None else np.asarray(zero_point).astype(np.int64)
        if s.size == 1:
            return cls(s.reshape(()), z.reshape(()), None)
        if not -rank <= axis < rank:
            return None
        return cls(s, z.reshape(s.shape), axis % rank)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, QuantParams) and self.axis == other.axis
                and np.array_equal(self.scale, other.scale)
                and np.array_equal(self.zero_point, other.zero_point))

    def __hash__(self) -> int:
        return hash((self.axis, self.scale.tobytes(), self.zero_point.tobytes()))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: float32 scales written as Python floats read back bit for bit."""
        return {"scale": self.scale.tolist(), "zero_point": self.zero_point.tolist(), "axis": self.axis}

    @classmethod
    def from_json(cls, d: Any) -> QuantParams:
        if not isinstance(d, dict) or "scale" not in d:
            raise GraphError(f"quant params {d!r} are not an object with a scale")
        return cls(np.asarray(d["scale"], np.float32), np.asarray(d.get("zero_point", 0), np.int64),
                   d.get("axis"))

    def describe(self) -> str:
        """Short text for listings: ``scale=0.0235 zp=3`` or ``axis=0 x64 scale=[..] zp=[..]``."""
        if self.axis is None:
            return f"scale={float(self.scale):.6g} zp={int(self.zero_point)}"
        s, z = self.scale, self.zero_point
        zs = f"{int(z[0])}" if np.all(z == z[0]) else f"[{int(z.min())}..{int(z.max())}]"
        return f"axis={self.axis} x{s.size} scale=[{float(s.min()):.4g}..{float(s.max()):.4g}] zp={zs}"


def depthwise(node: Node) -> bool:
    """A Conv whose every output channel reads one input channel (``group`` = input channels):
    a per-channel scale of its input folds into its per-channel requantization."""
    x = node.inputs[0]
    group = int(node.attrs.get("group") or 1)
    return (node.op == "Conv" and group > 1 and x is not None and len(x.shape) > 1
            and isinstance(x.shape[1], int) and group == x.shape[1])


def input_scale(scale: float | np.ndarray, outputs: int) -> np.ndarray:
    """An int8 node's input scale as its accumulator sees it: the one scale, or, for a
    per-channel input (a depthwise Conv's), each input channel's scale repeated for the
    ``outputs // channels`` output channels that read it."""
    s = np.asarray(scale, np.float32)
    return s if s.ndim == 0 else np.repeat(s, max(outputs // s.size, 1))
