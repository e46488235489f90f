"""``ob.batch``: validate, convert or compile a whole model zoo, on a local process pool or on Ray.

Every model becomes one self-contained *task* (:mod:`.task`): a plain dict holding the model's
bytes (and its weights', companion files' and plugins' bytes) and the options.
:func:`~opbridge.batch.task.run_task` writes those bytes to a private temporary folder, does the
work there and returns a plain dict with the verdict, the figures and the bytes of every output
file (``model.obir``, ``model.obprog``, ``report.json``, ``report.html``). Nothing in a task refers
to the caller's filesystem, so the same function runs in a local ``ProcessPoolExecutor`` (spawn
context) or as a Ray remote task on another machine (docs/scaling.md). The caller (:mod:`.api`)
writes the outputs under ``DIR/<safe-name>/`` and the summary of the whole batch
(:mod:`.summary`: ``summary.json``, ``summary.html`` and a table).

One failing model never stops the others: its error (a malformed file, an unsupported op, a
worker that died) is recorded in its row. :attr:`BatchResult.exit_code` is 0 when every model
passed, 1 when a validation did not pass, 2 when a model failed with a user error (an
:class:`~opbridge.errors.OpbridgeError` or an unreadable file), 3 on an internal error; the worst
one wins.
"""

from __future__ import annotations

from .api import (
    EXIT_FAILED,
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    EXIT_USER_ERROR,
    MODES,
    BatchError,
    BatchResult,
    ModelResult,
    batch,
    expand_models,
    safe_names,
)
from .task import run_task

__all__ = ["EXIT_FAILED", "EXIT_INTERNAL_ERROR", "EXIT_OK", "EXIT_USER_ERROR", "MODES", "BatchError",
           "BatchResult", "ModelResult", "batch", "expand_models", "run_task", "safe_names"]
