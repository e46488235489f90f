"""A damaged or unsupported TorchScript-json file, converted through the CLI: exit code 2, one
``error:`` line naming the file or the node and its op, a ``hint:`` line saying what to do, and
no traceback."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import requires_torch

pytestmark = requires_torch

Doc = dict[str, Any]


def _node(doc: Doc, kind: str) -> Doc:
    return next(n for n in doc["nodes"] if n["kind"] == kind)


def _const(doc: Doc, ts_type: str) -> Doc:
    return next(n for n in doc["nodes"] if n["kind"] == "prim::Constant" and n.get("types") == [ts_type])


def _set(path: list[Any], value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _set_kind(doc: Doc) -> None:
    _node(doc, "aten::softmax")["kind"] = "aten::frobnicate"


def _missing_blob(doc: Doc) -> None:
    next(n for n in doc["nodes"] if isinstance(n.get("value"), dict))["value"] = {"tensor": "no.such.key"}


def _int_as_str(doc: Doc) -> None:
    _const(doc, "int")["value"] = "one"


def _ints_as_float(doc: Doc) -> None:
    _const(doc, "List[int]")["value"] = [1.5, 2]


def _arg_dropped(doc: Doc) -> None:
    node = _node(doc, "aten::softmax")
    node["inputs"] = node["inputs"][:1]


def _producer_list(doc: Doc) -> None:
    doc["producer"] = ["torch"]


class _Text:
    """An edit of the JSON text itself (the other edits change the parsed document)."""

    def __init__(self, fn: Callable[[str], str]) -> None:
        self.fn = fn


#: case -> (edit, regex of the error)
CASES: dict[str, tuple[Any, str]] = {
    "json=truncated": (_Text(lambda text: text[: len(text) // 2]), r"'.*m\.ts\.json': not valid JSON"),
    "json=empty": (_Text(lambda text: ""), r"not valid JSON"),
    "json=not-an-object": (_Text(lambda text: "[1, 2]"), r"not a TorchScript-json file"),
    "version=99": (_set(["version"], 99), r"TorchScript-json version 99 is unknown"),
    "version=string": (_set(["version"], "1"), r"TorchScript-json version '1' is unknown"),
    "op=unknown-aten": (_set_kind, r"aten::frobnicate: node\(s\) 'softmax_\w+'; no mapping registered"),
    "blob=missing-key": (_missing_blob, r"node '[^']+' \(prim::Constant\): tensor key 'no\.such\.key' is missing"),
    "attr=int-is-str": (_int_as_str, r"node '[^']+' \(prim::Constant\): value \"one\" is not of its declared "
                                     r"type 'int'"),
    "attr=ints-are-floats": (_ints_as_float, r"node '[^']+' \(prim::Constant\): value \[1\.5, 2\] is not of "
                                             r"its declared type 'List\[int\]'"),
    "attr=argument-dropped": (_arg_dropped, r"node 'softmax_\w+' \(softmax\): argument 1 is missing"),
    "producer=list": (_producer_list, r"'producer' must be an object"),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from opbridge.export.torchscript import export_torchscript

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.conv(x).flatten(1), 1)

    torch.manual_seed(0)
    return export_torchscript(Net().eval(), (torch.randn(1, 2, 5, 5),),
                              tmp_path_factory.mktemp("ts") / "m.ts.json")


def _convert(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opbridge", "convert", str(path), "-o",
                           str(path.with_name("out.obir"))], capture_output=True, text=True, timeout=300)


def _assert_user_error(r: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: [torchscript]"), r.stderr
    assert re.search(pattern, r.stderr), r.stderr
    assert sum(line.startswith("hint: ") for line in lines) == 1, r.stderr  # one hint, at the end


@pytest.mark.parametrize("case", list(CASES))
def test_cli_reports_a_damaged_file_as_a_user_error(exported: Path, tmp_path: Path, case: str) -> None:
    edit, pattern = CASES[case]
    text = exported.read_text()
    shutil.copy(exported.with_suffix(".safetensors"), tmp_path / "m.ts.safetensors")
    if isinstance(edit, _Text):
        out = edit.fn(text)
    else:
        doc = json.loads(text)
        edit(doc)
        out = json.dumps(doc)
    (tmp_path / "m.ts.json").write_text(out)
    _assert_user_error(_convert(tmp_path / "m.ts.json"), pattern)


@pytest.mark.parametrize("damage", ["absent", "truncated"])
def test_cli_reports_a_missing_or_truncated_weights_file(exported: Path, tmp_path: Path, damage: str) -> None:
    shutil.copy(exported, tmp_path / "m.ts.json")
    if damage == "truncated":
        (tmp_path / "m.ts.safetensors").write_bytes(exported.with_suffix(".safetensors").read_bytes()[:40])
    pattern = (r"node '[^']+' \(prim::Constant\): the weights file .* does not exist" if damage == "absent"
               else r"node '[^']+' \(prim::Constant\): .* is not a valid safetensors file")
    _assert_user_error(_convert(tmp_path / "m.ts.json"), pattern)


def _handmade(kind: str, consts: list[tuple[str, Any]], out_type: str) -> Doc:
    """A document of one ``kind`` node whose arguments are the constants ``(type, value)``,
    added to the input ``x`` (a file no exporter writes: its arguments are the damage)."""
    nodes: list[Doc] = [{"name": f"c{i}", "kind": "prim::Constant", "inputs": [], "outputs": [f"c{i}"],
                         "types": [t], "value": v} for i, (t, v) in enumerate(consts)]
    nodes.append({"name": "made", "kind": kind, "inputs": [f"c{i}" for i in range(len(consts))],
                  "outputs": ["m"], "types": [out_type]})
    nodes.append({"name": "one", "kind": "prim::Constant", "inputs": [], "outputs": ["one"],
                  "types": ["int"], "value": 1})
    nodes.append({"name": "sum", "kind": "aten::add", "inputs": ["x", "m", "one"], "outputs": ["y"],
                  "types": ["Tensor"]})
    return {"format": "opbridge.torchscript-json", "version": 1, "name": "handmade",
            "inputs": [{"name": "x", "dtype": "float32", "shape": [3]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": [3]}], "nodes": nodes}


NONES = [("NoneType", None)] * 4

#: case -> (document, regex of the error): sizes and ranges that would allocate nonsense
HANDMADE = {
    "zeros=negative-size": (_handmade("aten::zeros", [("List[int]", [-3]), *NONES], "Tensor"),
                            r"node 'made' \(zeros\) attribute 'size': size: shape \(-3,\) has a negative dim"),
    "zeros=absurd-size": (_handmade("aten::zeros", [("List[int]", [1 << 30, 1 << 30]), *NONES], "Tensor"),
                          r"node 'made' \(zeros\) attribute 'size': .* above the limit"),
    "arange=step-0": (_handmade("aten::arange", [("int", 0), ("int", 3), ("int", 0), *NONES], "Tensor"),
                      r"node 'made' \(arange\): arange\(0, 3, 0\): numbers with a non-zero step"),
    "arange=absurd": (_handmade("aten::arange", [("int", 0), ("int", 1 << 40), ("int", 1), *NONES], "Tensor"),
                      r"node 'made' \(arange\): .* has no finite size of at most"),
}


@pytest.mark.parametrize("case", list(HANDMADE))
def test_cli_refuses_absurd_sizes_before_allocating(tmp_path: Path, case: str) -> None:
    doc, pattern = HANDMADE[case]
    (tmp_path / "m.ts.json").write_text(json.dumps(doc))
    _assert_user_error(_convert(tmp_path / "m.ts.json"), pattern)


def _lstm_modules() -> dict[str, tuple[Any, tuple[Any, ...], str]]:
    """name -> (module, example inputs, export mode): an LSTM cell called with its state list,
    and an LSTM layer given an initial state."""
    import torch

    class Cell(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = torch.nn.LSTMCell(3, 4)

        def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            k = self.cell
            return torch.lstm_cell(x, [h, c], k.weight_ih, k.weight_hh, k.bias_ih, k.bias_hh)

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 4)

        def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
            return self.lstm(x, (h, c))[0]

    torch.manual_seed(0)
    return {"lstm_cell": (Cell(), (torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)), "script"),
            "lstm": (Layer(), (torch.randn(5, 2, 3), torch.randn(1, 2, 4), torch.randn(1, 2, 4)), "trace")}


@pytest.mark.parametrize("keep", [1, 3], ids=["hx=1-tensor", "hx=3-tensors"])
@pytest.mark.parametrize("op", ["lstm_cell", "lstm"])
def test_cli_an_lstm_state_of_the_wrong_length_names_the_node(tmp_path: Path, op: str, keep: int) -> None:
    from opbridge.export.torchscript import export_torchscript

    module, inputs, mode = _lstm_modules()[op]
    path = export_torchscript(module.eval(), inputs, tmp_path / "m.ts.json", mode=mode)
    doc = json.loads(path.read_text())
    node = _node(doc, f"aten::{op}")
    state = next(n for n in doc["nodes"] if n["outputs"] == [node["inputs"][1]])
    assert state["kind"] in ("prim::ListConstruct", "prim::TupleConstruct") and len(state["inputs"]) == 2
    state["inputs"] = (state["inputs"] * 2)[:keep]
    path.write_text(json.dumps(doc))
    r = _convert(path)
    _assert_user_error(r, rf"node '{node['name']}' \({op}\): argument 'hx' holds {keep} tensor\(s\); "
                          r"an LSTM takes two, \(h, c\)")
    assert "hint: torch gives an LSTM its state as the list [h, c]" in r.stderr and "re-export" in r.stderr
