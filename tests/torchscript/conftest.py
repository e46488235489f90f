"""Shared helpers of the TorchScript-json tests: export a module into a temporary directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def export(tmp_path: Path) -> Any:
    """``export(module, example_inputs, name="m", **kw) -> Path`` of the written .ts.json."""
    from opbridge.export.torchscript import export_torchscript

    def run(module: Any, example: Any, name: str = "m", **kw: Any) -> Path:
        return export_torchscript(module, example, tmp_path / f"{name}.ts.json", **kw)

    return run
