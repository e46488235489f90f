"""Keywords of the Python API that were renamed to match the CLI: the former name keeps working,
with a DeprecationWarning naming the new one, until callers have moved.

One helper for every such keyword, so each renamed keyword warns, and refuses two different
values, in the same words.
"""

from __future__ import annotations

import warnings
from typing import Any

from .errors import OpbridgeError


def renamed_keyword(
    function: str,
    new: tuple[str, Any],
    old: tuple[str, Any],
    *,
    cli: str = "",
    error: type[OpbridgeError] = OpbridgeError,
) -> Any:
    """The value of keyword ``new`` (name, value) of ``function``, taken from ``old`` (its
    former name, value) when that was given, which warns. Both given with different values is
    ``error``. ``cli`` names the CLI option the new name matches, for the message;
    ``stacklevel`` is the warning's, counted from here (3: the caller of a function that
    calls this directly)."""
    (new_name, new_value), (old_name, old_value) = new, old
    if old_value is None:
        return new_value
    if new_value is not None and new_value != old_value:
        raise error(f"{function}() was given {new_name}={new_value!r} and {old_name}={old_value!r}",
                    hint=f"give {new_name}= only: {old_name}= is its former name")
    also = f" (the CLI's {cli})" if cli else ""
    warnings.warn(f"{function}({old_name}=...) is deprecated: write {new_name}=...{also}",
                  DeprecationWarning, stacklevel=3)
    return old_value
