"""Image decoding: ImageDecoder (ONNX ImageDecoder-20), encoded bytes to an HWC uint8 image.

Semantics: https://onnx.ai/onnx/operators/onnx__ImageDecoder.html. The image's height and width
are only known once the bytes are read, so they are run-time dims and the op runs on the host
CPU, like the other data-dependent ops. Decoding uses Pillow (an optional dependency, imported
when a node runs: ``pip install pillow``), restricted to the still-image formats the spec
names, whose decoders only read pixels (Pillow's EPS reader, which runs Ghostscript, is never
reached).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np

from ...errors import InterpretError
from ..opdef import ShapeContext, define_op
from ..types import MAX_ELEMENTS

PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")
#: Pillow format names of the formats ImageDecoder-20 lists (PPM reads the binary PNM family).
FORMATS = ("BMP", "JPEG", "JPEG2000", "TIFF", "PNG", "WEBP", "PPM")
PILLOW_HINT = "install Pillow, which opbridge decodes images with: pip install pillow"


def pillow_available() -> bool:
    """Whether Pillow can be imported (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("PIL") is not None
    except ValueError:  # a PIL entry of None in sys.modules: imports of it fail
        return False


def _decoder_shape(ctx: ShapeContext) -> Any:
    shape, dtype = ctx.input_shape(0), ctx.input_dtype(0)
    if len(shape) != 1 or dtype != "u8":
        raise ctx.error(f"encoded_stream is {dtype} {list(shape)}; it needs the file's bytes as a "
                        "1-D u8 tensor", hint="feed the encoded image's bytes, e.g. "
                        "np.frombuffer(open(path, 'rb').read(), np.uint8)")
    channels = 1 if ctx.attr("pixel_format") == "Grayscale" else 3
    return (ctx.runtime_dim("h"), ctx.runtime_dim("w"), channels), "u8"


def image_decoder(encoded: np.ndarray, *, pixel_format: str) -> np.ndarray:
    """[H, W, 3] (RGB or BGR) or [H, W, 1] (Grayscale, ITU-R 601-2 luma) uint8."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as err:
        raise InterpretError("ImageDecoder needs Pillow, which is not installed",
                             hint=PILLOW_HINT) from err
    try:
        with warnings.catch_warnings():  # a size past Pillow's warning is refused below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(encoded.tobytes()), formats=FORMATS)
        w, h = img.size
        # checked before the pixels are decoded: the header alone can claim any size
        limit = min(MAX_ELEMENTS // 3, Image.MAX_IMAGE_PIXELS or MAX_ELEMENTS)
        if w * h > limit:
            raise InterpretError(f"the encoded image claims {w}x{h} pixels, more than the "
                                 f"{limit} opbridge decodes",
                                 hint="check the image; if it is real, raise "
                                      "PIL.Image.MAX_IMAGE_PIXELS")
        decoded = img.convert("L" if pixel_format == "Grayscale" else "RGB")
    except UnidentifiedImageError as err:
        raise InterpretError(f"the encoded stream ({encoded.size} bytes) is not an image in a "
                             f"format ImageDecoder reads ({', '.join(FORMATS)})",
                             hint="feed the bytes of a BMP, JPEG, JPEG 2000, TIFF, PNG, WebP or "
                                  "PNM file") from err
    except Image.DecompressionBombError as err:  # Pillow's own check, past twice its limit
        raise InterpretError(f"the encoded image claims more pixels than opbridge decodes: {err}",
                             hint="check the image; if it is real, raise "
                                  "PIL.Image.MAX_IMAGE_PIXELS") from err
    except (OSError, ValueError) as err:
        raise InterpretError(f"the encoded image could not be decoded: {err}",
                             hint="the file may be truncated or corrupt; check it opens in an "
                                  "image viewer") from err
    pixels = np.asarray(decoded, dtype=np.uint8)
    if pixel_format == "Grayscale":
        return pixels[:, :, None].copy()
    return np.ascontiguousarray(pixels[:, :, ::-1] if pixel_format == "BGR" else pixels)


(
    define_op("ImageDecoder")
    .doc("Decodes an encoded image (BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PNM bytes) to "
         "[H, W, C] uint8; H and W are known at run time. Needs Pillow.")
    .input("encoded_stream", "u8").output("image", "u8")
    .param("pixel_format", "str", "RGB", allowed=PIXEL_FORMATS,
           doc="RGB or BGR (3 channels), Grayscale (1)")
    .placement("cpu")
    .shape_fn(_decoder_shape)
    .compute(image_decoder)
)
