"""``opbridge demo``: the main job on the bundled examples."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the main job on the bundled example models",
        description="Build the bundled example model, save it as .obir, load it back, run it "
        "in the reference interpreter and print its outputs.",
    )
    p.add_argument("--out-dir", default="out/demo", help="where to write the demo's files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..examples import tiny_cnn
    from ..ir import format_graph, interpret, load, save

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = tiny_cnn()
    path = out / f"{g.name}.obir"
    save(g, path)
    g = load(path)
    print(format_graph(g))
    x = np.random.default_rng(0).standard_normal(g.inputs[0].shape).astype(np.float32)
    outs = interpret(g, {g.inputs[0].name: x})
    print(f"\nwrote {path}; interpreter outputs:")
    for name, arr in outs.items():
        print(f"  {name}: {arr.dtype}{list(arr.shape)} mean={arr.mean():.6f} "
              f"min={arr.min():.6f} max={arr.max():.6f}")
    return 0
