"""``ob.interpret(..., dump_layers=FILE.npz)``: the keyword ``ob.validate`` and ``validate
--dump-layers`` use; ``dump=``, its former name, still works with a DeprecationWarning."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import InterpretError

X = np.arange(4, dtype=np.float32).reshape(1, 4) - 1.5
W = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


@pytest.fixture(autouse=True)
def _no_debug_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # OPBRIDGE_DEBUG would dump too, whatever the keywords say
    monkeypatch.delenv("OPBRIDGE_DEBUG", raising=False)


def _graph() -> ob.Graph:
    b = ob.GraphBuilder("dumped")
    x = b.input("x", "f32", (1, 4))
    w = b.constant("w", W)
    b.output(b.op("Relu", [b.op("MatMul", [x, w])]))
    return b.build()


def _outputs(path: Path) -> dict[str, np.ndarray]:
    """The dump's node outputs by tensor name (its keys are ``NODE/out:TENSOR``)."""
    with np.load(path) as d:
        return {k.partition("/out:")[2]: d[k] for k in d.files if "/out:" in k}


def _expected() -> list[np.ndarray]:
    """The two layers' outputs, computed with numpy: x @ w, then max(., 0)."""
    mm = X.astype(np.float64) @ W.astype(np.float64)
    return [mm, np.maximum(mm, 0)]


def test_dump_layers_writes_every_layer_without_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "layers.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ob.interpret(_graph(), {"x": X}, dump_layers=str(out))
    dumped = _outputs(out)
    assert len(dumped) == 2, sorted(dumped)
    for got, want in zip(dumped.values(), _expected()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_dump_is_a_deprecated_alias_naming_the_new_keyword(tmp_path: Path) -> None:
    new, old = tmp_path / "new.npz", tmp_path / "old.npz"
    ob.interpret(_graph(), {"x": X}, dump_layers=str(new))
    with pytest.warns(DeprecationWarning, match=r"interpret\(dump=\.\.\.\) is deprecated: write dump_layers=") as caught:
        ob.interpret(_graph(), {"x": X}, dump=str(old))
    assert len(caught) == 1
    assert caught[0].filename == __file__  # points at the caller's line
    a, b = _outputs(new), _outputs(old)
    assert sorted(a) == sorted(b) and len(a) == 2
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_both_spellings_with_different_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InterpretError, match=r"interpret\(\) was given dump_layers=.*a\.npz.* and dump=.*b\.npz"):
        ob.interpret(_graph(), {"x": X}, dump_layers=str(tmp_path / "a.npz"), dump=str(tmp_path / "b.npz"))
    assert not (tmp_path / "a.npz").exists() and not (tmp_path / "b.npz").exists()


def test_the_keyword_is_named_as_validates() -> None:
    interp = inspect.signature(ob.interpret).parameters
    valid = inspect.signature(ob.validate).parameters
    assert interp["dump_layers"].kind is inspect.Parameter.KEYWORD_ONLY
    assert valid["dump_layers"].kind is inspect.Parameter.KEYWORD_ONLY
    assert interp["dump"].default is None
