"""``opbridge batch`` / ``ob.batch``: a model zoo on the local process pool, and on a local Ray."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

import opbridge as ob
from opbridge.batch import BatchError, run_task, safe_names
from opbridge.cli import main
from opbridge.examples import fire_net_prototxt, write_small_cnn_onnx
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import requires_ort

pytestmark = requires_ort

ODD = 'odd <b>&"name".onnx'

# LeakyRelu's alpha dropped: the small CNN's leaky1 (alpha 0.2) then leaves onnxruntime's output
BAD_LEAKY_PLUGIN = '''
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "LeakyRelu", since_opset=6, override=True)
def leaky_without_alpha(node, g):
    return g.op("LeakyRelu", [g.input(0)])
'''


def _unsupported_onnx(path):
    from onnx import TensorProto, helper, save

    node = helper.make_node("FooBar", ["x"], ["y"], name="foo", domain="com.example")
    graph = helper.make_graph([node], "unsupported",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                  helper.make_opsetid("com.example", 1)]), str(path))
    return path


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    d = tmp_path_factory.mktemp("zoo")
    good = [write_small_cnn_onnx(d / "a.onnx", seed=0), write_small_cnn_onnx(d / ODD, seed=1),
            str(shutil.copy(fire_net_prototxt(), d / "fire_net.prototxt"))]
    (d / "bad.onnx").write_bytes(b"\x08\x07this is not a protobuf of a model")
    broken = [str(d / "bad.onnx"), str(_unsupported_onnx(d / "unsupported.onnx"))]
    return d, good, broken


@pytest.fixture(scope="module")
def validated(zoo, tmp_path_factory):
    """One CLI run over the zoo on the local pool with 2 workers: (exit code, summary, out dir)."""
    d, good, broken = zoo
    out = tmp_path_factory.mktemp("out")
    rc = main(["batch", "validate", *good, *broken, "--jobs", "2", "-o", str(out)])
    return rc, json.loads((out / "summary.json").read_text()), out


def test_validate_verdicts_agree_with_validate_alone(zoo, validated, tmp_path):
    _, good, _ = zoo
    rc, summary, out = validated
    by_path = {m["path"]: m for m in summary["models"]}
    assert [m["path"] for m in summary["models"]][:3] == good
    weights = str(tmp_path / "fire.caffemodel")  # what the batch makes for a prototxt alone
    write_random_weights(good[2], weights, seed=0)
    for path in good:
        alone = ob.validate(path, weights=weights if path.endswith(".prototxt") else None)
        row = by_path[path]
        assert row["passed"] == alone.passed, path
        assert row["status"] == ("passed" if alone.passed else "failed")
        assert row["figures"]["comparisons"] == len(alone.rows)
        assert row["first_divergence"] == (str(alone.first_divergence) if alone.first_divergence else None)
        report = json.loads((out / row["dir"] / "report.json").read_text())
        assert report["passed"] == alone.passed and report["model"] == path
        assert len(ob.load(out / row["dir"] / "model.obir").nodes) == row["figures"]["nodes"]
        assert ob.load_program(out / row["dir"] / "model.obprog").profile().est_latency_ms == \
            pytest.approx(row["figures"]["est_latency_ms"], rel=1e-3)
    assert by_path[good[2]]["weights"] == "random (seed 0)"


def test_failing_models_are_listed_and_others_complete(zoo, validated):
    _, good, broken = zoo
    rc, summary, _ = validated
    assert rc == 2  # a user error in a model: exit 2 although the others passed
    assert summary["exit_code"] == 2
    assert summary["counts"] == {"passed": 3, "failed": 0, "error": 2}
    by_path = {m["path"]: m for m in summary["models"]}
    bad, unsupported = by_path[broken[0]], by_path[broken[1]]
    assert bad["status"] == "error" and bad["error_kind"] == "user"
    assert "not a valid ONNX model" in bad["error"] and broken[0] in bad["error"]
    assert "opbridge-batch-" not in bad["error"]  # the caller's path, not the worker's copy
    assert unsupported["status"] == "error" and "FooBar" in unsupported["error"]
    assert bad["outputs"] == [] and unsupported["outputs"] == []


def test_summary_html_escapes_names(validated):
    _, summary, out = validated
    page = (out / "summary.html").read_text()
    assert "odd &lt;b&gt;&amp;&quot;name&quot;.onnx" in page
    assert "<b>&" not in page
    assert "http://" not in page and "https://" not in page  # nothing fetched: works offline
    odd = next(m for m in summary["models"] if m["path"].endswith(ODD))
    assert "<" not in odd["dir"] and f'href="{odd["dir"]}/report.html"' in page


def test_divergence_exits_1_and_names_the_layer(zoo, tmp_path):
    _, good, _ = zoo
    plugin = tmp_path / "bad_leaky.py"
    plugin.write_text(BAD_LEAKY_PLUGIN)
    # the plugin loads in the worker only: this process's registry stays as it was
    res = ob.batch("validate", [good[0]], output=tmp_path / "out", jobs=1, plugins=[str(plugin)])
    assert res.exit_code == 1 and not res.passed
    (row,) = res.models
    assert row.status == "failed" and "'leaky1'" in (row.first_divergence or "")


def test_convert_and_compile_write_their_files(zoo, tmp_path):
    _, good, _ = zoo
    nets = tmp_path / "nets"
    nets.mkdir()
    proto = shutil.copy(good[2], nets / "fire.prototxt")
    write_random_weights(proto, nets / "fire.caffemodel", seed=3)
    conv = ob.batch("convert", [good[0], nets], output=tmp_path / "conv", jobs=2)
    assert conv.exit_code == 0 and [m.status for m in conv.models] == ["passed", "passed"]
    fire = conv.models[1]
    assert fire.weights == "sibling" and fire.outputs == ["fire/model.obir"]
    alone = ob.convert(str(proto), weights=str(nets / "fire.caffemodel"))
    got = ob.load(tmp_path / "conv" / "fire" / "model.obir")
    for name, c in alone.constants.items():  # the sibling weights, not random ones
        if c.data is not None:
            assert (got.constants[name].data == c.data).all(), name
    comp = ob.batch("compile", [good[0]], output=tmp_path / "comp", jobs=1)
    (row,) = comp.models
    assert comp.exit_code == 0 and sorted(row.outputs) == ["a/model.obir", "a/model.obprog", "a/profile.html"]
    prog = ob.load_program(tmp_path / "comp" / "a" / "model.obprog")
    assert row.figures["layer_groups"] == prog.profile().num_layer_groups


def test_task_carries_bytes_only(zoo):
    """The task a worker or Ray node gets is plain data; its result carries the files' bytes."""
    _, good, _ = zoo
    data = open(good[0], "rb").read()
    res = run_task({"mode": "convert", "name": "net", "model_name": "net.onnx", "model": data,
                    "target": "bm1684"})
    assert res["status"] == "passed"
    assert set(res["outputs"]) == {"model.obir"} and isinstance(res["outputs"]["model.obir"], bytes)


def test_usage_errors(zoo, tmp_path, capsys):
    _, good, _ = zoo
    assert main(["batch", "convert", good[0], good[1], "--weights", "w.caffemodel", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--weights given for 2 models" in err and "Traceback" not in err
    with pytest.raises(BatchError, match="unknown batch mode 'frobnicate'"):
        ob.batch("frobnicate", good)
    with pytest.raises(BatchError, match="no models"):
        ob.batch("convert", [tmp_path])


def test_safe_names_are_distinct():
    from pathlib import Path

    paths = [Path("zoo/squeeze/deploy.prototxt"), Path("zoo/alex/deploy.prototxt"), Path("x/a b.onnx"),
             Path("y/a b.onnx"), Path("y/../y/a b.onnx")]
    names = safe_names(paths)
    assert names == ["squeeze-deploy", "alex-deploy", "x-a_b", "y-a_b", "y-a_b-2"]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="Ray is not installed (optional extra 'ray'; the test extra has it); "
                    "install it with pip install 'opbridge[ray]' to run this test")
def test_ray_local_cluster_matches_local_pool(zoo, validated, tmp_path):
    _, good, _ = zoo
    _, summary, _ = validated
    res = ob.batch("validate", [good[0], good[2]], output=tmp_path / "ray", ray=True)
    assert res.executor == "ray"
    pooled = {m["path"]: m for m in summary["models"]}
    for m in res.models:
        assert m.status == pooled[m.path]["status"]
        assert m.figures["comparisons"] == pooled[m.path]["figures"]["comparisons"]
        assert (tmp_path / "ray" / m.dir / "report.html").is_file()
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["exit_code"] == 0


# a mapping that kills the worker process converting it
CRASH_PLUGIN = '''
import os
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "com.example::FooBar", since_opset=1)
def foobar_exits(node, g):
    os._exit(7)
'''


def test_a_worker_that_dies_fails_only_its_model(zoo, tmp_path, monkeypatch):
    _, good, broken = zoo
    # a killed worker cannot remove its task folder: keep those under tmp_path (spawned workers
    # read TMPDIR afresh)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    plugin = tmp_path / "crash.py"
    plugin.write_text(CRASH_PLUGIN)
    res = ob.batch("convert", [broken[1], good[0], good[1]], output=tmp_path / "out", jobs=2,
                   plugins=[str(plugin)])
    assert [m.status for m in res.models] == ["error", "passed", "passed"]
    assert "worker running this model died" in (res.models[0].error or "")
    assert res.exit_code == 3


def test_ray_missing_is_a_user_error(zoo, tmp_path, monkeypatch, capsys):
    _, good, _ = zoo
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if Ray were not installed
    assert main(["batch", "convert", good[0], "--ray", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray" in err and "opbridge[ray]" in err


@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="Ray is not installed (optional extra 'ray'; the test extra has it)")
def test_ray_address_that_does_not_answer(zoo, tmp_path, capsys):
    import socket

    _, good, _ = zoo
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert main(["batch", "convert", good[0], "--ray", f"127.0.0.1:{port}", "-o", str(tmp_path)]) == 2
    assert f"cannot reach the Ray cluster at '127.0.0.1:{port}'" in capsys.readouterr().err
