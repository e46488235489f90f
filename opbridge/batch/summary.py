"""A batch's summary: a rich table, ``summary.json`` and a self-contained ``summary.html``.

The HTML page reuses the validation report's page shell (inlined CSS and script, no network): its
table is sortable and filterable the same way, and every model-provided string is escaped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import BatchResult, ModelResult

#: figures shown in the table and the page, in this order: key -> (label, format)
FIGURES = (("time_s", "time s", "{:.2f}"), ("nodes", "nodes", "{}"), ("comparisons", "compared", "{}"),
           ("failed", "out of tol.", "{}"), ("est_latency_ms", "est. latency ms", "{:.4g}"),
           ("layer_groups", "layer groups", "{}"), ("cpu_layers", "host layers", "{}"))

_STATUS_STYLE = {"passed": "green", "failed": "bold red", "error": "bold magenta"}


def write_summary(result: BatchResult) -> None:
    """Write ``summary.json`` and ``summary.html`` into the batch's output folder."""
    from ..ir.io import atomic_write

    out = Path(result.output)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result.to_dict(), indent=1, allow_nan=False) + "\n"
    atomic_write(out / "summary.json", lambda tmp: Path(tmp).write_text(text))
    page = summary_html(result)
    atomic_write(out / "summary.html", lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))


def _shown(result: BatchResult) -> list[tuple[str, str, str]]:
    """The figures at least one model has (convert has no latency, a failed model no figures)."""
    return [f for f in FIGURES if any(f[0] in m.figures for m in result.models)]


def _figure(m: ModelResult, key: str, fmt: str) -> str:
    v = m.figures.get(key)
    return "-" if v is None else fmt.format(v)


def _what(m: ModelResult) -> str:
    """What went wrong (the error, else the first divergence), or the verdict's gist."""
    if m.error:
        return m.error
    if m.first_divergence:
        return f"first divergence: {m.first_divergence}"
    return m.verdict.split(";")[0] if m.verdict else ""


def print_summary(result: BatchResult, console: Any = None) -> None:
    """The summary table, one row per model, then the counts and where the files are."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    t = Table(title=f"batch {result.mode} ({result.executor}, target {result.target})",
              title_justify="left", pad_edge=False)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("model", overflow="fold")
    t.add_column("status", no_wrap=True)
    shown = _shown(result)
    for _, label, _fmt in shown:
        t.add_column(label, justify="right", no_wrap=True)
    t.add_column("first divergence / error", overflow="fold")
    for i, m in enumerate(result.models):
        style = _STATUS_STYLE.get(m.status, "")
        t.add_row(str(i), escape(m.path), f"[{style}]{m.status.upper()}[/]",
                  *[_figure(m, key, fmt) for key, _, fmt in shown], escape(_what(m)))
    console.print(t)
    c = result.counts()
    style = "bold green" if result.passed else "bold red"
    console.print(f"[{style}]{c['passed']} passed, {c['failed']} failed, {c['error']} errors[/] of "
                  f"{len(result.models)} models in {result.wall_s:.1f} s; summary in "
                  f"{escape(str(Path(result.output) / 'summary.html'))}", highlight=False)


def summary_html(result: BatchResult) -> str:
    """The batch as one self-contained HTML page: counts, then a sortable, filterable table with a
    link to each model's own report (status last: the shared style marks a failing row's last cell)."""
    from ..validate.html import _page
    from ..validate.svg import esc

    c = result.counts()
    verdict = "PASS" if result.passed else "FAIL"
    shown = _shown(result)
    head = "".join(f'<th data-sort="{kind}" tabindex="0">{esc(label)}</th>' for label, kind in
                   [("#", "num"), ("model", "text")] + [(label, "num") for _, label, _ in shown]
                   + [("first divergence / error", "text"), ("status", "text")])
    rows = [_html_row(i, m, shown) for i, m in enumerate(result.models)]
    body = [
        f'<header><h1>opbridge batch {esc(result.mode)}</h1><p class="verdict {verdict.lower()}" '
        f'id="verdict">{verdict}</p><p class="summary">{c["passed"]} passed, {c["failed"]} failed, '
        f'{c["error"]} errors of {len(result.models)} models</p><dl class="facts">'
        f"<dt>target</dt><dd>{esc(result.target)}</dd><dt>ran on</dt><dd>{esc(result.executor)}</dd>"
        f"<dt>wall time</dt><dd>{result.wall_s:.1f} s</dd></dl></header>",
        '<section id="models"><h2>Models</h2><div class="controls"><input type="search" id="filter" '
        'placeholder="filter rows: model, status, error…" aria-label="filter rows"> <label><input '
        'type="checkbox" id="only-failed"> only failures</label> <span id="row-count"></span></div>'
        f'<div class="scroll"><table class="sortable" id="layer-table"><thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table></div></section>',
    ]
    return _page(f"opbridge batch {result.mode}", body, {"summary": result.to_dict()})


def _html_row(i: int, m: ModelResult, shown: list[tuple[str, str, str]]) -> str:
    from ..validate.svg import esc

    report = next((o for o in m.outputs if o.endswith(("/report.html", "/profile.html"))), None)
    name = esc(m.path)
    link = f'<a href="{esc(report)}">{name}</a>' if report else name
    cells = []
    for key, _, fmt in shown:
        v = m.figures.get(key)
        cells.append(f'<td class="n" data-v="{"" if v is None else esc(v)}">{esc(_figure(m, key, fmt))}</td>')
    cls = "pass" if m.status == "passed" else "fail"
    return (f'<tr class="{cls}"><td class="n" data-v="{i}">{i}</td><td title="{esc(m.dir)}">{link}</td>'
            f'{"".join(cells)}<td>{esc(_what(m))}</td><td>{esc(m.status)}</td></tr>')
