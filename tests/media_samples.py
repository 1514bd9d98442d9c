"""Pictures, recordings and PDFs for the media tests, built byte by byte, and a file host.

The builders write the real formats (a PNG a viewer opens, an Ogg Opus stream
whose pages say how long it plays, a PDF whose text a reader extracts), so the
code under test reads them as it would read a phone's. ``FileHost`` serves bytes
on 127.0.0.1, as Discord's CDN serves attachments.
"""

from __future__ import annotations

import base64
import struct
import threading
import zlib

from aiohttp import web

from tests.threaded_server import ThreadedServer


def png(width: int, height: int) -> bytes:
    """A real RGB PNG of a flat colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\x30\x80\xc0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int) -> bytes:
    """A JPEG's header as a camera writes it (JFIF, then a baseline frame), and its end."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    components = b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + components
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def ogg_opus(seconds: float) -> bytes:
    """An Ogg Opus stream (as Telegram and Discord record voice) that plays ``seconds``."""
    pre_skip = 312
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", pre_skip, 48_000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 7) + b"PinClaw" + struct.pack("<I", 0)
    audio = bytes(range(256)) * 3
    end = pre_skip + round(seconds * 48_000)
    return _page(head, 0, 0, 2) + _page(tags, 0, 1, 0) + _page(audio, end, 2, 4)


def _page(payload: bytes, granule: int, sequence: int, flags: int) -> bytes:
    lacing = [255] * (len(payload) // 255) + [len(payload) % 255]
    header = (
        b"OggS"
        + bytes([0, flags])
        + struct.pack("<qIII", granule, 0x50C1A, sequence, 0)
        + bytes([len(lacing), *lacing])
    )
    return header + payload


def pdf(*pages: str) -> bytes:
    """A real PDF with one page per argument, each line of it set in Helvetica, and a correct
    cross-reference table (as a PDF reader looks objects up)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, page in enumerate(pages):
        shown = " T* ".join(f"({_pdf_escaped(line)}) Tj" for line in page.splitlines())
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET"
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return bytes(out + trailer.encode())


def _pdf_escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def decoded(text: str) -> bytes:
    """The bytes of base64 ``text`` (strictly: any stray character fails)."""
    return base64.b64decode(text, validate=True)


class FileHost(ThreadedServer):
    """Serves registered bytes at ``{url}/attachments/<name>`` and counts downloads."""

    name = "file-host"

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, tuple[bytes, str]] = {}
        self.downloads: list[str] = []
        self._lock = threading.Lock()

    def add(self, name: str, data: bytes, content_type: str) -> str:
        """Serve ``data`` under ``name``; returns its URL."""
        with self._lock:
            self.files[name] = (data, content_type)
        return f"{self.url}/attachments/{name}"

    def make_app(self) -> web.Application:
        """One route for every file."""
        app = web.Application()
        app.router.add_get("/attachments/{name}", self._serve)
        return app

    async def _serve(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        with self._lock:
            self.downloads.append(name)
            found = self.files.get(name)
        if found is None:
            return web.Response(status=404)
        return web.Response(body=found[0], content_type=found[1])
