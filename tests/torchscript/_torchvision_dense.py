"""torchvision's dense models (segmentation, video, optical flow) for the conversion tests: how
to build each with random weights, the inputs it takes, and a wrapper whose outputs are plain
tensors (the segmentation models return a dict, RAFT a list of flow estimates)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._torchvision import import_torchvision


@dataclass(frozen=True)
class Dense:
    """One model: its torchvision module, input shapes and builder keywords."""

    module: str
    inputs: tuple[tuple[int, ...], ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


_SEG_IN = ((1, 3, 64, 64),)
# no download: the backbone's ImageNet weights are the builders' default
_SEG = {"weights_backbone": None}
_VIDEO_IN = ((1, 3, 8, 112, 112),)  # the smallest clip the 3-D ResNets and Swin3D take
# S3D ends in a (2, 7, 7) average pool over a /8 time, /32 space feature map; MViT's positional
# embeddings are sized for 16 frames of 224 x 224
_FULL_CLIP = ((1, 3, 16, 224, 224),)
_FLOW_IN = ((1, 3, 128, 128), (1, 3, 128, 128))

MODELS: dict[str, Dense] = {
    "fcn_resnet50": Dense("segmentation", _SEG_IN, {**_SEG, "aux_loss": True}),
    "fcn_resnet101": Dense("segmentation", _SEG_IN, {**_SEG, "aux_loss": True}),
    "deeplabv3_mobilenet_v3_large": Dense("segmentation", _SEG_IN, {**_SEG, "aux_loss": True}),
    "deeplabv3_resnet50": Dense("segmentation", _SEG_IN, {**_SEG, "aux_loss": True}),
    "deeplabv3_resnet101": Dense("segmentation", _SEG_IN, {**_SEG, "aux_loss": True}),
    "lraspp_mobilenet_v3_large": Dense("segmentation", _SEG_IN, _SEG),
    "r3d_18": Dense("video", _VIDEO_IN),
    "mc3_18": Dense("video", _VIDEO_IN),
    "r2plus1d_18": Dense("video", _VIDEO_IN),
    "s3d": Dense("video", _FULL_CLIP),
    "mvit_v1_b": Dense("video", _FULL_CLIP),
    "mvit_v2_s": Dense("video", _FULL_CLIP),
    "swin3d_t": Dense("video", _VIDEO_IN),
    "swin3d_s": Dense("video", _VIDEO_IN),
    "swin3d_b": Dense("video", _VIDEO_IN),
    "raft_small": Dense("optical_flow", _FLOW_IN),
    "raft_large": Dense("optical_flow", _FLOW_IN),
}

#: Models whose activations fade to nothing through torch's default initialisation (S3D: its
#: features come out near 3e-6, so the logits are the classifier's bias whatever the input,
#: and a comparison would test nothing); their convolutions get He initialisation instead.
FADING = ("s3d",)

#: RAFT's refinement iterations (12 by default; each adds one flow estimate to the outputs)
FLOW_UPDATES = 3


def all_models() -> list[str]:
    """Every model of the three torchvision modules."""
    tv = import_torchvision()
    return sorted(name for mod in ("segmentation", "video", "optical_flow")
                  for name in tv.models.list_models(module=getattr(tv.models, mod)))


def build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """(model in eval mode returning a tuple of tensors, random inputs), seeded."""
    import torch

    tv = import_torchvision()
    spec = MODELS[name]
    torch.manual_seed(0)
    model = tv.models.get_model(name, weights=None, **spec.kwargs)
    with torch.no_grad():  # a head that starts at zero would compare 0 with 0
        for p in model.parameters():
            if p.ndim >= 2 and not p.any():
                p.normal_(0.0, 0.02)
        if name in FADING:
            for mod in model.modules():
                if isinstance(mod, torch.nn.Conv3d):
                    torch.nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
    inputs = tuple(torch.randn(*shape) for shape in spec.inputs)
    flow = spec.module == "optical_flow"
    return _plain_outputs(torch)(model, flow).eval(), inputs


def _plain_outputs(torch: Any) -> Any:
    class Plain(torch.nn.Module):
        """The model with its output as a tuple of tensors (a dict's 'out', then 'aux'; RAFT's list)."""

        def __init__(self, model: Any, flow: bool) -> None:
            super().__init__()
            self.model = model
            self.flow = flow

        def forward(self, *xs: Any) -> Any:
            if self.flow:
                return tuple(self.model(*xs, num_flow_updates=FLOW_UPDATES))
            out = self.model(*xs)
            if isinstance(out, dict):
                return tuple(out[k] for k in ("out", "aux") if k in out)
            return (out,)

    return Plain


def output_names(name: str) -> list[str]:
    """What each output is, for the messages."""
    if MODELS[name].module == "optical_flow":
        return [f"flow{i}" for i in range(FLOW_UPDATES)]
    if MODELS[name].module == "segmentation":
        return ["out", "aux"] if MODELS[name].kwargs.get("aux_loss") else ["out"]
    return ["logits"]


#: Models whose outputs mix large and near-zero elements: float32 sums taken in another order
#: land up to ~4e-6 of the output's largest magnitude on any element (deep ResNet-50/101 heads
#: with random weights, outputs near 17; RAFT's iterated correlation lookups), and onnxruntime
#: differs from torch by as much on the same model. assert_close's floor for near-zero elements
#: is 1e-6 of that magnitude; these compare with a floor of 1e-5 of it (the relative 1e-4 stays).
SCALE_FLOOR = {"fcn_resnet50": 1e-5, "fcn_resnet101": 1e-5, "raft_small": 1e-5, "raft_large": 1e-5}


def compare(name: str, got: Any, ref: Any, what: str) -> None:
    """``got`` against the reference ``ref`` (numpy), within the tolerance of ``name``."""
    import numpy as np

    from .helpers import RTOL, assert_close

    got = np.asarray(got)
    assert np.abs(ref).max() > 0, f"{what}: the reference is all zeros, nothing to compare"
    if name not in SCALE_FLOOR:
        assert_close(got, ref, RTOL, what=what)
        return
    assert got.shape == ref.shape and got.dtype == ref.dtype, f"{what}: {got.shape} {got.dtype}"
    atol = SCALE_FLOOR[name] * float(np.abs(ref).max())
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=atol, err_msg=what)
