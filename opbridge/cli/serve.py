"""``opbridge serve``: the conversion service over HTTP (needs the ``serve`` extra)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import non_negative_int, positive_int

if TYPE_CHECKING:  # imported where used: every opbridge command builds this parser
    import logging
    import socket


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run a local HTTP service: upload a model, get its .obir, .obprog and validation report",
        description="Serve a web page and a JSON API (POST /api/jobs, GET /api/jobs/ID, "
        "/api/jobs/ID/report.html ...) that convert, compile and validate uploaded models. Each job "
        "runs in its own worker process with a time and memory limit; job state is kept in SQLite "
        "under --data, so a restart loses nothing. Needs the 'serve' extra "
        "(pip install 'opbridge[serve]'). See docs/serve.md.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000; 0: any free port)")
    p.add_argument("--data", default="opbridge-serve-data", metavar="DIR",
                   help="directory for the job database and files (default ./opbridge-serve-data)")
    p.add_argument("--workers", type=positive_int, default=2, metavar="N", help="jobs run at once (default 2)")
    p.add_argument("--allow-plugins", action="store_true",
                   help="accept plugin uploads (they are Python code run by the server's workers)")
    p.add_argument("--max-upload-mb", type=_positive_float, default=256.0, metavar="MB",
                   help="largest accepted upload, in MiB (default 256; larger: HTTP 413)")
    p.add_argument("--job-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="seconds a job may run before it is killed and failed (default 600)")
    p.add_argument("--job-memory-mb", type=non_negative_int, default=4096, metavar="MB",
                   help="address-space limit of a job's worker process, in MiB (default 4096; 0: none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import OpbridgeError

    try:
        import uvicorn

        from ..serve import ServeConfig, create_app
    except ImportError as err:
        raise OpbridgeError(f"opbridge serve needs {err.name or 'starlette and uvicorn'}",
                            hint="pip install 'opbridge[serve]'") from None
    config = ServeConfig(data=Path(args.data).resolve(), workers=args.workers,
                         allow_plugins=args.allow_plugins, max_upload_mb=args.max_upload_mb,
                         job_timeout_s=args.job_timeout, job_memory_mb=args.job_memory_mb)
    from ..serve.store import lock_data_dir

    if config.data.exists() and not config.data.is_dir():
        raise OpbridgeError(f"--data '{args.data}' is a file; it takes the folder of the job database and "
                            "files", hint="give a folder (made when missing), e.g. --data ./jobs")
    lock_data_dir(config.data).close()  # a clean error now rather than a failed app startup
    sock = _listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"serving http://{shown}:{port}/ (jobs in {config.data}); press Ctrl-C to stop", flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning"))
    import logging

    logging.getLogger("uvicorn.error").addFilter(_not_an_interrupt)
    interrupted = False
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C is how a server is stopped: not an interrupted command
        interrupted = True
    finally:
        sock.close()
    if not server.started and not interrupted:  # the app's startup failed (uvicorn logged why): a bug of ours, as uvicorn.run has it
        sys.stderr.write("internal error: the service did not start (the log above says why)\n"
                         "hint: rerun with --debug for the traceback, and please report it\n")
        return 3
    print("stopped", flush=True)
    return 0


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    """Whether to keep a uvicorn log record: not the traceback logged when a second Ctrl-C
    cancels the app's shutdown (a KeyboardInterrupt, then a CancelledError in the lifespan;
    starlette sends it formatted, as the message of a 'lifespan.shutdown.failed')."""
    text = record.getMessage().rstrip()
    return not (text.startswith("Traceback") and
                (text.endswith("CancelledError") or "\nKeyboardInterrupt\n" in text))


def _positive_float(text: str) -> float:
    """An ``argparse`` type: a number above 0 (seconds, MiB)."""
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return x


def _port(text: str) -> int:
    """An ``argparse`` type: a TCP port number, 0 to 65535."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: give a port number from 0 to 65535 (0: any free port)")
    return n


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` for the server, or an error that says what to do
    (uvicorn would log the failure as a traceback and exit 3, an internal error)."""
    import errno
    import socket

    from ..errors import OpbridgeError

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as err:
        sock.close()
        reason = getattr(err, "strerror", None) or str(err)
        hint = ("another program (another opbridge serve?) listens there: stop it, or choose another --port"
                if getattr(err, "errno", None) == errno.EADDRINUSE else
                "give --host an address of this machine (127.0.0.1, or 0.0.0.0 for every interface)")
        raise OpbridgeError(f"cannot listen on {host}:{port}: {reason}", hint=hint) from None
    return sock
