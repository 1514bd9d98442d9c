"""Text to speech through an OpenAI-compatible ``POST {base_url}/audio/speech``.

OpenAI and local servers (speaches, Kokoro-FastAPI, openedai-speech) take JSON
``{"model", "voice", "input", "response_format"}`` and answer with the audio
bytes. PinClaw asks for ``opus``: an Ogg Opus file, which Telegram plays as a
voice message as it is. A timeout, a lost connection, a 429 or a 5xx is tried
once more; every failure becomes a ``SpeechError`` carrying a reason for the log
and a sentence for people. An answer larger than ``MAX_AUDIO_BYTES`` is not read
past that size and counts as a failure.

``speakable`` turns a reply's markdown into what is worth saying aloud.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import httpx

from bot.config.media import SpeechConfig
from bot.core.errors import UserError
from bot.core.markdown import BULLET, FENCE_OPEN, HEADING, INLINE, closes_fence
from bot.media.endpoint import AudioClient

log = logging.getLogger(__name__)


# A reply's recording goes out as one upload (Telegram takes 50 MB, Discord 10 MB without
# Nitro); 20 MB is about an hour of Opus or several minutes of WAV: anything larger is a
# server gone wrong, and reading it whole could exhaust a Pi's memory.
MAX_AUDIO_BYTES = 20 * 1024 * 1024


class SpeechError(UserError):
    """A reply could not be turned into speech.

    ``str(exc)`` is the reason, for the log; ``person`` says what went wrong in words.
    """

    def __init__(self, reason: str, person: str) -> None:
        super().__init__(reason)
        self.person = person


@dataclass(frozen=True, slots=True)
class Recording:
    """Spoken audio as the endpoint sent it, with a file name and type that fit its format."""

    data: bytes = field(repr=False)
    name: str
    mime_type: str


class Speech(AudioClient[SpeechConfig]):
    """Sends text to the configured speech endpoint (through the app's client)."""

    PATH = "speech"

    async def say(self, text: str) -> Recording:
        """``text`` spoken; ``SpeechError`` when the endpoint cannot, even on a second try."""
        try:
            return await self._attempt(text)
        except _Transient as exc:
            log.info("speech at %s failed (%s); trying once more", self._url, exc)
        await self._sleep(self._retry_delay_s)
        try:
            return await self._attempt(text)
        except _Transient as exc:
            raise SpeechError(f"{exc}, twice", exc.person) from None

    async def _attempt(self, text: str) -> Recording:
        headers = self._headers()
        body = {
            "model": self._config.model,
            "voice": self._config.voice,
            "input": text,
            "response_format": "opus",
        }
        try:
            async with self._client.stream(
                "POST", self._url, json=body, headers=headers, timeout=self._config.timeout_s
            ) as response:
                status = response.status_code
                kind = response.headers.get("content-type", "no type")
                data = await _capped(response)
        except httpx.TimeoutException:
            raise _Transient(
                f"no answer from {self._url} within {self._config.timeout_s:g} s",
                "the speech service did not answer in time",
            ) from None
        except httpx.HTTPError as exc:
            raise _Transient(
                f"could not reach {self._url}: {exc!r}", "the speech service could not be reached"
            ) from exc
        if status == 429 or status >= 500:
            raise _Transient(f"HTTP {status} from {self._url}: {_detail(data)}", _refusal(status))
        if status != 200:
            raise SpeechError(f"HTTP {status} from {self._url}: {_detail(data)}", _refusal(status))
        if data is None:
            raise SpeechError(
                f"{self._url} answered with more than {MAX_AUDIO_BYTES // 1024**2} MB",
                "the speech service sent a recording too large to send",
            )
        recording = _recording(data)
        if recording is None:
            raise SpeechError(
                f"{self._url} answered with something that is not audio "
                f"({kind}, {len(data)} bytes)",
                "the speech service sent an answer I could not play",
            )
        return recording


class _Transient(SpeechError):
    """A failure worth one more try (a timeout, no connection, busy, a server error)."""


def _recording(data: bytes) -> Recording | None:
    """The audio by its first bytes: Ogg (Opus, as asked), else MP3 or WAV from servers
    that ignore ``response_format``; None for anything else (an error page)."""
    if data.startswith(b"OggS"):
        return Recording(data, "reply.ogg", "audio/ogg")
    if data.startswith(b"ID3") or data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return Recording(data, "reply.mp3", "audio/mpeg")
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return Recording(data, "reply.wav", "audio/wav")
    return None


async def _capped(response: httpx.Response) -> bytes | None:
    """The body, read as it comes; None once it passes ``MAX_AUDIO_BYTES`` (nothing more of
    it is read: a server that sends without end costs no memory)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_AUDIO_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_AUDIO_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _detail(data: bytes | None) -> str:
    """The start of an error body, on one line (it goes into one log line)."""
    return " ".join((data or b"")[:300].decode("utf-8", "replace").split())


def _refusal(status: int) -> str:
    """What an HTTP error from the speech service means, for people."""
    if status in (401, 403):
        return "the speech service did not accept PinClaw's API key"
    if status == 429:
        return "the speech service is busy (too many requests)"
    if status >= 500:
        return "the speech service had a problem"
    return "the speech service refused the text"


# -- what is said --------------------------------------------------------------------------

_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\s]*\)")
# A web address, up to (not including) punctuation that ends the sentence after it.
_URL = re.compile(
    r"\bhttps?://((?:[\w-]+\.)*[\w-]+)(?::\d+)?"
    r"(?:[/?#](?:[^\s)>\]]*[^\s)>\].,;:!?'\"])?)?"
)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s*(>\s?)+")


def speakable(text: str) -> str:
    """``text`` (PinClaw's markdown) as plain words to say: code blocks left out, markup
    dropped, links as their text, web addresses as their host; "" when nothing is left."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.replace("\r\n", "\n").split("\n"):
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
            continue
        if opener := FENCE_OPEN.match(line):
            fence = opener.group(1)
            continue
        if _TABLE_RULE.match(line) or _RULE.match(line):
            continue
        lines.append(_plain_line(line))
    return "\n".join(line for line in lines if line)


def _plain_line(line: str) -> str:
    line = _QUOTE.sub("", line)
    if heading := HEADING.match(line):
        line = heading.group(1)
    elif bullet := BULLET.match(line):
        line = bullet.group(2)
    line = _IMAGE.sub(lambda m: m.group(1), line)
    line = INLINE.sub(_inline, line)
    line = _URL.sub(lambda m: m.group(1), line)
    if line.count("|") >= 2:  # a table row: its cells, one after another
        line = ", ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
    return " ".join(line.split())


def _inline(match: re.Match[str]) -> str:
    """The words inside one piece of inline markup (nested markup too)."""
    inner = next(
        group
        for group in (
            match.group("ctext"),
            match.group("ltext"),
            match.group("btext"),
            match.group("btext2"),
            match.group("stext"),
            match.group("itext"),
            match.group("itext2"),
        )
        if group is not None
    )
    return inner if match.group("code") else INLINE.sub(_inline, inner)
