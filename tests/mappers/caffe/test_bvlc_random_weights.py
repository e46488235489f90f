"""``opbridge random-weights`` for BVLC layers: the blob shapes it writes are the ones Caffe's
layers allocate (as their LayerSetUp code in github.com/BVLC/caffe src/caffe/layers/ does),
and the caffemodel then loads back, including for layers after a shape-changing fork layer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import main
from opbridge.convert import convert
from opbridge.parsers.caffe_weights import read_caffemodel
from opbridge.tools.caffe_weights import write_random_weights

# layer text, input shapes, the blob shapes Caffe gives the layer "w" (cited per case)
CASES = {
    # embed_layer.cpp: weight (input_dim, num_output), bias (num_output)
    "Embed": ('layer { name: "w" type: "Embed" bottom: "a" top: "y" embed_param { num_output: 4 input_dim: 10 } }',
              {"a": (2, 3)}, [(10, 4), (4,)]),
    # bias_layer.cpp: one blob shaped as the bottom's axes axis..axis+num_axes
    "Bias": ('layer { name: "w" type: "Bias" bottom: "a" top: "y" bias_param { axis: 1 num_axes: 2 } }',
             {"a": (2, 3, 4, 5)}, [(3, 4)]),
    # lstm_layer.cpp (unrolled-net params in order): W_xc (4H, K), b_c (4H), W_hc (4H, H)
    "LSTM": ('layer { name: "w" type: "LSTM" bottom: "a" bottom: "c" top: "y" recurrent_param { num_output: 3 } }',
             {"a": (4, 2, 5, 2), "c": (4, 2)}, [(12, 10), (12,), (12, 3)]),
    # with a static input, W_xc_static (4H, K_static) comes third
    "LSTM,x_static": ('layer { name: "w" type: "LSTM" bottom: "a" bottom: "c" bottom: "s" top: "y" '
                      "recurrent_param { num_output: 3 } }",
                      {"a": (4, 2, 5), "c": (4, 2), "s": (2, 7)}, [(12, 5), (12,), (12, 7), (12, 3)]),
    # rnn_layer.cpp: W_xh (H, K), b_h (H), W_hh (H, H), W_ho (H, H), b_o (H)
    "RNN": ('layer { name: "w" type: "RNN" bottom: "a" bottom: "c" top: "y" recurrent_param { num_output: 3 } }',
            {"a": (4, 2, 5), "c": (4, 2)}, [(3, 5), (3,), (3, 3), (3, 3), (3,)]),
    # the Axpy fork layer's top has x's shape (N, C, H, W), not a's (N, C, 1, 1): the
    # InnerProduct after it takes C * H * W inputs (inner_product_layer.cpp: weight (N_out, K))
    "Axpy then InnerProduct": (
        'layer { name: "ax" type: "Axpy" bottom: "a" bottom: "b" bottom: "b" top: "ax" }\n'
        'layer { name: "w" type: "InnerProduct" bottom: "ax" top: "y" inner_product_param { num_output: 2 } }',
        {"a": (1, 3, 1, 1), "b": (1, 3, 4, 5)}, [(2, 60), (2,)]),
}


def _net(layers: str, inputs: dict[str, tuple[int, ...]]) -> str:
    decl = "".join(f'input: "{k}" input_shape {{ {" ".join(f"dim: {d}" for d in s)} }}\n'
                   for k, s in inputs.items())
    return f'name: "n"\n{decl}{layers}\n'


@pytest.mark.parametrize(("layers", "inputs", "want"), list(CASES.values()), ids=list(CASES))
def test_blob_shapes_are_caffes(tmp_path: Path, layers: str, inputs: dict, want: list) -> None:
    proto = tmp_path / "n.prototxt"
    proto.write_text(_net(layers, inputs))
    model = tmp_path / "n.caffemodel"
    write_random_weights(proto, model)
    assert [b.shape for b in read_caffemodel(model)["w"]] == want
    g = convert(proto, weights=model)  # the caffemodel loads back against the same shapes
    assert g.outputs


def test_axpy_feeding_inner_product_computes_a_x_plus_y(tmp_path: Path) -> None:
    layers, inputs, _ = CASES["Axpy then InnerProduct"]
    proto = tmp_path / "n.prototxt"
    proto.write_text(_net(layers, inputs))
    model = tmp_path / "n.caffemodel"
    write_random_weights(proto, model)
    w, b = read_caffemodel(model)["w"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    got = ob.interpret(convert(proto, weights=model), {"a": a, "b": x})["y"]
    np.testing.assert_allclose(got, (a * x + x).reshape(1, -1) @ w.T + b, rtol=1e-5, atol=1e-5)


def test_cli_random_weights_on_a_train_net_with_data_and_loss_layers(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """A train/val prototxt: the data layer's shape comes from --input-shape, the losses are
    dropped with a note, the caffemodel has the weighted layers."""
    proto = tmp_path / "train.prototxt"
    proto.write_text(
        'name: "t"\nlayer { name: "d" type: "HDF5Data" top: "data" top: "label" hdf5_data_param { source: "x" batch_size: 2 } }\n'
        'layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" inner_product_param { num_output: 3 } }\n'
        'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }\n')
    out = tmp_path / "t.caffemodel"
    with pytest.warns(UserWarning, match=r"dropped 1 training-only layer\(s\).*'loss' \(SoftmaxWithLoss\)"):
        rc = main(["random-weights", str(proto), "-o", str(out), "--input-shape", "data=2,5"])
    assert rc == 0, capsys.readouterr().err
    assert [b.shape for b in read_caffemodel(out)["fc"]] == [(3, 5), (3,)]
