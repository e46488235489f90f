"""The 18 real Caffe prototxts of ../shared/models/caffe: each converts with random weights
and runs in the interpreter; where OpenCV's dnn (an independent Caffe implementation) loads
the net, every blob it gives matches within 1e-4 relative. OpenCV lacks YOLOv3's Upsample and
Faster R-CNN's Python layer: for those two it gets a small Python layer (numpy nearest
upsampling written here; the example plugin's proposal function), so the rest of the net is
still checked against it. Detections are compared row by row over the rows both found."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import UnsupportedOpError
from opbridge.parsers.caffe import parse_caffe
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import HAVE_CV2, SHARED_MODELS, requires_shared_models
from tests.mappers.caffe.caffe_ref import is_final, opencv_blobs

pytestmark = requires_shared_models

ROOT = Path(__file__).resolve().parents[2]
PROPOSAL_PLUGIN = ROOT / "examples" / "plugins" / "frcnn_proposal.py"
CAFFE = SHARED_MODELS / "caffe"

# name -> run by default (a representative few) or only with the slow marker
MODELS = {
    "mobilenet_v1": True, "resnet50": True, "shufflenet_v2": True, "mobilenet_ssd": True,
    "bvlc_googlenet_v1_legacy": False, "bvlc_alexnet": False, "bvlc_googlenet": False,
    "bvlc_reference_caffenet": False, "densenet121": False, "faster_rcnn_vgg16": False,
    "mobilenet_v2": False, "resnet101": False, "shufflenet_v1_g3": False, "squeezenet_v1.0": False,
    "squeezenet_v1.1": False, "ssd_vgg300": False, "vgg16": False, "yolov3": False,
}


def _params(fast_only: bool = False) -> list[Any]:
    return [pytest.param(m, marks=() if fast else (pytest.mark.slow,), id=m)
            for m, fast in MODELS.items() if fast or not fast_only]


class _Upsample:
    """OpenCV custom layer: nearest upsampling by repetition (independent of our Reshape/Expand)."""

    def __init__(self, params: Any, blobs: Any) -> None:
        self.s = int(params.get("scale", 2))

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        n, c, h, w = inputs[0]
        return [[n, c, h * self.s, w * self.s]]

    def forward(self, inputs: Any) -> Any:
        return [np.repeat(np.repeat(inputs[0], self.s, axis=2), self.s, axis=3)]


class _Proposal:
    """OpenCV custom layer running the example plugin's proposal function."""

    def __init__(self, params: Any, blobs: Any) -> None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("frcnn_proposal_ref", PROPOSAL_PLUGIN)
        assert spec and spec.loader
        self.mod = sys_modules_get(spec)

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        return [[300, 5]]

    def forward(self, inputs: Any) -> Any:
        return [self.mod.proposal(*inputs, feat_stride=16, scales=(8.0, 16.0, 32.0),
                                  ratios=(0.5, 1.0, 2.0), pre_nms_top_n=6000, post_nms_top_n=300,
                                  nms_thresh=0.7, min_size=16)]


def sys_modules_get(spec: Any) -> Any:
    """The plugin module as opbridge loaded it (its op is already defined), else a fresh copy."""
    import sys

    for mod in sys.modules.values():
        if getattr(mod, "__file__", None) == str(PROPOSAL_PLUGIN):
            return mod
    import importlib.util

    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def opencv_layers() -> Iterator[None]:
    if not HAVE_CV2:
        yield
        return
    import cv2

    cv2.dnn_registerLayer("Upsample", _Upsample)
    cv2.dnn_registerLayer("Python", _Proposal)
    yield
    cv2.dnn_unregisterLayer("Upsample")
    cv2.dnn_unregisterLayer("Python")


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("caffe_weights")


def _batch1(prototxt: Path) -> dict[str, tuple[int, ...]]:
    g = parse_caffe(prototxt)
    return {t.name: (1, *t.shape[1:]) for t in g.inputs if t.shape}


def _feeds(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    if "im_info" in feeds:
        feeds["im_info"] = np.array([[224.0, 224.0, 1.0]], np.float32)
    return feeds


def _compare_detections(got: np.ndarray, ref: np.ndarray) -> None:
    g = got.reshape(-1, 7)
    r = ref.reshape(-1, 7)
    # padding rows: ours are -1 (Caffe's "none found" marker), OpenCV's are zeros
    g, r = g[(g[:, 1] >= 0) & (g[:, 2] > 0)], r[(r[:, 1] >= 0) & (r[:, 2] > 0)]
    assert len(g) == len(r), f"detections: {len(g)} rows, OpenCV {len(r)}"
    key = lambda a: a[np.lexsort((-a[:, 2], a[:, 1], a[:, 0]))]  # noqa: E731
    np.testing.assert_allclose(key(g), key(r), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model", _params())
def test_real_model(model: str, weights_dir: Path, opencv_layers: None) -> None:
    prototxt = CAFFE / model / "deploy.prototxt"
    weights = weights_dir / f"{model}.caffemodel"
    shapes = _batch1(prototxt)
    plugins = [PROPOSAL_PLUGIN] if model == "faster_rcnn_vgg16" else []
    if not weights.exists():
        write_random_weights(prototxt, weights, seed=0, input_shapes=shapes, plugins=plugins)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every caffemodel blob belongs to a layer
        origin = parse_caffe(prototxt, weights=weights, input_shapes=shapes)
    g = convert(origin, plugins=plugins)
    feeds = _feeds(shapes)
    ours = ob.interpret(g, feeds, keep_intermediates=True)
    # blobs that depend only on shapes (PriorBox) are folded into named constants
    ours.update({n: v.data for n, v in g.values().items() if v.data is not None and n not in ours})
    for out in g.outputs:
        assert np.isfinite(ours[out.name]).all(), f"output '{out.name}' is not finite"
    if not HAVE_CV2:
        pytest.skip("opencv-python-headless<5 is not installed: ran without the OpenCV comparison")
    import cv2

    net = cv2.dnn.readNetFromCaffe(str(prototxt), str(weights))
    net.enableFusion(False)
    for k, v in feeds.items():
        net.setInput(v, k)
    final = {o: (n.name, i) for n in origin.nodes for i, o in enumerate(n.outputs) if is_final(o, n.name)}
    # a PriorBox's constant boxes are folded into the Concat that gathers them (compared)
    priors = {n.outputs[0] for n in origin.nodes if n.op_type == "PriorBox"}
    final = {b: lay for b, lay in final.items() if not (b in priors and b not in ours)}
    refs = opencv_blobs(net, final)  # every top of a layer, not only the first
    worst, where = 0.0, ""
    for blob, (layer, _) in final.items():
        ref = refs[blob]
        if any(n.name == layer and n.op_type == "DetectionOutput" for n in origin.nodes):
            _compare_detections(ours[blob], ref)
            continue
        assert ours[blob].shape == ref.shape, f"blob '{blob}': {ours[blob].shape} vs OpenCV {ref.shape}"
        err = float(np.abs(ours[blob] - ref).max()) / max(float(np.abs(ref).max()), 1e-6)
        if err > worst:
            worst, where = err, blob
    print(f"{model}: {len(final)} blobs compared with OpenCV, worst relative error {worst:.2e} ({where})")
    assert worst <= 1e-4, f"{model}: blob '{where}' differs from OpenCV by {worst:.3g} (relative)"


def test_faster_rcnn_without_plugin_names_the_layer() -> None:
    """Without the example plugin, the Python layer is reported with what to register.

    The plugin may already be loaded in this process, so the check uses a registry holding
    only the built-in Caffe mappings."""
    from opbridge.mappers import DEFAULT_MAPPINGS, MappingRegistry

    builtin = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("caffe"):
        if "opbridge" + "/mappers/" in e.defined_at.replace("\\", "/"):
            builtin.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    prototxt = CAFFE / "faster_rcnn_vgg16" / "deploy.prototxt"
    with pytest.raises(UnsupportedOpError, match=r"Python.*'proposal'") as info:
        convert(prototxt, registry=builtin)
    assert "mapping(" in str(info.value) and "--plugin" in str(info.value)


def test_cli_convert_without_plugin_exits_2(tmp_path: Path) -> None:
    """``opbridge convert`` of Faster R-CNN without its plugin: exit 2, the layer named, no
    traceback (a fresh process, so no plugin is loaded)."""
    import subprocess
    import sys

    prototxt = CAFFE / "faster_rcnn_vgg16" / "deploy.prototxt"
    r = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(prototxt), "-o",
                        str(tmp_path / "f.obir")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "'proposal'" in r.stderr and "Python" in r.stderr and "--plugin" in r.stderr
    assert "Traceback" not in r.stderr
