"""Inline SVG for the HTML reports, drawn here in Python: no charting library, no network.

Three pictures: the per-layer chart (cosine and SQNR in graph order, the tolerance floor, the
first divergence), the graph as a layered diagram (topological rank -> column, nodes coloured
by comparison status or by the compiled program's unit), and the profile's timeline per engine.
Every string that comes from the model (node, tensor and op names) goes through :func:`esc`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: colours of the candidate runners' series in the chart, in runner order
SERIES = ("#1f6fd1", "#d1731f", "#6a3fb5", "#198a6b")
#: chart geometry (px)
_W, _PH, _ML, _MR, _MT, _MB = 960, 170, 58, 16, 14, 24


def esc(text: Any) -> str:
    """``text`` as HTML/SVG text or attribute value (quotes escaped too)."""
    return html.escape(str(text), quote=True)


def unit_colour(index: int) -> str:
    """A distinct colour per program unit (golden-angle hues), shared by diagram and timeline."""
    return f"hsl({(index * 137.508) % 360:.0f},58%,62%)"


def _num(v: float | None, digits: int = 5) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


# -- the per-layer chart -----------------------------------------------------------------


@dataclass
class Point:
    """One comparison on the chart: x is the tensor's position in graph order."""

    x: int
    series: int
    cosine: float
    sqnr: float
    passed: bool
    label: str


def chart_svg(points: Sequence[Point], n: int, floors: Sequence[float | None],
              series: Sequence[str], first: int | None) -> str:
    """Two panels over ``n`` tensors: cosine with the tolerance floor (``floors[x]``, None where
    the dtype must match exactly), and SQNR in dB; ``first`` is the first divergence's x."""
    if not points:
        return '<p class="empty">No comparisons to chart.</p>'
    cos = [p.cosine for p in points if math.isfinite(p.cosine)]
    lo = min(cos + [f for f in floors if f is not None] + [0.98])
    lo = max(-1.0, lo - (1.0 - lo) * 0.12)
    finite_sqnr = [p.sqnr for p in points if math.isfinite(p.sqnr)]
    s_hi = max(finite_sqnr + [60.0]) * 1.05
    s_lo = min(finite_sqnr + [0.0])
    height = 2 * (_PH + _MT + _MB) + 22
    out = [f'<svg class="chart" id="chart-svg" width="{_W}" height="{height}" '
           f'viewBox="0 0 {_W} {height}" role="img" aria-label="cosine and SQNR per layer">']
    out.append(_legend(series))
    top = 22
    out.append(_panel(points, n, top, lo, 1.0, "cosine", lambda p: p.cosine, floors, first))
    top += _PH + _MT + _MB
    out.append(_panel(points, n, top, s_lo, s_hi, "SQNR dB",
                      lambda p: min(p.sqnr, s_hi) if not math.isnan(p.sqnr) else p.sqnr, None, first))
    out.append("</svg>")
    return "".join(out)


def _legend(series: Sequence[str]) -> str:
    parts, x = [], _ML
    for i, name in enumerate(series):
        parts.append(f'<circle cx="{x + 5}" cy="9" r="4" fill="{SERIES[i % len(SERIES)]}"/>'
                     f'<text x="{x + 13}" y="13" class="lg">{esc(name)}</text>')
        x += 24 + 7 * len(name)
    parts.append(f'<line x1="{x}" y1="9" x2="{x + 18}" y2="9" class="floor key"/>'
                 f'<text x="{x + 22}" y="13" class="lg">tolerance floor</text>')
    x += 130
    parts.append(f'<line x1="{x}" y1="2" x2="{x}" y2="16" class="diverge key"/>'
                 f'<text x="{x + 5}" y="13" class="lg">first divergence</text>')
    return "".join(parts)


def _panel(points: Sequence[Point], n: int, top: float, lo: float, hi: float, title: str,
           value: Any, floors: Sequence[float | None] | None, first: int | None) -> str:
    """One panel: axes with five ticks, the floor as a step line, one polyline per series."""
    pw = _W - _ML - _MR
    hi = hi if hi > lo else lo + 1.0

    def sx(i: float) -> float:
        return _ML + (i + 0.5) * pw / n

    def sy(v: float) -> float:
        return top + _PH - (min(max(v, lo), hi) - lo) / (hi - lo) * _PH

    out = [f'<g class="panel"><rect x="{_ML}" y="{top}" width="{pw}" height="{_PH}" class="plot"/>',
           f'<text x="{_ML + 6}" y="{top + 13}" class="axis-title">{esc(title)}</text>']
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<line x1="{_ML - 4}" y1="{sy(v):.1f}" x2="{_ML + pw}" y2="{sy(v):.1f}" class="grid"/>'
                   f'<text x="{_ML - 6}" y="{sy(v) + 4:.1f}" class="tick">{_num(v, 4)}</text>')
    if floors is not None:
        steps = [f"{sx(i - 0.5):.1f},{sy(f):.1f} {sx(i + 0.5):.1f},{sy(f):.1f}"
                 for i, f in enumerate(floors) if f is not None]
        if steps:
            out.append(f'<polyline points="{" ".join(steps)}" class="floor"/>')
    if first is not None:
        out.append(f'<line x1="{sx(first):.1f}" y1="{top}" x2="{sx(first):.1f}" y2="{top + _PH}" '
                   f'class="diverge"/>')
    out.append(_series(points, value, sx, sy))
    out.append(f'<text x="{_ML}" y="{top + _PH + 16}" class="tick start">tensors in graph order '
               f'(1 to {n})</text></g>')
    return "".join(out)


def _series(points: Sequence[Point], value: Any, sx: Any, sy: Any) -> str:
    out: list[str] = []
    by_series: dict[int, list[Point]] = {}
    for p in points:
        by_series.setdefault(p.series, []).append(p)
    for s, pts in sorted(by_series.items()):
        colour = SERIES[s % len(SERIES)]
        line = " ".join(f"{sx(p.x):.1f},{sy(value(p)):.1f}" for p in pts if not math.isnan(value(p)))
        if line:
            out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.3"/>')
        for p in pts:
            v = value(p)
            if math.isnan(v):
                continue
            cls = "pt" if p.passed else "pt bad"
            out.append(f'<circle cx="{sx(p.x):.1f}" cy="{sy(v):.1f}" r="{2.6 if p.passed else 4}" '
                       f'fill="{colour}" class="{cls}"><title>{esc(p.label)}</title></circle>')
    return "".join(out)


# -- the graph diagram -------------------------------------------------------------------


@dataclass
class DiagramNode:
    """A node of the diagram: its name, op, the names it reads and writes, and how to colour it."""

    name: str
    op: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    #: ``pass``, ``fail``, ``first`` (the first divergence) or ``none`` (not compared)
    status: str = "none"
    #: the program unit running it and that unit's kind (group, global, host), when compiled
    unit: int | None = None
    kind: str = ""
    detail: str = ""
    #: what a click on the node types into the table's filter (its origin name)
    key: str = ""


_NW, _NH, _DX, _DY, _PAD = 132, 38, 168, 50, 12


def layout(nodes: Sequence[DiagramNode]) -> list[tuple[int, int]]:
    """(column, row) per node: the column is the node's topological rank (one more than its
    deepest producer), the row its order of arrival in that column. ``nodes`` are in topological
    order, as a Graph's nodes are."""
    producer: dict[str, int] = {}
    rank: list[int] = []
    rows_in: dict[int, int] = {}
    pos: list[tuple[int, int]] = []
    for i, nd in enumerate(nodes):
        r = 1 + max((rank[producer[t]] for t in nd.reads if t in producer), default=-1)
        rank.append(r)
        pos.append((r, rows_in.get(r, 0)))
        rows_in[r] = rows_in.get(r, 0) + 1
        for t in nd.writes:
            producer[t] = i
    return pos


def diagram_svg(nodes: Sequence[DiagramNode]) -> str:
    """The graph left to right; edges are producer -> consumer curves."""
    if not nodes:
        return '<p class="empty">The graph has no nodes.</p>'
    pos = layout(nodes)
    width = _PAD * 2 + max(c for c, _ in pos) * _DX + _NW
    height = _PAD * 2 + max(r for _, r in pos) * _DY + _DY
    producer = {t: i for i, nd in enumerate(nodes) for t in nd.writes}
    out = [f'<svg class="diagram" id="graph-svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="graph diagram"><g class="edges">']
    for j, nd in enumerate(nodes):
        for t in dict.fromkeys(nd.reads):
            if t in producer:
                out.append(_edge(pos[producer[t]], pos[j]))
    out.append("</g>")
    out.extend(_node(nd, c, r) for nd, (c, r) in zip(nodes, pos))
    out.append("</svg>")
    return "".join(out)


def _edge(a: tuple[int, int], b: tuple[int, int]) -> str:
    x1, y1 = _PAD + a[0] * _DX + _NW, _PAD + a[1] * _DY + _NH / 2
    x2, y2 = _PAD + b[0] * _DX, _PAD + b[1] * _DY + _NH / 2
    if b[0] - a[0] > 1 and a[1] == b[1]:
        # a skip connection along one row would run behind the nodes between: arc below them
        lo = y1 + _NH / 2 + (_DY - _NH) * 0.8
        return (f'<path d="M{x1 - 10},{y1 + _NH / 2} C{x1 + 20},{lo} {x2 - 20},{lo} '
                f'{x2 + 10},{y2 + _NH / 2}"/>')
    mid = (x1 + x2) / 2
    return f'<path d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>'


def _node(nd: DiagramNode, col: int, row: int) -> str:
    x, y = _PAD + col * _DX, _PAD + row * _DY
    cls = f"node st-{nd.status}" + (" host" if nd.kind == "host" else "")
    unit = "" if nd.unit is None else f' data-unit="{nd.unit}" style="--unit:{unit_colour(nd.unit)}"'
    tip = f"{nd.name} ({nd.op}): {nd.status}"
    if nd.unit is not None:
        tip += f"; unit {nd.unit} ({nd.kind})"
    if nd.detail:
        tip += f"; {nd.detail}"
    name = nd.name if len(nd.name) <= 20 else nd.name[:19] + "\u2026"
    badge = f'<text x="{x + _NW - 4}" y="{y + 13}" class="badge">host</text>' if nd.kind == "host" else ""
    return (f'<g class="{cls}" data-node="{esc(nd.key or nd.name)}"{unit}><title>{esc(tip)}</title>'
            f'<rect x="{x}" y="{y}" width="{_NW}" height="{_NH}" rx="5" class="box"/>'
            f'<text x="{x + 7}" y="{y + 15}" class="op">{esc(nd.op)}</text>'
            f'<text x="{x + 7}" y="{y + 31}" class="nm">{esc(name)}</text>{badge}</g>')


# -- the profile timeline ----------------------------------------------------------------


def timeline_svg(events: Iterable[Mapping[str, Any]], engines: Sequence[str], total_us: float) -> str:
    """One lane per engine; each Chrome-trace ``X`` event (``ts``/``dur`` in µs, ``tid`` the
    engine's 1-based index, ``args.unit`` its unit) is a bar coloured by its unit."""
    lane_h, left, width = 30, 64, _W
    pw = width - left - _MR
    total = total_us if total_us > 0 else 1.0
    height = len(engines) * lane_h + 34
    out = [f'<svg class="timeline" id="timeline-svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="timeline per engine">']
    for i, eng in enumerate(engines):
        y = 4 + i * lane_h
        out.append(f'<rect x="{left}" y="{y}" width="{pw}" height="{lane_h - 6}" class="lane"/>'
                   f'<text x="{left - 6}" y="{y + 17}" class="tick">{esc(eng)}</text>')
    for ev in events:
        if ev.get("ph") != "X" or not 1 <= int(ev.get("tid", 0)) <= len(engines):
            continue
        y = 4 + (int(ev["tid"]) - 1) * lane_h
        x = left + float(ev["ts"]) / total * pw
        w = max(0.6, float(ev["dur"]) / total * pw)
        unit = int(ev.get("args", {}).get("unit", 0))
        tip = f"{ev.get('name', '')}: {float(ev['ts']):.2f} µs + {float(ev['dur']):.2f} µs (unit {unit})"
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h - 6}" '
                   f'fill="{unit_colour(unit)}" class="ev"><title>{esc(tip)}</title></rect>')
    y = 4 + len(engines) * lane_h
    for k in range(6):
        x = left + pw * k / 5
        anchor = "start" if k == 0 else ("end" if k == 5 else "mid")
        out.append(f'<text x="{x:.1f}" y="{y + 14}" class="tick {anchor}">{total * k / 5 / 1000:.3g} ms</text>')
    out.append("</svg>")
    return "".join(out)
