"""Shared fixtures and skips.

Memory: ``OPBRIDGE_RSS_REPORT=/tmp/rss.txt pytest -n 0 tests/torchscript`` writes the tests that
raised the process's memory high-water mark most and those that left the most memory behind
(``.gw0``, ``.gw1`` suffixes under xdist; ``OPBRIDGE_RSS_TOP`` rows of each, 40 by default).
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real models written by others (read-only); absent on a user's fresh clone.
SHARED_MODELS = ROOT.parent / "shared" / "models"

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
HAVE_CV2 = importlib.util.find_spec("cv2") is not None

requires_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (optional extra)")
requires_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (extra 'validate')")
requires_cv2 = pytest.mark.skipif(
    not HAVE_CV2, reason="opencv-python-headless<5 is not installed (extra 'test')"
)
requires_shared_models = pytest.mark.skipif(
    not SHARED_MODELS.is_dir(), reason=f"{SHARED_MODELS} is absent (a fresh clone has no shared/)"
)


#: Slow tests (marked ``slow``) run as a sample of one in SLOW_SAMPLE unless OPBRIDGE_FULL_TESTS=1.
#: The sample is picked by a hash of the test id mixed with a seed that changes with every commit
#: (``git rev-parse HEAD``; the date outside a git checkout), so the same commit always runs the
#: same sample (on every machine, in every xdist worker) and successive commits rotate through
#: every slow test. OPBRIDGE_SLOW_SEED=<seed from the pytest header> replays a run's sample.
SLOW_SAMPLE = int(os.environ.get("OPBRIDGE_SLOW_SAMPLE", "3") or 3)


def _slow_seed() -> str:
    seed = os.environ.get("OPBRIDGE_SLOW_SEED")
    if seed:
        return seed
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        r = None
    if r is not None and r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()[:12]
    return datetime.date.today().isoformat()


def _full_run() -> bool:
    return os.environ.get("OPBRIDGE_FULL_TESTS") == "1" or SLOW_SAMPLE <= 1


SLOW_SEED = _slow_seed()


def in_slow_sample(nodeid: str, seed: str = SLOW_SEED, sample: int = SLOW_SAMPLE) -> bool:
    """Whether the slow test ``nodeid`` runs in the sample picked by ``seed``."""
    return zlib.crc32(f"{seed}:{nodeid}".encode()) % sample == 0


def pytest_report_header(config):
    if _full_run():
        return "slow tests: all (OPBRIDGE_FULL_TESTS=1)"
    return (f"slow tests: the 1-in-{SLOW_SAMPLE} sample of seed {SLOW_SEED} "
            "(OPBRIDGE_SLOW_SEED replays it; OPBRIDGE_FULL_TESTS=1 runs all)")


def pytest_collection_modifyitems(config, items):
    if _full_run():
        return
    reason = (f"slow test outside this commit's 1-in-{SLOW_SAMPLE} sample (seed {SLOW_SEED}); "
              "run every slow test with OPBRIDGE_FULL_TESTS=1")
    for item in items:
        if item.get_closest_marker("slow") and not in_slow_sample(item.nodeid):
            item.add_marker(pytest.mark.skip(reason=reason))


def run_isolated(target: str, *args: str) -> None:
    """Call ``target`` ("package.module:function") with the string ``args`` in a fresh Python
    process; a failure there (its traceback) fails the calling test.

    For tests whose memory the test process could not give back: torch keeps each traced and
    frozen module's weights in its process-wide compilation unit for good (pytorch/pytorch#96726),
    so every torchvision model exported in a test worker stayed resident, ~13 GB by the end of
    tests/torchscript. Torch offers no safe way to drop them (``drop_all_functions`` would also
    free the functions of scripted modules other tests still hold); a process that ends does.
    """
    code = ("import importlib, sys; mod, fn = sys.argv[1].split(':'); "
            "getattr(importlib.import_module(mod), fn)(*sys.argv[2:])")
    proc = subprocess.run([sys.executable, "-c", code, target, *args], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.fail(f"{target}{args} failed in its own process (exit code {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}{proc.stderr[-8000:]}", pytrace=False)


# -- a real browser (Debian's chromium through Playwright), shared by the HTML report and serve tests
CHROMIUM = os.environ.get("OPBRIDGE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _browser_missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install 'opbridge[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no chromium at {CHROMIUM} (apt-get install chromium, or set OPBRIDGE_CHROMIUM)"
    return ""


@pytest.fixture(scope="module")
def browser():
    """A headless chromium; skips with the reason where it is missing, unless
    OPBRIDGE_REQUIRE_BROWSER=1 (set by .ci/run), where a missing browser fails."""
    why = _browser_missing()
    if why:
        if os.environ.get("OPBRIDGE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"OPBRIDGE_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def isolated_registries():
    """Undo on teardown what a test registers (a plugin loaded with ``override=True`` replaces a
    built-in mapping for the whole process): the default op, mapping and kernel registries and
    the plugin loader's record of loaded files are put back as they were."""
    from opbridge import plugins_loader
    from opbridge.ir.opdef import DEFAULT_OPS
    from opbridge.mappers.registry import DEFAULT_MAPPINGS
    from opbridge.simulator.kernels.registry import DEFAULT_KERNELS

    DEFAULT_OPS.names()  # load every built-in family first, so that the snapshot is complete
    list(DEFAULT_MAPPINGS.entries())
    ops, kernels = dict(DEFAULT_OPS._ops), dict(DEFAULT_KERNELS._kernels)
    table = {k: dict(v) for k, v in DEFAULT_MAPPINGS._table.items()}
    fallbacks, loaded = list(DEFAULT_MAPPINGS._fallbacks), dict(plugins_loader._loaded)
    yield
    DEFAULT_OPS._ops.clear()
    DEFAULT_OPS._ops.update(ops)
    DEFAULT_KERNELS._kernels.clear()
    DEFAULT_KERNELS._kernels.update(kernels)
    DEFAULT_MAPPINGS._table.clear()
    DEFAULT_MAPPINGS._table.update(table)
    DEFAULT_MAPPINGS._fallbacks[:] = fallbacks
    plugins_loader._loaded.clear()
    plugins_loader._loaded.update(loaded)


# -- opt-in memory report: OPBRIDGE_RSS_REPORT=<file> records, for each test, the process's resident
# memory before and after it and how much it raised the high-water mark (ru_maxrss); at the end the
# N biggest (OPBRIDGE_RSS_TOP, 40) of each kind go to <file> (one file per xdist worker: .gw0, ...).
# A test that raises the peak is one to make lighter; one that leaves memory behind ("kept") points
# at a fixture, cache or module-level object that holds on to what it built.
RSS_REPORT = os.environ.get("OPBRIDGE_RSS_REPORT", "")
_rss_rows: list[tuple[str, int, int, int]] = []


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def _maxrss_mb(who: str = "RUSAGE_SELF") -> int:
    import resource

    return resource.getrusage(getattr(resource, who)).ru_maxrss // 1024


if RSS_REPORT:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        before, peak = _rss_mb(), _maxrss_mb()
        yield
        _rss_rows.append((item.nodeid, before, _rss_mb(), _maxrss_mb() - peak))

    def pytest_sessionfinish(session):
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        path = Path(RSS_REPORT + (f".{worker}" if worker else ""))
        top = int(os.environ.get("OPBRIDGE_RSS_TOP", "40"))
        lines = [f"peak (ru_maxrss) {_maxrss_mb()} MB, rss at the end {_rss_mb()} MB, "
                 f"{len(_rss_rows)} tests; the biggest child process (run_isolated, a CLI, a browser) "
                 f"peaked at {_maxrss_mb('RUSAGE_CHILDREN')} MB", "",
                 "raised the peak by (MB), rss before -> after:"]
        for nodeid, before, after, raised in sorted(_rss_rows, key=lambda r: -r[3])[:top]:
            lines.append(f"{raised:7d}  {before:6d} -> {after:6d}  {nodeid}")
        lines += ["", "kept after the test (MB), rss before -> after:"]
        for nodeid, before, after, _ in sorted(_rss_rows, key=lambda r: r[1] - r[2])[:top]:
            lines.append(f"{after - before:7d}  {before:6d} -> {after:6d}  {nodeid}")
        path.write_text("\n".join(lines) + "\n")
