"""Where a registration was made: the ``file:line`` every registry records for its error messages."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any


def caller_site(*own_files: str, helpers: Iterable[Callable[..., Any]] = ()) -> str:
    """``file:line`` of the innermost caller outside ``own_files`` (absolute paths), this module
    and the ``helpers`` (functions that register on their caller's behalf).

    Walks frames directly: ``inspect.stack()`` reads source files for every frame and made
    ``import opbridge`` (hundreds of registrations) take seconds.
    """
    skip = {os.path.abspath(f) for f in own_files} | {os.path.abspath(__file__)}
    codes = {getattr(h, "__code__", None) for h in helpers}
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        if os.path.abspath(fname) not in skip and frame.f_code not in codes:
            return f"{fname}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"
