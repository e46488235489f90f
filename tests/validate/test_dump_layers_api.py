"""``ob.validate(..., dump_layers=FILE.npz)``: the Python name of the CLI's ``validate
--dump-layers FILE.npz``; ``dump=``, its former name, still works with a DeprecationWarning."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import opbridge as ob
from opbridge.validate import ValidateError
from opbridge.validate.api import validate_graph


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opbridge.examples.onnx_models import write_small_cnn_onnx

    return Path(write_small_cnn_onnx(tmp_path_factory.mktemp("dump") / "small_cnn.onnx"))


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)


def _outputs(path: Path) -> dict[str, np.ndarray]:
    """The dump's node outputs by tensor name (its keys are ``NODE/out:TENSOR``)."""
    with np.load(path) as d:
        return {k.partition("/out:")[2]: d[k] for k in d.files if "/out:" in k}


def test_dump_layers_writes_the_layers_without_a_warning(model: Path, image: np.ndarray, tmp_path: Path) -> None:
    out = tmp_path / "layers.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = ob.validate(model, inputs={"image": image}, dump_layers=str(out), target=None)
    assert report.passed
    dumped = _outputs(out)
    # the last layer's output, as onnxruntime computes it on the same input
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["prob"], {"image": image})[0]
    np.testing.assert_allclose(dumped["prob"], want, rtol=1e-5, atol=1e-6)
    assert len(dumped) >= 5, sorted(dumped)  # every layer, not only the graph output


def test_dump_is_a_deprecated_alias(model: Path, image: np.ndarray, tmp_path: Path) -> None:
    new, old = tmp_path / "new.npz", tmp_path / "old.npz"
    ob.validate(model, inputs={"image": image}, dump_layers=str(new), target=None)
    with pytest.warns(DeprecationWarning, match=r"dump_layers=") as caught:
        ob.validate(model, inputs={"image": image}, dump=str(old), target=None)
    assert caught[0].filename == __file__  # points at the caller's line
    a, b = _outputs(new), _outputs(old)
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_dump_and_dump_layers_that_differ_are_refused(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidateError, match=r"dump_layers=.*dump="):
        ob.validate(model, dump_layers=str(tmp_path / "a.npz"), dump=str(tmp_path / "b.npz"), target=None)


def test_validate_graph_takes_the_same_name(model: Path, image: np.ndarray, tmp_path: Path) -> None:
    out = tmp_path / "g.npz"
    graph = ob.convert(str(model))
    validate_graph(graph, {"image": image}, framework="onnx", source=str(model), target=None, dump_layers=str(out))
    assert "prob" in _outputs(out)
    with pytest.warns(DeprecationWarning, match=r"validate_graph\(dump=\.\.\.\) is deprecated"):
        validate_graph(graph, {"image": image}, framework="onnx", source=str(model), target=None, dump=str(tmp_path / "h.npz"))


def test_the_keyword_is_named_as_the_cli_option() -> None:
    """``--dump-layers`` <-> ``dump_layers=``, as every other validate option is named."""
    params = inspect.signature(ob.validate).parameters
    assert params["dump_layers"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["dump"].default is None
