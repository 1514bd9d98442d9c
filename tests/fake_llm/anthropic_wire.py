"""The Anthropic Messages wire (``POST .../v1/messages``) for the fake LLM server.

Written from Anthropic's API reference, not from PinClaw's provider, so the
provider's tests catch mismatches. Requests are checked against the rules the
real API enforces with a 400 ``invalid_request_error`` (roles alternating and
starting with ``user``, no empty text blocks, every ``tool_use`` answered by a
``tool_result`` in the next user message, tool results before text).

Answers are a ``message`` object, or with ``"stream": true`` the SSE sequence
``message_start``, ``ping``, ``content_block_start/delta/stop`` per block,
``message_delta``, ``message_stop``; text arrives as several ``text_delta`` and
tool input as several ``input_json_delta`` fragments.

Limitation: a ``CallTools`` argument given as a raw ``str`` (deliberately broken
JSON) streams naturally as ``partial_json`` fragments, but a non-streaming
``tool_use.input`` must be an object, so there it is sent as the bare string,
which the real API never does.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from aiohttp import web

from tests.fake_llm.script import CallTools, Reply, RequestView, Say, arguments_json

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_FIELDS = {
    "model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k", "tools",
    "tool_choice", "stream", "stop_sequences", "metadata", "thinking", "service_tier",
}  # fmt: skip


class AnthropicWire:
    """Serves ``/v1/messages`` the way api.anthropic.com does."""

    name = "anthropic"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def accepts(self, path: str) -> bool:
        """True for the Messages endpoint under any prefix."""
        return path.endswith("/v1/messages")

    def view(self, path: str, query: dict[str, str], body: dict[str, Any]) -> RequestView:
        """Read the request into a wire-neutral view."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        last_role, last_text = "user", ""
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            # The last block decides: tool results followed by text read as user text.
            blocks = _as_blocks(message.get("content"))
            if blocks and blocks[-1].get("type") == "tool_result":
                last_role, last_text = "tool", _text_of(blocks[-1].get("content"))
            else:
                last_text = _text_of(blocks)
            break
        return RequestView(
            model=str(body.get("model", "")),
            system=_text_of(body.get("system")),
            last_role=last_role,
            last_text=last_text,
            tool_names=tuple(str(t.get("name")) for t in body.get("tools") or []),
            message_count=len(messages),
            stream=body.get("stream") is True,
        )

    async def render(
        self, request: web.Request, view: RequestView, reply: Reply
    ) -> web.StreamResponse:
        """Answer ``reply`` as a message object or as an SSE event stream."""
        raw = await request.read()
        problem = request_problem(json.loads(raw))
        if problem:
            return web.json_response(self.error_body(400, problem), status=400)
        if not isinstance(reply, Say | CallTools):
            raise TypeError(f"the anthropic wire cannot render {reply!r}")
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        if isinstance(reply, CallTools):
            blocks += [
                {"type": "tool_use", "id": self._tool_id(), "name": name, "input": args}
                for name, args in reply.calls
            ]
        stop = "tool_use" if isinstance(reply, CallTools) and reply.calls else "end_turn"
        usage = {"input_tokens": len(raw) // 4, "output_tokens": _output_tokens(blocks)}
        message = {
            "id": f"msg_fake{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": view.model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not view.stream:
            return web.json_response(message)
        return await _stream(request, _events(message))

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The API's error object for an HTTP status."""
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _tool_id(self) -> str:
        return f"toolu_fake{next(self._ids):016d}"


def request_problem(body: dict[str, Any]) -> str | None:
    """The message a real API 400 would carry for ``body``, or None if it is acceptable."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return f"{unknown[0]}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, tool in enumerate(body.get("tools") or []):
        schema = tool.get("input_schema") if isinstance(tool, dict) else None
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{index}.input_schema: Input should be an object schema"
    pending: list[str] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        role = message.get("role") if isinstance(message, dict) else None
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            return f"{where}: roles must alternate between 'user' and 'assistant', from 'user'"
        blocks = _as_blocks(message.get("content"))
        if not blocks:
            return f"{where}: all messages must have non-empty content"
        results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
        if pending and sorted(results) != sorted(pending):
            return f"{where}: tool_use ids without tool_result blocks right after: {pending}"
        if results and not pending:
            return f"{where}: unexpected tool_use_id found in tool_result blocks: {results}"
        if any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
            return f"{where}: tool_result blocks must come first in the user message"
        pending = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and not str(block.get("text", "")).strip():
                return f"{where}: text content blocks must contain non-whitespace text"
            if kind == "tool_use":
                if role != "assistant" or not _ID.match(str(block.get("id", ""))):
                    return f"{where}: tool_use blocks need an id matching {_ID.pattern}"
                if not isinstance(block.get("input"), dict):
                    return f"{where}: tool_use.input: Input should be a valid dictionary"
                pending.append(block["id"])
    return None


def _events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            opening = {**block, "input": {}}
            fragments = ["", *_pieces(arguments_json(block["input"]))]
            deltas = [{"type": "input_json_delta", "partial_json": f} for f in fragments]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


async def _stream(
    request: web.Request, events: list[tuple[str, dict[str, Any]]]
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for name, payload in events:
        await response.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
    await response.write_eof()
    return response


def _pieces(text: str) -> list[str]:
    """Split ``text`` into about four pieces, as a real stream would."""
    size = max(1, -(-len(text) // 4))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text_of(content: Any) -> str:
    """The text of a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in _as_blocks(content) if b.get("type") == "text")


def _output_tokens(blocks: list[dict[str, Any]]) -> int:
    return max(1, len(json.dumps(blocks)) // 4)
