"""Lint and type gates: ``ruff`` over the whole tree and ``mypy`` over the IR core and the
registries (STYLE.md), run as the developer would run them, so a red test names the file and line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: What ruff lints (the pyproject [tool.ruff] section says how).
RUFF_PATHS = ("opbridge", "tests", "bench", "scripts", "examples")

#: What mypy type-checks; imports outside are read for their types but not reported
#: (``--follow-imports=silent``). Per-module strictness lives in pyproject [tool.mypy].
MYPY_PATHS = (
    "opbridge/ir",
    "opbridge/mappers/registry.py",
    "opbridge/mappers/custom_op.py",
    "opbridge/simulator/kernels/registry.py",
    "opbridge/sites.py",
)

CHECKS = {
    "ruff": ["check", *RUFF_PATHS],
    "mypy": ["--follow-imports=silent", *MYPY_PATHS],
}


@pytest.mark.parametrize("tool", list(CHECKS))
def test_tool_is_clean(tool: str) -> None:
    """``python -m <tool> ...`` from the repository root exits 0 (no findings)."""
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed (it is in the 'test' extra: pip install -e .[test])")
    cmd = [sys.executable, "-m", tool, *CHECKS[tool]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    report = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"`{' '.join(cmd[1:])}` exited {proc.returncode}:\n{report}"
