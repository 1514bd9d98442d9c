"""A fake OpenAI-compatible embeddings server on 127.0.0.1: ``POST /v1/embeddings``.

Vectors come from the concept model in ``concepts.py``, so a paraphrase lands
near the sentence it paraphrases. Tests queue replies that break the next
requests (``Fail``, ``Raw``, ``Tamper``); unscripted requests get a correct
answer. Every request is recorded with its path, headers and JSON body before
it is answered. The server runs on its own thread and event loop, like the
other fakes.
"""

from __future__ import annotations

import collections
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fake_embeddings.concepts import concept_vector
from tests.threaded_server import ThreadedServer


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error in OpenAI's error shape."""

    status: int
    message: str = "injected failure"
    retry_after: float | None = None


@dataclass(frozen=True)
class Raw:
    """Answer with exactly these bytes (a body no well-behaved server would send)."""

    body: bytes | str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Tamper:
    """Answer correctly, then spoil the answer: ``drop`` the last items, make the first
    vector one number short (``ragged``), list the items in ``reverse`` order (their
    ``index`` stays right), or answer in ``dims`` dimensions instead of the server's."""

    drop: int = 0
    ragged: bool = False
    reverse: bool = False
    dims: int | None = None


Reply = Fail | Raw | Tamper


@dataclass(frozen=True)
class Recorded:
    """One request the fake received."""

    path: str
    headers: dict[str, str]
    body: Any
    inputs: list[str] = field(default_factory=list)


class FakeEmbeddings(ThreadedServer):
    """The fake server: ``with FakeEmbeddings.running(dims=384) as server:``.

    Clients use ``f"{server.url}/v1"`` as their base URL. With ``models`` set, any
    other model name gets a 404 like a server that does not have it.
    """

    name = "fake-embeddings"

    def __init__(self, dims: int = 384, models: set[str] | None = None) -> None:
        super().__init__()
        self.models = models
        self._dims = dims
        self._requests: list[Recorded] = []
        self._script: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()

    @property
    def dims(self) -> int:
        """How many dimensions the vectors have; set it to simulate a new model."""
        with self._lock:
            return self._dims

    @dims.setter
    def dims(self, value: int) -> None:
        with self._lock:
            self._dims = value

    @property
    def requests(self) -> list[Recorded]:
        """The requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def inputs(self) -> list[str]:
        """Every text sent for embedding, in arrival order."""
        return [text for request in self.requests for text in request.inputs]

    def queue(self, *replies: Reply) -> None:
        """Append replies; each request takes the next one, then answers are correct."""
        with self._lock:
            self._script.extend(replies)

    def fail_next(
        self,
        count: int,
        status: int,
        message: str = "injected failure",
        *,
        retry_after: float | None = None,
    ) -> None:
        """Make the next ``count`` requests fail with ``status``."""
        self.queue(*[Fail(status, message, retry_after)] * count)

    def make_app(self) -> web.Application:
        """The embeddings route; anything else is a 404 in OpenAI's error shape."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        inputs = _inputs(body)
        routed = request.method == "POST" and request.path == "/v1/embeddings"
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            self._requests.append(Recorded(request.path, headers, body, inputs or []))
            reply = self._script.popleft() if self._script and routed else None
            dims = self._dims
        if not routed:
            return error(404, f"no route {request.method} {request.path}", "not_found")
        if isinstance(reply, Fail):
            wait = {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
            return error(reply.status, reply.message, "injected", wait)
        if isinstance(reply, Raw):
            data = reply.body.encode() if isinstance(reply.body, str) else reply.body
            return web.Response(
                status=reply.status, body=data, headers={"Content-Type": reply.content_type}
            )
        if not isinstance(body, dict) or inputs is None:
            return error(400, "'input' must be a string or a list of strings", "invalid_request")
        model = body.get("model")
        if not isinstance(model, str) or (self.models is not None and model not in self.models):
            return error(404, f"model '{model}' not found", "model_not_found")
        return web.json_response(answer(model, inputs, dims, reply))


def answer(model: str, inputs: list[str], dims: int, tamper: Tamper | None) -> dict[str, Any]:
    """The OpenAI-shaped answer for ``inputs``, spoiled as ``tamper`` says."""
    tamper = tamper or Tamper()
    width = tamper.dims or dims
    items = [
        {"object": "embedding", "index": i, "embedding": concept_vector(text, width).tolist()}
        for i, text in enumerate(inputs)
    ]
    if tamper.drop:
        items = items[: -tamper.drop]
    if tamper.ragged and items:
        items[0]["embedding"] = items[0]["embedding"][:-1]
    if tamper.reverse:
        items.reverse()
    tokens = sum(len(text.split()) for text in inputs)
    return {
        "object": "list",
        "data": items,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def error(
    status: int, message: str, code: str, headers: dict[str, str] | None = None
) -> web.Response:
    """An error in OpenAI's shape."""
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return web.json_response(body, status=status, headers=headers)


def _inputs(body: Any) -> list[str] | None:
    """The texts of a request (``input`` may be one string or a list of them)."""
    if not isinstance(body, dict):
        return None
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None
