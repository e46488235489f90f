"""Benchmark: start-up of ``import opbridge`` and ``opbridge --help`` against ``import onnx``.

Each command runs as a fresh process, the commands interleaved round by round (A B C, A B C,
...) with one BLAS thread each, so a slower moment of a shared machine hits all of them; the
ratios are of medians measured in this run. Timing is a benchmark, not a test: nothing here
asserts. For where the time goes: ``python -X importtime -c "import opbridge"``.

Usage: ``python bench/bench_startup.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def commands() -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c 'import onnx'": [py, "-c", "import onnx"],
        "python -c 'import opbridge'": [py, "-c", "import opbridge"],
        "opbridge --help": [py, "-m", "opbridge", "--help"],
        "python -c 'pass' (the interpreter)": [py, "-c", "pass"],
    }


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (default 11)")
    args = ap.parse_args()
    env = {**os.environ, **ONE_THREAD}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages are: with their .pyc files
    cmds = commands()
    for cmd in cmds.values():  # warm the file cache and the .pyc files
        run_once(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    peaks: dict[str, float] = dict.fromkeys(cmds, 0.0)
    for _ in range(max(args.rounds, 1)):
        for name, cmd in cmds.items():
            t, m = run_once(cmd, env)
            times[name].append(t)
            peaks[name] = max(peaks[name], m)
    base = statistics.median(times["python -c 'import onnx'"])
    print(f"start-up, {args.rounds} interleaved rounds, one BLAS thread; median wall, ratio to import onnx")
    print(f"{'':38s} {'wall (s)':>9s} {'ratio':>7s} {'peak RSS (MiB)':>15s}")
    for name in cmds:
        med = statistics.median(times[name])
        print(f"{name:38s} {med:9.3f} {med / base:7.2f} {peaks[name]:15.0f}")


if __name__ == "__main__":
    main()
