"""The HTML reports, read back with the standard library's HTML parser: every layer row is
there, the first divergence is marked in the summary, the table, the chart and the diagram,
model-provided names are escaped, and nothing is fetched from a network."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import main
from tests.conftest import requires_ort

from .test_validate import BAD_LEAKY_PLUGIN, leaky_onnx

ROOT = Path(__file__).resolve().parents[2]
CUSTOM_OPS = ROOT / "examples" / "plugins" / "onnx_custom_ops.py"


EVIL = '<script>alert("x")</script>&amp;'
_VOID = {"meta", "input", "br", "img", "link", "hr", "source", "col", "area", "base", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Descendants with this tag (any when None) whose attributes contain the given ones; a
        ``cls`` value must be one of the element's classes."""
        want_cls = attrs.pop("cls", None)
        return [e for e in self.iter() if (tag is None or e.tag == tag)
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
                and (want_cls is None or want_cls in e.attrs.get("class", "").split())]

    def by_id(self, ident: str) -> Element:
        found = self.find(id=ident)
        assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
        return found[0]

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return
        raise AssertionError(f"</{tag}> closes nothing open")

    def handle_data(self, data):
        el = self.stack[-1]
        if el.children:  # text after a child element: keep it in document order
            el.children.append(Element("#text", {}, text=data))
        else:
            el.text += data


def parse(page: str) -> Element:
    b = _TreeBuilder()
    b.feed(page)
    b.close()
    assert [e.tag for e in b.stack] == ["#document"], "unclosed elements: " + str([e.tag for e in b.stack])
    return b.root


def layer_rows(doc: Element) -> list[Element]:
    return doc.by_id("layer-table").find("tbody")[0].find("tr")


def assert_offline(page: str, doc: Element) -> None:
    """No URL of any scheme, no external resource element, no script from a file."""
    assert "http://" not in page and "https://" not in page and "//" not in re.sub(
        r"<script>.*?</script>", "", page, flags=re.S).replace("<!--", "")
    assert not doc.find("link") and not doc.find("img") and not doc.find("iframe")
    for el in doc.iter():
        assert "src" not in el.attrs, el
        assert el.attrs.get("href", "#").startswith("#"), el
    assert "@import" not in page and "url(" not in page


def data_block(doc: Element) -> dict:
    return json.loads(doc.by_id("report-data").all_text())




def failing_report(tmp: Path) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """``opbridge validate --html`` of the leaky net with a plugin whose LeakyRelu mapping drops
    alpha, in a fresh interpreter (the override is process-global): the page and the JSON report."""
    model = leaky_onnx(tmp / "leaky_net.onnx")
    plugin = tmp / "bad_leaky.py"
    plugin.write_text(BAD_LEAKY_PLUGIN)
    page, rep = tmp / "report.html", tmp / "report.json"
    r = subprocess.run([sys.executable, "-m", "opbridge", "validate", str(model), "--plugin", str(plugin),
                        "--report", str(rep), "--html", str(page)], capture_output=True, text=True,
                       timeout=300)
    return page, json.loads(rep.read_text()), r


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="the reference of the leaky net is onnxruntime")
    page, rep, r = failing_report(tmp_path_factory.mktemp("failing"))
    assert r.returncode == 1, r.stdout + r.stderr
    return page.read_text(encoding="utf-8"), rep


@requires_ort
def test_passing_report_has_every_row_chart_diagram_and_timeline(tmp_path):
    report = ob.validate(str(leaky_onnx(tmp_path / "leaky_net.onnx")))
    assert report.passed, report.summary()
    report.write_html(tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    doc = parse(page)
    assert doc.by_id("verdict").all_text() == "PASS"
    rows = layer_rows(doc)
    assert len(rows) == len(report.rows) == 5  # 4 tensors by the interpreter, the output by the simulator
    got = [(tr.find("td")[1].all_text().replace(" (out)", ""), tr.find("td")[4].all_text()) for tr in rows]
    assert got == [(r.tensor, f"{r.candidate} vs {r.reference}") for r in report.rows]
    assert not doc.find("tr", id="row-first") and not doc.find(id="first-divergence")
    chart = doc.by_id("chart-svg")
    assert len(chart.find("circle", cls="pt")) == 2 * len(report.rows)  # cosine and SQNR panels
    assert [e.attrs["class"] for e in chart.find(cls="diverge")] == ["diverge key"]  # the legend's only
    assert len(chart.find("polyline", cls="floor")) == 1  # the cosine panel's tolerance floor
    nodes = doc.by_id("graph-svg").find("g", cls="node")
    assert sorted(n.attrs["data-node"] for n in nodes) == ["add", "conv", "leaky", "relu"]
    assert all("st-pass" in n.attrs["class"].split() for n in nodes)
    prof = report.program.profile()
    bars = doc.by_id("timeline-svg").find("rect", cls="ev")
    assert len(bars) == sum(1 for e in prof.events if e["ph"] == "X") > 0
    assert data_block(doc)["report"] == json.loads(json.dumps(report.to_dict()))
    assert_offline(page, doc)


def test_failing_report_marks_the_first_divergence(failing):
    page, rep = failing
    doc = parse(page)
    fd = rep["first_divergence"]
    assert (fd["node"], fd["tensor"], fd["candidate"]) == ("leaky", "leaky_out", "interpreter")
    assert doc.by_id("verdict").all_text() == "FAIL"
    assert "node 'leaky' (LeakyRelu), tensor 'leaky_out'" in doc.by_id("first-divergence").all_text()
    rows = layer_rows(doc)
    assert len(rows) == len(rep["rows"])
    assert sum("fail" in tr.attrs["class"].split() for tr in rows) == sum(not r["passed"] for r in rep["rows"])
    first = doc.by_id("row-first")
    cells = [td.all_text() for td in first.find("td")]
    assert cells[1] == "leaky_out" and cells[2] == "leaky" and cells[4] == "interpreter vs onnxruntime"
    # the chart's divergence line stands on the point of leaky_out in both panels
    chart = doc.by_id("chart-svg")
    lines = [e for e in chart.find("line", cls="diverge") if "key" not in e.attrs["class"]]
    dots = [c for c in chart.find("circle", cls="pt") if c.find("title")[0].all_text().startswith("leaky_out ")]
    assert len(lines) == 2 and dots
    assert {ln.attrs["x1"] for ln in lines} == {c.attrs["cx"] for c in dots}
    assert any("bad" in c.attrs["class"].split() for c in dots)
    # the diagram: the LeakyRelu is the first divergence, its producer passed, its consumers failed
    status = {n.attrs["data-node"]: n.attrs["class"].split()[1] for n in doc.by_id("graph-svg").find("g", cls="node")}
    assert status == {"conv": "st-pass", "leaky": "st-first", "add": "st-fail", "relu": "st-fail"}
    assert_offline(page, doc)


def test_names_from_the_model_are_escaped(tmp_path):
    b = ob.GraphBuilder("evil" + EVIL)
    x = b.input("x" + EVIL, "f32", (1, 4, 8, 8))
    y = b.op("Relu", [x], name="relu" + EVIL, outputs=["y" + EVIL])
    b.output(b.op("Sigmoid", [y], name="sig</script><script>alert(2)</script>", outputs=["out" + EVIL]))
    report = ob.validate(b.build())
    assert report.program is not None  # the simulator ran: names reach the timeline too
    report.write_html(tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("<script") == 2  # the data block and the page's own script
    assert "<script>alert" not in page and "</script><script>" not in page
    doc = parse(page)
    # escaped in the source, the same text once parsed (the simulator keeps the Relu in local
    # memory, so the output is the one comparison)
    cells = [[td.all_text() for td in tr.find("td")[1:3]] for tr in layer_rows(doc)]
    assert cells == [["out" + EVIL + " (out)", "sig</script><script>alert(2)</script>"]]
    names = {n.attrs["data-node"] for n in doc.by_id("graph-svg").find("g", cls="node")}
    assert names == {"relu" + EVIL, "sig</script><script>alert(2)</script>"}
    assert data_block(doc)["report"]["rows"][0]["tensor"] == "out" + EVIL
    titles = [t.all_text() for t in doc.by_id("timeline-svg").find("title")]
    assert any("relu" + EVIL in t for t in titles)
    assert_offline(page, doc)


def test_profile_html_marks_host_layers_and_lanes(tmp_path):
    graph = ob.convert(_custom_model(), plugins=[str(CUSTOM_OPS)])
    prog = ob.compile(graph, "bm1684")
    prog.save(tmp_path / "m.obprog")
    assert main(["profile", str(tmp_path / "m.obprog"), "--plugin", str(CUSTOM_OPS),
                 "--html", str(tmp_path / "p.html")]) == 0
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    doc = parse(page)
    prof = prog.profile()
    assert prof.num_cpu_layers == 1
    nodes = {n.attrs["data-node"]: n.attrs for n in doc.by_id("graph-svg").find("g", cls="node")}
    assert set(nodes) == {n.name for n in prog.graph.nodes}
    assert [k for k, a in nodes.items() if "host" in a["class"].split()] == ["bar"]
    assert all("data-unit" in a for a in nodes.values())
    assert "by-unit" in doc.by_id("graph-box").attrs["class"].split()  # no comparison to colour by
    lanes = doc.by_id("timeline-svg").find("rect", cls="lane")
    host_y = lanes[2].attrs["y"]
    bars = doc.by_id("timeline-svg").find("rect", cls="ev")
    assert [b.find("title")[0].all_text().split(":")[0] for b in bars if b.attrs["y"] == host_y] == ["BarShift bar"]
    assert len(doc.by_id("unit-table").find("tbody")[0].find("tr")) == len(prof.units)
    assert data_block(doc)["profile"]["num_cpu_layers"] == 1
    assert_offline(page, doc)


def _custom_model():
    """Conv -> com.example::FooScale -> Relu -> com.example::BarShift (a host op) -> Relu."""
    import onnx  # noqa: F401
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (8, 3, 3, 3),
                           (rng.standard_normal(8 * 27) * 0.3).astype(np.float32).tolist())
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("FooScale", ["c"], ["f"], name="foo", domain="com.example", scale=2.0),
        helper.make_node("Relu", ["f"], ["r"], name="relu"),
        helper.make_node("BarShift", ["r"], ["s"], name="bar", domain="com.example", shift=3),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    g = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


@requires_ort
def test_report_without_simulator_has_no_profile(tmp_path):
    report = ob.validate(str(leaky_onnx(tmp_path / "leaky_net.onnx")), target=None)
    assert report.program is None and report.graph is not None
    report.write_html(tmp_path / "r.html")
    doc = parse((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert not doc.find(id="timeline-svg") and not doc.find(id="profile") and not doc.find("input", type="radio")
    assert len(doc.by_id("graph-svg").find("g", cls="node")) == 4
    assert "profile" not in data_block(doc)
    assert len(layer_rows(doc)) == len(report.rows) == 4
