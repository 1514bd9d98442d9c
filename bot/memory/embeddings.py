"""Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

OpenAI (``https://api.openai.com/v1``), Ollama (``http://localhost:11434/v1``),
llama.cpp's server and vLLM all speak this wire. Retries, Retry-After and the
reading of HTTP errors are ``ProviderHttp``'s job; this module sends the texts
in batches, checks the shape of each answer, and turns every failure into one
``EmbeddingError`` sentence that names the endpoint.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from bot.core.errors import ProviderError, UserError
from bot.providers.http import ProviderHttp, RetryPolicy, Sleep


class EmbeddingError(UserError):
    """The embeddings endpoint failed or answered something unusable; ``str(exc)`` says
    which endpoint and what was wrong, in one sentence."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class OpenAIEmbeddings:
    """An ``Embedder`` over the OpenAI embeddings wire; owns no client (the app does)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._model = model
        self._batch_size = batch_size
        self.url = base_url.rstrip("/") + "/embeddings"
        self._label = f"the embeddings endpoint {self.url}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ProviderHttp(
            client,
            self._label,
            policy=RetryPolicy(max_retries=max_retries),
            timeout_s=timeout_s,
            sleep=sleep,
        )

    @property
    def model(self) -> str:
        """The model's name as the endpoint knows it."""
        return self._model

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One float32 row per text, in order; an empty list gives a (0, 0) array."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        blocks = [
            await self._embed_batch(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        widths = sorted({block.shape[1] for block in blocks})
        if len(widths) > 1:
            raise self._bad(f"vectors of different lengths ({_join(widths)}) for one request")
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)

    async def _embed_batch(self, batch: list[str]) -> npt.NDArray[np.float32]:
        body = {"model": self._model, "input": batch}
        try:
            answer = await self._http.post_json(self.url, body, self._headers)
        except ProviderError as exc:
            raise EmbeddingError(
                self._tidy(str(exc)), retryable=exc.retryable, status=exc.status
            ) from exc
        return self._parse(answer, len(batch))

    def _parse(self, answer: Any, count: int) -> npt.NDArray[np.float32]:
        """The answer's vectors ordered by their ``index``, after checking its shape."""
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise self._bad("JSON without a 'data' list of vectors")
        if len(data) != count:
            raise self._bad(f"{len(data)} vectors for {count} texts")
        rows: list[list[Any] | None] = [None] * count
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise self._bad(f"an item that is not an object at position {position}")
            index = item.get("index", position)
            if type(index) is not int or not 0 <= index < count or rows[index] is not None:
                raise self._bad(f"a missing, repeated or out-of-range index ({index!r})")
            vector = item.get("embedding")
            if not isinstance(vector, list) or not vector or not all(_is_number(x) for x in vector):
                raise self._bad(f"an embedding that is not a list of numbers (index {index})")
            rows[index] = vector
        widths = sorted({len(row) for row in rows if row is not None})
        if len(widths) > 1:
            raise self._bad(f"vectors of different lengths ({_join(widths)})")
        try:
            matrix = np.array(rows, dtype=np.float32)
        except (OverflowError, ValueError):
            matrix = np.array([[np.inf]], dtype=np.float32)
        if not np.isfinite(matrix).all():
            raise self._bad("numbers that are not finite (NaN, infinity or too large)")
        return matrix

    def _bad(self, what: str) -> EmbeddingError:
        return EmbeddingError(f"{self._label} answered with {what}")

    def _tidy(self, message: str) -> str:
        """Drop the "at http://host:port" ProviderHttp adds, since the label has the URL."""
        url = httpx.URL(self.url)
        port = f":{url.port}" if url.port else ""
        return message.replace(f" at {url.scheme}://{url.host}{port} (", " (")


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _join(widths: list[int]) -> str:
    return ", ".join(str(width) for width in widths)
