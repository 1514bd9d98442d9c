"""A fake OpenAI-compatible speech server: ``POST {url}/v1/audio/speech``.

It reads the JSON body the way OpenAI's endpoint does (``model``, ``voice`` and
``input`` required; ``response_format`` one of OpenAI's), records every request,
and answers with ``audio``: Ogg Opus bytes, as OpenAI sends for ``opus``. Tests
make it fail: ``fail(times, status)`` answers the next requests with an error.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.media_samples import ogg_opus
from tests.threaded_server import ThreadedServer

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")


@dataclass(frozen=True)
class SpeechRequest:
    """One request as the server read it."""

    body: dict[str, Any]
    authorization: str

    @property
    def input(self) -> str:
        """The text to speak."""
        return str(self.body.get("input", ""))


class FakeSpeech(ThreadedServer):
    """The fake server; ``audio`` is what it answers with when not told to fail."""

    name = "fake-speech"

    def __init__(self, audio: bytes | None = None) -> None:
        super().__init__()
        self.audio = audio if audio is not None else ogg_opus(2.4)
        self.requests: list[SpeechRequest] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """What ``[speech] base_url`` is set to."""
        return f"{self.url}/v1"

    def fail(self, times: int = 1, status: int = 500) -> None:
        """Answer the next ``times`` requests with HTTP ``status``."""
        with self._lock:
            self._failures.extend([status] * times)

    def inputs(self) -> list[str]:
        """The texts asked for so far, oldest first."""
        with self._lock:
            return [request.input for request in self.requests]

    def make_app(self) -> web.Application:
        """One route, like the real API."""
        app = web.Application()
        app.router.add_post("/v1/audio/speech", self._speech)
        return app

    async def _speech(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The body must be a JSON object.")
        with self._lock:
            self.requests.append(SpeechRequest(body, request.headers.get("Authorization", "")))
            status = self._failures.pop(0) if self._failures else None
        for key in ("model", "voice", "input"):
            if not isinstance(body.get(key), str) or not body[key]:
                return _error(400, f"Missing required parameter: '{key}'.")
        if body.get("response_format", "mp3") not in FORMATS:
            return _error(400, f"Invalid value for 'response_format': {body['response_format']}")
        if status is not None:
            return _error(status, "injected failure")
        return web.Response(body=self.audio, content_type="audio/ogg")


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return web.json_response(body, status=status)
