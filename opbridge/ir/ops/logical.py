"""logical ops (being filled in)."""

from __future__ import annotations
