"""Reading a job submission: the multipart body with a size cap, files stored under fixed names."""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cli.common import input_shape_arg
from .config import MODEL_EXTENSIONS, PLUGIN_EXTENSIONS, WEIGHT_EXTENSIONS


class UploadError(Exception):
    """A bad submission: the HTTP status and the message for the client."""

    def __init__(self, status: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.hint = status, message, hint


class _TooLarge(Exception):
    pass


def limited_receive(receive: Any, limit: int) -> Any:
    """Wrap an ASGI ``receive`` so that a body past ``limit`` bytes stops being read (the
    Content-Length header can be absent or lie)."""
    seen = 0

    async def wrapped() -> Any:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _TooLarge
        return message

    return wrapped


def too_large(limit: int) -> UploadError:
    return UploadError(413, f"the upload is larger than the server's limit of {limit / 2**20:g} MiB",
                       hint="start the server with a larger --max-upload-mb")


def extension(filename: str | None, allowed: tuple[str, ...], what: str) -> str:
    """The allowed extension ``filename`` ends with; the rest of the client's name is not used."""
    name = (filename or "").lower()
    for ext in sorted(allowed, key=len, reverse=True):
        if name.endswith(ext) and len(name) > len(ext):
            return ext
    raise UploadError(400, f"{what} {_quoted(os.path.basename(filename or ''))}: the file name must end "
                      f"with one of {', '.join(allowed)}",
                      hint=f"upload a {what} file named with its format's ending ({', '.join(allowed)})")


def _quoted(text: str) -> str:
    """A client's string for a message: quoted, control characters escaped, cut short."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


@dataclass
class Submission:
    model_name: str
    target: str
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    files: list[tuple[Any, str]] = field(default_factory=list)  # (UploadFile, stored name)

    def spec(self) -> dict[str, Any]:
        names = [n for _, n in self.files]
        return {"model": names[0], "weights": next((n for n in names if n.startswith("weights")), None),
                "plugins": [n for n in names if n.startswith("plugin")],
                "input_shapes": {k: list(v) for k, v in self.input_shapes.items()}, "target": self.target}

    def store(self, jobdir: Path) -> None:
        """Copy the uploads into ``jobdir`` under their fixed names (blocking: run in a thread)."""
        for upload, name in self.files:
            upload.file.seek(0)
            with open(jobdir / name, "wb") as f:
                shutil.copyfileobj(upload.file, f, 1 << 20)


#: the fields of ``POST /api/jobs`` (the upload page's form has exactly these)
FIELDS = ("model", "weights", "plugin", "target", "input_shape")
_FIELDS_HINT = ("the form's fields are model (a file), weights (a file), plugin (files), target and "
                "input_shape (repeatable, NAME=DIMS)")


def read_submission(form: Any, allow_plugins: bool) -> Submission:
    """Check the form of ``POST /api/jobs``; raises UploadError with the status to answer."""
    # a misspelt field (input_shapes=...) would otherwise be dropped and the job run without it
    unknown = sorted({k for k in form.keys() if k not in FIELDS})
    if unknown:
        raise UploadError(400, f"unknown form field {_quoted(unknown[0])}", hint=_FIELDS_HINT)
    for name in ("model", "weights", "target"):
        if len(form.getlist(name)) > 1:
            raise UploadError(400, f"the form gives '{name}' {len(form.getlist(name))} times", hint=_FIELDS_HINT)
    model = form.get("model")
    if model is None or isinstance(model, str) or not model.filename:
        raise UploadError(400, "the form has no 'model' file", hint="send the model as a multipart file field 'model'")
    # a browser sends an empty file input as a part with no file name: not an upload
    plugins = [p for p in form.getlist("plugin") if not isinstance(p, str) and p.filename]
    if plugins and not allow_plugins:
        raise UploadError(403, "plugins are Python code and this server does not run uploaded code",
                          hint="start the server with --allow-plugins to accept them")
    sub = Submission(model_name=os.path.basename(model.filename or "model")[:200],
                     target=str(form.get("target") or "bm1684"))
    sub.files.append((model, "model" + extension(model.filename, MODEL_EXTENSIONS, "model")))
    weights = form.get("weights")
    if weights is not None and not isinstance(weights, str) and weights.filename:
        sub.files.append((weights, "weights" + extension(weights.filename, WEIGHT_EXTENSIONS, "weights")))
    for i, p in enumerate(plugins):
        sub.files.append((p, f"plugin_{i}" + extension(p.filename, PLUGIN_EXTENSIONS, "plugin")))
    for text in form.getlist("input_shape"):
        if not isinstance(text, str) or not text.strip():
            continue
        try:
            name, shape = input_shape_arg(text.strip())
        except argparse.ArgumentTypeError as err:
            raise UploadError(400, f"input_shape {err}", hint="one input_shape field per input, "
                              "NAME=DIMS, e.g. data=1,3,224,224") from None
        if name in sub.input_shapes:
            raise UploadError(400, f"input_shape gives {_quoted(name)} twice", hint="give each input once")
        sub.input_shapes[name] = shape
    _check_target(sub.target)
    return sub


def _check_target(name: str) -> None:
    from ..errors import OpbridgeError
    from ..simulator.target import Target

    try:
        Target.preset(name)
    except OpbridgeError as err:
        raise UploadError(400, err.message, hint=err.hint) from None
