"""BVLC layers OpenCV does not run as Caffe does, against numpy written from BVLC's sources.

ArgMax follows src/caffe/layers/argmax_layer.cpp (github.com/BVLC/caffe, master): per sample
(or per position along ``axis``) the (value, index) pairs are partial-sorted with
std::greater — equal values put the higher index first —; without an axis the top is
(N, 1 or 2, top_k) padded with ones to the bottom's rank, [indices..., values...] per sample.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import AttrError

from .caffe_ref import layer, tiny_net


def ref_argmax(x: np.ndarray, top_k: int = 1, out_max_val: bool = False, axis: int | None = None) -> np.ndarray:
    """argmax_layer.cpp's Forward_cpu, written as loops over its pairs."""
    if axis is not None:
        moved = np.moveaxis(x, axis, -1)
        out = np.empty(moved.shape[:-1] + (top_k,), np.float32)
        for pos in np.ndindex(moved.shape[:-1]):
            pairs = sorted(((float(v), j) for j, v in enumerate(moved[pos])), reverse=True)[:top_k]
            out[pos] = [v if out_max_val else j for v, j in pairs]
        return np.moveaxis(out, -1, axis)
    n = x.shape[0]
    flat = x.reshape(n, -1)
    rows = []
    for i in range(n):
        pairs = sorted(((float(v), j) for j, v in enumerate(flat[i])), reverse=True)[:top_k]
        idx = [float(j) for _, j in pairs]
        rows.append(idx + [v for v, _ in pairs] if out_max_val else idx)
    shape = [n, 2 if out_max_val else 1, top_k] + [1] * max(x.ndim - 3, 0)
    return np.array(rows, np.float32).reshape(shape)


ARGMAX = {
    "top_k=3": ({"top_k": 3}, (2, 4, 3, 5)),
    "top_k=3,out_max_val": ({"top_k": 3, "out_max_val": True}, (2, 4, 3, 5)),
    "top_k=2,axis=1": ({"top_k": 2, "axis": 1}, (2, 4, 3, 5)),
    "top_k=2,axis=-1,out_max_val": ({"top_k": 2, "axis": -1, "out_max_val": True}, (2, 4, 3, 5)),
    "axis=0": ({"axis": 0}, (3, 4)),
    "rank 2,top_k=2": ({"top_k": 2}, (3, 6)),
    "rank 2,out_max_val": ({"out_max_val": True}, (3, 6)),
    "rank 5": ({"top_k": 2, "out_max_val": True}, (2, 2, 2, 2, 3)),
}


def _params(d: dict) -> str:
    body = " ".join(f"{k}: {str(v).lower()}" for k, v in d.items())
    return f"argmax_param {{ {body} }}" if d else ""


@pytest.mark.parametrize(("params", "shape"), list(ARGMAX.values()), ids=list(ARGMAX))
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_argmax(tmp_path: Path, params: dict, shape: tuple[int, ...], ties: bool) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    if ties:  # few distinct values: equal maxima everywhere (ReLU-like outputs)
        x = np.maximum(np.round(x), 0).astype(np.float32)
    proto = tmp_path / "n.prototxt"
    proto.write_text(tiny_net(layer("ArgMax", _params(params)), shape))
    got = ob.interpret(convert(proto), {"data": x})["y"]
    want = ref_argmax(x, params.get("top_k", 1), params.get("out_max_val", False), params.get("axis"))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("params", ["argmax_param { top_k: 61 }", "argmax_param { axis: 1 top_k: 5 }",
                                    "argmax_param { top_k: 0 }"], ids=["k>count", "k>axis", "k=0"])
def test_argmax_top_k_out_of_range_names_the_layer(tmp_path: Path, params: str) -> None:
    proto = tmp_path / "n.prototxt"
    proto.write_text(tiny_net(layer("ArgMax", params), (1, 4, 3, 5)))
    with pytest.raises(AttrError, match=r"layer 'y' \(ArgMax\).*argmax_param.top_k"):
        convert(proto)
