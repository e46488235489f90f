"""aten activations and softmax vs torch (each case on its own; defaults are 'absent' cases)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    return {
        "relu": lambda x: torch.relu(x),
        "relu_=inplace": nn.ReLU(inplace=True),
        "relu6": nn.ReLU6(),
        "hardtanh=absent": nn.Hardtanh(),
        "hardtanh=-2,3": nn.Hardtanh(-2.0, 3.0),
        "gelu=none": nn.GELU(),
        "gelu=tanh": nn.GELU(approximate="tanh"),
        "silu": nn.SiLU(),
        "hardswish": nn.Hardswish(),
        "hardsigmoid": nn.Hardsigmoid(),
        "leaky_relu=absent": nn.LeakyReLU(),
        "leaky_relu=0.2": nn.LeakyReLU(0.2),
        "elu=absent": nn.ELU(),
        "elu=0.5": nn.ELU(0.5),
        "selu": nn.SELU(),
        "celu=1.5": nn.CELU(1.5),
        "sigmoid": nn.Sigmoid(),
        "tanh": nn.Tanh(),
        "softplus=absent": nn.Softplus(),
        "softplus=beta2,th1": nn.Softplus(beta=2.0, threshold=1.0),
        "mish": nn.Mish(),
        "prelu=1": nn.PReLU(),
        "prelu=per-channel": nn.PReLU(4, init=0.1),
        "log_sigmoid": nn.LogSigmoid(),
        "threshold": nn.Threshold(0.1, -3.0),
        "glu=absent": nn.GLU(),
        "glu=dim1": nn.GLU(dim=1),
        "clamp=both": lambda x: torch.clamp(x, -0.5, 0.7),
        "clamp=min-only": lambda x: torch.clamp(x, min=-0.5),
        "clamp_min": lambda x: x.clamp_min(0.1),
        "clamp_max": lambda x: x.clamp_max(0.1),
        "softmax=dim1": nn.Softmax(dim=1),
        "softmax=dim-1": lambda x: F.softmax(x, dim=-1),
        "log_softmax": nn.LogSoftmax(dim=-1),
        "softmax=dtype": lambda x: F.softmax(x.half(), dim=-1, dtype=torch.float32),
    }


@pytest.mark.parametrize("case", list(_cases().keys()) if __import__("importlib").util.find_spec("torch") else [])
def test_activation(case: str) -> None:
    import torch

    torch.manual_seed(0)
    check(_cases()[case], torch.randn(2, 4, 3, 6) * 3)
