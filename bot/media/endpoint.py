"""What the clients of OpenAI-compatible audio endpoints share: the URL, the key, retry pacing.

``Transcriber`` (``/audio/transcriptions``) and ``Speech`` (``/audio/speech``) each
send their own request and read their own answer; both go through the app's HTTP
client, with the key as a bearer token when one is set, and wait a moment before
their one retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ClassVar, Generic, TypeVar

import httpx

from bot.config.media import AudioEndpoint

Sleep = Callable[[float], Awaitable[None]]
C = TypeVar("C", bound=AudioEndpoint)


class AudioClient(Generic[C]):
    """A client of ``{base_url}/audio/{PATH}`` with the settings ``C``."""

    PATH: ClassVar[str] = ""

    def __init__(
        self,
        config: C,
        client: httpx.AsyncClient,
        *,
        sleep: Sleep = asyncio.sleep,
        retry_delay_s: float = 1.0,
    ) -> None:
        self._config = config
        self._client = client
        self._sleep = sleep
        self._retry_delay_s = retry_delay_s
        self._url = f"{config.base_url.rstrip('/')}/audio/{self.PATH}"

    def _headers(self) -> dict[str, str]:
        """The bearer key, when the endpoint has one."""
        key = self._config.key()
        return {"Authorization": f"Bearer {key}"} if key else {}
