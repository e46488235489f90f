"""aten ops overloaded on lists (``aten::slice.t``, ``aten::add.t``, ``aten::mul.left_t`` /
``right_``) and ``aten::list`` in scripted modules, against torch: a list known while converting
(the sizes of a tensor whose shape torch's own passes do not fold, here after a pad) is sliced,
concatenated, copied and repeated as TorchScript does, not taken for a tensor (a tensor slice
of ``shape[-1:]`` read its start as a dim; ``[-1] + shape`` was added element by element)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch


def _scripted(kind: str) -> Any:
    import torch
    import torch.nn.functional as F

    class Slice(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 2])
            return y.reshape(y.shape[::-1]) * 2.0

    class SliceStepAndConcat(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 2])
            return y.reshape([-1] + y.shape[-1:0:-2])

    class Copy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 2])
            return y.reshape(list(y.shape[1:]) + [-1])

    class RepeatLeft(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 1])
            return y.reshape(y.shape[:1] * 2 + [-1])

    class RepeatRight(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 1])
            return y.reshape(2 * y.shape[1:2] + [-1])

    mods = {"slice[::-1]": Slice, "slice[-1:0:-2],add": SliceStepAndConcat,
            "list": Copy, "mul.left_t": RepeatLeft, "mul.right_": RepeatRight}
    return torch.jit.script(mods[kind]())


@pytest.mark.parametrize("kind", ["slice[::-1]", "slice[-1:0:-2],add", "list", "mul.left_t", "mul.right_"])
def test_list_overloads_match_torch(kind: str) -> None:
    import torch

    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(4))
    g = check(_scripted(kind), x, mode="script")
    assert [n.op for n in g.nodes if n.op != "Mul"] == ["Pad", "Reshape"]  # the lists are constants


def test_slice_of_a_tensor_list_is_refused_naming_the_node(tmp_path) -> None:
    """A list of tensors has no value while converting: its slice is refused with the node
    named and the way round it (trace the model), not read as a tensor slice."""
    import json

    import opbridge as ob

    doc = {
        "format": "opbridge.torchscript-json", "version": 1, "name": "Net",
        "producer": {"torch": "2.13.0", "opbridge": "0.1.0", "mode": "script"},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3]}],
        "nodes": [
            {"name": "const_1", "kind": "prim::Constant", "inputs": [], "outputs": ["one"],
             "types": ["int"], "value": 1},
            {"name": "const_0", "kind": "prim::Constant", "inputs": [], "outputs": ["zero"],
             "types": ["int"], "value": 0},
            {"name": "const_none", "kind": "prim::Constant", "inputs": [], "outputs": ["none"],
             "types": ["NoneType"], "value": None},
            {"name": "xs", "kind": "prim::ListConstruct", "inputs": ["x", "x"], "outputs": ["xs"],
             "types": ["List[Tensor]"]},
            {"name": "tail", "kind": "aten::slice", "inputs": ["xs", "one", "none", "one"],
             "outputs": ["t"], "types": ["List[Tensor]"]},
            {"name": "cat", "kind": "aten::cat", "inputs": ["t", "zero"], "outputs": ["y"],
             "types": ["Tensor"]},
        ],
    }
    path = tmp_path / "m.ts.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ob.UnsupportedOpError, match=r"'tail' \(slice\).*List\[Tensor\]") as err:
        ob.convert(str(path))
    assert "mode='trace'" in err.value.hint


def test_list_changed_in_place_is_refused() -> None:
    """``xs += [...]`` (aten::add_ on a list) changes the list every reader of it sees: refused,
    as aten::append is, not computed as a new list (or, before, added element by element)."""
    import torch
    import torch.nn.functional as F

    import opbridge as ob

    class Extend(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(x, [1, 2])
            s = list(y.shape[1:])
            s += [-1]
            return y.reshape(s)

    with pytest.raises(ob.UnsupportedOpError, match=r"\(add_\): changes a list in place") as err:
        check(torch.jit.script(Extend()), torch.randn(2, 3, 4), mode="script")
    assert "one expression" in err.value.hint
