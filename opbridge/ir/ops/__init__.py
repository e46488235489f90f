"""The built-in op vocabulary, one module per family, each defined with ``define_op``.

Every module is imported here by name (no scanning); tests check that each is.
"""

from __future__ import annotations

from . import activation, elementwise  # noqa: F401

FAMILIES = ("activation", "elementwise")
