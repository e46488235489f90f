"""Benchmark: the interpreter's GridSample and DeformConv kernels against torch, in one process.

GridSample (ONNX GridSample-20, every mode with zeros and border padding) is timed through
``ob.interpret`` on a one-node graph and against ``torch.nn.functional.grid_sample`` on the
same data. DeformConv's peer would be ``torchvision.ops.deform_conv2d``; where torchvision's
C++ ops do not load (a torchvision built for another torch), the peer is the same deformable
convolution written in torch: every kernel tap's points sampled by one ``grid_sample``
(bilinear, zeros outside, align_corners=True turns pixel coordinates into grid ones exactly)
times the mask, then one matmul with the weights. The line says which peer ran.

Every runner gets one thread (BLAS and torch's intra-op pool), the runners take turns round
by round, so that a machine shared with other work slows them alike, and the best round of
each is reported with the ratio ours / torch. Each case also checks that both agree.

    .venv/bin/python bench/bench_sample.py [--repeat 5] [--size 64] [--channels 32]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread settings, which BLAS reads at import)
from onnx import TensorProto, helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_sim import best_of  # noqa: E402  (the same best-of-N timing as the simulator bench)

import opbridge as ob  # noqa: E402


def one_node(op: str, inputs: dict[str, tuple[int, ...]], out: str, opset: int, **attrs: Any) -> Any:
    """A converted graph of one ONNX node over float inputs."""
    node = helper.make_node(op, list(inputs), [out], **attrs)
    graph = helper.make_graph([node], op.lower(),
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])
    return ob.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def grid_sample_cases(torch: Any, n: int, c: int, size: int) -> list[tuple[str, Callable, Callable]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (n, size, size, 2)).astype(np.float32)
    tx, tg = torch.from_numpy(x), torch.from_numpy(grid)
    cases = []
    for mode, tmode in (("linear", "bilinear"), ("nearest", "nearest"), ("cubic", "bicubic")):
        for padding in ("zeros", "border"):
            g = one_node("GridSample", {"X": x.shape, "grid": grid.shape}, "Y", 20, mode=mode,
                         padding_mode=padding, align_corners=0)

            def ours(g: Any = g) -> np.ndarray:
                return ob.interpret(g, {"X": x, "grid": grid})["Y"]

            def peer(tmode: str = tmode, padding: str = padding) -> np.ndarray:
                with torch.no_grad():
                    return torch.nn.functional.grid_sample(tx, tg, mode=tmode, padding_mode=padding,
                                                           align_corners=False).numpy()

            cases.append((f"GridSample {mode:7s} {padding:6s} x{list(x.shape)}", ours, peer))
    return cases


def _torch_deform_conv(torch: Any, x: Any, w: Any, off: Any, mask: Any, k: int, pad: int) -> Any:
    """torchvision's deform_conv2d (stride 1, dilation 1, one group and offset group) in torch:
    tap t of output (i, j) reads x at (i - pad + t // k + dy, j - pad + t % k + dx)."""
    n, c, h, wd = x.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n, k * k, 2, oh, ow)
    ky, kx = torch.meshgrid(torch.arange(k), torch.arange(k), indexing="ij")
    oy, ox = torch.meshgrid(torch.arange(oh), torch.arange(ow), indexing="ij")
    py = (oy - pad)[None, None] + ky.reshape(1, -1, 1, 1) + off[:, :, 0]
    px = (ox - pad)[None, None] + kx.reshape(1, -1, 1, 1) + off[:, :, 1]
    grid = torch.stack([px * 2 / (wd - 1) - 1, py * 2 / (h - 1) - 1], dim=-1)
    cols = torch.nn.functional.grid_sample(x, grid.reshape(n, k * k * oh, ow, 2), mode="bilinear",
                                           padding_mode="zeros", align_corners=True)
    cols = cols.reshape(n, c, k * k, oh * ow) * mask.reshape(n, 1, k * k, oh * ow)
    return (w.reshape(w.shape[0], -1) @ cols.reshape(n, c * k * k, oh * ow)).reshape(n, -1, oh, ow)


def deform_conv_case(torch: Any, n: int, c: int, size: int) -> tuple[str, Callable, Callable]:
    rng = np.random.default_rng(1)
    k, pad = 3, 1
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((c, c, k, k)) / (3 * np.sqrt(c))).astype(np.float32)
    off = rng.uniform(-2, 2, (n, 2 * k * k, size, size)).astype(np.float32)
    mask = rng.uniform(0, 1, (n, k * k, size, size)).astype(np.float32)
    shapes = {"X": x.shape, "W": w.shape, "offset": off.shape, "B": (c,), "mask": mask.shape}
    g = one_node("DeformConv", shapes, "Y", 19, pads=[pad] * 4)
    b = np.zeros(c, np.float32)
    t = [torch.from_numpy(a) for a in (x, w, off, mask, b)]
    try:
        from torchvision.ops import deform_conv2d

        def peer() -> np.ndarray:  # torchvision's order: input, offset, weight
            with torch.no_grad():
                return deform_conv2d(t[0], t[2], t[1], bias=t[4], padding=pad, mask=t[3]).numpy()

        peer()
        label = "torchvision.ops.deform_conv2d"
    except (ImportError, RuntimeError) as err:  # torchvision's C++ ops built for another torch
        label = f"torch grid_sample + matmul (torchvision's ops do not load: {str(err).splitlines()[0]})"

        def peer() -> np.ndarray:
            with torch.no_grad():
                return _torch_deform_conv(torch, t[0], t[1], t[2], t[3], k, pad).numpy()

    def ours() -> np.ndarray:
        return ob.interpret(g, {"X": x, "W": w, "offset": off, "B": b, "mask": mask})["Y"]

    return f"DeformConv 3x3 x{list(x.shape)} w{list(w.shape)} vs {label}", ours, peer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size", type=int, default=64, help="image side (GridSample; DeformConv half)")
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    cases = grid_sample_cases(torch, args.batch, args.channels, args.size)
    cases.append(deform_conv_case(torch, args.batch, args.channels, args.size // 2))
    print(f"best of {args.repeat} interleaved rounds, one thread each; ratio = ours / torch")
    for label, ours, peer in cases:
        got, want = ours(), peer()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=label)  # a wrong kernel is not timed
        diff = float(np.max(np.abs(got - want)))
        best = best_of({"ours": ours, "torch": peer}, args.repeat)
        print(f"{label}: ours {best['ours'] * 1e3:8.2f} ms  torch {best['torch'] * 1e3:8.2f} ms  "
              f"ratio {best['ours'] / best['torch']:6.2f}  max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()
