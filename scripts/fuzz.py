"""The long fuzz run: N seeded mutants per input kind; prints failures and a summary.

    .venv/bin/python scripts/fuzz.py --cases 5000            # every kind
    .venv/bin/python scripts/fuzz.py --kind onnx --cases 200 --seed 7
    .venv/bin/python scripts/fuzz.py --kind onnx-structured --kind obir-structured --kind obprog-structured

The ``*-structured`` kinds decode the seed and mutate its fields (tests/fuzz/structured*.py);
the others mutate bytes and tokens. Each case is reproducible from its printed label (seed and
case number). The address space is capped (``--max-memory``) so that a runaway allocation is a
MemoryError, reported as a failure, instead of a machine-wide out-of-memory. Exit 1 if any fails.
"""

from __future__ import annotations

import argparse
import resource
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
from tests.fuzz.structured import onnx_structured_seed, onnx_structured_seeds, run_onnx_structured  # noqa: E402
from tests.fuzz.structured_json import run_json_structured  # noqa: E402


def structured_kinds(tmp: Path, max_nesting: int) -> dict:
    """The structure-aware kinds: name -> run(cases, seed) -> failures."""
    seed_dir = tmp / "structured"
    seed_dir.mkdir()
    model = onnx_structured_seed()
    (seed_dir / "seed.onnx").write_bytes(model.SerializeToString())
    g = ob.convert(seed_dir / "seed.onnx")
    ob.save(g, seed_dir / "seed.obir")
    ob.compile(g, target="bm1684").save(seed_dir / "seed.obprog")
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 8)).astype(np.float32)
    return {
        "onnx-structured": lambda n, seed: run_onnx_structured(ob.convert, onnx_structured_seeds(), tmp, n,
                                                               seed),
        "obir-structured": lambda n, seed: run_json_structured(
            ob.load, seed_dir / "seed.obir", ("graph",), ".obir", tmp, n, seed, max_nesting),
        "obprog-structured": lambda n, seed: run_json_structured(
            lambda p: ob.load_program(p).run({"x": x}), seed_dir / "seed.obprog", ("graph", "program"),
            ".obprog", tmp, n, seed, max_nesting),
    }


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
    ap.add_argument("--max-nesting", type=int, default=5000,
                    help="deepest JSON nesting the obir/obprog-structured mutants build")
    ap.add_argument("--max-memory", type=int, default=4096, help="address-space cap in MiB (0: none)")
    args = ap.parse_args()
    if args.max_memory:
        cap = args.max_memory << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    warnings.simplefilter("ignore")
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs = {name: (lambda n, seed, k=k: run_file_cases(k[0], k[1], k[2], tmp, n, seed, text=k[3]))
                for name, k in kinds(tmp).items()}
        runs.update(structured_kinds(tmp, args.max_nesting))
        for name, run in runs.items():
            if args.kind and name not in args.kind:
                continue
            t0 = time.perf_counter()
            fails = run(args.cases, args.seed)
            dt = time.perf_counter() - t0
            print(f"{name:18s} {args.cases} cases, {len(fails)} failures, {dt:.1f}s")
            groups: dict[str, list] = {}
            for f in fails:  # one line per distinct failure (its exception and where it was raised)
                groups.setdefault(f.detail.split(" at ")[-1] if " at " in f.detail else f.detail[:80], []).append(f)
            for fs in list(groups.values())[:20]:
                print(f"    {len(fs)} x, first {fs[0].case}: {fs[0].detail[:400]}")
            failed += len(fails)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
