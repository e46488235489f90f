from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="opbridge serve needs the 'serve' extra (in the 'test' extra too)")


@pytest.fixture(scope="session")
def small_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opbridge.examples.onnx_models import write_small_cnn_onnx

    return Path(write_small_cnn_onnx(tmp_path_factory.mktemp("serve-model") / "small_cnn.onnx"))


@pytest.fixture
def make_client(tmp_path: Path):
    """A TestClient over a fresh app (its lifespan runs: store and scheduler started and stopped)."""
    from starlette.testclient import TestClient

    from opbridge.serve import ServeConfig, create_app

    clients = []

    def make(**options):
        client = TestClient(create_app(ServeConfig(data=tmp_path / "data", **options)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.__exit__(None, None, None)
