"""aten arithmetic (tensor and Scalar overloads, broadcasting), comparisons, where, unary math."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _binary() -> dict[str, Any]:
    import torch

    return {
        "add=tensor": lambda x, y: x + y,
        "add=scalar": lambda x, y: x + 2.5,
        "add=alpha": lambda x, y: torch.add(x, y, alpha=0.5),
        "add=broadcast-row": lambda x, y: x + y[0, 0],
        "add_=inplace": lambda x, y: x.clone().add_(y),
        "sub=tensor": lambda x, y: x - y,
        "sub=alpha": lambda x, y: torch.sub(x, y, alpha=3),
        "rsub=scalar": lambda x, y: 1.0 - x,
        "mul=tensor": lambda x, y: x * y,
        "mul=scalar": lambda x, y: x * 0.25,
        "mul=int-scalar": lambda x, y: x * 3,
        "div=tensor": lambda x, y: x / (y.abs() + 0.5),
        "div=scalar": lambda x, y: x / 4,
        "div=floor": lambda x, y: torch.div(x, y.abs() + 0.5, rounding_mode="floor"),
        "div=trunc": lambda x, y: torch.div(x, y.abs() + 0.5, rounding_mode="trunc"),
        "floor_divide": lambda x, y: torch.floor_divide(x, 0.7),
        "remainder": lambda x, y: torch.remainder(x, 0.7),
        "fmod": lambda x, y: torch.fmod(x, 0.7),
        "pow=2": lambda x, y: x ** 2,
        "pow=tensor": lambda x, y: x.abs() ** y,
        "pow=0.5": lambda x, y: x.abs().pow(0.5),
        "maximum": lambda x, y: torch.maximum(x, y),
        "minimum": lambda x, y: torch.minimum(x, y),
        "max=binary": lambda x, y: torch.max(x, y),
        "eq": lambda x, y: x.round() == y.round(),
        "ne": lambda x, y: x.round() != y.round(),
        "lt=scalar": lambda x, y: x < 0.1,
        "le": lambda x, y: x <= y,
        "gt": lambda x, y: x > y,
        "ge=scalar": lambda x, y: x >= 0,
        "logical_and": lambda x, y: torch.logical_and(x > 0, y > 0),
        "logical_or": lambda x, y: torch.logical_or(x > 0, y > 0),
        "logical_xor": lambda x, y: torch.logical_xor(x > 0, y > 0),
        "logical_not": lambda x, y: torch.logical_not(x > 0),
        "where=tensors": lambda x, y: torch.where(x > y, x, y),
        "where=scalar": lambda x, y: torch.where(x > 0, x, 0.0),
        "masked_fill": lambda x, y: x.masked_fill(y > 0, -1.0),
        "masked_fill=-inf": lambda x, y: x.masked_fill(y > 0, float("-inf")),
        "int-tensor+float": lambda x, y: (x > 0).long() * 1.5 + y,
    }


def _unary() -> dict[str, Any]:
    import torch

    return {
        "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 1),
        "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
        "reciprocal": lambda x: torch.reciprocal(x.abs() + 0.1), "floor": torch.floor,
        "ceil": torch.ceil, "round": torch.round, "sign": torch.sign, "sin": torch.sin,
        "cos": torch.cos, "tan": lambda x: torch.tan(x * 0.3), "erf": torch.erf,
        "square": torch.square, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
        "asin": lambda x: torch.asin(x.clamp(-1, 1)), "acos": lambda x: torch.acos(x.clamp(-1, 1)),
        "exp_=inplace": lambda x: x.clone().exp_(),
    }


@pytest.mark.parametrize("case", list(_binary()) if HAVE_TORCH else [])
def test_binary(case: str) -> None:
    import torch

    torch.manual_seed(1)
    check(_binary()[case], torch.randn(2, 3, 4) * 2, torch.randn(2, 3, 4))


@pytest.mark.parametrize("case", list(_unary()) if HAVE_TORCH else [])
def test_unary(case: str) -> None:
    import torch

    torch.manual_seed(2)
    check(_unary()[case], torch.randn(3, 5) * 2)


#: ``&``, ``|``, ``^`` and torch.bitwise_* on tensors: logical on bools, bitwise on integers, a
#: bool operand promoted to the integer's dtype, a Python int taking the tensor's dtype.
def _bool_operators() -> dict[str, Any]:
    import torch

    return {
        "and-operator": lambda x, y: (x > 0) & (y > 0),
        "or-operator": lambda x, y: (x > 0) | (y > 0),
        "bitwise_and": lambda x, y: torch.bitwise_and(x > 0, y > 0),
        "bitwise_or": lambda x, y: torch.bitwise_or(x > 0, y > 0),
        "xor-operator": lambda x, y: (x > 0) ^ (y > 0),
        "int-and": lambda x, y: (x * 10).to(torch.int32) & (y * 10).to(torch.int32),
        "int-or-scalar": lambda x, y: (x * 10).to(torch.int64) | 5,
        "int-xor": lambda x, y: torch.bitwise_xor((x * 10).to(torch.int64), (y * 10).to(torch.int64)),
        "bool-and-int": lambda x, y: (x > 0) & (y * 10).to(torch.int32),
    }


@pytest.mark.parametrize("case", list(_bool_operators()) if HAVE_TORCH else [])
def test_bool_tensor_operators(case: str) -> None:
    import torch

    torch.manual_seed(1)
    check(_bool_operators()[case], torch.randn(2, 3, 4), torch.randn(2, 3, 4))


@requires_torch
def test_scripted_mask_and_keeps_int_and_for_shape_code() -> None:
    """In a scripted module ``&`` on masks is a tensor op while ``&`` on bools computed from
    shapes stays conversion-time arithmetic."""
    import torch

    class Masks(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            both = (x.dim() == 3) & (y.size(0) == 2)
            m = (x > 0) & (y > 0)
            return m if both else ~m

    torch.manual_seed(3)
    check(Masks(), torch.randn(2, 3, 4), torch.randn(2, 3, 4), mode="script")
