"""The service's settings, shared by the app, the scheduler and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: extensions an uploaded model may have (the stored file is ``model<ext>``; the client's name is
#: never used as a path). Longest first so that ``.ts.json`` wins over ``.json``.
MODEL_EXTENSIONS = (".ts.json", ".onnx", ".prototxt")
WEIGHT_EXTENSIONS = (".caffemodel", ".safetensors")
PLUGIN_EXTENSIONS = (".py",)


@dataclass(frozen=True)
class ServeConfig:
    data: Path
    workers: int = 2
    allow_plugins: bool = False
    max_upload_mb: float = 256.0
    job_timeout_s: float = 600.0
    job_memory_mb: int = 4096
    recent: int = 100

    @property
    def jobs_dir(self) -> Path:
        return self.data / "jobs"

    @property
    def db_path(self) -> Path:
        return self.data / "jobs.sqlite3"

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 2**20)
