"""The built-in Caffe mappings (owned by the Caffe frontend)."""

from __future__ import annotations
