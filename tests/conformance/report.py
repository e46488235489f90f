"""Print the conformance figures: ``python -m tests.conformance.report [--failed] [--skipped]``.

Runs every node test and real-model test through opbridge.backend (as the test module does)
and prints passed / total, the failures, and the skip reasons grouped by cause.
"""

from __future__ import annotations

import argparse
import collections
import re
import time

from .harness import NODE, REAL, case_names, run_case


def _cause(detail: str) -> str:
    """A skip or failure detail reduced to its cause (op names kept, node names dropped)."""
    m = re.match(r"unsupported: - (\S+)", detail)
    if m:
        return "unsupported: no mapping for " + m.group(1)
    if detail.startswith("unsupported:"):
        return re.sub(r"node '[^']*'", "node", detail)[:160]
    return detail[:160]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--failed", action="store_true", help="list every failure")
    ap.add_argument("--skipped", action="store_true", help="list skip causes with counts")
    ap.add_argument("-k", default="", help="only tests whose name contains this")
    args = ap.parse_args()
    for kind in (NODE, REAL):
        t0 = time.perf_counter()
        outcomes = {n: run_case(kind, n) for n in case_names(kind) if args.k in n}
        dt = time.perf_counter() - t0
        counts = collections.Counter(o.status for o in outcomes.values())
        print(f"{kind}: {counts['passed']} passed / {len(outcomes)} total, {counts['failed']} failed, "
              f"{counts['skipped']} skipped ({dt:.1f} s)")
        if args.failed:
            for n, o in outcomes.items():
                if o.status == "failed":
                    print(f"  FAIL {n}: {o.detail[:300]}")
        if args.skipped:
            causes = collections.Counter(_cause(o.detail) for o in outcomes.values() if o.status == "skipped")
            for cause, c in causes.most_common():
                print(f"  {c:4d}  {cause}")


if __name__ == "__main__":
    main()
