"""Run a tiny Caffe net through opbridge and through OpenCV's dnn (an independent Caffe
implementation) on the same random caffemodel and inputs, and compare every blob."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import opbridge as ob
from opbridge.convert import convert
from opbridge.parsers.caffe import parse_caffe
from opbridge.tools.caffe_weights import write_random_weights


def tiny_net(layers: str, shape: tuple[int, ...] = (2, 3, 9, 9), inputs: str = "data") -> str:
    """A prototxt: one net-level input of ``shape`` and the given layer blocks."""
    dims = " ".join(f"dim: {d}" for d in shape)
    return f'name: "t"\ninput: "{inputs}"\ninput_shape {{ {dims} }}\n{layers}\n'


def layer(type_: str, params: str = "", *, name: str = "y", bottoms: tuple[str, ...] = ("data",),
          tops: tuple[str, ...] | None = None) -> str:
    """One ``layer { }`` block."""
    b = " ".join(f'bottom: "{x}"' for x in bottoms)
    t = " ".join(f'top: "{x}"' for x in (tops or (name,)))
    return f'layer {{ name: "{name}" type: "{type_}" {b} {t} {params} }}'


def is_final(blob: str, layer_name: str) -> bool:
    """Is ``blob`` (an output of layer ``layer_name``) the blob's last version? Earlier versions
    of an in-place blob are named ``BLOB/LAYER`` by the parser."""
    return not (blob.endswith("/" + layer_name) or "/" + layer_name + "_" in blob)


def final_blobs(prototxt: Path) -> dict[str, tuple[str, int]]:
    """Blob name -> (the layer that writes it last, which of the layer's tops it is); OpenCV
    hands back all of a layer's outputs by the layer's name."""
    g = parse_caffe(prototxt)
    return {o: (n.name, i) for n in g.nodes for i, o in enumerate(n.outputs) if is_final(o, n.name)}


def run_ours_and_opencv(
    tmp_path: Path, text: str, inputs: dict[str, tuple[int, ...]], *, seed: int = 0,
    feeds: dict[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(our blobs, OpenCV's blobs) by blob name, for every final blob of the net."""
    import cv2

    proto = tmp_path / "net.prototxt"
    proto.write_text(text)
    model = tmp_path / "net.caffemodel"
    written = write_random_weights(proto, model, seed=seed)
    rng = np.random.default_rng(seed + 1)
    feeds = feeds or {k: rng.standard_normal(s).astype(np.float32) for k, s in inputs.items()}
    g = convert(proto, weights=model if written else None)
    ours = ob.interpret(g, feeds, keep_intermediates=True)
    # blobs that depend only on shapes (PriorBox) are folded into named constants
    ours.update({n: v.data for n, v in g.values().items() if v.data is not None and n not in ours})
    net = cv2.dnn.readNetFromCaffe(str(proto), str(model)) if written else \
        cv2.dnn.readNetFromCaffe(str(proto))
    net.enableFusion(False)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    for k, v in feeds.items():
        net.setInput(v, k)
    blobs = final_blobs(proto)
    for out in g.outputs:
        assert out.name in ours, f"graph output '{out.name}' missing"
    # a blob read only for its shape (Crop's reference) is removed as dead code: skip it
    blobs = {b: lay for b, lay in blobs.items() if b in ours}
    # the filter above must not drop what the test is about: every graph output is compared
    missing = [out.name for out in g.outputs if out.name not in blobs]
    assert not missing, f"graph output(s) {missing} have no OpenCV blob to compare with"
    return {b: ours[b] for b in blobs}, opencv_blobs(net, blobs)


def opencv_blobs(net: Any, blobs: dict[str, tuple[str, int]]) -> dict[str, np.ndarray]:
    """OpenCV's value of each blob given as (layer, top index). First tops come from one
    forward pass; a layer's other tops each from a pass that asks for that layer alone (asked
    for together with other layers, OpenCV reuses the memory of tops past the first: seen on
    shufflenet_v2's Slice layers)."""
    firsts = sorted({lay for lay, _ in blobs.values()})
    got = dict(zip(firsts, net.forward(firsts)))
    return {b: got[lay] if i == 0 else net.forwardAndRetrieve([lay])[0][i]
            for b, (lay, i) in blobs.items()}


def assert_blobs_close(ours: dict[str, np.ndarray], refs: dict[str, Any], rtol: float = 1e-4) -> None:
    """Each blob within ``rtol`` of the reference, relative to the reference's largest value."""
    for name, ref in refs.items():
        ref = np.asarray(ref)
        got = ours[name]
        assert got.shape == ref.shape, f"blob '{name}': shape {got.shape}, OpenCV {ref.shape}"
        scale = max(float(np.abs(ref).max()), 1e-6)
        err = float(np.abs(got - ref).max()) / scale
        assert err <= rtol, f"blob '{name}': max error {err:.3g} relative to max |ref| {scale:.3g}"
