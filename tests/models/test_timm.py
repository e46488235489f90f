"""Image models of ``timm`` (pretrained=False, num_classes=10, 56-64 px inputs; no download)
through TorchScript-json and through ONNX (torch.onnx.export): converted, interpreted and
compared with torch (and onnxruntime) within 1e-4 relative, with the near-zero floor of
tests/torchscript/helpers.py. A few also run compiled on the bm1684 simulator.

One model per kind runs by default (a depthwise-separable CNN, a ConvNeXt, a RegNet); the heavier
ones (attention hybrids, Swin, MaxViT) are marked slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import HAVE_TORCH, requires_ort, requires_torch
from tests.models._zoo import TIMM_MODELS, check_onnx, check_torchscript, importorskip_zoo

pytestmark = requires_torch
if HAVE_TORCH:
    importorskip_zoo("timm")

DEFAULT = ("efficientnet_b0", "convnext_atto", "regnetx_002")
SIMULATED = ("efficientnet_b0", "convnext_atto")


def _params() -> list[object]:
    return [pytest.param(n, id=n, marks=() if n in DEFAULT else pytest.mark.slow)
            for n in TIMM_MODELS]


@pytest.mark.parametrize("name", _params())
def test_timm_model_torchscript_matches_torch(name: str) -> None:
    check_torchscript(name, simulate=name in SIMULATED)  # asserts within 1e-4 relative


@requires_ort
@pytest.mark.parametrize("name", _params())
def test_timm_model_onnx_matches_onnxruntime_and_torch(name: str, tmp_path: Path) -> None:
    check_onnx(name, tmp_path / f"{name}.onnx")  # asserts within 1e-4 relative
