"""What a picture really is: its type from the first bytes, its size from its header.

Only the four formats every model API takes are recognised (JPEG, PNG, GIF,
WebP); a file is one of them by its content, whatever its name or declared type
says. Width and height come from the format's header, read by hand (no imaging
library needed on a Pi); when a header cannot be read the size is simply unknown.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".webp")

# JPEG markers that start a frame and carry its size (SOF0..SOF15 without DHT, JPG, DAC).
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
# Markers without a length field: TEM, RST0..7, SOI.
_STANDALONE = {0x01, *range(0xD0, 0xD9)}


@dataclass(frozen=True, slots=True)
class Picture:
    """A recognised picture: its real type and, when the header says, its size in pixels."""

    mime_type: str
    width: int | None = None
    height: int | None = None

    @property
    def size_text(self) -> str:
        """``1280x960``, or "" when the size is unknown."""
        return f"{self.width}x{self.height}" if self.width and self.height else ""


def sniff_image(data: bytes) -> Picture | None:
    """The picture ``data`` holds, or None when it is not JPEG, PNG, GIF or WebP."""
    if data.startswith(b"\xff\xd8\xff"):
        return Picture("image/jpeg", *_jpeg_size(data))
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return Picture("image/png", *_png_size(data))
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return Picture("image/gif", *_gif_size(data))
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return Picture("image/webp", *_webp_size(data))
    return None


Size = tuple[int | None, int | None]


def _png_size(data: bytes) -> Size:
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None, None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif_size(data: bytes) -> Size:
    if len(data) < 10:
        return None, None
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _webp_size(data: bytes) -> Size:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None, None


def _jpeg_size(data: bytes) -> Size:
    """Walk the segments up to the first start-of-frame, which holds the size."""
    index = 2
    while index + 4 <= len(data):
        if data[index] != 0xFF:
            return None, None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte before a marker
            index += 1
            continue
        if marker in _STANDALONE:
            index += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, or entropy-coded data: no frame header
            return None, None
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        if marker in _SOF:
            if index + 9 > len(data):
                return None, None
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return width, height
        if length < 2:
            return None, None
        index += 2 + length
    return None, None
