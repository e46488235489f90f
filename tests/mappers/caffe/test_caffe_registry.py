"""The built-in Caffe mappings: every family module imported, 50+ layer types, every layer
type of the real models covered."""

from __future__ import annotations

import pkgutil

import opbridge.mappers.caffe as caffe_pkg
from opbridge.mappers import DEFAULT_MAPPINGS
from opbridge.parsers.caffe import parse_caffe
from tests.conftest import SHARED_MODELS, requires_shared_models

# The layer type only a plugin maps (examples/plugins/frcnn_proposal.py).
PLUGIN_LAYERS = {"Python"}


def _caffe_types() -> set[str]:
    return {e.op_type for e in DEFAULT_MAPPINGS.entries("caffe") if "/mappers/caffe/" in e.defined_at.replace("\\", "/")}


def test_every_family_module_is_listed() -> None:
    for mod in pkgutil.iter_modules(caffe_pkg.__path__):
        if mod.name != "common":
            assert mod.name in caffe_pkg.FAMILIES, f"{mod.name} is not listed in FAMILIES of __init__"


def test_at_least_50_layer_types() -> None:
    assert len(_caffe_types()) >= 50, sorted(_caffe_types())


@requires_shared_models
def test_real_models_layer_types_are_mapped() -> None:
    used = {n.op_type for p in (SHARED_MODELS / "caffe").glob("*/deploy.prototxt") for n in parse_caffe(p).nodes}
    missing = used - _caffe_types() - PLUGIN_LAYERS
    assert not missing, f"layer types of the real models without a mapping: {sorted(missing)}"
