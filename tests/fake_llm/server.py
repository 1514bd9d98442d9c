"""A fake LLM server on 127.0.0.1 that speaks the OpenAI, Anthropic, Gemini and Ollama wires.

Tests queue replies (``Say``, ``CallTools``, ``Fail``, ``Stall``, ``Hold``, ``Raw``);
each request takes the next one, or the autopilot answers when the queue is empty. ``Fail`` and
``Raw`` are answered here for every wire; the wire renders the rest. Every request is
recorded with its wire, path, headers, JSON body and size. The server runs on its
own thread and event loop, so synchronous tests, async tests and subprocesses
(``pinclaw agent``) can all talk to it.

Run it by hand as a local OpenAI-compatible server::

    python -m tests.fake_llm --port 8080
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from typing import Any, Protocol

from aiohttp import web

from tests.fake_llm.script import Fail, Hold, Raw, Recorded, Reply, RequestView, Stall, autopilot
from tests.threaded_server import ThreadedServer


class Wire(Protocol):
    """One wire format: which paths it serves, how to read a request, how to answer."""

    name: str

    def accepts(self, path: str) -> bool: ...

    def view(self, path: str, query: dict[str, str], body: dict[str, Any]) -> RequestView: ...

    async def render(
        self, request: web.Request, view: RequestView, reply: Reply
    ) -> web.StreamResponse: ...

    def error_body(self, status: int, message: str) -> dict[str, Any]: ...


class FakeLLM(ThreadedServer):
    """The fake server. Use ``with FakeLLM.running() as llm:`` or ``start()``/``stop()``."""

    name = "fake-llm"

    def __init__(self, wires: list[Wire] | None = None) -> None:
        super().__init__()
        self.wires = wires if wires is not None else default_wires()
        self.requests: list[Recorded] = []
        self._script: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def queue(self, *replies: Reply) -> None:
        """Append replies; each request takes the next one."""
        with self._lock:
            self._script.extend(replies)

    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        with self._lock:
            return len(self._script)

    def wait_requests(self, count: int, timeout: float = 10.0) -> list[Recorded]:
        """Block until at least ``count`` requests arrived; return them."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"expected {count} requests, got {len(self.requests)}")
            return list(self.requests)

    def tool_results(self) -> list[str]:
        """Every tool result the model was shown (OpenAI wire), in order, once each."""
        seen: list[str] = []
        for request in list(self.requests):
            for message in request.body.get("messages", []):
                if message.get("role") == "tool" and message["content"] not in seen:
                    seen.append(message["content"])
        return seen

    def make_app(self) -> web.Application:
        """One catch-all route; each wire decides which paths it serves."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        wire = next((w for w in self.wires if w.accepts(path)), None)
        if wire is None or request.method != "POST":
            return web.json_response({"error": {"message": f"no route {path}"}}, status=404)
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        view = wire.view(path, dict(request.query), body)
        with self._lock:
            reply = self._script.popleft() if self._script else autopilot(view)
        record = Recorded(
            wire=wire.name,
            path=path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            size=len(raw),
            view=view,
            arrived=time.monotonic(),
            reply=reply,
        )
        with self._changed:
            self.requests.append(record)
            self._changed.notify_all()
        while isinstance(reply, Stall | Hold):
            if isinstance(reply, Hold):
                await asyncio.to_thread(reply.gate.wait, reply.timeout_s)
            else:
                await asyncio.sleep(reply.seconds)
            reply = reply.then if reply.then is not None else autopilot(view)
        if isinstance(reply, Fail):
            headers = {}
            if reply.retry_after is not None:
                headers["Retry-After"] = f"{reply.retry_after:g}"
            return web.json_response(
                wire.error_body(reply.status, reply.message), status=reply.status, headers=headers
            )
        if isinstance(reply, Raw):
            return await send_raw(request, reply)
        return await wire.render(request, view, reply)


async def send_raw(request: web.Request, reply: Raw) -> web.StreamResponse:
    """Answer with ``reply``'s bytes as they are: whole, streamed, or streamed and cut."""
    headers = {"Content-Type": reply.content_type, **reply.headers}
    if reply.chunks is None:
        return web.Response(status=reply.status, body=_bytes(reply.body), headers=headers)
    # No Content-Length: HTTP/1.1 then sends the body chunked, so a cut is detectable.
    response = web.StreamResponse(status=reply.status, headers=headers)
    await response.prepare(request)
    for chunk in reply.chunks:
        await response.write(_bytes(chunk))
    if not reply.cut:
        await response.write_eof()
        return response
    # Close the socket (after sending what was written) without the final empty chunk:
    # the client reads an incomplete chunked body. aiohttp's own write_eof afterwards
    # fails with a ConnectionError, which it expects from vanished clients and ignores.
    transport = request.transport
    assert transport is not None
    transport.close()
    return response


def _bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else data


def default_wires() -> list[Wire]:
    """All four wire formats."""
    from tests.fake_llm.anthropic_wire import AnthropicWire
    from tests.fake_llm.gemini_wire import GeminiWire
    from tests.fake_llm.ollama_wire import OllamaWire
    from tests.fake_llm.openai_wire import OpenAIWire

    return [OpenAIWire(), AnthropicWire(), GeminiWire(), OllamaWire()]
