"""In-place variants (``aten::relu_`` …): registered as kinds of their own, checked here one by one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch

#: Tensor methods called on a clone: ``x.clone().<name>(*args)``.
_METHODS: dict[str, tuple[Any, ...]] = {
    "abs_": (), "acos_": (), "asin_": (), "atan_": (), "ceil_": (), "cos_": (), "cosh_": (),
    "erf_": (), "floor_": (), "log_": (), "neg_": (), "negative_": (), "reciprocal_": (),
    "round_": (), "rsqrt_": (), "sigmoid_": (), "sign_": (), "sin_": (), "sinh_": (), "sqrt_": (),
    "square_": (), "tan_": (), "tanh_": (), "relu_": (), "add_": (1.5,), "sub_": (0.5,),
    "mul_": (2.0,), "div_": (4.0,), "pow_": (2,), "clamp_": (-0.5, 0.5), "clip_": (-0.5, 0.5),
    "clamp_min_": (0.1,), "clamp_max_": (0.1,), "unsqueeze_": (0,), "squeeze_": (),
    "exp_": (), "eq_": (0.5,), "ne_": (0.5,), "lt_": (0.0,), "le_": (0.0,), "gt_": (0.0,),
    "ge_": (0.0,), "greater_": (0.1,), "less_": (0.1,), "divide_": (3.0,), "true_divide_": (3.0,),
    "multiply_": (-2.0,), "floor_divide_": (0.5,), "remainder_": (0.7,), "fmod_": (0.7,),
    "cumsum_": (2,), "tril_": (), "triu_": (1,),
}

#: torch.nn.functional activations with inplace=True.
_FUNCTIONAL = ("relu6", "hardtanh", "elu", "selu", "celu", "leaky_relu", "silu", "hardswish",
               "hardsigmoid", "mish", "threshold", "dropout", "alpha_dropout", "feature_alpha_dropout")


def _positive(name: str) -> bool:
    return name in ("acos_", "asin_", "log_", "rsqrt_", "sqrt_", "reciprocal_")


@pytest.mark.parametrize("name", list(_METHODS))
def test_inplace_method(name: str) -> None:
    import torch

    torch.manual_seed(11)
    x = torch.rand(2, 1, 3) * 0.9 + 0.05 if _positive(name) else torch.randn(2, 1, 3)
    args = _METHODS[name]
    check(lambda t: getattr(t.clone(), name)(*args), x)


@pytest.mark.parametrize("name", list(_FUNCTIONAL) if HAVE_TORCH else [])
def test_inplace_functional(name: str) -> None:
    import torch
    import torch.nn.functional as F  # noqa: N812

    fn = getattr(F, name)
    extra: dict[str, Any] = {"training": False} if "dropout" in name else {}
    args = (0.1, 20.0) if name == "threshold" else ()
    torch.manual_seed(12)
    check(lambda t: fn(t.clone(), *args, inplace=True, **extra), torch.randn(2, 4, 5) * 3)
