"""torchvision's dense models — segmentation ('out' and 'aux'), video, optical flow (RAFT, every
flow estimate) — with random weights through export_torchscript -> convert -> interpret,
matching torch within 1e-4 relative (see SCALE_FLOOR for the near-zero elements of four). The aten kinds each one uses that opbridge does not map
are listed here (UNSUPPORTED), and the list is checked both ways.

One small model per family runs by default; the rest are marked slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import requires_torch, run_isolated

from ._torchvision import HAVE_TORCHVISION, SKIP_REASON, export_checked
from ._torchvision_dense import MODELS, all_models, build, compare, output_names

pytestmark = [requires_torch, pytest.mark.skipif(not HAVE_TORCHVISION, reason=SKIP_REASON)]

#: aten/prim kinds a model uses that opbridge does not map (empty: all convert).
UNSUPPORTED: dict[str, set[str]] = {}

#: Run by default, one per family: DeepLabV3 with its aux head (depthwise/SE/hardswish, atrous
#: convolutions, ASPP's global pooling, bilinear upsampling), a 3-D ResNet (Conv3d, 3-D pooling),
#: RAFT (grid_sample in the correlation lookup, the refinement loop unrolled).
DEFAULT = ("deeplabv3_mobilenet_v3_large", "mc3_18", "raft_small")


def _params() -> list[object]:
    return [pytest.param(name, marks=() if name in DEFAULT else (pytest.mark.slow,), id=name)
            for name in MODELS]


@pytest.mark.parametrize("name", _params())
def test_dense_model_matches_torch(name: str, tmp_path: Path) -> None:
    # in a process of its own: torch would keep the model's weights in the test process
    run_isolated(f"{__name__}:_check", name, str(tmp_path))


def _check(name: str, tmp_dir: str) -> None:
    """Export ``name``, check its kinds against UNSUPPORTED, convert, interpret, compare."""
    import torch

    import opbridge as ob

    model, inputs = build(name)
    path = Path(tmp_dir) / f"{name}.ts.json"
    if not export_checked(model, inputs, path, UNSUPPORTED.get(name, set())):
        return
    with torch.no_grad():
        ref = [t.numpy() for t in model(*inputs)]
    graph = ob.convert(str(path))
    got = list(ob.interpret(graph, {v.name: t.numpy() for v, t in zip(graph.inputs, inputs)}).values())
    names = output_names(name)
    assert len(got) == len(ref) == len(names), f"{len(got)} outputs, torch {len(ref)}, names {names}"
    for what, o, r in zip(names, got, ref):
        compare(name, o, r, f"{name} {what}")


def test_every_dense_model_is_listed() -> None:
    """Every segmentation, video and optical-flow model has an entry (a new torchvision release
    adding one fails here), and the lists name only real models."""
    assert set(MODELS) == set(all_models())
    assert set(DEFAULT) | set(UNSUPPORTED) <= set(MODELS)
