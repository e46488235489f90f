"""Structure-aware mutants of ``.obir`` and ``.obprog`` files (safetensors + JSON metadata).

The metadata JSON is decoded and mutated structurally (keys deleted, values replaced by edge
numbers / None / "" / [] / {} / wrong types, list elements duplicated, deep nesting), the
tensors are sometimes dropped, truncated or retyped, and the file is re-saved with safetensors,
so the mutants reach the graph reader, the verifier and the simulator rather than the header
decoder. Labels are ``<kind>-structured seed=S case=I``; the same (seed, case) re-creates a mutant.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .mutate import Outcome, judge

EDGE_VALUES: tuple[Any, ...] = (0, -1, 2**31, 10**12, -(2**63), 2**64, 1e308, -1e308, float("nan"),
                                float("inf"), 0.5, None, "", "x", "f32", "../../etc/passwd", [], {},
                                [0], [-1, 2**31], {"a": 1}, True, False)


def _paths(doc: Any, max_depth: int = 40) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (iteratively, and not below ``max_depth``: mutants nest deeply)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        prefix, cur = stack.pop()
        out.append(prefix)
        if len(prefix) >= max_depth:
            continue
        if isinstance(cur, dict):
            stack.extend((prefix + (k,), v) for k, v in cur.items())
        elif isinstance(cur, list):
            stack.extend((prefix + (i,), v) for i, v in enumerate(cur))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def mutate_json(doc: Any, rng: random.Random, max_nesting: int = 5000) -> Any:
    """One structural mutation of a JSON document (which is changed in place and returned);
    deep nesting goes up to ``max_nesting`` levels."""
    paths = _paths(doc)
    path = rng.choice(paths[1:] or paths)
    if not path:
        return rng.choice(EDGE_VALUES)
    parent, key = _get(doc, path[:-1]), path[-1]
    cur = parent[key]
    k = rng.randrange(6)
    if k == 0:  # delete
        del parent[key]
    elif k in (1, 2):  # an edge value or a value of the wrong type
        parent[key] = copy.deepcopy(rng.choice(EDGE_VALUES))
    elif k == 3 and isinstance(cur, list) and cur:  # duplicate an element
        cur.insert(rng.randrange(len(cur) + 1), copy.deepcopy(rng.choice(cur)))
    elif k == 3 and isinstance(cur, (int, float)) and not isinstance(cur, bool):
        parent[key] = rng.choice([cur + 1, cur - 1, -cur, cur * 1000])
    elif k == 4:  # deep nesting
        for _ in range(rng.choice([d for d in (2, 50, 500, 5000) if d <= max_nesting] or [1])):
            cur = [cur] if rng.random() < 0.5 else {"a": cur}
        parent[key] = cur
    elif isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(cur))
    else:
        parent[f"{key}_x" if rng.random() < 0.5 else key] = copy.deepcopy(rng.choice(EDGE_VALUES))
    return doc


def _mutate_tensors(tensors: dict[str, np.ndarray], rng: random.Random) -> None:
    if not tensors:
        return
    key = rng.choice(sorted(tensors))
    k = rng.randrange(4)
    if k == 0:
        del tensors[key]
    elif k == 1:
        tensors[key] = tensors[key].reshape(-1)[: max(0, tensors[key].size - 1)].copy()
    elif k == 2:
        tensors[key] = tensors[key].astype(rng.choice([np.float64, np.int8, np.bool_, np.uint16]))
    else:
        tensors[rng.choice(["ghost", key + "_x"])] = np.zeros(rng.choice([0, 3]), np.float32)


def safetensors_mutants(seed_path: Path, json_keys: tuple[str, ...], n: int, seed: int, out: Path,
                        max_nesting: int = 5000) -> Iterator[str]:
    """Write ``n`` mutants of a safetensors seed to ``out`` (one at a time); yields each label."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(seed_path), framework="numpy") as f:
        meta0 = dict(f.metadata() or {})
        tensors0 = {k: f.get_tensor(k) for k in f.keys()}
    docs0 = {k: json.loads(meta0[k]) for k in json_keys}
    for i in range(n):
        rng = random.Random(f"json-structured:{seed}:{i}")
        meta = dict(meta0)
        docs = copy.deepcopy(docs0)
        tensors = dict(tensors0)
        for _ in range(rng.randrange(1, 4)):
            r = rng.random()
            if r < 0.8:
                key = rng.choice(json_keys)
                try:
                    docs[key] = mutate_json(docs[key], rng, max_nesting)
                except RecursionError:  # copying an already deeply nested mutant: keep it as is
                    pass
            elif r < 0.9:
                _mutate_tensors(tensors, rng)
            else:
                # versions below, at and above both formats' current ones, and non-numbers
                meta[rng.choice(["format", "format_version"])] = rng.choice(["", "1", "-1", "2", "x", "3"])
        for key, doc in docs.items():
            try:
                meta[key] = json.dumps(doc)
            except (RecursionError, ValueError):
                meta[key] = "[" * 100000
        save_file(tensors, str(out), metadata=meta)
        yield f"seed={seed} case={i}"


def run_json_structured(load: Callable[[Path], Any], seed_path: Path, json_keys: tuple[str, ...],
                        suffix: str, tmp: Path, n: int, seed: int, max_nesting: int = 5000) -> list[Outcome]:
    """Judge ``load`` on ``n`` structured mutants of a .obir/.obprog seed; returns the failures."""
    path = tmp / f"case{suffix}"
    failures = []
    for label in safetensors_mutants(seed_path, json_keys, n, seed, path, max_nesting):
        out = judge(f"{suffix[1:]}-structured {label}", lambda: load(path))  # noqa: B023
        if not out.ok:
            failures.append(out)
    return failures
