"""A seeded mutator for the fuzz suite, and the harness that judges one case.

Every case must end in a valid result or an OpbridgeError with a non-empty message; any
other exception, a hang past the time limit, or memory past a bound is a failure.
"""

from __future__ import annotations

import random
import re
import signal
import traceback
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opbridge.errors import OpbridgeError

EDGE_NUMBERS = ("0", "-1", "-7", "2147483648", "4294967296", "1000000000000", "1e308", "nan", "-0")
JUNK = (b"\x00", b"\xff\xfe", b"{", b"}", b"\"", b"\n", b"layer {", b"::", b"\x80\x80\x80\x80")


def byte_mutations(data: bytes, rng: random.Random) -> bytes:
    """One random byte-level mutation: truncate, flip, insert junk, duplicate or delete a span."""
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    kind = rng.randrange(6)
    n = len(data)
    if kind == 0:
        return data[: rng.randrange(n)]
    if kind == 1:
        b = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:
        i = rng.randrange(n)
        return data[:i] + rng.choice(JUNK) + data[i:]
    if kind == 3:
        i, j = sorted(rng.randrange(n) for _ in range(2))
        return data[:j] + data[i:j] + data[j:]
    if kind == 4:
        i, j = sorted(rng.randrange(n) for _ in range(2))
        return data[:i] + data[j:]
    b = bytearray(data)
    i = rng.randrange(n)
    b[i] = rng.randrange(256)
    return bytes(b)


_TOKEN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\"[^\"]*\"|\S")


def text_mutations(data: bytes, rng: random.Random) -> bytes:
    """One token-level mutation of a text format: delete, duplicate, junk, or an edge number."""
    toks = [(m.start(), m.end()) for m in _TOKEN.finditer(data)]
    if not toks:
        return byte_mutations(data, rng)
    s, e = rng.choice(toks)
    kind = rng.randrange(5)
    if kind == 0:
        return data[:s] + data[e:]
    if kind == 1:
        return data[:e] + b" " + data[s:e] + data[e:]
    if kind == 2:
        return data[:s] + rng.choice(JUNK) + data[e:]
    if kind == 3:
        nums = [(a, b) for a, b in toks if re.fullmatch(rb"-?\d+(\.\d+)?", data[a:b])]
        if nums:
            s, e = rng.choice(nums)
        return data[:s] + rng.choice(EDGE_NUMBERS).encode() + data[e:]
    return byte_mutations(data, rng)


@dataclass
class Outcome:
    case: str
    ok: bool
    detail: str


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def judge(label: str, fn: Callable[[], Any], *, seconds: float = 5, max_bytes: int = 512 << 20) -> Outcome:
    """Run ``fn``; fine if it returns or raises an OpbridgeError with a message.

    A hang is ``seconds`` of CPU time (so a loaded machine does not make false hangs), or four
    times that in wall time (a case blocked without using CPU, say on a FIFO or a device).
    """
    old_alarm = signal.signal(signal.SIGALRM, _alarm)
    old_prof = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 4 * seconds)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    tracemalloc.start()
    try:
        fn()
        result = Outcome(label, True, "accepted")
    except OpbridgeError as err:
        msg = str(err).strip()
        result = Outcome(label, bool(msg), f"OpbridgeError: {msg[:200]}" if msg else "empty message")
    except _Timeout:
        result = Outcome(label, False, f"hang: still running after {seconds}s of CPU or {4 * seconds}s")
    except MemoryError:
        result = Outcome(label, False, "MemoryError")
    except RecursionError:
        result = Outcome(label, False, "RecursionError")
    except Exception as err:  # the failure the suite exists to find
        frames = traceback.extract_tb(err.__traceback__)
        ours = [f for f in frames if "opbridge" in f.filename] or frames
        at = f" at {ours[-1].filename}:{ours[-1].lineno}" if ours else ""
        result = Outcome(label, False, f"{type(err).__name__}: {str(err)[:300]}{at}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGPROF, old_prof)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    if result.ok and peak > max_bytes:
        result = Outcome(label, False, f"memory: peak {peak >> 20} MiB > {max_bytes >> 20} MiB")
    return result


def mutants(seed_data: bytes, n: int, seed: int, *, text: bool) -> Iterator[tuple[str, bytes]]:
    """``n`` mutants of ``seed_data``; each label is enough to re-create the case."""
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        data = seed_data
        for _ in range(rng.randrange(1, 4)):
            data = text_mutations(data, rng) if text and rng.random() < 0.7 else byte_mutations(data, rng)
        yield f"seed={seed} case={i}", data


def run_file_cases(load: Callable[[Path], Any], seed_data: bytes, suffix: str, tmp: Path, n: int,
                   seed: int, *, text: bool) -> list[Outcome]:
    """Write each mutant to ``tmp/case<suffix>`` and judge ``load(path)``; returns the failures."""
    failures = []
    path = tmp / f"case{suffix}"
    for label, data in mutants(seed_data, n, seed, text=text):
        path.write_bytes(data)
        out = judge(label, lambda: load(path))  # noqa: B023 (called at once)
        if not out.ok:
            failures.append(out)
    return failures
