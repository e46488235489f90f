"""Mutation drivers for the JSON and value surfaces: every leaf of a valid document replaced by
each edge value, keys deleted or added, the text truncated; each case judged as the fuzz suite
judges (tests/fuzz/mutate.py), and stricter: a refusal must carry a hint.

A case ends in a result or an OpbridgeError whose message is not empty and whose hint says what
to do; any other exception, a hang, or memory past the bound is a failure.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

from opbridge.errors import OpbridgeError

from ..fuzz.mutate import Outcome, judge

#: values a leaf is replaced by: wrong types, bool-for-number, non-finite, huge, negative
EDGE: tuple[Any, ...] = (None, True, False, "", "x", "1", "nan", [], {}, [1], {"a": 1}, 0, -1, 0.5,
                         -0.0, 2**31, 2**63, 10**30, -(10**30), 1e308, float("nan"),
                         float("inf"), float("-inf"))


def leaf_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``doc`` (containers and leaves), the root excluded."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield (*prefix, k)
        yield from leaf_paths(v, (*prefix, k))


def edited(doc: Any, path: tuple[Any, ...], value: Any = None, delete: bool = False) -> Any:
    """A deep copy of ``doc`` with the leaf at ``path`` set to ``value`` (or deleted)."""
    out = copy.deepcopy(doc)
    cur = out
    for k in path[:-1]:
        cur = cur[k]
    if delete:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


def json_mutants(doc: dict[str, Any], skip: Callable[[tuple[Any, ...]], bool] = lambda p: False,
                 ) -> Iterator[tuple[str, Any]]:
    """(label, mutant document) for every path x edge value, every deletion, an unknown key at
    each object, and the root replaced by non-objects."""
    for root in (None, [], "x", 1, [doc]):
        yield f"root={root!r:.20}", root
    for path in leaf_paths(doc):
        if skip(path):
            continue
        where = "/".join(map(str, path))
        yield f"{where}:deleted", edited(doc, path, None, delete=True)
        for v in EDGE:
            yield f"{where}={v!r:.20}", edited(doc, path, v)
    yield "unknown-key", {**doc, "zzz_unknown": 1}


def text_mutants(text: str) -> Iterator[tuple[str, str]]:
    """Truncations at a spread of points, junk, an empty file, deep nesting and a huge integer."""
    n = len(text)
    for cut in sorted({0, 1, n // 7, n // 3, n // 2, n - 2, n - 1}):
        yield f"truncated@{cut}", text[:cut]
    yield "deep-nesting", "[" * 100000
    yield "huge-int", '{"a": ' + "1" * 5000 + "}"
    yield "bytes", "\x00\xff{"
    yield "json-nan", text.replace("}", ', "zz": NaN}', 1)


def judge_strict(label: str, fn: Callable[[], Any], seconds: float = 10) -> Outcome:
    """:func:`tests.fuzz.mutate.judge`, and a refusal must have a hint."""
    caught: list[OpbridgeError] = []

    def run() -> None:
        try:
            fn()
        except OpbridgeError as err:
            caught.append(err)
            raise

    out = judge(label, run, seconds=seconds)
    if out.ok and caught and not caught[0].hint:
        return Outcome(label, False, f"no hint: {caught[0].message[:200]}")
    return out


def drive(cases: Iterator[tuple[str, Any]], fn: Callable[[Any], Any]) -> tuple[int, list[Outcome]]:
    """Judge ``fn`` on every case; returns the number of cases and the failures."""
    n, failures = 0, []
    for label, case in cases:
        n += 1
        out = judge_strict(label, lambda case=case: fn(case))
        if not out.ok:
            failures.append(out)
    return n, failures


def dumps(doc: Any) -> str:
    """JSON text of a mutant (NaN/inf as Python's json writes them, as a hand-edited file may)."""
    return json.dumps(doc)


def summarize(failures: list[Outcome]) -> str:
    """Failures grouped by kind (the detail with numbers and quoted names blurred): one line
    per group with a count and an example case."""
    import re

    groups: dict[str, list[Outcome]] = {}
    for f in failures:
        key = re.sub(r"'[^']*'|\[[^\]]*\]|-?\d[\d.e+-]*", "_", f.detail)[:90]
        groups.setdefault(key, []).append(f)
    return "\n".join(f"{len(v):4d} x {v[0].case}: {v[0].detail[:220]}" for v in groups.values())
