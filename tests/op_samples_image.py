"""Sample rows of ``decode_image`` (samediff/ops/image.py), added to op_samples.SAMPLES like
the other families' rows. The encoded inputs are written here from the file formats'
definitions -- a 24-bit BMP (a 54-byte header, rows bottom-up in B, G, R order, each padded to
4 bytes) and a PNG (the signature, then IHDR, one zlib-compressed IDAT of filter-0 rows, IEND,
each chunk with its CRC-32) -- so the expected pixels are the ones encoded, not a decoder's."""
from __future__ import annotations

import struct
import zlib

import numpy as np

DEFAULT = "default"
U8 = "uint8"

#: a 3 x 5 RGB picture with distinct channels (so an R/B swap shows) and a gray 2 x 3 one
#: (R = G = B: its luma is that value under any weights that sum to one)
PIXELS = np.array([[[255, 0, 10], [1, 2, 3], [0, 128, 255], [200, 100, 50], [9, 99, 199]],
                   [[0, 0, 0], [255, 255, 255], [17, 34, 51], [250, 5, 125], [60, 70, 80]],
                   [[128, 64, 32], [33, 66, 99], [254, 253, 252], [7, 14, 21], [90, 45, 0]]],
                  np.uint8)
GRAY = np.array([[0, 17, 255], [128, 1, 200]], np.uint8)


def bmp(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` (uint8 [H, W, 3], RGB) as the bytes of a 24-bit uncompressed BMP file."""
    h, w, _ = pixels.shape
    stride = (3 * w + 3) // 4 * 4
    rows = b"".join(bytes(pixels[y, :, ::-1].reshape(-1).tolist()) + b"\0" * (stride - 3 * w)
                    for y in range(h - 1, -1, -1))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(rows), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    return np.frombuffer(header + info + rows, np.uint8)


def png(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` (uint8 [H, W, 3], RGB) as the bytes of an 8-bit truecolor PNG file."""
    h, w, _ = pixels.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\0" + bytes(pixels[y].reshape(-1).tolist()) for y in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return np.frombuffer(data, np.uint8)


def _decoded(pixels: np.ndarray):
    """The reference: the encoded picture itself, in the asked-for channel order."""
    def ref(encoded, *, pixel_format):
        if pixel_format == "BGR":
            return pixels[:, :, ::-1]
        if pixel_format == "Grayscale":  # (gray pictures only: every channel is the luma)
            return pixels[:, :, :1]
        return pixels
    return ref


def image_samples(S) -> dict:
    """op name -> sample rows (``S`` is op_samples.Sample)."""
    gray = np.repeat(GRAY[:, :, None], 3, axis=2)
    common = dict(dtypes=(DEFAULT,), out_dtype=U8, smooth=False)
    return {
        "decode_image": [
            S([png(PIXELS)], {"pixel_format": "RGB"}, _decoded(PIXELS), **common),
            S([bmp(PIXELS)], {"pixel_format": "BGR"}, _decoded(PIXELS), **common),
            S([png(gray)], {"pixel_format": "Grayscale"}, _decoded(gray), **common),
            S([bmp(gray)], {"pixel_format": "RGB"}, _decoded(gray), **common),
        ],
    }
