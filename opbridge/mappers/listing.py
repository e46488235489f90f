"""What the registry maps, as plain rows (for ``opbridge ops --framework F``)."""

from __future__ import annotations

from typing import Any

from ..parsers.origin import Framework
from .registry import DEFAULT_MAPPINGS, MappingRegistry


def mapped_ops(framework: Framework | str, registry: MappingRegistry | None = None) -> list[dict[str, Any]]:
    """One row per origin op type (and pinned domain): its since-versions, IR op and sites."""
    reg = registry if registry is not None else DEFAULT_MAPPINGS
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for e in reg.entries(framework):
        row = rows.setdefault((e.op_type, e.domain or ""), {
            "op_type": e.op_type, "domain": e.domain if e.domain is not None else "*",
            "versions": [], "ir_op": e.ir_op, "defined_at": [],
        })
        row["versions"].append(e.since)
        row["defined_at"].append(e.defined_at)
    return [rows[k] for k in sorted(rows)]


def format_mapped_ops(framework: Framework | str, registry: MappingRegistry | None = None) -> str:
    """A plain-text table of :func:`mapped_ops`."""
    rows = mapped_ops(framework, registry)
    fw = Framework(framework)
    lines = [f"{len(rows)} {fw} op types mapped (since-versions; '*' = any domain)"]
    width = max((len(r["op_type"]) + len(r["domain"]) + 2 for r in rows), default=10)
    for r in rows:
        key = r["op_type"] if r["domain"] == "*" else f"{r['domain']}::{r['op_type']}"
        vs = ", ".join(str(v) for v in r["versions"])
        lines.append(f"  {key:<{width}}  {vs}" + (f"  -> {r['ir_op']}" if r["ir_op"] else ""))
    if fw == Framework.ONNX and (registry is None or registry is DEFAULT_MAPPINGS):
        from .onnx.decompose import DECOMPOSITIONS

        extra = sorted(k for k in DECOMPOSITIONS if not any(r["op_type"] == k for r in rows))
        lines.append("unmapped ONNX ops are still converted when ONNX defines them as a function "
                     "(expanded from onnx.defs), or by opbridge's decompositions: " + ", ".join(extra))
    return "\n".join(lines)
