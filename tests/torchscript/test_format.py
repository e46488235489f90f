"""The TorchScript-json file: what the exporter writes and what the parser refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opbridge.cli import main
from opbridge.errors import ModelFormatError
from opbridge.parsers.torchscript_json import parse_torchscript_json
from tests.conftest import requires_torch

pytestmark = requires_torch


def _tiny() -> Any:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv2 = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(self.conv2(x)))

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer1 = nn.Sequential(Block())
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.layer1(x)
            return self.fc(y.mean(dim=(2, 3))), y

    torch.manual_seed(0)
    return Tiny().eval(), torch.randn(1, 3, 6, 6)


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_export_writes_documented_fields(export: Any, mode: str) -> None:
    model, x = _tiny()
    path = export(model, (x,), mode=mode)
    doc = json.loads(path.read_text())
    assert doc["format"] == "opbridge.torchscript-json" and doc["version"] == 1
    assert doc["weights"] == "m.ts.safetensors" and (path.parent / "m.ts.safetensors").is_file()
    assert doc["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 3, 6, 6]}]
    assert [o["shape"] for o in doc["outputs"]] == [[1, 2], [1, 4, 6, 6]]
    by_name = {n["name"]: n for n in doc["nodes"]}
    # the module path names the node, so reports can say where a layer is
    assert by_name["layer1.0.conv2"]["kind"] in ("aten::_convolution", "aten::conv2d")
    assert by_name["layer1.0.bn"]["kind"] == "aten::batch_norm"
    assert by_name["fc"]["kind"] == "aten::linear"
    g = parse_torchscript_json(path)
    w = g.tensors["self.fc.weight"]
    np.testing.assert_array_equal(w, model.fc.weight.detach().numpy())


def test_constants_round_trip(export: Any) -> None:
    import torch

    class Consts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.tensor([2.0], dtype=torch.bfloat16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.pad(x, [1, 2], value=float("-inf"))
            return (torch.clamp(y, min=-1.5).to(torch.bfloat16) * self.scale).float()

    path = export(Consts(), (torch.randn(2, 3),))
    g = parse_torchscript_json(path)
    values = [n.attrs["value"] for n in g.nodes if n.op_type == "Constant"]
    plain = [v for v in values if not isinstance(v, np.ndarray)]
    assert [1, 2] in plain and -1.5 in plain
    assert any(isinstance(v, float) and v == float("-inf") for v in plain)
    bf = [v for v in values if isinstance(v, np.ndarray) and v.dtype.name == "bfloat16"]
    assert len(bf) == 1 and float(bf[0][0]) == 2.0


def _mutate(path: Path, fn: Any) -> Path:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))
    return path


def _first(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["kind"] == kind)


def _dangle(doc: dict[str, Any]) -> None:
    _first(doc, "aten::linear")["inputs"][0] = "no_such_value"


def _missing_key(doc: dict[str, Any]) -> None:
    node = next(n for n in doc["nodes"] if isinstance(n.get("value"), dict))
    node["value"] = {"tensor": "not.in.the.file"}


@pytest.mark.parametrize(
    ("mutation", "pattern"),
    [
        (lambda d: d.update(version=99), r"version 99 is unknown"),
        (lambda d: d.pop("version"), r"version None is unknown"),
        (lambda d: d.update(format="something-else"), r"not a TorchScript-json file"),
        (_dangle, r"node 'fc' \(aten::linear\): input 'no_such_value' is not defined"),
        (_missing_key, r"node 'const_[^']+' \(prim::Constant\): tensor key 'not.in.the.file' is missing"),
        (lambda d: d["outputs"][0].update(name="ghost"), r"graph output 'ghost' is not defined"),
        (lambda d: d["inputs"][0].update(dtype="complex64"), r"dtype 'complex64'"),
    ],
    ids=["version=99", "version=absent", "format=other", "dangling-input", "missing-tensor-key",
         "dangling-output", "dtype=unknown"],
)
def test_parser_refuses(export: Any, mutation: Any, pattern: str) -> None:
    model, x = _tiny()
    path = _mutate(export(model, (x,)), mutation)
    with pytest.raises(ModelFormatError, match=pattern):
        parse_torchscript_json(path)


_REEXPORT_HINT = ("the JSON was edited, truncated or written by another tool: export the model again "
                  "(opbridge export-torchscript, or opbridge.export_torchscript); docs/torchscript-json.md "
                  "describes the format")


@pytest.mark.parametrize(
    ("mutation", "pattern"),
    [
        (lambda d: d.update(nodes={}), r"'nodes' must be a list"),
        (lambda d: d["nodes"][0].pop("kind"), r"node 0 needs a 'kind'"),
        (lambda d: d["nodes"][0].update(attrs=[]), r"'attrs' must be an object"),
        (lambda d: d["nodes"][0].update(inputs="x"), r"'inputs' and 'outputs' must be lists of value names"),
        (lambda d: d.update(inputs=d["inputs"] * 2), r"graph input '[^']+' is declared twice"),
        (lambda d: d.update(weights="../w.bin"), r"'weights' must be a file name beside the JSON"),
        (lambda d: d.update(inputs={}), r"'inputs' must be a list"),
    ],
    ids=["nodes=object", "kind=absent", "attrs=list", "inputs=string", "input-twice", "weights=path",
         "graph-inputs=object"],
)
def test_a_damaged_structure_says_to_export_again(export: Any, mutation: Any, pattern: str) -> None:
    """Every refusal of a structure the exporter never writes carries the same hint."""
    model, x = _tiny()
    path = _mutate(export(model, (x,)), mutation)
    with pytest.raises(ModelFormatError, match=pattern) as err:
        parse_torchscript_json(path)
    assert err.value.hint == _REEXPORT_HINT


def test_parser_refuses_missing_weights_file(export: Any) -> None:
    model, x = _tiny()
    path = export(model, (x,))
    (path.parent / "m.ts.safetensors").unlink()
    with pytest.raises(ModelFormatError, match=r"weights file .* does not exist"):
        parse_torchscript_json(path)


def test_parser_refuses_truncated_weights(export: Any) -> None:
    model, x = _tiny()
    path = export(model, (x,))
    w = path.parent / "m.ts.safetensors"
    w.write_bytes(w.read_bytes()[:40])
    with pytest.raises(ModelFormatError, match=r"not a valid safetensors file"):
        parse_torchscript_json(path)


def test_control_flow_is_written_as_blocks_in_version_2(export: Any) -> None:
    """prim::If gets its two blocks (version 2); a file without blocks stays version 1, which
    older readers read."""
    import torch

    from ._scripted import Branchy

    doc = json.loads(export(Branchy(), (torch.randn(2),), mode="script").read_text())
    assert doc["version"] == 2
    (node,) = [n for n in doc["nodes"] if n["kind"] == "prim::If"]
    assert [len(b["inputs"]) for b in node["blocks"]] == [0, 0]
    assert all(len(b["outputs"]) == len(node["outputs"]) for b in node["blocks"])
    assert all(n["name"].startswith(f"{node['name']}/block") for b in node["blocks"] for n in b["nodes"])
    plain = json.loads(export(torch.nn.ReLU(), (torch.randn(2),), name="plain").read_text())
    assert plain["version"] == 1


def test_block_referencing_an_undefined_value_is_refused(export: Any) -> None:
    import torch

    from ._scripted import Branchy

    path = export(Branchy(), (torch.randn(2),), mode="script")
    doc = json.loads(path.read_text())
    (node,) = [n for n in doc["nodes"] if n["kind"] == "prim::If"]
    node["blocks"][0]["outputs"] = ["nowhere"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"block 0: output 'nowhere' is not defined"):
        parse_torchscript_json(path)


def test_cli_exports_a_saved_module(tmp_path: Path) -> None:
    import torch

    model, x = _tiny()
    pt = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.trace(model, (x,)), str(pt))
    out = tmp_path / "tiny.ts.json"
    rc = main(["export-torchscript", str(pt), "--input-shape", "x=1,3,6,6", "-o", str(out)])
    assert rc == 0
    g = parse_torchscript_json(out)
    assert [(i.name, i.shape) for i in g.inputs] == [("x", (1, 3, 6, 6))]


@pytest.mark.parametrize("arg", ["x=1,a", "x", "=1,2"], ids=["size=not-int", "no-shape", "no-name"])
def test_cli_rejects_bad_input_shape(tmp_path: Path, arg: str, capsys: Any) -> None:
    # the shared --input-shape parser refuses it while the arguments are parsed (argparse's exit)
    with pytest.raises(SystemExit) as stop:
        main(["export-torchscript", str(tmp_path / "m.pt"), "--input-shape", arg,
              "-o", str(tmp_path / "o.ts.json")])
    assert stop.value.code == 2 and "--input-shape" in capsys.readouterr().err


def test_cli_converts_a_ts_json(export: Any, tmp_path: Path) -> None:
    import opbridge as ob

    model, x = _tiny()
    path = export(model, (x,))
    out = tmp_path / "tiny.obir"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    g = ob.load(str(out))
    assert any(n.origin.name == "layer1.0.conv2" for n in g.nodes)



def test_cli_input_dtype(tmp_path: Path) -> None:
    import torch

    emb = torch.nn.Embedding(10, 3).eval()
    pt = tmp_path / "emb.pt"
    torch.jit.save(torch.jit.trace(emb, (torch.tensor([[1, 2]]),)), str(pt))
    out = tmp_path / "emb.ts.json"
    rc = main(["export-torchscript", str(pt), "--input-shape", "tokens=2,4", "--input-dtype",
               "tokens=int64", "-o", str(out)])
    assert rc == 0
    g = parse_torchscript_json(out)
    assert [(i.name, i.dtype, i.shape) for i in g.inputs] == [("tokens", np.dtype(np.int64), (2, 4))]


def test_cli_rejects_unknown_input_dtype(tmp_path: Path, capsys: Any) -> None:
    rc = main(["export-torchscript", str(tmp_path / "m.pt"), "--input-shape", "x=1", "--input-dtype",
               "x=complex64", "-o", str(tmp_path / "o.ts.json")])
    assert rc == 2 and "--input-dtype" in capsys.readouterr().err


@pytest.mark.parametrize("kind, inputs, index", [
    ("aten::select", ["x", "dim", "index"], 3),
    ("aten::select", ["x", "dim", "index"], -4),
    ("aten::select_scatter", ["x", "src", "dim", "index"], 3),
])
def test_select_index_out_of_range_names_the_node(tmp_path: Path, kind: str, inputs: list[str],
                                                  index: int) -> None:
    import opbridge as ob

    # x is [2, 3]: dim 1 has indices -3..2, so 3 and -4 are out of range (as torch says)
    const = [{"name": f"c_{n}", "kind": "prim::Constant", "inputs": [], "outputs": [n], "types": ["int"],
              "value": v} for n, v in (("dim", 1), ("index", index))]
    doc = {"format": "opbridge.torchscript-json", "version": 1, "name": "m",
           "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]},
                      {"name": "src", "dtype": "float32", "shape": [2]}],
           "outputs": [{"name": "y", "dtype": "float32", "shape": None}],
           "nodes": [*const, {"name": "sel", "kind": kind, "inputs": inputs, "outputs": ["y"],
                              "types": ["Tensor"]}]}
    path = tmp_path / "m.ts.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ob.OpbridgeError, match=rf"'sel' \({kind.split('::')[1]}\): index {index} is out of range for dim 1 "
                                               r"of size 3"):
        ob.convert(str(path))


def _failing_modules() -> dict[str, Any]:
    import torch

    class Raises(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyError("boom")

    class Unscriptable(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return sum(v for v in [x, x])  # a generator: TorchScript cannot compile it

    return {"trace": (Raises(), r"tracing the module failed: KeyError: 'boom'"),
            "script": (Unscriptable(), r"scripting the module failed: \w+")}


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_export_reports_a_module_torch_cannot_compile(export: Any, mode: str) -> None:
    """What the module or torch's compiler raises is an error naming the step, not a traceback."""
    import torch

    from opbridge.export.torchscript_graph import TorchExportError

    module, pattern = _failing_modules()[mode]
    with pytest.raises(TorchExportError, match=pattern) as info:
        export(module, (torch.randn(2),), mode=mode)
    assert "mode='" in (info.value.hint or "")


def _returns_twice() -> Any:
    import torch

    class ReturnsTwice(torch.nn.Module):
        """One tensor returned twice, once through a clone (which converts to the tensor
        itself), and a graph input returned as it is, twice."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                  torch.Tensor]:
            y = torch.relu(x) * 2.0
            return y, y, x, y.clone(), x

    return ReturnsTwice().eval()


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_cli_a_tensor_returned_twice_gives_distinct_outputs(tmp_path: Path, mode: str) -> None:
    import torch

    import opbridge as ob

    model = _returns_twice()
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    compiled = torch.jit.trace(model, (x,)) if mode == "trace" else torch.jit.script(model)
    torch.jit.save(compiled, str(tmp_path / "m.pt"))
    ts, obir = tmp_path / "m.ts.json", tmp_path / "m.obir"
    assert main(["export-torchscript", str(tmp_path / "m.pt"), "--input-shape", "x=2,3", "-o", str(ts)]) == 0
    assert main(["convert", str(ts), "-o", str(obir)]) == 0
    g = ob.load(str(obir))
    names = [v.name for v in g.outputs]
    assert len(names) == 5 and len(set(names)) == 5, names
    got = ob.interpret(g, {g.inputs[0].name: x.numpy()})
    with torch.no_grad():
        ref = model(x)
    assert list(got) == names
    for name, r in zip(names, ref):
        np.testing.assert_array_equal(got[name], r.numpy(), err_msg=name)
    prog = ob.compile(g, "bm1684")
    sim = prog.run({g.inputs[0].name: x.numpy()})
    for name, r in zip(names, ref):
        np.testing.assert_array_equal(sim[name], r.numpy(), err_msg=f"simulator {name}")
