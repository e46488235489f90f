"""Import torchvision for the model tests, or say why not.

The Makefile installs the torchvision release made for torch 2.13 from the package index, without
dependencies (it must not replace the CPU torch). That wheel's C++ extension is linked against
torch's CUDA libraries, so on the CPU torch it does not load, and torchvision's import then fails
registering a fake kernel for ``torchvision::nms``. The classification models use none of the
extension's ops (nms, roi_align, deform_conv2d): declaring the two schemas the import registers
fake kernels for lets it finish; calling those ops would still fail.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

HAVE_TORCHVISION = importlib.util.find_spec("torchvision") is not None
SKIP_REASON = "torchvision is not installed (make install adds it where the torch wheel is)"

_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_declared: list[Any] = []


def import_torchvision() -> Any:
    """The torchvision module (its models usable even where its C++ extension is not)."""
    try:
        import torchvision
    except RuntimeError as err:
        if "torchvision::nms" not in str(err):
            raise
        import torch

        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS:
            lib.define(schema)
        _declared.append(lib)  # the schemas live as long as the library object
        import torchvision
    return torchvision


def export_checked(model: Any, inputs: tuple[Any, ...], path: Any, unsupported: set[str]) -> bool:
    """Export ``model`` on ``inputs`` to the TorchScript-json ``path`` and check that the node
    kinds opbridge has no mapping for are exactly ``unsupported`` (the test's list, checked both
    ways); True when every kind maps, so the model can be converted and compared."""
    import json
    import warnings

    from opbridge.export.torchscript import export_torchscript
    from opbridge.mappers import DEFAULT_MAPPINGS
    from opbridge.parsers.origin import Framework

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_torchscript(model, inputs, path)
    kinds = {n["kind"] for n in json.loads(path.read_text())["nodes"]}
    unmapped = kinds - {e.key_text for e in DEFAULT_MAPPINGS.entries(Framework.TORCHSCRIPT)}
    assert unmapped == unsupported, f"update UNSUPPORTED: unmapped {sorted(unmapped)}"
    return not unsupported
