"""The TorchScript-json parser on hand-written files: needs no torch, refuses malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from opbridge.errors import ModelFormatError
from opbridge.parsers.torchscript_json import parse_torchscript_json

_HEAD = {"format": "opbridge.torchscript-json", "version": 1}


def test_hand_written_file_parses_without_weights(tmp_path: Path) -> None:
    doc = {**_HEAD, "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
           "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3]}],
           "nodes": [
               {"name": "c", "kind": "prim::Constant", "inputs": [], "outputs": ["n"], "types": ["float"],
                "value": {"float": "-inf"}},
               {"name": "l", "kind": "prim::ListConstruct", "inputs": ["n", "n"], "outputs": ["l"],
                "types": ["List[float]"]},
               {"name": "act", "kind": "aten::relu", "inputs": ["x"], "outputs": ["y"], "types": ["Tensor"],
                "scope": "block.act", "source": "m.py:3"},
           ]}
    path = tmp_path / "m.ts.json"
    path.write_text(json.dumps(doc))
    g = parse_torchscript_json(path)
    relu = g.nodes[-1]
    assert (relu.domain, relu.op_type, relu.location) == ("aten", "relu", "m.py:3")
    assert relu.attrs["scope"] == "block.act" and relu.attrs["args"] == [0]
    assert np.isneginf(g.nodes[0].attrs["value"])
    assert g.nodes[1].attrs["args"] == [0, 1] and g.nodes[1].attrs["consts"][0] == float("-inf")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('{"format": "opbridge.torchscript-json", "version": 1, "nodes": [', r"not valid JSON"),
        ("[]", r"not a TorchScript-json file"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "nodes": [7]}', r"node 0 needs a 'kind'"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "nodes": '
         '[{"kind": "aten::relu", "inputs": [1]}]}', r"lists of value names"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "nodes": '
         '[{"kind": "prim::Constant", "outputs": ["a"], "value": {"what": 1}}]}', r"not a TorchScript-json value"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "weights": "../x.safetensors", "nodes": []}',
         r"must be a file name beside the JSON"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "inputs": [{"name": "x", "shape": [-1]}],'
         ' "nodes": []}', r"shape \[-1\] is not a list of sizes"),
        ('{"format": "opbridge.torchscript-json", "version": 1, "nodes": ' + "[" * 5000 + "]" * 5000 + "}",
         r"nested too deeply|not valid JSON|'nodes'"),
    ],
    ids=["truncated", "not-an-object", "node-not-object", "input-not-name", "bad-constant",
         "weights-path-escape", "negative-dim", "deep-nesting"],
)
def test_parser_refuses_malformed_json(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "bad.ts.json"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match=pattern):
        parse_torchscript_json(path)
