"""``opbridge serve``: a local HTTP service that converts, compiles and validates uploaded models.

The ASGI app (:func:`create_app`) keeps jobs in SQLite under a data directory and runs each job in
its own worker process (:mod:`.scheduler`), so a crash or a runaway model ends that job, not the
server. Starlette, uvicorn and python-multipart come with the ``serve`` extra.
"""

from __future__ import annotations

from .config import ServeConfig

__all__ = ["ServeConfig", "create_app"]


def create_app(config: ServeConfig):  # -> starlette.applications.Starlette (imported lazily)
    """The ASGI application for ``config``."""
    from .app import create_app as _create

    return _create(config)
