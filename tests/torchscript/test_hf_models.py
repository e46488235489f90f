"""Architectures of the Hugging Face ``transformers`` library, randomly initialised from tiny
configs (tests/models/_zoo.py; no download), through TorchScript-json and through ONNX
(torch.onnx.export): converted, interpreted and compared with torch (and onnxruntime) within
1e-4 relative, with the near-zero floor of tests/torchscript/helpers.py. A few also run compiled
on the bm1684 simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import HAVE_TORCH, requires_ort, requires_torch
from tests.models._zoo import HF_MODELS, build, check_onnx, check_torchscript, importorskip_zoo

pytestmark = requires_torch
if HAVE_TORCH:
    importorskip_zoo("transformers")

#: Also compiled and run on the simulator: an encoder, a GQA + RoPE decoder, a vision transformer.
SIMULATED = ("bert", "llama", "vit")


@pytest.mark.parametrize("name", HF_MODELS)
def test_hf_model_torchscript_matches_torch(name: str) -> None:
    check_torchscript(name, simulate=name in SIMULATED)  # asserts within 1e-4 relative


@requires_ort
@pytest.mark.parametrize("name", HF_MODELS)
def test_hf_model_onnx_matches_onnxruntime_and_torch(name: str, tmp_path: Path) -> None:
    check_onnx(name, tmp_path / f"{name}.onnx")  # asserts within 1e-4 relative


def test_decoder_without_attention_mask_torchscript() -> None:
    """Without a mask, transformers looks for packed sequences in the position ids
    (torch.diff + cumsum): aten::diff maps (torch.onnx cannot export it at opset 17)."""
    from tests.torchscript.helpers import check

    model, (ids, _mask) = build("llama")
    check(model, ids)
