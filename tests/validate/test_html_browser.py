"""The HTML reports in a real headless browser (Debian's chromium through Playwright): the page
loads without console errors or any network request, the chart, the diagram and the timeline
render, and the table filters and sorts.

Skipped, with the reason, where chromium or playwright is missing (a fresh clone without root);
with ``OPBRIDGE_REQUIRE_BROWSER=1`` (set by ``.ci/run``) a missing browser fails instead.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob

from .test_html import CUSTOM_OPS, _custom_model, failing_report


class Loaded:
    """A page opened from a file, with what it logged and requested."""

    def __init__(self, browser, path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        # generous: a shared 2-core machine under a parallel test run renders slowly
        self.page.set_default_timeout(120_000)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri(), wait_until="load")

    def visible_rows(self) -> list[str]:
        return self.page.eval_on_selector_all(
            "#layer-table tbody tr", "rows => rows.filter(r => r.offsetParent !== null).map(r => r.textContent)")


@pytest.fixture(scope="module")
def failing(browser, tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="the reference of the leaky net is onnxruntime")
    path, rep, r = failing_report(tmp_path_factory.mktemp("browser"))
    assert r.returncode == 1, r.stdout + r.stderr
    loaded = Loaded(browser, path)
    yield loaded, rep
    loaded.page.close()


def _box(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not rendered"
    return box


def _distinct_colours(png: bytes) -> int:
    import cv2

    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert img is not None and img.shape[0] > 20 and img.shape[1] > 100
    return len(np.unique(img.reshape(-1, 3), axis=0))


def test_report_loads_offline_without_errors_and_renders(failing):
    loaded, rep = failing
    assert loaded.errors == []
    assert all(u.startswith("file:") for u in loaded.requests), loaded.requests
    for sel in ("#chart-svg", "#graph-svg", "#timeline-svg", "#layer-table"):
        box = _box(loaded.page, sel)
        assert box["width"] > 100 and box["height"] > 30, (sel, box)
    nodes = loaded.page.locator("#graph-svg g.node rect.box")
    assert nodes.count() == 4
    for i in range(4):
        box = nodes.nth(i).bounding_box()
        assert box is not None and box["width"] > 50 and box["height"] > 20
    # the first divergence's node is filled with the failure red: the CSS applied
    fill = loaded.page.eval_on_selector("#graph-svg g.st-first rect.box", "e => getComputedStyle(e).fill")
    assert fill == "rgb(214, 69, 65)", fill
    for sel in ("#chart-svg", "#graph-svg", "#timeline-svg"):
        assert _distinct_colours(loaded.page.locator(sel).screenshot(animations="disabled")) > 8, sel
    assert _distinct_colours(loaded.page.screenshot(full_page=True, animations="disabled")) > 200


def test_filter_box_and_failure_switch_hide_rows(failing):
    loaded, rep = failing
    page = loaded.page
    rows = rep["rows"]
    assert len(loaded.visible_rows()) == len(rows)
    page.fill("#filter", "leaky")
    want = [r for r in rows if "leaky" in (r["tensor"] + r["node"] + r["op_type"]).lower()]
    shown = loaded.visible_rows()
    assert 0 < len(shown) == len(want) < len(rows)
    assert page.text_content("#row-count") == f"{len(want)} of {len(rows)} rows"
    page.fill("#filter", "")
    page.check("#only-failed")
    assert len(loaded.visible_rows()) == sum(not r["passed"] for r in rows) > 0
    page.uncheck("#only-failed")
    assert len(loaded.visible_rows()) == len(rows)


def test_headers_sort_and_nodes_filter(failing):
    loaded, rep = failing
    page = loaded.page
    page.click("#layer-table th:nth-child(7)")  # cosine
    cosines = [float(c) for c in page.eval_on_selector_all(
        "#layer-table tbody tr td:nth-child(7)", "cs => cs.map(c => c.getAttribute('data-v'))")]
    assert cosines == sorted(cosines) and cosines != [r["cosine"] for r in rep["rows"]]
    page.click("#layer-table th:nth-child(7)")
    cosines = [float(c) for c in page.eval_on_selector_all(
        "#layer-table tbody tr td:nth-child(7)", "cs => cs.map(c => c.getAttribute('data-v'))")]
    assert cosines == sorted(cosines, reverse=True)
    page.click('#graph-svg g.node[data-node="add"]')
    assert page.input_value("#filter") == "add"
    assert all("add" in text for text in loaded.visible_rows())
    page.fill("#filter", "")
    page.dispatch_event("#filter", "input")


def test_profile_page_renders_host_lane(browser, tmp_path):
    from opbridge.validate.html import profile_html

    prog = ob.compile(ob.convert(_custom_model(), plugins=[str(CUSTOM_OPS)]), "bm1684")
    path = tmp_path / "p.html"
    path.write_text(profile_html(prog), encoding="utf-8")
    loaded = Loaded(browser, path)
    try:
        assert loaded.errors == []
        lanes = loaded.page.locator("#timeline-svg rect.lane")
        host = lanes.nth(2).bounding_box()
        bars = [loaded.page.locator("#timeline-svg rect.ev").nth(i).bounding_box()
                for i in range(loaded.page.locator("#timeline-svg rect.ev").count())]
        assert host is not None and all(b is not None and b["width"] > 0 for b in bars)
        assert sum(1 for b in bars if b and abs(b["y"] - host["y"]) < 1) == 1  # the BarShift
        assert loaded.page.locator("#graph-svg g.node.host").count() == 1
        # no comparison here: nodes take their unit's colour, the one of its swatch in the table
        fill = loaded.page.eval_on_selector('#graph-svg g.node[data-node="bar"] rect.box',
                                            "e => getComputedStyle(e).fill")
        swatch = loaded.page.eval_on_selector_all(
            "#unit-table tbody tr", "rows => rows.filter(r => r.cells[1].textContent === 'host')"
            ".map(r => getComputedStyle(r.querySelector('.sw')).backgroundColor)")
        assert swatch == [fill]
    finally:
        loaded.page.close()


def test_colour_switch_shows_program_units(failing):
    loaded, _ = failing
    page = loaded.page
    sel = '#graph-svg g.node[data-node="leaky"] rect.box'
    by_status = page.eval_on_selector(sel, "e => getComputedStyle(e).fill")
    page.check('input[name="colour"][value="unit"]')
    by_unit = page.eval_on_selector(sel, "e => getComputedStyle(e).fill")
    unit = page.get_attribute('#graph-svg g.node[data-node="leaky"]', "data-unit")
    swatch = page.eval_on_selector_all(
        "#unit-table tbody tr", f"rows => rows.filter(r => r.cells[0].getAttribute('data-v') === '{unit}')"
        ".map(r => getComputedStyle(r.querySelector('.sw')).backgroundColor)")
    assert by_unit != by_status and swatch == [by_unit]
    page.check('input[name="colour"][value="status"]')
    assert page.eval_on_selector(sel, "e => getComputedStyle(e).fill") == by_status
