"""Lazy start-up: what ``import opbridge`` and ``opbridge --help`` import, and that loading the
built-in op definitions and mappings per family on first use answers exactly as loading them
all up front would (duplicates caught, overrides kept, listings complete, the index current).

Each case runs in a fresh interpreter: what is loaded depends on what the process did before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

HEAVY = ("onnx", "google.protobuf", "torch", "starlette", "uvicorn", "ray", "safetensors", "numpy")


def _run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON document as its last line."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _loaded(prefixes: tuple[str, ...]) -> str:
    return f"sorted(m for m in sys.modules if m.split('.')[0] in {prefixes!r} or m.startswith({prefixes!r}))"


def test_import_opbridge_imports_no_heavy_module_and_no_family() -> None:
    out = _run(f"""
        import json, sys
        import opbridge
        print(json.dumps({_loaded(HEAVY + ('opbridge.ir.ops.', 'opbridge.mappers.'))}))
    """)
    assert out == []


def test_help_imports_no_heavy_module_and_no_family() -> None:
    out = _run(f"""
        import json, sys
        from opbridge.cli import build_parser
        text = build_parser().format_help()
        assert "convert" in text and "validate" in text
        print(json.dumps({_loaded(HEAVY + ('opbridge.ir.ops.', 'opbridge.mappers.'))}))
    """)
    assert out == []


def test_public_names_resolve_and_functions_win_over_their_modules() -> None:
    out = _run("""
        import json, sys, types
        import opbridge.convert, opbridge.validate.api, opbridge.batch.api  # the submodules first
        import opbridge.ir.interpret
        import opbridge as ob
        from opbridge.ir import interpret
        missing = [n for n in ob.__all__ if not hasattr(ob, n)]
        star = {}
        exec("from opbridge import *", star)
        missing += [n for n in ob.__all__ if n not in star or n not in dir(ob)]
        kinds = {n: type(getattr(ob, n)).__name__ for n in ("convert", "validate", "batch", "interpret")}
        kinds["ir.interpret"] = type(interpret).__name__
        print(json.dumps({"missing": missing, "kinds": kinds, "ir": isinstance(ob.ir, types.ModuleType)}))
    """)
    assert out == {"missing": [], "ir": True,
                   "kinds": dict.fromkeys(("convert", "validate", "batch", "interpret", "ir.interpret"), "function")}


def test_onnx_convert_loads_only_the_families_it_uses(tmp_path) -> None:
    out = _run(f"""
        import json, sys
        import numpy as np
        from onnx import TensorProto, helper
        import opbridge as ob
        m = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])]),
            opset_imports=[helper.make_opsetid("", 17)])
        g = ob.convert(m)
        y = ob.interpret(g, {{"x": np.array([[-1, 0, 2, -3]], np.float32)}})["y"]
        print(json.dumps({{"y": y.tolist(), "loaded": {_loaded(("opbridge.ir.ops.", "opbridge.mappers."))}}}))
    """)
    assert out["y"] == [[0, 0, 2, 0]]
    loaded = set(out["loaded"])
    assert "opbridge.ir.ops.activation" in loaded and "opbridge.mappers.onnx.activation" in loaded
    assert not {m for m in loaded if m.startswith(("opbridge.mappers.caffe.", "opbridge.mappers.torchscript."))}
    assert "opbridge.ir.ops.detection" not in loaded


@pytest.mark.parametrize("first", ["nothing", "everything"])
def test_a_duplicate_op_definition_is_caught_whatever_was_loaded(first: str) -> None:
    out = _run(f"""
        import json
        from opbridge import RegistryError, define_op, DEFAULT_OPS
        if {first == "everything"}:
            DEFAULT_OPS.names()
        try:
            define_op("Relu")
        except RegistryError as err:
            print(json.dumps(str(err)))
        else:
            print(json.dumps(None))
    """)
    assert out is not None and "already defined at" in out
    assert "ir/ops/activation.py" in out.replace("\\\\", "/")


@pytest.mark.parametrize("first", ["nothing", "everything"])
def test_a_duplicate_mapping_is_caught_whatever_was_loaded(first: str) -> None:
    out = _run(f"""
        import json
        from opbridge import DEFAULT_MAPPINGS, Framework, RegistryError, mapping
        if {first == "everything"}:
            list(DEFAULT_MAPPINGS.entries())
        try:
            mapping(Framework.ONNX, "Relu")(lambda node, g: None)
        except RegistryError as err:
            print(json.dumps(str(err)))
        else:
            print(json.dumps(None))
    """)
    assert out is not None and "registered twice" in out
    assert "mappers/onnx/" in out.replace("\\\\", "/")


@pytest.mark.parametrize("first", ["nothing", "everything"])
def test_a_plugin_overriding_a_builtin_keeps_its_override(tmp_path, first: str) -> None:
    plugin = tmp_path / "my_relu.py"
    plugin.write_text(textwrap.dedent("""
        import numpy as np
        import opbridge as ob

        (ob.define_op("Relu", override=True).input("x", "T").output("y", "T")
           .type_param("T", allowed=("f32",)).shape_fn(lambda ctx: ctx.same_as_input(0))
           .compute(lambda x: np.maximum(x, 0) + 100))

        @ob.mapping(ob.Framework.ONNX, "Relu", since_opset=14, override=True)
        def relu(node, g):
            return g.op("Relu", [g.input(0)])
    """))
    out = _run(f"""
        import json
        import numpy as np
        from onnx import TensorProto, helper
        import opbridge as ob
        if {first == "everything"}:
            ob.DEFAULT_OPS.names(); list(ob.DEFAULT_MAPPINGS.entries())
        ob.load_plugins([{str(plugin)!r}])
        ob.DEFAULT_OPS.names(); list(ob.DEFAULT_MAPPINGS.entries())  # every family loaded after it
        m = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
            opset_imports=[helper.make_opsetid("", 17)])
        y = ob.interpret(ob.convert(m), {{"x": np.array([-1, 2], np.float32)}})["y"]
        entry = ob.DEFAULT_MAPPINGS.find("onnx", "Relu", "", 17)
        print(json.dumps({{"y": y.tolist(), "op_site": ob.DEFAULT_OPS.get("Relu").defined_at,
                           "map_site": entry.defined_at}}))
    """)
    assert out["y"] == [100, 102]
    assert "my_relu.py" in out["op_site"] and "my_relu.py" in out["map_site"]


def test_listings_hold_everything_the_families_register() -> None:
    out = _run("""
        import importlib, json
        from opbridge import registry_index
        from opbridge.families import MAPPING_PACKAGES, OP_PACKAGES, family_modules
        from opbridge.ir.opdef import DEFAULT_OPS
        from opbridge.mappers.registry import DEFAULT_MAPPINGS
        lazy_ops = DEFAULT_OPS.names()
        lazy_maps = sorted({(e.framework.value, e.domain or "", e.op_type) for e in DEFAULT_MAPPINGS.entries()})
        for m in family_modules(OP_PACKAGES + MAPPING_PACKAGES):
            importlib.import_module(m)
        eager_maps = sorted({(e.framework.value, e.domain or "", e.op_type) for e in DEFAULT_MAPPINGS.entries()})
        index_maps = sorted({(fw, d or "", o) for fw, d, o in registry_index.MAPPINGS})
        print(json.dumps({"ops": [lazy_ops, DEFAULT_OPS.names(), sorted(registry_index.OPS)],
                          "maps": [lazy_maps, eager_maps, index_maps]}))
    """)
    assert len(out["ops"][0]) > 100 and out["ops"][0] == out["ops"][1] == out["ops"][2]
    assert len(out["maps"][0]) > 200 and out["maps"][0] == out["maps"][1] == out["maps"][2]


def test_a_name_the_index_does_not_know_still_resolves() -> None:
    out = _run("""
        import json
        from types import SimpleNamespace
        from opbridge.families import DEFAULT_LOADER
        from opbridge.ir.opdef import DEFAULT_OPS
        from opbridge.mappers.registry import DEFAULT_MAPPINGS
        DEFAULT_LOADER._index = SimpleNamespace(OPS={}, MAPPINGS={}, FALLBACKS={})  # a stale index
        entry = DEFAULT_MAPPINGS.find("caffe", "Convolution")
        print(json.dumps([DEFAULT_OPS.get("Conv").name, entry is not None, "Softmax" in DEFAULT_OPS]))
    """)
    assert out == ["Conv", True, True]


def test_the_index_is_up_to_date() -> None:
    proc = subprocess.run([sys.executable, "-m", "opbridge.tools.registry_index", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_threads_asking_at_once_all_find_their_names() -> None:
    out = _run("""
        import json, threading
        from opbridge.ir.opdef import DEFAULT_OPS
        from opbridge.mappers.registry import DEFAULT_MAPPINGS
        names = ["Conv", "Relu", "MaxPool", "MatMul", "Softmax", "Resize", "Concat", "ReduceMean"]
        barrier, found = threading.Barrier(4), []

        def ask():
            barrier.wait()
            found.append(all(DEFAULT_OPS.get(n).name == n and DEFAULT_MAPPINGS.find("onnx", n, "", 17)
                             for n in names))

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps(found))
    """)
    assert out == [True] * 4
