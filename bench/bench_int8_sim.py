"""Benchmark: ResNet-50 (random weights) in f32 and in int8 on the simulated BM1684, by the
cost model's estimate (no timing of this machine).

The int8 model is onnxruntime's ``quantize_static`` (QDQ, per channel, int8, MinMax over two
random samples) folded by ``fold_qdq`` into ConvInteger / Requantize; the residual adds stay
in float between their quantize / dequantize pairs. Prints, per batch, the estimated latency
per image, the GDMA bytes, the layer groups and tiles of both programs, next to Sophgo's
measured ResNet-50 on the BM1684 (6.36 ms fp32; int8 3.93 ms at batch 1, 1.24 ms per image at
batch 4; from the issue and ``../shared/targets/chip-latency.md``).

    .venv/bin/python bench/bench_int8_sim.py [--batch 1 4] [--work DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import opbridge as ob  # noqa: E402
from opbridge.ir.passes import with_passes  # noqa: E402

#: Sophgo's measured ResNet-50 on the BM1684, ms per image: (fp32, int8) by batch
SOPHGO_MS = {1: (6.36, 3.93), 4: (None, 1.24)}
#: (bottleneck width, blocks, first stride) of ResNet-50's four stages
STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]


class _Net:
    """ResNet-50 written with onnx.helper, He-initialised random weights."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def conv(self, x: str, cin: int, cout: int, k: int, s: int, name: str, relu: bool = True) -> str:
        w = self.rng.normal(0, np.sqrt(2 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        self.inits += [numpy_helper.from_array(w, name + "_w"),
                       numpy_helper.from_array(np.zeros(cout, np.float32), name + "_b")]
        self.nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name],
                                           pads=[k // 2] * 4, strides=[s, s]))
        if not relu:
            return name
        self.nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    def model(self, n: int) -> onnx.ModelProto:
        h = self.conv("x", 3, 64, 7, 2, "stem")
        self.nodes.append(helper.make_node("MaxPool", [h], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                                           pads=[1, 1, 1, 1]))
        h, cin = "pool", 64
        for si, (mid, blocks, stride) in enumerate(STAGES):
            for bi in range(blocks):
                s, nm = (stride if bi == 0 else 1), f"s{si}b{bi}"
                a = self.conv(self.conv(h, cin, mid, 1, 1, nm + "a"), mid, mid, 3, s, nm + "b")
                a = self.conv(a, mid, mid * 4, 1, 1, nm + "c", relu=False)
                sc = self.conv(h, cin, mid * 4, 1, s, nm + "d", relu=False) if bi == 0 else h
                self.nodes += [helper.make_node("Add", [a, sc], [nm + "add"]),
                               helper.make_node("Relu", [nm + "add"], [nm + "out"])]
                h, cin = nm + "out", mid * 4
        self.nodes.append(helper.make_node("GlobalAveragePool", [h], ["y"]))
        graph = helper.make_graph(self.nodes, "resnet50",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 224, 224])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 2048, 1, 1])],
                                  initializer=self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def quantize(src: Path, dst: Path, n: int) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.feeds = iter([{"x": rng.normal(0, 1, (n, 3, 224, 224)).astype(np.float32)} for _ in range(2)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4], help="batch sizes (default 1 4)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the ONNX files (default: a temporary one)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_int8_"))
    print("batch | f32 ms/img | int8 ms/img | int8 speedup | Sophgo f32 / int8 ms/img | GDMA int8/f32 | "
          "groups f32/int8 | tiles f32/int8")
    for n in args.batch:
        src, dst = work / f"resnet50_b{n}.onnx", work / f"resnet50_b{n}.int8.onnx"
        onnx.save(_Net().model(n), src)
        print(f"  (batch {n}: quantizing with onnxruntime ...)", file=sys.stderr, flush=True)
        quantize(src, dst, n)
        pf = ob.compile(ob.convert(src), target="bm1684").profile()
        pi = ob.compile(ob.convert(dst, passes=with_passes(["fold_qdq"])), target="bm1684").profile()
        f32, i8 = SOPHGO_MS.get(n, (None, None))
        print(f"{n} | {pf.est_latency_ms / n:.2f} | {pi.est_latency_ms / n:.2f} | "
              f"{pf.est_latency_ms / pi.est_latency_ms:.2f}x | {f32 or '-'} / {i8 or '-'} | "
              f"{pi.gdma_bytes / pf.gdma_bytes:.3f} | {pf.num_layer_groups}/{pi.num_layer_groups} | "
              f"{pf.num_tiles}/{pi.num_tiles}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
