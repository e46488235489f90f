"""Array files that declare more data than the machine could hold: an ``.npz`` member whose
header declares 1 TiB uncompressed (a forged archive of a few hundred bytes) is refused before
anything is allocated, naming the member, with a hint; so is an archive whose members together
pass the limit, and a ``.npy`` past it. Arrays below the limit still load. The CLI answers with
one ``error:`` and one ``hint:`` line, exit 2."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy as np
import pytest

import opbridge.arrayfile as af
from opbridge.arrayfile import ArrayFileError, ArrayTooLargeError, memory_limit, read_array_file

TIB = 1 << 40


def _npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A version-1.0 .npy header (numpy/lib/format.py), written here from the format's text."""
    d = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    pad = 64 - (10 + len(d) + 1) % 64
    text = (d + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def _forged_npz(name: str, payload: bytes, declared: int) -> bytes:
    """A one-member stored (uncompressed) zip whose ZIP64 sizes declare ``declared`` bytes
    while it holds ``payload`` (APPNOTE.TXT 4.3.7, 4.3.12, 4.5.3: sizes 0xFFFFFFFF in the
    headers, the real ones in the ZIP64 extra field)."""
    fname = name.encode()
    crc = zlib.crc32(payload)
    extra = struct.pack("<HHQQ", 1, 16, declared, declared)
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                        0xFFFFFFFF, len(fname), len(extra)) + fname + extra
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                          0xFFFFFFFF, len(fname), len(extra), 0, 0, 0, 0, 0) + fname + extra
    offset = len(local) + len(payload)
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), offset, 0)
    return local + payload + central + end


@pytest.fixture
def no_allocation(monkeypatch):
    """Any read of a member's data fails the test: the refusal must come first."""
    def refuse(*a, **k):
        raise AssertionError("a member's data was read (its array allocated)")
    monkeypatch.setattr(np.lib.format, "read_array", refuse)


def test_forged_archive_declares_what_its_zip_headers_say():
    """The forgery is read by zipfile as declaring 1 TiB: what the check sees."""
    data = _forged_npz("x.npy", _npy_header((TIB // 4,)) + b"\0" * 16, TIB)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("x.npy")
    assert info.file_size == TIB and info.compress_type == zipfile.ZIP_STORED


def test_member_declaring_a_terabyte_is_refused_before_allocation(tmp_path, no_allocation):
    p = tmp_path / "bomb.npz"
    p.write_bytes(_forged_npz("x.npy", _npy_header((TIB // 4,)) + b"\0" * 16, TIB))
    assert p.stat().st_size < 1000
    with pytest.raises(ArrayTooLargeError, match=r"bomb\.npz' member 'x\.npy' declares 1 TiB of data "
                                             r"uncompressed, more than this machine's physical memory") as err:
        read_array_file(p)
    assert "more memory" in (err.value.hint or "")


def test_members_together_past_the_limit_are_refused(tmp_path, monkeypatch, no_allocation):
    p = tmp_path / "two.npz"
    np.savez(p, a=np.zeros(100_000, np.uint8), b=np.zeros(100_000, np.uint8))
    monkeypatch.setattr(af, "memory_limit", lambda: 150_000)
    with pytest.raises(ArrayTooLargeError, match=r"two\.npz' declares 2 arrays of .* in all, uncompressed"):
        read_array_file(p)


def test_npy_past_the_limit_is_refused(tmp_path, monkeypatch):
    p = tmp_path / "big.npy"
    np.save(p, np.zeros((2, 1 << 18), np.float32))
    monkeypatch.setattr(af, "memory_limit", lambda: 1 << 20)
    with pytest.raises(ArrayTooLargeError, match=r"big\.npy' declares float32\[2, 262144\] \(2 MiB\), more than "
                                             r"this machine's physical memory \(1 MiB\)"):
        read_array_file(p)


@pytest.mark.parametrize("compress", [False, True], ids=["savez", "savez_compressed"])
def test_large_member_below_the_limit_still_loads(tmp_path, monkeypatch, compress):
    """A legitimate 8 MiB member under a 9 MiB limit: loaded, value for value."""
    x = np.arange(2 << 20, dtype=np.float32)
    p = tmp_path / "ok.npz"
    (np.savez_compressed if compress else np.savez)(p, x=x)
    monkeypatch.setattr(af, "memory_limit", lambda: 9 << 20)
    got = read_array_file(p)
    assert isinstance(got, dict)
    np.testing.assert_array_equal(got["x"], x)


def test_memory_limit_is_physical_memory_or_the_documented_fallback(monkeypatch):
    import os

    pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    assert memory_limit() == pages * page
    def unsupported(name):
        raise ValueError(name)
    monkeypatch.setattr(os, "sysconf", unsupported)
    assert memory_limit() == af.FALLBACK_MEMORY_LIMIT == 64 << 30


def test_cli_validate_input_names_the_member_with_one_error_and_hint(tmp_path, capsys):
    from opbridge.cli import main
    from opbridge.examples.onnx_models import write_small_cnn_onnx

    model = write_small_cnn_onnx(tmp_path / "cnn.onnx")
    bomb = tmp_path / "bomb.npz"
    bomb.write_bytes(_forged_npz("input.npy", _npy_header((TIB // 4,)) + b"\0" * 16, TIB))
    rc = main(["validate", str(model), "--input", str(bomb)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert lines[0].startswith("error:")
    assert "bomb.npz' is not a readable" in lines[0]
    assert "member 'input.npy' declares 1 TiB" in lines[0] and "physical memory" in lines[0]
    assert [ln for ln in lines if ln.startswith("hint:")] == lines[1:2] and "more memory" in lines[1], err
    assert "Traceback" not in err


def test_a_bad_member_is_still_named_in_the_reason(tmp_path):
    """Other member errors keep being reported as the archive's, naming the member."""
    p = tmp_path / "obj.npz"
    np.savez(p, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ArrayFileError) as err:
        read_array_file(p)
    assert not isinstance(err.value, ArrayTooLargeError)
    assert "is not a readable .npz archive" in err.value.reason and "obj.npz[a.npy]" in err.value.reason
