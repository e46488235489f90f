"""Benchmark: `opbridge convert` of ResNet-50 against onnx.load + onnx.checker + shape inference,
and of a large model whose weights are ONNX external data.

Builds a ResNet-50 v1 ONNX model (Conv/BatchNormalization/Relu/MaxPool/Add/GlobalAveragePool/
Flatten/Gemm, ~25.6 M parameters, random weights) with ``onnx.helper`` (no torch), then runs,
each as a whole fresh process on the same file, and prints wall time and peak RSS (of that
process, from wait4) for both, with the ratios:

- ``opbridge convert resnet50.onnx -o resnet50.obir``
- ``python -c "onnx.load; onnx.checker.check_model; onnx.shape_inference.infer_shapes"``

The commands run interleaved (A B A B ...), one BLAS thread each; the figures are medians and
the ratios are of medians measured in this run.

With ``--external-gib G`` (default 1.6; 0 to skip) it also writes a MatMul chain whose
weights (G GiB of float32) are external data, and times ``opbridge convert`` of it: wall time
and peak RSS as a fraction of the weights' size (the weights are streamed into the .obir,
never held in memory).

Usage: ``python bench/bench_convert.py [--repeat N] [--keep DIR] [--external-gib G]``. Timing is
a benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def _w(self, name: str, shape: tuple[int, ...], scale: float = 0.05) -> str:
        arr = (self.rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        self.n += 1
        p = f"conv{self.n}"
        w = self._w(f"{p}.weight", (cout, cin, k, k), scale=float(np.sqrt(2.0 / (cin * k * k))))
        pad = k // 2
        self.nodes.append(helper.make_node("Conv", [x, w], [f"{p}.out"], name=p, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[pad] * 4))
        bn = f"bn{self.n}"
        scale = self._w(f"{bn}.scale", (cout,), 0.1)
        bias = self._w(f"{bn}.bias", (cout,), 0.1)
        mean = self._w(f"{bn}.mean", (cout,), 0.1)
        var = f"{bn}.var"
        self.inits.append(numpy_helper.from_array(self.rng.uniform(0.5, 1.5, cout).astype(np.float32), var))
        self.nodes.append(helper.make_node("BatchNormalization", [f"{p}.out", scale, bias, mean, var],
                                           [f"{bn}.out"], name=bn, epsilon=1e-5))
        out = f"{bn}.out"
        if relu:
            self.nodes.append(helper.make_node("Relu", [out], [f"relu{self.n}.out"], name=f"relu{self.n}"))
            out = f"relu{self.n}.out"
        return out

    def bottleneck(self, x: str, cin: int, width: int, stride: int) -> str:
        cout = width * 4
        y = self.conv_bn(x, cin, width, 1, 1, True)
        y = self.conv_bn(y, width, width, 3, stride, True)
        y = self.conv_bn(y, width, cout, 1, 1, False)
        short = x if (stride == 1 and cin == cout) else self.conv_bn(x, cin, cout, 1, stride, False)
        self.n += 1
        add, out = f"add{self.n}", f"add{self.n}.out"
        self.nodes.append(helper.make_node("Add", [y, short], [f"{add}.sum"], name=add))
        self.nodes.append(helper.make_node("Relu", [f"{add}.sum"], [out], name=f"{add}.relu"))
        return out


def resnet50(seed: int = 0) -> onnx.ModelProto:
    """ResNet-50 v1 with random weights, batch 1, 224x224, opset 17."""
    b = _Builder(seed)
    x = b.conv_bn("data", 3, 64, 7, 2, True)
    b.nodes.append(helper.make_node("MaxPool", [x], ["pool1"], name="pool1", kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for width, blocks, stride in STAGES:
        for i in range(blocks):
            x = b.bottleneck(x, cin, width, stride if i == 0 else 1)
            cin = width * 4
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    b.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fc_w = b._w("fc.weight", (1000, 2048), 0.02)
    fc_b = b._w("fc.bias", (1000,), 0.01)
    b.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc", transB=1))
    g = helper.make_graph(b.nodes, "resnet50",
                          [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
                          initializer=b.inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_convert")


def write_external(folder: Path, gib: float) -> tuple[Path, int]:
    """A chain of MatMuls x @ W_i (4096 x 4096 float32 each, 64 MiB) whose weights, ``gib`` GiB
    in all, live in one external-data file written chunk by chunk (this process stays small)."""
    n, width = max(1, round(gib * 2**30 / (4096 * 4096 * 4))), 4096
    rng = np.random.default_rng(0)
    inits, nodes, offset = [], [], 0
    with open(folder / "big.bin", "wb") as f:
        for i in range(n):
            for _ in range(16):  # 4 MiB at a time
                f.write((rng.standard_normal((width // 16, width), dtype=np.float32) * 0.01).tobytes())
            t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[width, width],
                            data_location=TensorProto.EXTERNAL)
            nbytes = width * width * 4
            for k, v in (("location", "big.bin"), ("offset", str(offset)), ("length", str(nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            offset += nbytes
            nodes.append(helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", f"w{i}"], [f"h{i}"],
                                          name=f"mm{i}"))
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info(f"h{n - 1}", TensorProto.FLOAT, [1, width])],
                          initializer=inits)
    path = folder / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, offset


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + sys) and peak RSS (MiB) of one process running ``cmd``.

    This process stays small (the model is generated in a child), so the child's RSS high-water
    mark, which starts from its parent's at fork, is its own.
    """
    t0 = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages are: with their .pyc files
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err}")
    return dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # Linux: KiB


ONNX_TRIO = (
    "import sys, onnx, onnx.checker, onnx.shape_inference\n"
    "m = onnx.load(sys.argv[1])\n"
    "onnx.checker.check_model(m)\n"
    "onnx.shape_inference.infer_shapes(m)\n"
)


def _interleaved(runs: dict[str, list[str]], repeat: int,
                 outputs: tuple[Path, ...] = ()) -> dict[str, tuple[float, float, float]]:
    """Median wall, median CPU and largest peak RSS of each command, run in turn, round by round.
    ``outputs`` are removed before each run: deleting a large old file is not the command's work."""
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in runs}
    for _ in range(max(repeat, 1)):
        for name, cmd in runs.items():
            for out in outputs:
                out.unlink(missing_ok=True)
            got[name].append(measure(cmd))
    return {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), max(r[2] for r in v))
            for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (medians are kept)")
    ap.add_argument("--keep", metavar="DIR", help="write the models and .obir here instead of a temp dir")
    ap.add_argument("--external-gib", type=float, default=1.6, metavar="G",
                    help="size of the external-data model's weights (0: skip it)")
    ap.add_argument("--generate", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        onnx.save(resnet50(), args.generate)
        return
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_convert_"))
    folder.mkdir(parents=True, exist_ok=True)
    model_path, out_path = folder / "resnet50.onnx", folder / "resnet50.obir"
    if not model_path.exists():
        subprocess.run([sys.executable, __file__, "--generate", str(model_path)], check=True)
    size = model_path.stat().st_size / 2**20
    opbridge = [sys.executable, "-m", "opbridge", "convert"]
    runs = {
        "opbridge convert": [*opbridge, str(model_path), "-o", str(out_path)],
        "onnx load+checker+shape_inference": [sys.executable, "-c", ONNX_TRIO, str(model_path)],
        "(python -c 'import opbridge' alone)": [sys.executable, "-c", "import opbridge"],
    }
    results = _interleaved(runs, args.repeat, (out_path,))
    print(f"ResNet-50 v1, random weights, {size:.1f} MiB .onnx, one process per run, "
          f"{args.repeat} interleaved rounds, medians")
    print(f"{'':38s} {'wall (s)':>9s} {'CPU (s)':>8s} {'peak RSS (MiB)':>15s}")
    for name, (t, c, m) in results.items():
        print(f"{name:38s} {t:9.2f} {c:8.2f} {m:15.0f}")
    (to, co, mo) = results["opbridge convert"]
    (tr, cr, mr) = results["onnx load+checker+shape_inference"]
    print(f"{'ratio opbridge / onnx trio':38s} {to / tr:9.2f} {co / cr:8.2f} {mo / mr:15.2f}")
    if args.external_gib > 0:
        big = folder / "big.onnx"
        weights = (folder / "big.bin").stat().st_size if big.exists() and (folder / "big.bin").exists() else 0
        if abs(weights - args.external_gib * 2**30) > 2**26:
            big, weights = write_external(folder, args.external_gib)
        outs = (folder / "big.obir", folder / "big.copy")
        big_runs = {"opbridge convert": [*opbridge, str(big), "-o", str(outs[0])],
                    "cp of the weights file (the disk's pace)": ["cp", str(folder / "big.bin"), str(outs[1])]}
        res = _interleaved(big_runs, args.repeat, outs)
        for out in outs:
            out.unlink(missing_ok=True)
        print(f"\nMatMul chain with {weights / 2**30:.2f} GiB of external-data weights, {args.repeat} interleaved "
              "rounds, medians")
        print(f"{'':42s} {'wall (s)':>9s} {'CPU (s)':>8s} {'peak RSS (MiB)':>15s} {'RSS / weights':>14s}")
        for name, (t, c, m) in res.items():
            print(f"{name:42s} {t:9.2f} {c:8.2f} {m:15.0f} {m * 2**20 / weights:14.3f}")
        ratio = res["opbridge convert"][0] / res["cp of the weights file (the disk's pace)"][0]
        print(f"{'ratio opbridge convert / cp':42s} {ratio:9.2f}")


if __name__ == "__main__":
    main()
