"""The lite caffe.proto: the committed generated module is current, and the field numbers and
defaults that matter for reading real caffemodels are BVLC's/SSD's."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opbridge.parsers.caffe import layer_defaults
from opbridge.proto import caffe_pb2

PROTO_DIR = Path(__file__).resolve().parents[2] / "opbridge" / "proto"


def _without_versions(code: str) -> str:
    """The generated module minus the lines that only record the protoc version, so another
    grpcio-tools release still checks the schema (the serialized descriptor) itself."""
    code = re.sub(r"# Protobuf Python Version: .*\n", "", code)
    return re.sub(r"_runtime_version\.ValidateProtobufRuntimeVersion\([^)]*\)\n", "", code)


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None,
                    reason="grpcio-tools (protoc) is not installed (extra 'dev')")
def test_generated_module_is_current(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={tmp_path}",
         str(PROTO_DIR / "caffe.proto")],
        check=True, capture_output=True,
    )
    fresh = _without_versions((tmp_path / "caffe_pb2.py").read_text())
    committed = _without_versions((PROTO_DIR / "caffe_pb2.py").read_text())
    assert fresh == committed, (
        "opbridge/proto/caffe_pb2.py is stale: regenerate it with "
        "python -m grpc_tools.protoc -Iopbridge/proto --python_out=opbridge/proto "
        "opbridge/proto/caffe.proto"
    )


# Field numbers as in BVLC caffe.proto (and weiliu89/caffe's ssd branch for the SSD layers).
@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("NetParameter", "layer", 100), ("NetParameter", "layers", 2),
        ("NetParameter", "input", 3), ("NetParameter", "input_dim", 4),
        ("NetParameter", "input_shape", 8), ("LayerParameter", "blobs", 7),
        ("LayerParameter", "convolution_param", 106), ("LayerParameter", "batch_norm_param", 139),
        ("LayerParameter", "scale_param", 142), ("LayerParameter", "input_param", 143),
        ("LayerParameter", "prior_box_param", 203), ("LayerParameter", "detection_output_param", 204),
        ("LayerParameter", "norm_param", 206), ("LayerParameter", "permute_param", 202),
        ("V1LayerParameter", "blobs", 6), ("V1LayerParameter", "type", 5),
        ("BlobProto", "shape", 7), ("BlobProto", "data", 5), ("BlobProto", "num", 1),
        ("BlobProto", "width", 4), ("ConvolutionParameter", "dilation", 18),
        ("PoolingParameter", "global_pooling", 12), ("PoolingParameter", "round_mode", 13),
        ("PriorBoxParameter", "offset", 13), ("DetectionOutputParameter", "keep_top_k", 7),
        ("LayerParameter", "recurrent_param", 146), ("LayerParameter", "hdf5_data_param", 112),
        ("RecurrentParameter", "num_output", 1), ("RecurrentParameter", "expose_hidden", 5),
        ("HDF5DataParameter", "batch_size", 2),
    ],
    ids=lambda v: str(v),
)
def test_field_numbers(message: str, field: str, number: int) -> None:
    assert getattr(caffe_pb2, message).DESCRIPTOR.fields_by_name[field].number == number


@pytest.mark.parametrize(
    ("block", "field", "default"),
    [
        ("convolution_param", "bias_term", True), ("convolution_param", "group", 1),
        ("pooling_param", "pool", "MAX"), ("pooling_param", "stride", 1),
        ("lrn_param", "local_size", 5), ("lrn_param", "beta", 0.75), ("lrn_param", "k", 1.0),
        ("batch_norm_param", "eps", pytest.approx(1e-5)), ("eltwise_param", "operation", "SUM"),
        ("concat_param", "axis", 1), ("flatten_param", "end_axis", -1),
        ("scale_param", "num_axes", 1), ("scale_param", "bias_term", False),
        ("reshape_param", "num_axes", -1), ("crop_param", "axis", 2),
        ("prior_box_param", "flip", True), ("prior_box_param", "clip", False),
        ("norm_param", "eps", pytest.approx(1e-10)), ("norm_param", "across_spatial", True),
        ("detection_output_param", "keep_top_k", -1), ("upsample_param", "scale", 2),
        ("softmax_param", "axis", 1), ("relu_param", "negative_slope", 0.0),
        ("recurrent_param", "num_output", 0), ("recurrent_param", "expose_hidden", False),
    ],
    ids=lambda v: str(v),
)
def test_defaults(block: str, field: str, default: object) -> None:
    assert layer_defaults(block)[field] == default
