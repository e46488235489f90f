"""ONNX mappings: STFT-17 and MelWeightMatrix-17, onto the IR ops of the same names.

Semantics: https://onnx.ai/onnx/operators/onnx__STFT.html,
https://onnx.ai/onnx/operators/onnx__MelWeightMatrix.html. Their size operands (STFT's
frame_step and frame_length, every MelWeightMatrix input) set the output's shape, so they must
be constants; STFT's window may be computed at run time.
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, ir_dtype, required_input
from .shape import const_scalar

ONNX = Framework.ONNX


@mapping(ONNX, "STFT", since_opset=17)
def stft(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("onesided",))
    signal = required_input(g, 0, "signal")
    g.const(3)  # asks for both sizes at once (see mel_weight_matrix)
    attrs["frame_step"] = int(const_scalar(g, 1, "frame_step"))
    if g.has_input(3):
        attrs["frame_length"] = int(const_scalar(g, 3, "frame_length"))
    return g.op("STFT", [signal, g.input(2)], **attrs)


_MEL_INPUTS = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")


@mapping(ONNX, "MelWeightMatrix", since_opset=17)
def mel_weight_matrix(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("output_datatype",))
    for i in range(len(_MEL_INPUTS)):  # asks for every one, so that all are known in one go
        g.const(i)
    params: dict[str, Any] = {name: const_scalar(g, i, name) for i, name in enumerate(_MEL_INPUTS)}
    for name in _MEL_INPUTS[:3]:
        params[name] = int(params[name])
    for name in _MEL_INPUTS[3:]:
        params[name] = float(params[name])
    params["dtype"] = ir_dtype(g, attrs.get("output_datatype", 1))
    return g.op("MelWeightMatrix", [], **params)
