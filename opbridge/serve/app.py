"""The Starlette app: the JSON API under ``/api`` and the upload page at ``/``."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from .config import ServeConfig
from .page import PAGE
from .scheduler import Scheduler
from .store import JobStore, lock_data_dir
from .uploads import UploadError, _quoted, _TooLarge, limited_receive, read_submission, too_large

ARTEFACTS = {"report.html": "text/html; charset=utf-8", "report.json": "application/json",
             "model.obir": "application/octet-stream", "model.obprog": "application/octet-stream"}
_ID = re.compile(r"[0-9a-f]{16}")


def _error(status: int, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "hint": hint}, status_code=status)


def _public(job: dict[str, Any]) -> dict[str, Any]:
    out = {k: job[k] for k in ("id", "status", "verdict", "summary", "error", "hint", "created",
                               "started", "finished", "timings")}
    out["model"] = job["model_name"]
    out["target"] = job["spec"].get("target")
    if job["status"] == "done":
        out["links"] = {name: f"/api/jobs/{job['id']}/{name}" for name in ARTEFACTS}
    return out


class Service:
    """The app's state: the store, the scheduler and the handlers that use them."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store: JobStore | None = None
        self.scheduler: Scheduler | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        lock = lock_data_dir(self.config.data)
        self.config.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.store = JobStore(self.config.db_path)
        self.scheduler = Scheduler(self.config, self.store)
        self.scheduler.start()
        try:
            yield
        finally:
            await run_in_threadpool(self.scheduler.stop)
            self.store.close()
            lock.close()

    def _job(self, request: Request) -> dict[str, Any] | None:
        job_id = request.path_params["job_id"]
        assert self.store is not None
        return self.store.get(job_id) if _ID.fullmatch(job_id) else None

    async def submit(self, request: Request) -> Response:
        limit = self.config.max_upload_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return _error(413, too_large(limit).message, too_large(limit).hint)
        limited = Request(request.scope, receive=limited_receive(request.receive, limit))
        try:
            form = await limited.form(max_files=64, max_fields=64)
        except _TooLarge:
            return _error(413, too_large(limit).message, too_large(limit).hint)
        except (HTTPException, MultiPartException) as err:  # a malformed body
            return _error(400, f"could not read the multipart form: {getattr(err, 'detail', None) or err}",
                          hint="POST multipart/form-data with a file field 'model'")
        job_id = secrets.token_hex(8)
        jobdir = self.config.jobs_dir / job_id
        try:
            sub = read_submission(form, self.config.allow_plugins)
            jobdir.mkdir(parents=True)
            await run_in_threadpool(sub.store, jobdir)
            (jobdir / "spec.json").write_text(json.dumps(sub.spec()))
        except UploadError as err:
            return _error(err.status, err.message, err.hint)
        except BaseException:
            shutil.rmtree(jobdir, ignore_errors=True)
            raise
        finally:
            await form.close()
        assert self.store is not None and self.scheduler is not None
        self.store.add(job_id, sub.model_name, sub.spec())
        self.scheduler.notify()
        return JSONResponse({"id": job_id, "status": "queued"}, status_code=202)

    async def list_jobs(self, request: Request) -> Response:
        assert self.store is not None
        return JSONResponse({"jobs": [_public(j) for j in self.store.recent(self.config.recent)]})

    async def get_job(self, request: Request) -> Response:
        job = self._job(request)
        if job is None:
            return _error(404, f"no job {_quoted(request.path_params['job_id'])}", hint=_JOBS_HINT)
        return JSONResponse(_public(job))

    async def artefact(self, request: Request) -> Response:
        job = self._job(request)
        name = request.path_params["name"]
        if job is None:
            return _error(404, f"no job {_quoted(request.path_params['job_id'])}", hint=_JOBS_HINT)
        path = self.config.jobs_dir / job["id"] / name
        if name not in ARTEFACTS or not path.is_file():
            return _error(404, f"job {job['id']} has no {name} (status {job['status']})",
                          hint=f"artefacts: {', '.join(ARTEFACTS)}, once the job is done")
        return FileResponse(path, media_type=ARTEFACTS[name],
                            filename=None if name == "report.html" else f"{job['id']}-{name}")

    async def delete_job(self, request: Request) -> Response:
        job = self._job(request)
        if job is None:
            return _error(404, f"no job {_quoted(request.path_params['job_id'])}", hint=_JOBS_HINT)
        assert self.store is not None and self.scheduler is not None
        self.store.delete(job["id"])
        # the status read above may be stale (the job was claimed or finished since): the
        # scheduler says whether a slot has the job and will remove its directory itself
        if not self.scheduler.cancel(job["id"]):
            await run_in_threadpool(shutil.rmtree, self.config.jobs_dir / job["id"], True)
        return JSONResponse({"id": job["id"], "deleted": True})

    async def health(self, request: Request) -> Response:
        assert self.store is not None
        return JSONResponse({"status": "ok", "version": __version__, "workers": self.config.workers,
                             "jobs": self.store.counts()})

    async def index(self, request: Request) -> Response:
        return HTMLResponse(PAGE)


_JOBS_HINT = "GET /api/jobs lists the jobs and their ids"


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, f"no job or page at {_quoted(request.url.path)}", hint="see GET /api/jobs and GET /api/health")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _error(405, f"{request.method} is not allowed on {_quoted(request.url.path)}",
                  hint="POST /api/jobs submits a job; GET and DELETE /api/jobs/ID read and delete one; "
                  "GET /api/jobs/ID/ARTEFACT downloads its files")


def create_app(config: ServeConfig) -> Starlette:
    svc = Service(config)
    routes = [
        Route("/", svc.index),
        Route("/api/health", svc.health),
        Route("/api/jobs", svc.submit, methods=["POST"]),
        Route("/api/jobs", svc.list_jobs, methods=["GET"]),
        Route("/api/jobs/{job_id}", svc.get_job, methods=["GET"]),
        Route("/api/jobs/{job_id}", svc.delete_job, methods=["DELETE"]),
        Route("/api/jobs/{job_id}/{name}", svc.artefact, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=svc.lifespan, exception_handlers={404: _not_found, 405: _not_allowed})
    app.state.service = svc
    return app
