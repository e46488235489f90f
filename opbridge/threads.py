"""BLAS threads for one call: ``threads=N``, ``--threads N`` and ``OPBRIDGE_NUM_THREADS``.

The interpreter and the simulator spend most of their time in BLAS (the matmuls of Conv,
MatMul and Gemm). Left alone, OpenBLAS starts one thread per core, and on a machine whose
cores are busy with other work those threads wait on each other: a run slows five to ten
times. So every run limits BLAS to a number of threads for its duration, through
threadpoolctl (which finds the BLAS numpy loaded, whichever it is):

- ``threads=N`` (``ob.interpret``, ``Program.run``, ``ob.validate``, ``ob.calibrate``,
  ``ob.quantize``) or ``--threads N`` on the CLI wins;
- else the environment variable ``OPBRIDGE_NUM_THREADS``;
- else :data:`DEFAULT_THREADS` (1): safe on a busy or shared machine, and the speed of a
  single-threaded runtime on an idle one. Ask for more where cores are free.

``0`` means "no limit": BLAS keeps its own setting (usually one thread per core).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .errors import OpbridgeError

#: BLAS threads of a run when neither ``threads=`` nor ``OPBRIDGE_NUM_THREADS`` says otherwise.
DEFAULT_THREADS = 1

#: The environment variable that sets the default number of BLAS threads.
ENV_VAR = "OPBRIDGE_NUM_THREADS"

_controller: Any = None

#: The ``--threads`` of the command running in this context (None: not given). A context
#: variable, not the environment: a thread of another command in the same process (a server,
#: a test session) must not see it.
_command_threads: ContextVar[int | None] = ContextVar("opbridge_command_threads", default=None)


def check_threads(value: Any, where: str) -> int:
    """``value`` as a thread count (an int, or a string of one, >= 0)."""
    n = -1
    if isinstance(value, str):
        try:
            n = int(value.strip())
        except ValueError:
            pass
    elif not isinstance(value, bool):
        try:
            n = operator.index(value)
        except TypeError:
            pass
    if n < 0:
        raise OpbridgeError(
            f"{where} = {value!r}: the number of threads must be an integer >= 0",
            hint="give 1 (the default) on a busy machine, the number of free cores otherwise, "
                 "or 0 to leave BLAS its own setting")
    return n


def resolve_threads(threads: int | None = None) -> int:
    """The BLAS threads a run uses: ``threads`` if given, else the command's ``--threads``,
    else ``OPBRIDGE_NUM_THREADS``, else :data:`DEFAULT_THREADS`; 0 means BLAS's own setting.
    A bad value is an OpbridgeError."""
    if threads is not None:
        return check_threads(threads, "threads")
    command = _command_threads.get()
    if command is not None:
        return command
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return check_threads(env, ENV_VAR)
    return DEFAULT_THREADS


def _threadpool_controller() -> Any:
    # finding the loaded BLAS libraries walks the process's shared objects: do it once
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@contextmanager
def blas_threads(threads: int | None = None) -> Iterator[int]:
    """Limit BLAS to ``resolve_threads(threads)`` threads inside the ``with`` block; yields
    that number (0: not limited). The previous limits come back on exit, also on errors."""
    n = resolve_threads(threads)
    if n == 0:
        yield 0
        return
    with _threadpool_controller().limit(limits=n, user_api="blas"):
        yield n


@contextmanager
def threads_env(threads: int | None, where: str = "--threads") -> Iterator[None]:
    """Make ``threads`` (a CLI ``--threads`` value; None: leave as is) the default of every run
    inside the block (in this thread), so that runs made deep inside a command (validate's
    interpreter and simulator) honour it too; it wins over ``OPBRIDGE_NUM_THREADS``. ``where``
    names the value in the error a bad one gets (``threads`` for a Python keyword)."""
    if threads is None:
        yield
        return
    token = _command_threads.set(check_threads(threads, where))
    try:
        yield
    finally:
        _command_threads.reset(token)
