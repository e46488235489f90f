"""docs/cli.md and docs/ops.md are generated from the code; fail when they are stale."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DOCS = [ROOT / "docs" / "cli.md", ROOT / "docs" / "ops.md"]


def _generated_with() -> str | None:
    m = re.search(r"gendocs` \(Python (\d+\.\d+)\)", DOCS[0].read_text())
    return m.group(1) if m else None


def test_docs_record_the_python_that_generated_them():
    # without the marker the freshness test below would skip on every Python, never failing
    assert _generated_with() is not None, f"{DOCS[0]} lacks the 'gendocs` (Python X.Y)' marker"


@pytest.mark.skipif(_generated_with() != f"{sys.version_info.major}.{sys.version_info.minor}",
                    reason="argparse words --help differently across Python versions; the docs "
                    "record the version that generated them")
def test_docs_are_fresh():
    # a fresh interpreter: no plugin or test-defined op leaks into the tables
    r = subprocess.run([sys.executable, "-m", "opbridge.tools.gendocs", "--check"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr + "\n(run: python -m opbridge.tools.gendocs)"


def test_cli_doc_covers_every_command():
    from opbridge.cli import COMMANDS

    text = DOCS[0].read_text()
    for name in COMMANDS:
        assert f"## opbridge {name}\n" in text, name


def test_ops_doc_lists_ir_ops_and_frameworks():
    text = DOCS[1].read_text()
    assert "| Conv |" in text and "| Relu |" in text
    for title in ("ONNX", "Caffe", "TorchScript"):
        assert f"## {title}: " in text


def test_check_mode_detects_staleness(tmp_path, monkeypatch):
    from opbridge.tools import gendocs

    monkeypatch.setattr(gendocs, "DOCS", tmp_path)
    monkeypatch.setattr(gendocs, "ROOT", tmp_path)
    assert gendocs.main(["--check"]) == 1          # files absent
    assert gendocs.main([]) == 0                   # written
    assert (tmp_path / "cli.md").is_file() and (tmp_path / "ops.md").is_file()
    assert gendocs.main(["--check"]) == 0
