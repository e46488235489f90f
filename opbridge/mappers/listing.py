"""What the registry maps, as plain rows (for ``opbridge ops --framework F``)."""

from __future__ import annotations

import os
from typing import Any

from ..parsers.origin import Framework
from .registry import DEFAULT_MAPPINGS, MappingRegistry

#: Sites inside the package are shown relative to its parent directory (``opbridge/...``).
_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def short_site(site: str) -> str:
    """``file:line`` with a path inside opbridge shortened to ``opbridge/...``."""
    path, sep, line = site.rpartition(":")
    if not sep or not os.path.isabs(path):
        return site
    rel = os.path.relpath(path, _PKG_PARENT)
    return f"{rel}:{line}" if rel.startswith("opbridge" + os.sep) else site


def mapped_ops(framework: Framework | str, registry: MappingRegistry | None = None) -> list[dict[str, Any]]:
    """One row per origin op type (and pinned domain): its since-versions, the version range
    each covers (``[since, until]``, until None for "and later"), IR op and sites."""
    reg = registry if registry is not None else DEFAULT_MAPPINGS
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for e in reg.entries(framework):
        row = rows.setdefault((e.op_type, e.domain or ""), {
            "op_type": e.op_type, "domain": e.domain if e.domain is not None else "*",
            "versions": [], "ranges": [], "ir_op": e.ir_op, "defined_at": [],
        })
        row["versions"].append(e.since)
        row["defined_at"].append(e.defined_at)
    handled, site = _parser_handled(Framework(framework))
    for op_type, what in handled.items():
        rows.setdefault((op_type, ""), {
            "op_type": op_type, "domain": "*", "versions": [1], "ranges": [], "ir_op": None,
            "defined_at": [site], "handled_by": f"the parser: {what}",
        })
    for row in rows.values():
        vs = row["versions"]
        row["ranges"] = [[v, nxt - 1] for v, nxt in zip(vs, vs[1:])] + [[vs[-1], None]]
    return [rows[k] for k in sorted(rows)]


def _parser_handled(fw: Framework) -> tuple[dict[str, str], str]:
    """Op types a framework's parser resolves itself (Caffe's data and loss layers), and the
    site of that table: listed beside the mapped types, since a model with them converts
    without a mapping."""
    if fw != Framework.CAFFE:
        return {}, ""
    from ..parsers.caffe import parser_handled_layers as table

    return table(), f"{table.__code__.co_filename}:{table.__code__.co_firstlineno}"


def format_mapped_ops(framework: Framework | str, registry: MappingRegistry | None = None) -> str:
    """A plain-text table of :func:`mapped_ops`: key, since-versions, IR op, where registered."""
    reg = registry if registry is not None else DEFAULT_MAPPINGS
    rows = mapped_ops(framework, reg)
    fw = Framework(framework)
    lines = [f"{len(rows)} {fw} op types mapped (since-versions: each covers the versions up to "
             "the next; '*' = any domain)"]
    width = max((len(r["op_type"]) + len(r["domain"]) + 2 for r in rows), default=10)
    vwidth = max((len(", ".join(map(str, r["versions"]))) for r in rows), default=4)
    for r in rows:
        key = r["op_type"] if r["domain"] == "*" else f"{r['domain']}::{r['op_type']}"
        vs = ", ".join(str(v) for v in r["versions"])
        sites = ", ".join(dict.fromkeys(short_site(s) for s in r["defined_at"]))
        target = f"  -> {r['ir_op']}" if r["ir_op"] else (
            f"  ({r['handled_by']})" if r.get("handled_by") else "")
        lines.append(f"  {key:<{width}}  {vs:<{vwidth}}{target}  at {sites}")
    lines += [f"unmapped {fw} ops are still converted when this fallback handles them: {name}"
              for name in reg.fallback_names(fw)]
    return "\n".join(lines)
