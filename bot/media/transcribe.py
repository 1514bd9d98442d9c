"""Voice to text through an OpenAI-compatible ``POST {base_url}/audio/transcriptions``.

OpenAI, Groq and local whisper servers (faster-whisper-server, speaches,
whisper.cpp's server with ``--inference-path``) all take the same multipart
form (``file``, ``model``) and answer ``{"text": ...}``. A timeout or a 5xx is
tried once more; every failure becomes a ``TranscriptionError`` carrying a
reason for the log and a sentence for the person.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from bot.config.media import TranscriptionConfig
from bot.core.errors import UserError
from bot.media.endpoint import AudioClient

log = logging.getLogger(__name__)


class TranscriptionError(UserError):
    """A recording could not be turned into text.

    ``str(exc)`` is the reason, for the log; ``person`` says what went wrong in
    words for whoever sent the recording.
    """

    def __init__(self, reason: str, person: str) -> None:
        super().__init__(reason)
        self.person = person


@dataclass(frozen=True, slots=True)
class Transcript:
    """What was heard, and how long the recording was when the server says."""

    text: str
    duration_s: float | None = None


class Transcriber(AudioClient[TranscriptionConfig]):
    """Sends recordings to the configured transcription endpoint (through the app's client)."""

    PATH = "transcriptions"

    @property
    def max_bytes(self) -> int:
        """The largest recording that is sent (``max_audio_bytes``)."""
        return self._config.max_audio_bytes

    async def transcribe(self, data: bytes, name: str, mime_type: str) -> Transcript:
        """The text spoken in ``data``; ``TranscriptionError`` when it cannot be had."""
        try:
            response = await self._post(data, name, mime_type)
        except httpx.TimeoutException:
            log.warning("transcription at %s timed out; trying once more", self._url)
            await self._sleep(self._retry_delay_s)
            response = await self._post_once_more(data, name, mime_type)
        else:
            if response.status_code >= 500:
                log.warning(
                    "transcription at %s failed with HTTP %d; trying once more",
                    self._url,
                    response.status_code,
                )
                await self._sleep(self._retry_delay_s)
                response = await self._post_once_more(data, name, mime_type)
        return self._read(response)

    async def _post_once_more(self, data: bytes, name: str, mime_type: str) -> httpx.Response:
        try:
            return await self._post(data, name, mime_type)
        except httpx.TimeoutException:
            raise TranscriptionError(
                f"no answer from {self._url} within {self._config.timeout_s:g} s, twice",
                "the transcription service did not answer in time",
            ) from None

    async def _post(self, data: bytes, name: str, mime_type: str) -> httpx.Response:
        headers = self._headers()
        try:
            return await self._client.post(
                self._url,
                files={"file": (name, data, mime_type or "application/octet-stream")},
                data={"model": self._config.model},
                headers=headers,
                timeout=self._config.timeout_s,
            )
        except httpx.TimeoutException:
            raise
        except httpx.HTTPError as exc:
            raise TranscriptionError(
                f"could not reach {self._url}: {exc!r}",
                "the transcription service could not be reached",
            ) from exc

    def _read(self, response: httpx.Response) -> Transcript:
        status = response.status_code
        if status != 200:
            detail = response.text[:300].strip()
            raise TranscriptionError(f"HTTP {status} from {self._url}: {detail}", _refusal(status))
        try:
            body = response.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise TranscriptionError(
                f"{self._url} answered without a text field: {response.text[:300]!r}",
                "the transcription service sent an answer I could not read",
            )
        duration = body.get("duration") if isinstance(body, dict) else None
        seconds = float(duration) if isinstance(duration, int | float) else None
        return Transcript(text.strip(), seconds)


def _refusal(status: int) -> str:
    """What an HTTP error from the transcription service means, for the person."""
    if status in (401, 403):
        return "the transcription service did not accept PinClaw's API key"
    if status == 413:
        return "the recording is too large for the transcription service"
    if status == 429:
        return "the transcription service is busy (too many requests)"
    if status >= 500:
        return "the transcription service had a problem, twice"
    return "the transcription service refused the recording"
