"""Self-contained HTML reports: one file that opens offline, with no request to any server.

:func:`report_html` renders a validation :class:`~opbridge.validate.report.Report` -- the summary
and verdict, a chart of cosine / SQNR per layer, the per-layer table (sortable, filterable), the
graph as a diagram coloured by status (and by the compiled program's units), and the profile's
timeline per engine; :func:`profile_html` renders a compiled Program's profile alone. CSS and the
small script are inlined from ``assets/``; the pictures are inline SVG drawn by :mod:`.svg`.
Model-provided strings are HTML-escaped; the report data is embedded as JSON with ``<``, ``>``
and ``&`` written as ``\\u`` escapes, so no name can close the script block.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import TYPE_CHECKING, Any

from .report import MODES
from .svg import DiagramNode, Point, chart_svg, diagram_svg, esc, timeline_svg, unit_colour

if TYPE_CHECKING:
    from ..ir.graph import Graph
    from .report import Report, Row

#: what the timeline calls the cost model's engines
_ENGINE_LABELS = {"gdma": "GDMA", "tpu": "compute", "host": "host"}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _page(title: str, body: list[str], data: dict[str, Any]) -> str:
    blob = (json.dumps(data, allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head><body>",
        *body,
        f'<script type="application/json" id="report-data">{blob}</script>\n',
        f"<script>{_asset('report.js')}</script></body></html>\n",
    ])


def report_html(report: Report, graph: Graph | None = None, program: Any = None) -> str:
    """The validation report as one HTML page; ``graph`` and ``program`` (the converted Graph and
    the compiled Program, defaulting to the ones validation kept on the report) add the
    diagram and the profile."""
    graph = graph if graph is not None else getattr(report, "graph", None)
    program = program if program is not None else getattr(report, "program", None)
    prof = program.profile() if program is not None else None
    body = [_summary(report),
            _section("chart", "Per layer", _chart(report)),
            _section("layers", "Comparisons", _layer_table(report))]
    if graph is not None:
        body.append(_section("graph", "Graph", _diagram(graph, report, program, prof)))
    if prof is not None:
        body.append(_section("profile", "Profile", _profile_body(program, prof)))
    data: dict[str, Any] = {"report": report.to_dict()}
    if prof is not None:
        data["profile"] = _finite(prof.to_dict())
    return _page(f"opbridge validate {report.model}", body, data)


def profile_html(program: Any) -> str:
    """A compiled Program's profile as one HTML page: figures, timeline, units, diagram."""
    prof = program.profile()
    title = f"opbridge profile {program.graph.name} on {program.target.name}"
    body = [f'<header><h1>{esc(title)}</h1></header>',
            _section("profile", "Profile", _profile_body(program, prof)),
            _section("graph", "Graph", _diagram(program.graph, None, program, prof))]
    return _page(title, body, {"profile": _finite(prof.to_dict())})


def _section(ident: str, title: str, content: str) -> str:
    return f'<section id="{ident}"><h2>{esc(title)}</h2>{content}</section>'


def _finite(obj: Any) -> Any:
    """``obj`` with non-finite floats as strings, so it is valid JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


# -- summary -----------------------------------------------------------------------------


def _summary(report: Report) -> str:
    verdict = "PASS" if report.passed else "FAIL"
    fd = report.first_divergence
    facts = [("model", report.model), ("framework", report.framework),
             ("reference", report.reference),
             ("compared", " and ".join(report.runners[1:]) or "-"),
             ("tolerance", ", ".join(map(str, report.tolerance)) if report.tolerance
              else "per-dtype defaults (cosine, euclid)"),
             ("comparisons", f"{len(report.rows)} ({len(report.failures)} out of tolerance)"),
             ("mode", MODES.get(report.mode, report.mode))]
    if report.unreferenced:
        facts.append((f"no {report.reference} reference", ", ".join(report.unreferenced)))
    facts += [(f"input {k}", v) for k, v in report.inputs.items()]
    out = [f'<header><h1>opbridge validate <span class="model">{esc(report.model)}</span></h1>',
           f'<p class="verdict {verdict.lower()}" id="verdict">{verdict}</p>',
           f'<p class="summary">{esc(report.summary().split("; first divergence:")[0])}</p>']
    if fd is not None:
        out.append(f'<p class="first" id="first-divergence">First divergence: <a href="#row-first">'
                   f'{esc(fd)}</a></p>')
    out.append('<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
               + "</dl>")
    out += [f'<p class="note">note: {esc(n)}</p>' for n in report.notes]
    out += [f'<p class="error">error: {esc(e)}</p>' for e in report.errors]
    out.append("</header>")
    return "".join(out)


# -- chart and table ---------------------------------------------------------------------


def _floor(row: Row, tolerance: tuple[float, float] | None) -> float | None:
    from .compare import tolerance_for

    tol = tolerance_for(row.result.ref_dtype, tolerance)
    return None if tol.exact else tol.cosine


def _chart(report: Report) -> str:
    order: dict[str, int] = {}
    floors: list[float | None] = []
    series = report.runners[1:] or [report.reference]
    fd = report.first_divergence
    points = []
    for r in report.rows:
        if r.tensor not in order:
            order[r.tensor] = len(order)
            floors.append(_floor(r, report.tolerance))
        s = series.index(r.candidate) if r.candidate in series else 0
        res = r.result
        label = (f"{r.tensor} ({r.node}, {r.op_type}) {r.candidate}: cosine {res.cosine:.6g}, "
                 f"SQNR {res.sqnr_db:.4g} dB, {res.status}")
        points.append(Point(order[r.tensor], s, res.cosine, res.sqnr_db, r.passed, label))
    first = order.get(fd.tensor) if fd is not None else None
    return chart_svg(points, len(order), floors, series, first)


_COLUMNS = (("#", "num"), ("tensor", "text"), ("layer", "text"), ("op", "text"), ("run", "text"),
            ("shape", "text"), ("cosine", "num"), ("euclid", "num"), ("max|Δ|", "num"),
            ("SQNR dB", "num"), ("status", "text"))


def _cell(v: float) -> str:
    if math.isnan(v):
        return '<td class="n" data-v="">-</td>'
    text = ("inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:.6g}"
    return f'<td class="n" data-v="{v!r}">{text}</td>'


def _layer_table(report: Report) -> str:
    fd = report.first_divergence
    head = "".join(f'<th data-sort="{kind}" tabindex="0">{esc(name)}</th>' for name, kind in _COLUMNS)
    rows = []
    for i, r in enumerate(report.rows):
        res = r.result
        first = fd is not None and (r.tensor, r.candidate) == (fd.tensor, fd.candidate)
        cls = ("pass" if r.passed else "fail") + (" first" if first else "")
        shape = "x".join(map(str, res.ref_shape)) or "scalar"
        if res.cand_shape != res.ref_shape:
            shape += " → " + ("x".join(map(str, res.cand_shape)) or "scalar")
        tip = f' title="{esc(res.reason)}"' if res.reason else ""
        ident = ' id="row-first"' if first else ""
        rows.append(
            f'<tr class="{cls}"{ident} data-node="{esc(r.node)}"><td class="n" data-v="{i}">{i}</td>'
            f'<td>{esc(r.tensor)}{" <em>(out)</em>" if r.is_output else ""}</td><td>{esc(r.node)}</td>'
            f"<td>{esc(r.op_type)}</td><td>{esc(r.candidate)} vs {esc(r.reference)}</td>"
            f"<td>{esc(res.ref_dtype)}[{esc(shape)}]</td>{_cell(res.cosine)}{_cell(res.euclid)}"
            f"{_cell(res.max_abs)}{_cell(res.sqnr_db)}<td{tip}>{esc(res.status)}</td></tr>")
    return ('<div class="controls"><input type="search" id="filter" placeholder="filter rows: '
            'tensor, layer, op, status…" aria-label="filter rows"> <label><input type="checkbox" '
            'id="only-failed"> only failures</label> <span id="row-count"></span></div>'
            f'<table class="sortable" id="layer-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


# -- graph diagram -----------------------------------------------------------------------


def _units_of(program: Any, prof: Any) -> dict[str, tuple[int, str]]:
    """Node name -> (unit index, unit kind) of a compiled program."""
    found: dict[str, tuple[int, str]] = {}
    for up, unit in zip(prof.units, program.units):
        names = getattr(unit, "nodes", None)
        if names is None:
            names = unit["nodes"]
        for name in names:
            found[name] = (up.index, up.kind)
    return found


def _diagram(graph: Graph, report: Report | None, program: Any, prof: Any) -> str:
    status: dict[str, str] = {}
    if report is not None:
        for r in report.rows:
            status[r.tensor] = "fail" if not r.passed or status.get(r.tensor) == "fail" else "pass"
    fd = report.first_divergence if report is not None else None
    units = _units_of(program, prof) if program is not None else {}
    nodes = []
    for n in graph.nodes:
        outs = tuple(v.name for v in n.outputs)
        seen = [status[t] for t in outs if t in status]
        st = "fail" if "fail" in seen else ("pass" if seen else "none")
        if fd is not None and fd.tensor in outs:
            st = "first"
        unit, kind = units.get(n.name, (None, ""))
        origin = n.origin.name if n.origin is not None and n.origin.name else n.name
        nodes.append(DiagramNode(n.name, n.op, tuple(v.name for v in n.inputs if v is not None), outs,
                                 st, unit, kind, f"origin '{origin}'" if origin != n.name else "", origin))
    cls = "by-status" if report is not None else "by-unit"
    return f'{_diagram_controls(report, program)}<div class="scroll {cls}" id="graph-box">{diagram_svg(nodes)}</div>'


def _diagram_controls(report: Report | None, program: Any) -> str:
    """The colour switch (when there is both a comparison and a program) and the legend."""
    host = '<span class="sw host"></span>host (CPU) layer'
    if report is None:
        return f'<p class="legend">Nodes coloured by program unit, as in the units table; {host}.</p>'
    toggle = ""
    if program is not None:
        toggle = ('<div class="controls">colour by: <label><input type="radio" name="colour" '
                  'value="status" checked> comparison status</label> <label><input type="radio" '
                  'name="colour" value="unit"> program unit (layer group, as in the units table)'
                  '</label></div>')
    return (f'{toggle}<p class="legend"><span class="sw st-pass"></span>passed <span class="sw st-fail">'
            '</span>out of tolerance <span class="sw st-first"></span>first divergence '
            f'<span class="sw st-none"></span>not compared {host}; click a node to filter the table</p>')


# -- profile -----------------------------------------------------------------------------


def _profile_body(program: Any, prof: Any) -> str:
    from ..simulator.cost import ENGINES  # the trace's tracks: tid i + 1 is ENGINES[i]

    lanes = [_ENGINE_LABELS.get(e, e) for e in ENGINES]
    figures = (f"estimated latency {prof.est_latency_ms:.3f} ms; GDMA {prof.gdma_bytes / 2**20:.2f} MiB; "
               f"local memory peak {prof.lmem_peak_bytes / 1024:.1f} KiB/lane; {prof.num_layer_groups} "
               f"layer groups, {prof.num_tiles} tiles, {prof.num_global_layers} global layers, "
               f"{prof.num_cpu_layers} host ops; {prof.flops / 1e9:.3f} GFLOP")
    head = "".join(f'<th data-sort="{k}" tabindex="0">{esc(c)}</th>' for c, k in (
        ("#", "num"), ("kind", "text"), ("ops", "text"), ("tiles", "num"), ("lmem KiB", "num"),
        ("GDMA KiB", "num"), ("start ms", "num"), ("est ms", "num"), ("bound", "text")))
    rows = "".join(
        f'<tr><td class="n" data-v="{u.index}"><span class="sw" style="background:'
        f'{unit_colour(u.index)}"></span>{u.index}</td><td>{esc(u.kind)}</td><td>{esc(op_summary(u.ops))}</td>'
        f'<td class="n" data-v="{u.tiles}">{u.tiles}</td>{_cell(u.lmem_bytes / 1024)}'
        f"{_cell(u.gdma_bytes / 1024)}{_cell(u.start_ms)}{_cell(u.est_ms)}<td>{esc(u.bound)}</td></tr>"
        for u in prof.units)
    return (f'<p class="summary" id="profile-figures">{esc(figures)}</p>'
            f'<h3>Timeline per engine</h3><p class="legend">GDMA: transfers between DDR and local '
            f'memory; compute: the TPU lanes; host: ops on the CPU. Bars are coloured by program unit '
            f'(as in the table below); hover for the instruction.</p><div class="scroll">'
            f"{timeline_svg(prof.events, lanes, prof.est_latency_ms * 1000)}</div>"
            f'<h3>Units</h3><table class="sortable" id="unit-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def op_summary(ops: list[str]) -> str:
    """``Conv x3, Relu x2``: op types by first appearance, with counts."""
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
