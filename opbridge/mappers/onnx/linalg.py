"""ONNX mapping: Det (opset 11; opset 22 only adds bfloat16), onto the IR op of the same name.

Semantics: https://onnx.ai/onnx/operators/onnx__Det.html.
"""

from __future__ import annotations

from .elementwise import one_to_one

one_to_one("Det", 11)
