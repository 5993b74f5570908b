"""``decode_image``: an encoded image file (its bytes as a uint8 tensor) to pixels -- ONNX's
``ImageDecoder``.

Decoding JPEG, PNG, BMP, GIF, TIFF, WebP, PNM and JPEG 2000 is Pillow's job (the ``image``
extra: ``pip install "nd4py[image]"``); it is imported on the first call, and a named error
says how to install it when it is missing. The result is ``uint8 [H, W, C]``: C = 3 for
``pixel_format="RGB"`` or ``"BGR"`` (the channels reversed), 1 for ``"Grayscale"`` (Pillow's
ITU-R 601-2 luma, ``L = (299 R + 587 G + 114 B) / 1000``). Images with an alpha channel, a
palette or one channel are converted to RGB first, as Pillow converts them. The size is known
only once the bytes are read (``value_shaped``); the op is not differentiable, and a compiled
plan runs it as a library step.

>>> import io, numpy as np, nd4py as nd
>>> from PIL import Image
>>> buf = io.BytesIO(); Image.new("RGB", (3, 2), (255, 0, 10)).save(buf, format="PNG")
>>> pixels = nd.decode_image(nd.create(np.frombuffer(buf.getvalue(), np.uint8)))
>>> pixels.shape, pixels.numpy()[0, 0].tolist()
((2, 3, 3), [255, 0, 10])
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np

from .registry import NONDIFF, Attr, AttrKind, TensorType, define

_U8 = np.dtype(np.uint8)
FORMATS = ("RGB", "BGR", "Grayscale")


def _pixel_format(v: Any) -> str:
    s = Attr.STR.coerce(v)
    if s not in FORMATS:
        raise ValueError(f"pixel_format must be one of {', '.join(FORMATS)}, got {s!r}")
    return s


PIXEL_FORMAT = AttrKind("pixel format", _pixel_format)


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("decode_image needs Pillow to decode image files: pip install "
                          "'nd4py[image]' (or pillow)") from None
    return Image


def _infer(types: list[TensorType], a: Any) -> list[TensorType]:
    (x,) = types
    if x.dtype != _U8 or len(x.shape) != 1:
        raise ValueError(f"the encoded image must be a 1-D uint8 tensor (the file's bytes), "
                         f"got {x.dtype} of shape {list(x.shape)}")
    return [TensorType((-1, -1, 1 if a.pixel_format == "Grayscale" else 3), _U8)]


def _decode(data: Any, *, pixel_format: str) -> np.ndarray:
    image_module = _pillow()
    raw = np.ascontiguousarray(data, _U8).tobytes()
    try:
        image = image_module.open(io.BytesIO(raw))
        image.load()
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds for bad bytes
        raise ValueError(f"cannot decode {len(raw)} bytes as an image "
                         f"({type(exc).__name__}: {exc})") from None
    if pixel_format == "Grayscale":
        return np.asarray(image.convert("L"), _U8)[:, :, None]
    rgb = np.asarray(image if image.mode == "RGB" else image.convert("RGB"), _U8)
    return np.ascontiguousarray(rgb[:, :, ::-1]) if pixel_format == "BGR" else rgb


define("decode_image", ["encoded"], _infer, _decode,
       attrs={"pixel_format": (PIXEL_FORMAT, "RGB")}, namespace="image", method=False,
       value_shaped=True, grad=NONDIFF,
       doc="Decode an image file's bytes (uint8 [N]) to uint8 [H, W, C] pixels, RGB, BGR or "
           "Grayscale (ONNX ``ImageDecoder``; Pillow decodes).")
