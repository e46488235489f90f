"""ONNX mappings: comparisons, boolean logic, Where, IsNaN/IsInf.

Semantics: https://onnx.ai/onnx/operators/. Equal/Less/Greater/And/Or/Xor before opset 7
broadcast B onto A at 'axis' (legacy broadcasting) and get their own mapping; later versions
only widen the accepted types, which the IR ops already accept.
"""

from __future__ import annotations

from .elementwise import legacy_binary, one_to_one

for _op in ("Equal", "Less", "Greater", "And", "Or", "Xor"):
    legacy_binary(_op)
    one_to_one(_op, 7, num_inputs=2)

one_to_one("LessOrEqual", 12, num_inputs=2)
one_to_one("GreaterOrEqual", 12, num_inputs=2)
one_to_one("Not", 1)
one_to_one("Where", 9, num_inputs=3)
one_to_one("IsNaN", 9)
one_to_one("IsInf", 10, attrs=("detect_negative", "detect_positive"))
