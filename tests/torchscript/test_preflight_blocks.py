"""An op with no mapping inside a TorchScript block (prim::If's branches, prim::Loop's body) is
reported once, by the pre-flight check that ONNX subgraphs share, naming the node holding the
block; the prim::If/prim::Loop is not reported again as a refused case of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import opbridge as ob

torch = pytest.importorskip("torch", reason="torch scripts the modules whose blocks are edited here")

from ._scripted import Branchy, ForLoop  # noqa: E402  (needs torch)

UNKNOWN = "aten::frobnicate"  # no mapping in any registry


def _with_unknown_op_in_a_block(path: Path, kind: str, block: int) -> tuple[Path, str, str]:
    """The file with the first aten node of the ``kind`` node's block ``block`` renamed to
    UNKNOWN; the inner node's name and the block holder's."""
    doc = json.loads(path.read_text())
    (node,) = [n for n in doc["nodes"] if n["kind"] == kind]
    inner = next(n for n in node["blocks"][block]["nodes"] if n["kind"].startswith("aten::"))
    inner["kind"] = UNKNOWN
    path.write_text(json.dumps(doc))
    return path, inner["name"], node["name"]


@pytest.mark.parametrize("module,example,kind,block", [
    (Branchy, lambda: (torch.randn(2),), "prim::If", 0),
    (Branchy, lambda: (torch.randn(2),), "prim::If", 1),
    (ForLoop, lambda: (torch.randn(2, 3), 2), "prim::Loop", 0),
], ids=["If-block0", "If-block1", "Loop-body"])
def test_an_unmapped_op_in_a_block_is_one_entry(export: Any, module: Any, example: Any, kind: str,
                                                block: int) -> None:
    path, inner, holder = _with_unknown_op_in_a_block(export(module(), example(), mode="script"), kind, block)
    with pytest.raises(ob.UnsupportedOpError) as err:
        ob.convert(path)
    entries = [line for line in err.value.message.splitlines() if line.startswith("  - ")]
    assert len(entries) == 1, err.value.message
    assert entries[0].startswith(f"  - {UNKNOWN}: node(s) '{inner}' (in blocks[{block}] ")
    assert f" of node '{holder}' ({kind.removeprefix('prim::')}))" in entries[0]
    assert "unsupported case" not in err.value.message


def test_cli_prints_one_error_and_one_hint(export: Any, tmp_path: Path) -> None:
    path, _, _ = _with_unknown_op_in_a_block(export(Branchy(), (torch.randn(2),), mode="script"), "prim::If", 0)
    done = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(path), "-o", str(tmp_path / "o.obir")],
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith(("error:", "hint:"))] == ["error", "hint"]
    assert sum(UNKNOWN in line for line in lines) == 1
    assert "Traceback" not in done.stderr
