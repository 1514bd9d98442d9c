"""Documents people send: which ones can be read, their text, and the line the model reads.

A file is read as text when its type or name says so (``text/*``, JSON, YAML,
TOML, XML, shell, ``.md``, ``.csv``, ``.log``, source code ...) or, when it has
no telling type, when its content is UTF-8 without NUL bytes (one named as text
that holds NUL bytes, a program or an archive renamed, is not read); it is read
as a PDF when its content starts like one (``%PDF-``), through ``pypdf`` in a
thread. The model reads one line naming the document, with its type, its size
("26 bytes", "12.5 KB"), where it was saved (see ``inbox``) and how much of its
text follows, then the text inside the same ``<untrusted ...>`` marker that tool
output from outside gets: whoever wrote a document is not in the chat.

A document over ``[media] max_document_bytes`` is not downloaded; one that cannot
be read (a zip, a Word file, an encrypted PDF) gets a line with its exact size and
type and the reason, so the model can tell the person.
"""

from __future__ import annotations

import asyncio
import codecs
import io
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from bot.config.media import MediaConfig
from bot.core.channel import DeliveryError
from bot.core.messages import Attachment, InboundMessage, clean_text, decode_text, one_line
from bot.media.inbox import Inbox
from bot.security.gate import mark_untrusted

log = logging.getLogger(__name__)

Kind = Literal["text", "pdf"]
Fetch = Callable[[Attachment], Awaitable[bytes]]

_TEXT_TYPES = frozenset(
    {
        "application/json", "application/x-ndjson", "application/jsonl", "application/xml",
        "application/yaml", "application/x-yaml", "application/toml", "application/x-toml",
        "application/x-sh", "application/x-shellscript", "application/javascript",
        "application/x-javascript", "application/typescript", "application/sql",
        "application/x-sql", "application/csv", "application/x-python", "application/x-perl",
        "application/x-ruby", "application/x-httpd-php", "application/x-php",
        "application/x-tex", "application/x-latex", "application/x-subrip",
        "application/graphql", "application/x-diff", "application/x-patch",
    }
)  # fmt: skip
_TEXT_SUFFIXES = frozenset(
    {
        "txt", "text", "md", "markdown", "rst", "adoc", "org", "csv", "tsv", "json", "jsonl",
        "ndjson", "geojson", "ipynb", "yaml", "yml", "toml", "ini", "cfg", "conf", "config", "env",
        "properties", "log", "xml", "html", "htm", "xhtml", "css", "scss", "less", "py", "pyi",
        "js", "mjs", "cjs", "ts", "tsx", "jsx", "vue", "svelte", "sh", "bash", "zsh", "fish", "ps1",
        "bat", "cmd", "rs", "go", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "ino", "java", "kt",
        "kts", "scala", "swift", "dart", "cs", "fs", "rb", "php", "pl", "pm", "lua", "r", "jl",
        "sql", "tex", "bib", "srt", "vtt", "diff", "patch", "gradle", "cmake", "mk", "nix", "hcl",
        "tf", "proto", "graphql", "ex", "exs", "erl", "hs", "ml", "clj", "el", "vim", "lisp", "asm",
        "s", "ics", "vcf", "gpx", "kml", "service", "timer", "socket", "rules", "desktop", "po",
    }
)  # fmt: skip
_TEXT_NAMES = frozenset(
    {"makefile", "dockerfile", "readme", "license", "changelog", "procfile", "gemfile"}
)
_SNIFF_BYTES = 8192
_UNSUPPORTED = "only text files and PDFs are read"
_NOT_A_PDF = "it is named a PDF, but its content is not one"
_NOT_TEXT = "it is named a text file, but its content is not text"


def declared_kind(attachment: Attachment) -> Kind | None:
    """What the file says it is, by its type or its name: text, a PDF, or neither."""
    mime = attachment.mime_type.lower().split(";", 1)[0].strip()
    name = attachment.name.lower()
    suffix = name.rsplit(".", 1)[1] if "." in name else ""
    if mime == "application/pdf" or suffix == "pdf":
        return "pdf"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if suffix in _TEXT_SUFFIXES or (not suffix and name in _TEXT_NAMES):
        return "text"
    return None


def is_pdf(data: bytes) -> bool:
    """Whether ``data`` starts like a PDF (a few bytes of junk before ``%PDF-`` are allowed)."""
    return b"%PDF-" in data[:1024]


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` reads as text: a UTF-16 byte order mark, or UTF-8 without NUL bytes."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    head = data[:_SNIFF_BYTES]
    if b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(data) <= _SNIFF_BYTES)
    except UnicodeDecodeError:
        return False
    return True


def is_binary(data: bytes) -> bool:
    """Whether ``data`` holds NUL bytes, as programs and archives do and text never does
    (UTF-16, which has them, starts with its byte order mark)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\0" in data[:_SNIFF_BYTES]


def text_of(data: bytes) -> str:
    """A text file's text: UTF-8 (a byte order mark dropped; invalid bytes become U+FFFD),
    or UTF-16 when it starts with that byte order mark."""
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return clean_text(data[len(bom) :].decode(codec, "replace"))
    return decode_text(data.removeprefix(codecs.BOM_UTF8))


@dataclass(frozen=True, slots=True)
class PdfText:
    """What a PDF gave: its text, how many pages it has, and why it gave none ("" if it did)."""

    text: str = ""
    pages: int = 0
    failed_pages: int = 0
    problem: str = ""


PDF_TIME_S = 30.0  # a PDF's pages are read for this long; the rest count as not read


async def pdf_text(data: bytes, time_s: float = PDF_TIME_S) -> PdfText:
    """The text of a PDF, read by ``pypdf`` in a thread; a broken or locked one says why.

    Pages are read for at most ``time_s`` (those left count as not read); a single page
    that takes far longer than that does not keep the turn waiting (the thread is left).
    """
    wait_s = 2 * time_s + 5
    try:
        return await asyncio.wait_for(asyncio.to_thread(_pdf_text, data, time_s), wait_s)
    except TimeoutError:
        log.warning("gave up reading a PDF after %.0f s", wait_s)
        return PdfText(problem=f"reading it took longer than {wait_s:.0f} s")


def _pdf_text(data: bytes, time_s: float = PDF_TIME_S) -> PdfText:
    from pypdf import PdfReader  # loaded with the first PDF someone sends

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return PdfText(problem="it is protected by a password")
        pages = list(reader.pages)
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        if _encrypted(data):
            return PdfText(problem="it is encrypted in a way that cannot be opened here")
        log.warning("could not read a PDF: %s", type(exc).__name__)
        return PdfText(problem="it could not be read as a PDF (it may be damaged)")
    texts: list[str] = []
    failed = 0
    deadline = time.monotonic() + time_s
    for index, page in enumerate(pages):
        if time.monotonic() > deadline:
            log.warning("stopped reading a PDF after %d of %d pages (time)", index, len(pages))
            failed += len(pages) - index
            break
        try:
            texts.append(page.extract_text())
        except Exception as exc:
            log.warning("could not read a page of a PDF: %s", type(exc).__name__)
            failed += 1
    text = clean_text("\n\n".join(t.strip() for t in texts if t.strip()))
    return PdfText(text, len(pages), failed)


def _encrypted(data: bytes) -> bool:
    return b"/Encrypt" in data


def size_text(size: int) -> str:
    """A size as people read it: exact when small ("26 bytes"), else "12.5 KB", "3.1 MB"."""
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    for unit, scale in (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3)):
        if size < scale * 1024 or unit == "GB":
            number = f"{size / scale:.1f}".removesuffix(".0")
            return f"{number} {unit}"
    raise AssertionError("unreachable")


def exact_size(size: int) -> str:
    """A size with its exact count of bytes: "26 bytes", "12.5 KB, 12,800 bytes"."""
    shown = size_text(size)
    return shown if size < 1024 else f"{shown}, {size:,} bytes"


def cut(text: str, limit: int) -> str:
    """The first ``limit`` bytes of ``text`` (as UTF-8), never half a character."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


class FetchedOnce:
    """``fetch``, remembering what it gave during one turn: a file of no declared type is
    downloaded to be looked at as a picture, then read as a document from the same bytes."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._got: dict[str, bytes] = {}

    async def __call__(self, attachment: Attachment) -> bytes:
        """The attachment's bytes, downloaded on the first call only."""
        if attachment.ref not in self._got:
            self._got[attachment.ref] = await self._fetch(attachment)
        return self._got[attachment.ref]


@dataclass(frozen=True, slots=True)
class DocumentLine:
    """What a document gives the turn: its line (and text), and the label it taints with."""

    line: str
    untrusted: str = ""


class DocumentReader:
    """Downloads, saves and reads the documents of a turn (see the module docstring)."""

    def __init__(self, config: MediaConfig, inbox: Inbox | None = None) -> None:
        self._config = config
        self._inbox = inbox

    async def take(
        self, attachment: Attachment, message: InboundMessage, fetch: Fetch
    ) -> DocumentLine:
        """The line for ``attachment`` of ``message``, fetched through ``fetch``."""
        # One short line each, whatever the sender's app put there (the line is not marked).
        name = one_line(attachment.name, 200) or "document"
        limit = self._config.max_document_bytes
        mime = one_line(attachment.mime_type, 100) or "unknown type"
        if attachment.size > limit:
            return DocumentLine(_too_big(name, mime, attachment.size, limit))
        try:
            data = await fetch(attachment)
        except DeliveryError as exc:
            log.warning("could not download %s in %s: %s", name, message.session, exc)
            where = message.channel.capitalize()
            head = f"{name} ({mime}, {size_text(attachment.size)})"
            return DocumentLine(f"[document: {head}, could not be downloaded from {where}]")
        if len(data) > limit:
            return DocumentLine(_too_big(name, mime, len(data), limit))
        saved = await self._save(attachment, message, data)
        kind: Kind | None = "pdf" if is_pdf(data) else declared_kind(attachment)
        if kind is None and looks_like_text(data):
            kind = "text"
        # A file that is not read says its exact size; one that is read, a rounded one.
        exact = f"{name} ({mime}, {exact_size(len(data))}){saved}"
        if kind is None:
            return DocumentLine(f"[document: {exact}; not read: {_UNSUPPORTED}]")
        if kind == "pdf" and not is_pdf(data):
            return DocumentLine(f"[document: {exact}; not read: {_NOT_A_PDF}]")
        if kind == "text" and is_binary(data):
            return DocumentLine(f"[document: {exact}; not read: {_NOT_TEXT}]")
        head = f"{name} ({mime}, {size_text(len(data))})"
        pages = ""
        if kind == "pdf":
            pdf = await pdf_text(data)
            if pdf.problem:
                return DocumentLine(f"[document: {exact}; not read: {pdf.problem}]")
            pages = f", {pdf.pages} page" + ("s" if pdf.pages != 1 else "")
            if pdf.failed_pages:
                pages += f" ({pdf.failed_pages} could not be read)"
            text = pdf.text
        else:
            text = text_of(data)
        return self._with_text(f"{head}{pages}{saved}", name, text, kind)

    def _with_text(self, head: str, name: str, text: str, kind: Kind) -> DocumentLine:
        if not text.strip():
            empty = (
                "it is empty"
                if kind == "text"
                else "its pages hold no text (they may be scanned pictures)"
            )
            return DocumentLine(f"[document: {head}; {empty}]")
        total = len(text.encode("utf-8"))
        shown = cut(text, self._config.document_text_bytes)
        if len(shown) == len(text):
            how = "its text follows"
        else:
            first = size_text(len(shown.encode("utf-8")))
            how = f"the first {first} of its {size_text(total)} of text follow"
        label = f"the document {name}"
        body = mark_untrusted("document", shown, label)
        return DocumentLine(f"[document: {head}; {how}]\n{body}", label)

    async def _save(self, attachment: Attachment, message: InboundMessage, data: bytes) -> str:
        """The document's ", saved as inbox/..." (or why it was not saved)."""
        if self._inbox is None:
            return ""
        sender = message.sender_name or message.sender_id
        when = message.sent_at if message.sent_at is not None else message.received_at
        source = f"the document {attachment.name}, sent by {sender}"
        try:
            path = await self._inbox.save(attachment.name, data, when, source)
        except OSError as exc:
            log.error("could not save %s from %s: %s", attachment.name, message.session, exc)
            return ", not saved (the inbox folder could not be written)"
        return f", saved as {path}"


def _too_big(name: str, mime: str, size: int, limit: int) -> str:
    return (
        f"[document: {name} ({mime}, {exact_size(size)}), not downloaded: it is over the "
        f"{size_text(limit)} limit for documents ([media] max_document_bytes)]"
    )


def with_attachments(message: InboundMessage) -> str:
    """The message text, with a line naming any files that came with it (no intake)."""
    if not message.attachments:
        return message.text
    files = ", ".join(f"{a.name} ({a.mime_type}, {size_text(a.size)})" for a in message.attachments)
    return f"{message.text}\n[attached: {files}]".strip()
