"""prim:: kinds and conversion-time scalar code (sizes, NumToTensor, Int/Float, numel, dim, len,
tuples and lists, int and bool arithmetic): folded while converting, compared with torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _traced() -> dict[str, Any]:
    import torch

    return {
        "size=view": lambda x: x.view(x.size(0), -1),
        "size=negative-dim": lambda x: x.reshape(x.size(-1), -1),
        "shape-unpack": lambda x: (lambda b, c, h: x.reshape(b * c, h))(*x.shape),
        "numel": lambda x: x.reshape(-1)[: x.numel() // 2],
        "dim": lambda x: x * x.dim(),
        "num-to-tensor": lambda x: x / torch.tensor(x.size(1)),
        "int-cast": lambda x: x[:, : int(x.size(1) / 2)],
        "float-cast": lambda x: x + float(x.size(2)),
        "list-unpack=chunk": lambda x: (lambda a, b: a - b)(*torch.chunk(x, 2, dim=1)),
        "list-unpack=unbind": lambda x: (lambda *t: t[0] + t[-1])(*x.unbind(2)),
        "getitem=split": lambda x: x.split(1, dim=1)[2] * 2,
        "tuple-outputs": lambda x: (x + 1, x.size(0) * x),
    }


@pytest.mark.parametrize("case", list(_traced()) if HAVE_TORCH else [])
def test_prim_traced(case: str) -> None:
    import torch

    torch.manual_seed(3)
    g = check(_traced()[case], torch.randn(2, 4, 3))
    # shape code folds: no op in the graph computes on sizes
    assert not {"Shape", "Size"} & set(g.op_counts())


@pytest.mark.parametrize("module", ["ShapeCode", "BoolShapeLogic", "TupleOutputs"])
def test_prim_scripted(module: str) -> None:
    import torch

    from . import _scripted

    check(getattr(_scripted, module)(), torch.randn(2, 3, 4, 4), mode="script")


def test_shape_arithmetic_folds() -> None:
    """Sizes, NumToTensor and int arithmetic become constants: only real tensor ops remain."""
    import torch

    def fn(x: Any) -> Any:
        b, c = x.shape[0], x.shape[1]
        return x.reshape(b * 2, (c // 2) * x.size(2))

    g = check(fn, torch.randn(4, 6, 5))
    assert g.op_counts() == {"Reshape": 1}


def test_scripted_shape_code() -> None:
    """prim::ListUnpack of a size list, TupleConstruct/Unpack, numel, floordiv, __getitem__, len,
    dtype — all resolved while converting; only tensor ops remain."""
    import torch

    from ._scripted import ShapeCode

    g = check(ShapeCode(), torch.randn(2, 3, 4, 5), mode="script")
    assert "Reshape" in g.op_counts()
