"""A fake OpenAI-compatible transcription server: ``POST {url}/v1/audio/transcriptions``.

It reads the multipart form the way OpenAI's endpoint does (a ``file`` part
whose name must end in a supported audio suffix, and a ``model`` field),
records every upload, and answers ``{"text": ...}``. Tests queue other answers:
``Refuse(status)`` for an HTTP error, ``Hold(seconds)`` to outlast the client's
timeout, ``Heard(text, duration)`` for a particular transcript.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.threaded_server import ThreadedServer

# The suffixes OpenAI's /audio/transcriptions accepts.
SUFFIXES = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")


@dataclass(frozen=True)
class Heard:
    """Answer with this transcript (and a ``duration``, as ``verbose_json`` would)."""

    text: str
    duration: float | None = None


@dataclass(frozen=True)
class Refuse:
    """Answer with this HTTP status and an OpenAI-shaped error body."""

    status: int
    message: str = "injected failure"


@dataclass(frozen=True)
class Hold:
    """Hold the request this long, then answer with the default transcript."""

    seconds: float


Answer = Heard | Refuse | Hold


@dataclass(frozen=True)
class Upload:
    """One request as the server read it."""

    model: str
    file_name: str
    content_type: str
    data: bytes
    authorization: str


class FakeTranscription(ThreadedServer):
    """The fake server; ``text`` is what it hears when nothing else is queued."""

    name = "fake-transcription"

    def __init__(self, text: str = "is the porch light on") -> None:
        super().__init__()
        self.text = text
        self.uploads: list[Upload] = []
        self._script: collections.deque[Answer] = collections.deque()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """What ``[transcription] base_url`` is set to."""
        return f"{self.url}/v1"

    def queue(self, *answers: Answer) -> None:
        """Answer the next requests with these, in order."""
        with self._lock:
            self._script.extend(answers)

    def make_app(self) -> web.Application:
        """One route, like the real API."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        return app

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str) or not model:
            return _error(400, "you must provide a file and a model")
        data = upload.file.read()
        with self._lock:
            self.uploads.append(
                Upload(
                    model,
                    upload.filename,
                    upload.content_type,
                    data,
                    request.headers.get("Authorization", ""),
                )
            )
            answer = self._script.popleft() if self._script else Heard(self.text)
        if not upload.filename.lower().endswith(SUFFIXES):
            return _error(400, f"Invalid file format. Supported formats: {list(SUFFIXES)}")
        if isinstance(answer, Refuse):
            return _error(answer.status, answer.message)
        if isinstance(answer, Hold):
            await asyncio.sleep(answer.seconds)
            answer = Heard(self.text)
        body: dict[str, Any] = {"text": answer.text}
        if answer.duration is not None:
            body["duration"] = answer.duration
        return web.json_response(body)


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return web.json_response(body, status=status)
