"""The TorchScript mapping table: every family module imported, every kind a real torch op,
the count, the CLI listing, and how unsupported ops are reported."""

from __future__ import annotations

import json
import pkgutil
from typing import Any

import pytest

import opbridge.mappers.torchscript as ts_pkg
from opbridge.cli import main
from opbridge.errors import UnsupportedOpError
from opbridge.mappers import DEFAULT_MAPPINGS
from opbridge.parsers.origin import Framework
from tests.conftest import requires_torch

from .helpers import check

#: prim node kinds that have no operator schema (the JIT builds them specially).
_PRIM_NODES = {"prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::ListUnpack",
               "prim::TupleConstruct", "prim::If", "prim::Loop"}


def _kinds() -> list[str]:
    return [e.key_text for e in DEFAULT_MAPPINGS.entries(Framework.TORCHSCRIPT)]


def test_every_family_module_is_listed() -> None:
    modules = {m.name for m in pkgutil.iter_modules(ts_pkg.__path__) if m.name != "common"}
    assert modules and modules <= set(ts_pkg.FAMILIES), sorted(modules - set(ts_pkg.FAMILIES))


def test_at_least_120_kinds_are_mapped(capsys: Any) -> None:
    assert main(["ops", "--framework", "torchscript", "--format", "json"]) == 0
    listed = {f"{r['domain']}::{r['op_type']}" for r in json.loads(capsys.readouterr().out)}
    assert listed == set(_kinds())
    assert len(listed) >= 120


@requires_torch
def test_every_mapped_kind_is_a_torch_operator() -> None:
    import torch

    schemas = {s.name for s in torch._C._jit_get_all_schemas()}
    # opbridge:: kinds are added by the parser's functionalisation, not by torch; torchvision::
    # kinds by torchvision's C++ extension, which the CPU torch wheel may not load (then
    # tests/torchscript/test_sample.py declares the schema it maps)
    # (roi_align: an op of the extension that tests/torchscript/_torchvision.py does not declare)
    vision = hasattr(torch.ops.torchvision, "roi_align")
    unknown = sorted(k for k in _kinds()
                     if k not in schemas and k not in _PRIM_NODES and not k.startswith("opbridge::")
                     and (vision or not k.startswith("torchvision::")))
    assert not unknown, f"mapped kinds torch does not have: {unknown}"


@requires_torch
def test_unsupported_ops_are_listed_together() -> None:
    import torch

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x > 0).float().sum() + torch.kthvalue(x, 2).values.sum()

    with pytest.raises(UnsupportedOpError, match=r"(?s)2 unsupported op types.*aten::nonzero.*"
                       r"aten::kthvalue.*@opbridge.mapping\(opbridge.Framework.TORCHSCRIPT"):
        check(fn, torch.randn(3, 4))


@requires_torch
def test_run_time_shape_value_is_refused_naming_the_node() -> None:
    import torch

    from ._scripted import DataDependentReshape

    # aten::Int of a run-time tensor is a run-time 0-d int; the reshape that needs it is refused
    with pytest.raises(UnsupportedOpError, match=r"node 'reshape[^']*' \(reshape\).*computed at run time"):
        check(DataDependentReshape(), torch.randn(4, 3), mode="script")
