"""Linear algebra: ``torch.linalg.det`` / ``torch.det`` (both record ``aten::linalg_det`` when
traced; a scripted ``torch.det`` records ``aten::det``)."""

from __future__ import annotations

from .common import one_to_one

one_to_one("Det", "linalg_det", "det")
