"""The long fuzz run: N seeded mutants per input kind; prints failures and a summary.

    .venv/bin/python scripts/fuzz.py --cases 5000            # every kind
    .venv/bin/python scripts/fuzz.py --kind onnx --cases 200 --seed 7

Each case is reproducible from its printed label (seed and case number). Exit 1 if any fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import opbridge as ob  # noqa: E402
from tests.fuzz import seeds  # noqa: E402
from tests.fuzz.mutate import run_file_cases  # noqa: E402


def kinds(tmp: Path) -> dict:
    out = {}
    out["onnx"] = (ob.convert, seeds.write_onnx(tmp).read_bytes(), ".onnx", False)
    proto, model = seeds.write_caffe(tmp)
    out["prototxt"] = (lambda p: ob.convert(p, weights=model), proto.read_bytes(), ".prototxt", True)
    out["caffemodel"] = (lambda p: ob.convert(proto, weights=p), model.read_bytes(), ".caffemodel", False)
    g = ob.GraphBuilder("fz")
    x = g.input("x", "f32", (1, 4))
    g.output(g.op("Relu", [g.op("Add", [x, g.constant("c", np.ones(4, np.float32))])]))
    ob.save(g.build(), tmp / "seed.obir")
    out["obir"] = (ob.load, (tmp / "seed.obir").read_bytes(), ".obir", False)
    xin = np.zeros((1, 3, 8, 8), np.float32)
    out["obprog"] = (lambda p: ob.load_program(p).run({"x": xin}), seeds.write_obprog(tmp).read_bytes(),
                     ".obprog", False)
    try:
        src = seeds.write_ts_json(tmp)
        (tmp / "case.ts.safetensors").write_bytes(src.with_name("seed.ts.safetensors").read_bytes())
        text = src.read_bytes().replace(b"seed.ts.safetensors", b"case.ts.safetensors")
        out["ts.json"] = (ob.convert, text, ".ts.json", True)
    except ImportError:
        print("torch is not installed: skipping the ts.json kind")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=5000, help="mutants per kind")
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--kind", action="append", help="only these kinds (repeatable)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, (load, data, suffix, text) in kinds(tmp).items():
            if args.kind and name not in args.kind:
                continue
            t0 = time.perf_counter()
            fails = run_file_cases(load, data, suffix, tmp, args.cases, args.seed, text=text)
            dt = time.perf_counter() - t0
            print(f"{name:10s} {args.cases} cases, {len(fails)} failures, {dt:.1f}s")
            for f in fails[:20]:
                print(f"    {f.case}: {f.detail}")
            failed += len(fails)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
