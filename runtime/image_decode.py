"""ONNX ImageDecoder as a run-time function: ``script/onnx_ops_image.py`` converts the operator
into ``R.call_pure_packed("tvms.image.decode", encoded, R.str(pixel_format))``, whose result's
height and width only the data gives.

Decoding uses Pillow, an optional dependency (``pip install tvms[image]``), imported here when
an image is decoded, never by ``import tvms``. The bytes may come from anyone, so only the
formats ONNX names are opened (JPEG, PNG, BMP, PNM, TIFF, WebP, JPEG 2000: not EPS, which Pillow
hands to Ghostscript), an image of more pixels than Pillow's decompression-bomb limit
(``PIL.Image.MAX_IMAGE_PIXELS``) is refused before it is decoded, and corrupt or truncated data
is a TVMSError."""
from __future__ import annotations

import io

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .vm_memory import aligned_empty

# ONNX's formats as Pillow names them (PPM reads the PNM family: PBM, PGM, PPM)
FORMATS = ("JPEG", "PNG", "BMP", "PPM", "TIFF", "WEBP", "JPEG2000")
PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise TVMSError("tvms.image.decode: ImageDecoder needs Pillow, an optional dependency: "
                        "pip install 'tvms[image]' (or pillow)") from None
    return Image


@register_func("tvms.image.decode")
def decode(encoded: np.ndarray, pixel_format: str) -> np.ndarray:
    """The image in ``encoded`` (1-D uint8: the bytes of an image file) as (height, width, 3)
    uint8 in RGB or BGR order, or (height, width, 1) for Grayscale (as ONNX's reference decodes
    it: the first frame, its colors converted by Pillow)."""
    if pixel_format not in PIXEL_FORMATS:
        raise TVMSError(f"tvms.image.decode: the pixel format {pixel_format!r} is not one of {', '.join(PIXEL_FORMATS)}")
    encoded = np.asarray(encoded)
    if encoded.dtype != np.uint8 or encoded.ndim != 1:
        raise TVMSError(f"tvms.image.decode: expected the encoded image as 1-D uint8, got {encoded.dtype} of shape "
                        f"{encoded.shape}")
    Image = _pillow()
    try:
        with Image.open(io.BytesIO(encoded.tobytes()), formats=FORMATS) as image:
            # (past the limit Pillow only warns, up to twice it: refused here before decoding)
            limit = Image.MAX_IMAGE_PIXELS
            if limit is not None and image.width * image.height > limit:
                raise Image.DecompressionBombError(
                    f"Image size ({image.width * image.height} pixels) exceeds limit of {limit} pixels, "
                    f"could be decompression bomb DOS attack.")
            pixels = np.asarray(image.convert("L" if pixel_format == "Grayscale" else "RGB"))
    except Image.DecompressionBombError as err:
        raise TVMSError(f"tvms.image.decode: refused: {err}") from None
    except Exception as err:  # (Pillow's decoders raise OSError, ValueError, SyntaxError, EOFError, ...)
        raise TVMSError(f"tvms.image.decode: the data is not an image of a format ONNX names "
                        f"({'/'.join(FORMATS)}) that decodes: {type(err).__name__}: {err}") from None
    pixels = pixels[:, :, None] if pixel_format == "Grayscale" else pixels[:, :, ::-1] if pixel_format == "BGR" \
        else pixels
    out = aligned_empty(pixels.shape, np.dtype(np.uint8))
    out[...] = pixels
    return out
