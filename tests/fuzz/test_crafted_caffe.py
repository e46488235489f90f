"""Crafted hostile Caffe inputs: each ends in an OpbridgeError naming what is wrong, never a crash,
a hang or a huge allocation (sizes are checked before anything is allocated)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import opbridge as ob
from opbridge.tools.caffe_weights import write_random_weights

from . import seeds
from .mutate import judge

HEAD = ('name: "c"\nlayer { name: "data" type: "Input" top: "data" '
        'input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }\n')


def _write(tmp_path: Path, text: str | bytes, name: str = "net.prototxt") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _expect(fn, match: str) -> None:
    """``fn`` ends in an OpbridgeError (judged like a fuzz case) whose message matches."""
    out = judge("crafted", fn)
    assert out.ok, out.detail
    assert out.detail.startswith("OpbridgeError"), f"accepted, expected an error matching {match!r}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ob.OpbridgeError, match=match):
            fn()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n >> 7 else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# -- prototxt structure -------------------------------------------------------------------------

def test_deeply_nested_prototxt(tmp_path):
    p = tmp_path / "deep.prototxt"
    p.write_text("layer { " * 20000 + "}" * 20000)
    out = judge("deep", lambda: ob.convert(p))
    assert out.ok, out.detail
    with pytest.raises(ob.ModelFormatError, match=r"deep\.prototxt:1: .*nested deeper than 100"):
        ob.convert(p)


def test_nesting_at_the_limit_is_read(tmp_path):
    """100 levels are fine for the reader (the layer is then rejected for what it is)."""
    p = _write(tmp_path, "layer { " + "a { " * 99 + "}" * 99 + " }")
    _expect(lambda: ob.convert(p), r"no 'type'")


@pytest.mark.parametrize("content", [
    bytes(range(1, 128)) * 4,
    b"\x0a\x03net\xa2\x06\x04\x0a\x02ab",
    "layer { name: \u202e\"x\" }".encode(),
    b"\x00" * 64,
], ids=["ascii-control-junk", "binary-caffemodel-as-prototxt", "unicode-junk", "nul-bytes"])
def test_prototxt_that_is_junk(tmp_path, content):
    p = _write(tmp_path, content)
    _expect(lambda: ob.convert(p), r"net\.prototxt")


# -- numbers at the edges ------------------------------------------------------------------------

CONV = ('layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv" '
        'convolution_param {{ num_output: {n} kernel_size: {k} pad: {p} group: {g} }} }}\n')


@pytest.mark.parametrize(("field", "value", "match"), [
    ("n", "4294967296", r"num_output.*out of the range of uint32"),
    ("n", "1e308", r"num_output.*out of the range"),
    ("n", "-1", r"num_output.*out of the range of uint32"),
    ("k", "-3", r"kernel_size.*out of the range"),
    ("k", "nan", r"kernel_size.*not a valid uint32"),
    ("n", "2147483648", r"conv.*above the limit"),
    ("n", "1000000000", r"conv.*above the limit"),
    ("k", "4294967295", r"conv.*above the limit"),
    ("k", "0", r"kernel_size.*>= 1"),
    ("g", "0", r"group.*must divide"),
    ("g", "3", r"group.*must divide"),
], ids=["num_output=2^32", "num_output=1e308", "num_output=-1", "kernel_size=-3", "kernel_size=nan",
        "num_output=2^31", "num_output=1e9", "kernel_size=2^32-1", "kernel_size=0", "group=0", "group=3"])
def test_conv_edge_numbers_rejected_before_allocation(tmp_path, field, value, match):
    values = {"n": "4", "k": "3", "p": "1", "g": "1", field: value}
    p = _write(tmp_path, HEAD + CONV.format(**values))
    _expect(lambda: write_random_weights(p, tmp_path / "w.caffemodel"), match)


@pytest.mark.parametrize(("dims", "match"), [
    ("1 4 -1 8", r"input 'data' has a negative dim"),
    ("1 4 1000000000000 1000000", r"input 'data'.*above the limit"),
    ("1 4 2147483648 2147483648", r"input 'data'.*above the limit"),
    ("1 4 9223372036854775808 1", r"out of the range of int64"),
], ids=["dim=-1", "dims=1e12x1e6", "dims=2^31x2^31", "dim=2^63"])
def test_input_dims_at_the_edges(tmp_path, dims, match):
    shape = " ".join(f"dim: {d}" for d in dims.split())
    text = HEAD.replace("dim: 1 dim: 4 dim: 8 dim: 8", shape) + (
        'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n')
    p = _write(tmp_path, text)
    _expect(lambda: ob.convert(p), match)


@pytest.mark.parametrize("legacy", [False, True], ids=["input_shape", "input_dim"])
def test_net_level_input_huge(tmp_path, legacy):
    dims = (1, 1 << 30, 1 << 20, 1 << 20)
    decl = ("".join(f"input_dim: {d}\n" for d in dims) if legacy
            else "input_shape { " + " ".join(f"dim: {d}" for d in dims) + " }\n")
    p = _write(tmp_path, f'input: "data"\n{decl}layer {{ name: "r" type: "ReLU" bottom: "data" top: "r" }}\n')
    _expect(lambda: ob.convert(p), r"input 'data'.*above the limit")


@pytest.mark.parametrize(("layer", "match"), [
    ('type: "InnerProduct" inner_product_param { num_output: 4294967295 }', r"'L'.*above the limit"),
    ('type: "Embed" embed_param { num_output: 1000000 input_dim: 1000000 }', r"'L'.*above the limit"),
    ('type: "SPP" spp_param { pyramid_height: 2147483647 }', r"pyramid_height.*does not fit"),
    ('type: "PriorBox" bottom: "data" prior_box_param { min_size: 4 aspect_ratio: 0 }',
     r"aspect_ratio.*> 0"),
    ('type: "Parameter" parameter_param { shape { dim: -5 } }', r"'L'.*negative"),
    ('type: "Reshape" reshape_param { shape { dim: 0 dim: -1 dim: 0 dim: 0 dim: 0 } }', r"'L'"),
], ids=["InnerProduct,num_output=2^32-1", "Embed,1e6x1e6", "SPP,pyramid_height=2^31-1",
        "PriorBox,aspect_ratio=0", "Parameter,dim=-5", "Reshape,too-many-dims"])
def test_layer_edge_values(tmp_path, layer, match):
    p = _write(tmp_path, HEAD + f'layer {{ name: "L" bottom: "data" top: "L" {layer} }}\n')

    def go():
        w = tmp_path / "w.caffemodel"
        write_random_weights(p, w)
        ob.convert(p, weights=w)

    _expect(go, match)


def test_random_weights_total_limit(tmp_path):
    """A net whose blobs are each fine but together too many: stopped before allocating them."""
    p = _write(tmp_path, HEAD + CONV.format(n=64, k=3, p=1, g=1))
    with pytest.raises(ob.ShapeError, match=r"'conv' \(Convolution\): blob 0: .* above the limit of 100"):
        write_random_weights(p, tmp_path / "w.caffemodel", max_elements=100)


# -- V1 nets with junk enums ---------------------------------------------------------------------

V1 = ('input: "data"\ninput_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8\n'
      'layers {{ name: "L" type: {t} bottom: "data" top: "L" {params} }}\n')


@pytest.mark.parametrize(("t", "params", "match"), [
    ("JUNK", "", r"'L'.*field 'type' = 'JUNK'.*not a value of LayerType"),
    ("999", "", r"'L'.*field 'type' = '999'.*not a value of LayerType"),
    ("-1", "", r"'L'.*field 'type'"),
    ('"CONVOLUTION"', "", r"'L'.*field 'type'"),
    ("POOLING", "pooling_param { pool: 7 }", r"'L'.*field 'pool' = '7'.*PoolMethod"),
    ("POOLING", "pooling_param { pool: RANDOM }", r"'L'.*field 'pool' = 'RANDOM'"),
], ids=["type=JUNK", "type=999", "type=-1", "type=quoted", "pool=7", "pool=RANDOM"])
def test_v1_junk_enums(tmp_path, t, params, match):
    p = _write(tmp_path, V1.format(t=t, params=params))
    _expect(lambda: ob.convert(p), match)


# -- caffemodels ---------------------------------------------------------------------------------

def test_caffemodel_layer_name_not_utf8(tmp_path):
    """Protobuf hands a proto2 string that is not UTF-8 over as bytes: a clean error, not a
    TypeError where the name is joined into a message (found by scripts/fuzz.py)."""
    proto, _ = seeds.write_caffe(tmp_path)
    bad = _write(tmp_path, _field(100, _field(1, b"\xff\xfeconv")), "bad.caffemodel")
    _expect(lambda: ob.convert(proto, weights=bad), r"layer #0: name .* is not valid UTF-8")


def _blob(shape: bytes, data: bytes) -> bytes:
    return _field(7, _field(1, shape)) + _field(5, data)


@pytest.mark.parametrize(("dims", "nvalues", "match"), [
    ([1 << 31, 1 << 31, 4], 0, r"above the limit"),
    ([(1 << 63) - 1, 2], 0, r"above the limit"),
    ([(1 << 64) - 1], 0, r"negative dimension"),
    ([4, 4], 3, r"holds 16 values but the file has 3"),
], ids=["dims=2^31x2^31x4", "dims=2^63", "dim=-1", "data-short"])
def test_caffemodel_blob_dims(tmp_path, dims, nvalues, match):
    proto, _ = seeds.write_caffe(tmp_path)
    blob = _blob(b"".join(_varint(d) for d in dims), b"\0\0\0\0" * nvalues)
    model = _write(tmp_path, _field(100, _field(1, b"conv1") + _field(7, blob)), "m.caffemodel")
    _expect(lambda: ob.convert(proto, weights=model), r"layer 'conv1' blob 0: .*" + match)


@pytest.mark.parametrize(("change", "match"), [
    ((b"num_output: 4", b"num_output: 6"), r"'conv1'.*blob 0.*\(4, 3, 3, 3\).*\(6, 3, 3, 3\)"),
    ((b"kernel_size: 3", b"kernel_size: 5"), r"'conv1'.*blob 0.*\(4, 3, 3, 3\).*\(4, 3, 5, 5\)"),
    ((b"num_output: 5", b"num_output: 7"), r"'fc'.*blob 0"),
    ((b"dim: 3 dim: 8", b"dim: 2 dim: 8"), r"'conv1'.*blob 0"),
], ids=["conv-num_output", "conv-kernel", "fc-num_output", "input-channels"])
def test_blob_shape_disagrees_with_prototxt(tmp_path, change, match):
    _, model = seeds.write_caffe(tmp_path)
    other = _write(tmp_path, seeds.PROTOTXT.replace(*change), "other.prototxt")
    _expect(lambda: ob.convert(other, weights=model), match)


def test_caffemodel_missing_bias_blob(tmp_path):
    proto, _ = seeds.write_caffe(tmp_path)
    weight = _blob(b"".join(_varint(d) for d in (4, 3, 3, 3)), b"\0\0\0\0" * 108)
    model = _write(tmp_path, _field(100, _field(1, b"conv1") + _field(7, weight)), "m.caffemodel")
    _expect(lambda: ob.convert(proto, weights=model), r"'conv1'.*no blob 1")


@pytest.mark.parametrize("kind", ["onnx", "blobproto", "prototxt-text", "obir"])
def test_caffemodel_of_the_wrong_message(tmp_path, kind):
    """Valid protobuf (or text) of another message given as the caffemodel."""
    proto, _ = seeds.write_caffe(tmp_path)
    if kind == "onnx":
        data = seeds.onnx_model().SerializeToString()
    elif kind == "blobproto":  # a mean file: BlobProto num/channels/height/width + data
        data = b"\x08\x01\x10\x03\x18\x08\x20\x08" + _field(5, b"\0\0\0\0" * 192)
    elif kind == "prototxt-text":
        data = seeds.PROTOTXT
    else:
        g = ob.GraphBuilder("g")
        g.output(g.op("Relu", [g.input("x", "f32", (1, 4))]))
        ob.save(g.build(), tmp_path / "g.obir")
        data = (tmp_path / "g.obir").read_bytes()
    model = _write(tmp_path, data, "wrong.caffemodel")
    _expect(lambda: ob.convert(proto, weights=model), r"wrong\.caffemodel|'conv1'")


@pytest.mark.parametrize("nesting", [
    b"\xbb\x3e" * 200000 + b"\xbc\x3e" * 200000,
    _field(100, b"\xa3\x06" * 100000 + b"\xa4\x06" * 100000),
], ids=["unknown-groups", "groups-inside-layers"])
def test_caffemodel_deeply_nested(tmp_path, nesting):
    proto, _ = seeds.write_caffe(tmp_path)
    model = _write(tmp_path, nesting, "deep.caffemodel")
    _expect(lambda: ob.convert(proto, weights=model), r"deep\.caffemodel")


@pytest.mark.parametrize("which", ["caffemodel", "prototxt"])
def test_huge_files_rejected_before_reading(tmp_path, which):
    """Sparse files: their size is checked before a byte is read."""
    proto, model = seeds.write_caffe(tmp_path)
    big = tmp_path / f"big.{which}"
    with open(big, "wb") as f:
        f.truncate(3 << 30 if which == "caffemodel" else 100 << 20)
    if which == "caffemodel":
        _expect(lambda: ob.convert(proto, weights=big), r"big\.caffemodel' is 3221225472 bytes, above")
    else:
        _expect(lambda: ob.convert(big, weights=model), r"big\.prototxt' is 104857600 bytes, above")


@pytest.mark.parametrize(("layer", "match"), [
    ('type: "PriorBox" bottom: "data" bottom: "data" prior_box_param { min_size: 4 }',
     r"'L'.*prior boxes would be a constant of \d+ values, above the limit"),
    ('type: "Pooling" bottom: "data" pooling_param { pool: AVE kernel_size: 3 stride: 2 }',
     r"'L'.*average divisor correction would be a constant of 900000000 values"),
], ids=["PriorBox", "Pooling,AVE"])
def test_shape_derived_constants_checked_before_building(tmp_path, layer, match):
    """A 60000 x 60000 input is below the IR's element limit, but the constants these layers
    compute from it at conversion would not fit in memory."""
    text = HEAD.replace("dim: 1 dim: 4 dim: 8 dim: 8", "dim: 1 dim: 1 dim: 60000 dim: 60000")
    p = _write(tmp_path, text + f'layer {{ name: "L" top: "L" {layer} }}\n')
    _expect(lambda: ob.convert(p), match)


def test_huge_declared_batch_replaced_by_input_shapes(tmp_path):
    """The limit applies to the shape used: a declared batch that input_shapes replaces is not
    an error, and without the replacement it is."""
    p = _write(tmp_path, 'input: "data"\ninput_dim: 2000000000\ninput_dim: 3\ninput_dim: 224\ninput_dim: 224\n'
                         'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n')
    _expect(lambda: ob.convert(p), r"input 'data' of shape \[2000000000, 3, 224, 224\].*above the limit")
    g = ob.convert(p, input_shapes={"data": (1, 3, 224, 224)})
    assert tuple(g.inputs[0].shape) == (1, 3, 224, 224)
