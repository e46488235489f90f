"""The fold_scale pass: a per-channel Mul and Add after a Conv (Caffe's Scale after BatchNorm)
folded into the Conv's weights and bias, checked against the unfolded graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.passes import optimize

RNG = np.random.default_rng(4)
F32 = np.float32

PROTOTXT = """
name: "conv_bn_scale"
input: "data"
input_shape { dim: 2 dim: 3 dim: 12 dim: 12 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param { use_global_stats: true } }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "scale2" type: "Scale" bottom: "conv2" top: "conv2" scale_param { bias_term: false } }
layer { name: "bias2" type: "Bias" bottom: "conv2" top: "conv2" }
"""


def test_caffe_scale_after_batchnorm_folds_into_the_conv(tmp_path: Path) -> None:
    from opbridge.tools.caffe_weights import write_random_weights

    proto = tmp_path / "net.prototxt"
    proto.write_text(PROTOTXT)
    weights = tmp_path / "net.caffemodel"
    write_random_weights(proto, weights)
    g = ob.convert(str(proto), weights=str(weights))
    folded = optimize(g, ("fold_batchnorm", "fold_scale"))
    assert [n.op for n in folded.nodes] == ["Conv", "Relu", "Conv"]
    x = {"data": RNG.standard_normal((2, 3, 12, 12)).astype(F32)}
    want, got = ob.interpret(g, x), ob.interpret(folded, x)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4 * np.abs(want[k]).max())


def _conv_then(ops: list[tuple[str, np.ndarray, bool]], *, bias: bool = True,
               extra_reader: bool = False) -> ob.Graph:
    """x -> Conv -> each (op, constant, constant first) in turn -> output."""
    b = ob.GraphBuilder("conv_then")
    x = b.input("x", "f32", (1, 3, 6, 6))
    ins = [x, b.constant("w", RNG.standard_normal((5, 3, 3, 3)).astype(F32))]
    if bias:
        ins.append(b.constant("b", RNG.standard_normal(5).astype(F32)))
    h = c = b.op("Conv", ins, pads=(1, 1, 1, 1))
    for i, (op, k, first) in enumerate(ops):
        kv = b.constant(f"k{i}", k)
        h = b.op(op, [kv, h] if first else [h, kv])
    b.output(h)
    if extra_reader:
        b.output(b.op("Relu", [c]))
    return b.build()


CASES = {
    "mul then add, (C,1,1)": ([("Mul", RNG.uniform(0.5, 2, (5, 1, 1)).astype(F32), False),
                               ("Add", RNG.standard_normal((5, 1, 1)).astype(F32), False)], 1),
    "constant first, (1,C,1,1)": ([("Mul", RNG.uniform(-2, 2, (1, 5, 1, 1)).astype(F32), True),
                                   ("Add", RNG.standard_normal((1, 5, 1, 1)).astype(F32), True)], 1),
    "scalar": ([("Mul", np.array(0.3, F32), False), ("Add", np.array([1.5], F32), False)], 1),
    "add then mul then add": ([("Add", RNG.standard_normal((5, 1, 1)).astype(F32), False),
                               ("Mul", RNG.uniform(0.5, 2, (5, 1, 1)).astype(F32), False),
                               ("Add", RNG.standard_normal((5, 1, 1)).astype(F32), False)], 1),
    "per position: not folded": ([("Mul", RNG.uniform(0.5, 2, (5, 6, 6)).astype(F32), False)], 2),
    "broadcasts the output: not folded": ([("Add", RNG.standard_normal((2, 5, 1, 1)).astype(F32), False)], 2),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
@pytest.mark.parametrize("case", CASES)
def test_per_channel_mul_and_add_fold(case: str, bias: bool) -> None:
    ops, nodes_left = CASES[case]
    g = _conv_then(ops, bias=bias)
    folded = optimize(g, ("fold_scale",))
    assert len(folded.nodes) == nodes_left
    x = {"x": RNG.standard_normal((1, 3, 6, 6)).astype(F32)}
    want, got = ob.interpret(g, x), ob.interpret(folded, x)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)


def test_conv_read_elsewhere_is_not_folded() -> None:
    g = _conv_then([("Mul", RNG.uniform(0.5, 2, (5, 1, 1)).astype(F32), False)], extra_reader=True)
    assert [n.op for n in optimize(g, ("fold_scale",)).nodes] == ["Conv", "Mul", "Relu"]


def test_quantize_folds_the_scale_before_quantizing(tmp_path: Path) -> None:
    """``ob.quantize`` of the Caffe net: the Scale after the BatchNorm goes into the first
    convolution; the Scale and Bias after the second (no BatchNorm before them) stay as they
    are (quantization folds only what follows a BatchNorm), and the unrestricted pass folds
    them too."""
    from opbridge.tools.caffe_weights import write_random_weights

    proto = tmp_path / "net.prototxt"
    proto.write_text(PROTOTXT)
    weights = tmp_path / "net.caffemodel"
    write_random_weights(proto, weights)
    g = ob.convert(str(proto), weights=str(weights))
    feeds = [{"data": RNG.standard_normal((2, 3, 12, 12)).astype(F32)} for _ in range(2)]
    q = ob.quantize(g, ob.calibrate(g, feeds), dtype="int8")
    assert [n.op for n in q.nodes].count("ConvInteger") == 2
    left = {n.origin.name for n in q.nodes if n.op in ("Mul", "Add") and n.outputs[0].dtype == "f32"}
    assert left == {"scale2", "bias2"}
    q = ob.quantize(optimize(g, ("fold_batchnorm", "fold_scale")), ob.calibrate(g, feeds), dtype="int8")
    assert not [n.op for n in q.nodes if n.op in ("Mul", "Add") and n.outputs[0].dtype == "f32"]
