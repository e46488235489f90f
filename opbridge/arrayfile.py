"""Reading the .npy / .npz files users give as inputs, constants and calibration samples.

One reader for every place that takes an array file (``--input``, ``--input-value``,
``--data``, ``validate``), so each refuses the same things the same way: no pickle (object
arrays and pickled files), only arrays of numbers or booleans, and a header checked against the
file's size before anything is allocated (a 100-byte file claiming 10^11 elements would
otherwise make numpy allocate 373 GiB), no blocking on a pipe. An ``.npz`` member's header is
checked against the member's size as the archive declares it, uncompressed: a
``numpy.savez_compressed`` member may truly expand about 1000 times (deflate's limit, an
array of zeros), so a small compressed file can still hold, and allocate, a large array (a
member whose data falls short of its declared size is refused when the short read is met).
Whatever a header or an archive declares, an array (or the members of one archive together)
larger than the machine's physical memory (:func:`memory_limit`) is refused before it is
allocated: it could not be held, and an archive's header can claim any size. The format is
numpy's (``numpy/lib/format.py``): magic, version, a header dict parsed with
``ast.literal_eval``.
"""

from __future__ import annotations

import math
import os
import stat
import zipfile
from typing import IO, Any

import numpy as np

from .errors import ModelFormatError

#: dtype kinds an input array may have: booleans, integers, floats
ARRAY_KINDS = "biuf"


class ArrayFileError(ModelFormatError):
    """An array file that cannot be read safely; ``reason`` says why, without the path (the
    caller puts it in its own message)."""

    def __init__(self, path: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"'{path}' {reason}", hint=hint or "write it with numpy.save / numpy.savez "
                         "(arrays of numbers; object arrays are refused)")
        self.reason = reason


class ArrayTooLargeError(ArrayFileError):
    """An array file that declares more data than the machine could hold."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason, hint="the file is damaged or forged, or the array is larger "
                         "than this machine can hold: load it on a machine with more memory, or save "
                         "it in smaller arrays")


#: The limit when the machine does not say how much physical memory it has (no os.sysconf).
FALLBACK_MEMORY_LIMIT = 64 << 30

def memory_limit() -> int:
    """The most bytes of arrays one file may declare: the machine's physical memory
    (``os.sysconf``), else :data:`FALLBACK_MEMORY_LIMIT`."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY_LIMIT
    return pages * page if pages > 0 and page > 0 else FALLBACK_MEMORY_LIMIT


def _check_fits(p: str, what: str, nbytes: int, limit: int) -> None:
    """Refuse ``nbytes`` of data beyond ``limit`` before anything is allocated; ``what`` says
    what the file declares, with ``{size}`` where the size goes."""
    if nbytes > limit:
        raise ArrayTooLargeError(p, f"{what.replace('{size}', _gib(nbytes))}, more than this "
                                 f"machine's physical memory ({_gib(limit)})")


def _gib(n: int) -> str:
    """``n`` bytes for a reader: bytes, KiB, MiB, GiB or TiB."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def read_array_file(path: str | os.PathLike[str]) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a ``.npy`` file, or the arrays of an ``.npz`` archive by name (told apart by
    content, not by the file's suffix); anything else is an :class:`ArrayFileError`."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise ArrayFileError(p, "does not exist") from None
    except OSError as err:
        raise ArrayFileError(p, f"cannot be read: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever
        raise ArrayFileError(p, "is not a regular file (a folder, a pipe or a device)")
    try:
        with open(p, "rb") as f:
            if f.read(4) in (b"PK\x03\x04", b"PK\x05\x06"):
                f.seek(0)
                return _read_npz(f, p)
            f.seek(0)
            return _read_npy(f, st.st_size, p)
    except OSError as err:
        raise ArrayFileError(p, f"cannot be read: {err.strerror or err}") from None


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The one array of a ``.npy`` file (an ``.npz`` archive is refused: it holds several)."""
    got = read_array_file(path)
    if isinstance(got, dict):
        raise ArrayFileError(os.fspath(path), f"is an .npz archive ({len(got)} arrays), not one .npy array")
    return got


def _header(f: IO[bytes], p: str) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """The shape, Fortran order and dtype a .npy header declares, each checked."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except (ValueError, EOFError, SyntaxError, TypeError) as err:
        raise ArrayFileError(p, f"is not a .npy array (truncated or not written by numpy.save): "
                             f"{str(err)[:200]}") from None
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in ARRAY_KINDS:
        raise ArrayFileError(p, f"holds {dtype} values; opbridge reads arrays of numbers or booleans "
                             "(object arrays, which need pickle, are refused)")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ArrayFileError(p, f"declares the shape {shape}, which has a negative dim")
    return tuple(shape), bool(fortran), dtype


def _checked_size(p: str, shape: tuple[int, ...], dtype: np.dtype[Any], have: int) -> int:
    need = math.prod(shape) * dtype.itemsize
    if need != have:
        raise ArrayFileError(p, f"declares {dtype}{list(shape)} ({need} bytes of data) but holds {have} "
                             "bytes (truncated, or not written by numpy.save)")
    return need


def _read_npy(f: IO[bytes], size: int, p: str) -> np.ndarray:
    shape, fortran, dtype = _header(f, p)
    need = _checked_size(p, shape, dtype, size - f.tell())
    _check_fits(p, f"declares {dtype}{list(shape)} ({{size}})", need, memory_limit())
    arr = np.fromfile(f, dtype=dtype, count=math.prod(shape))
    return arr.reshape(shape, order="F" if fortran else "C")


def _read_npz(f: IO[bytes], p: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    limit = memory_limit()
    try:
        with zipfile.ZipFile(f) as z:
            members = [info for info in z.infolist() if not info.is_dir()]
            # what the archive declares, uncompressed, checked before any member is opened
            for info in members:
                what = f"member '{info.filename}' declares {{size}} of data uncompressed"
                _check_fits(p, what, info.file_size, limit)
            total = sum(info.file_size for info in members)
            _check_fits(p, f"declares {len(members)} arrays of {{size}} in all, uncompressed", total, limit)
            for info in members:
                where = f"{p}[{info.filename}]"
                with z.open(info) as m:
                    shape, _, dtype = _header(m, where)
                    _checked_size(where, shape, dtype, info.file_size - m.tell())
                    # numpy reads a member that is not a real file in chunks into the final
                    # array: the member is held once, not as bytes and then as a copy
                    m.seek(0)
                    arr = np.lib.format.read_array(m, allow_pickle=False)
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                out[name] = arr
    except ArrayTooLargeError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as err:
        raise ArrayFileError(p, f"is not a readable .npz archive: {str(err)[:200]}") from None
    return out
