"""Run in a subprocess by test_models.py: convert each .ts.json and interpret it, without torch.

argv: a directory holding NAME.ts.json (+ .safetensors) and NAME.inputs.npz for each model.
Writes NAME.outputs.npz beside them, or NAME.error.txt (also when the converted graph does not
come back equal from a .obir file).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import opbridge as ob
from opbridge.convert import convert

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make tests importable
from tests.graph_equality import assert_roundtrip  # noqa: E402


def main(folder: str) -> int:
    for path in sorted(Path(folder).glob("*.ts.json")):
        name = path.name[: -len(".ts.json")]
        try:
            graph = convert(str(path))
            assert_roundtrip(graph, folder)
            feeds = dict(np.load(path.with_name(f"{name}.inputs.npz")))
            outs = ob.interpret(graph, feeds)
            np.savez(path.with_name(f"{name}.outputs.npz"), *[np.asarray(v) for v in outs.values()])
        except ob.OpbridgeError as err:
            path.with_name(f"{name}.error.txt").write_text(str(err))
        except AssertionError as err:
            path.with_name(f"{name}.error.txt").write_text(f"save -> load: {err}")
    if "torch" in sys.modules:
        print("torch was imported during conversion", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
