"""The Anthropic Messages API (``POST /v1/messages``), plain JSON or streamed as SSE.

The neutral conversation becomes alternating ``user`` / ``assistant`` messages of
content blocks: assistant tool calls are ``tool_use`` blocks and tool results go
back as ``tool_result`` blocks in the next user message. Retries, HTTP errors
and timeouts are ``ProviderHttp``'s business; this module only speaks the format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.config.provider import ProviderSpec
from bot.core.conversation import (
    CONTENT_FILTER,
    END_TURN,
    MAX_TOKENS,
    TOOL_USE,
    ChatMessage,
    Completion,
    CompletionRequest,
    StopReason,
    TextSink,
    ToolCall,
    ToolSpec,
    Usage,
)
from bot.core.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderResponseError,
    ProviderUnavailable,
    ProviderUnreachable,
)
from bot.providers.http import ProviderHttp, iter_sse
from bot.providers.schema import SchemaStrategy, clean_schema
from bot.providers.tool_args import decode_arguments
from bot.providers.wire_common import (
    for_vision,
    neutral_stop_reason,
    pick_temperature,
    system_prompt,
    token_limit,
)

API_VERSION = "2023-06-01"

# Tool ids from other providers may hold characters Anthropic rejects.
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")

# ``stop_reason`` in the neutral vocabulary; ``pause_turn`` (a server tool paused the
# turn) has no equivalent and passes through.
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": END_TURN,
    "stop_sequence": END_TURN,
    "tool_use": TOOL_USE,
    "max_tokens": MAX_TOKENS,
    "model_context_window_exceeded": MAX_TOKENS,
    "refusal": CONTENT_FILTER,
}

# Error types Anthropic may send inside a stream, mapped onto our hierarchy.
_STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "overloaded_error": ProviderUnavailable,
    "api_error": ProviderUnavailable,
    "rate_limit_error": ProviderRateLimited,
    "authentication_error": ProviderAuthError,
    "permission_error": ProviderAuthError,
    "invalid_request_error": ProviderRequestError,
}


@dataclass
class _Block:
    """A content block being assembled from stream events."""

    kind: str
    id: str = ""
    name: str = ""
    start_input: Any = None
    parts: list[str] = field(default_factory=list)


class AnthropicProvider:
    """Completes conversations through Anthropic's Messages API."""

    schema_strategy: SchemaStrategy = "anthropic"

    def __init__(self, spec: ProviderSpec, http: ProviderHttp) -> None:
        self._spec = spec
        self._http = http
        base = spec.url.rstrip("/")
        self._url = f"{base if base.endswith('/v1') else base + '/v1'}/messages"

    @property
    def label(self) -> str:
        """How logs and errors name this provider."""
        return self._spec.label

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        """Send ``request``; stream text to ``on_text`` when it is given."""
        body = self.build_body(request, stream=on_text is not None)
        headers = self._headers()
        if on_text is None:
            return self._parse(await self._http.post_json(self._url, body, headers))
        async with self._http.stream(self._url, body, headers) as response:
            return await self._read_stream(response, on_text)

    def build_body(self, request: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a Messages request."""
        body: dict[str, Any] = {
            "model": self._spec.model,
            "max_tokens": token_limit(self._spec, request),
            "messages": to_messages(for_vision(self._spec, request).messages),
        }
        system = system_prompt(request)
        if system is not None:
            body["system"] = system
        temperature = pick_temperature(self._spec, request)
        if temperature is not None:
            body["temperature"] = temperature
        if request.tools:
            body["tools"] = [self._tool(tool) for tool in request.tools]
        if stream:
            body["stream"] = True
        return body

    def _tool(self, tool: ToolSpec) -> dict[str, Any]:
        return {
            "name": tool.name,
            "description": tool.description,
            "input_schema": clean_schema(tool.parameters, self.schema_strategy),
        }

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if self._spec.key():
            headers["x-api-key"] = self._spec.key()
        return {**headers, **self._spec.headers}

    def _parse(self, data: Any) -> Completion:
        if isinstance(data, dict) and data.get("type") == "error":
            raise self._api_error(data)
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise self._bad("answered without a list of content blocks")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
            elif block.get("type") == "tool_use":
                calls.append(self._call(block.get("id"), block.get("name"), block.get("input")))
        return Completion(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=_usage(data.get("usage"), Usage()),
            stop_reason=_stop_reason(data.get("stop_reason"), calls),
            provider=self.label,
        )

    async def _read_stream(self, response: httpx.Response, on_text: TextSink) -> Completion:
        blocks: dict[int, _Block] = {}
        usage, stop_reason, finished = Usage(), "", False
        async for event, data in iter_sse(response):
            payload = self._decode(data)
            kind = payload.get("type") or event
            if kind == "message_start":
                message = payload.get("message")
                usage = _usage(message.get("usage") if isinstance(message, dict) else None, usage)
            elif kind == "content_block_start":
                blocks[self._index(payload)] = self._start(payload.get("content_block"))
            elif kind == "content_block_delta":
                self._delta(blocks, payload, on_text)
            elif kind == "message_delta":
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("stop_reason"):
                    stop_reason = str(delta["stop_reason"])
                usage = _usage(payload.get("usage"), usage)
            elif kind == "message_stop":
                finished = True
                break
            elif kind == "error":
                raise self._api_error(payload)
        if not finished:
            raise ProviderUnreachable(
                f"the connection to {self.label} closed mid-answer", provider=self.label
            )
        ordered = [blocks[index] for index in sorted(blocks)]
        text = "".join("".join(b.parts) for b in ordered if b.kind == "text")
        calls = [
            self._call(b.id, b.name, "".join(b.parts) or b.start_input)
            for b in ordered
            if b.kind == "tool_use"
        ]
        return Completion(text, tuple(calls), usage, _stop_reason(stop_reason, calls), self.label)

    def _start(self, block: Any) -> _Block:
        if not isinstance(block, dict):
            raise self._bad("started a content block without describing it")
        kind = str(block.get("type") or "")
        if kind != "tool_use":
            return _Block(kind)
        return _Block(
            kind, str(block.get("id") or ""), str(block.get("name") or ""), block.get("input")
        )

    def _delta(self, blocks: dict[int, _Block], payload: dict[str, Any], on_text: TextSink) -> None:
        block = blocks.get(self._index(payload))
        delta = payload.get("delta")
        if block is None or not isinstance(delta, dict):
            raise self._bad("sent a delta for a content block it never started")
        if delta.get("type") == "text_delta":
            piece = str(delta.get("text") or "")
            block.parts.append(piece)
            if piece:
                on_text(piece)
        elif delta.get("type") == "input_json_delta":
            block.parts.append(str(delta.get("partial_json") or ""))

    def _call(self, call_id: Any, name: Any, raw: Any) -> ToolCall:
        if not isinstance(name, str) or not name:
            raise self._bad("asked for a tool without naming it")
        arguments, error = decode_arguments(raw)
        return ToolCall(str(call_id or ""), name, arguments, error)

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if not isinstance(index, int):
            raise self._bad("sent a stream event without a block index")
        return index

    def _decode(self, data: str) -> dict[str, Any]:
        try:
            payload = json.loads(data)
        except ValueError:
            raise self._bad("sent a stream event that is not JSON") from None
        if not isinstance(payload, dict):
            raise self._bad("sent a stream event that is not a JSON object")
        return payload

    def _api_error(self, payload: dict[str, Any]) -> ProviderError:
        error = payload.get("error")
        error = error if isinstance(error, dict) else {}
        kind = str(error.get("type") or "error")
        message = str(error.get("message") or "no details given")
        cls = _STREAM_ERRORS.get(kind, ProviderResponseError)
        return cls(f"{self.label} reported {kind}: {message}", provider=self.label)

    def _bad(self, what: str) -> ProviderResponseError:
        return ProviderResponseError(f"{self.label} {what}", provider=self.label)


def to_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as Anthropic messages: roles alternating, tool results first."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    for entry in merged:
        # The API wants tool_result blocks before any text in a user message.
        entry["content"].sort(key=lambda block: block["type"] != "tool_result")
    return merged


def _blocks(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": _safe_id(message.tool_call_id or ""),
            "content": message.content or "(no output)",
            "is_error": message.is_error,
        }
        return "user", [result]
    # Pictures before the text about them, as Anthropic advises.
    blocks: list[dict[str, Any]] = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.base64()},
        }
        for image in message.images
    ]
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": _safe_id(c.id), "name": c.name, "input": dict(c.arguments)}
            for c in message.tool_calls
        ]
    return message.role, blocks


def _stop_reason(raw: Any, calls: Sequence[ToolCall]) -> str:
    return neutral_stop_reason(raw, _STOP_REASONS, has_calls=bool(calls))


def _safe_id(call_id: str) -> str:
    return _UNSAFE_ID.sub("_", call_id) or "call"


def _usage(raw: Any, previous: Usage) -> Usage:
    """Merge a usage object: streams report input first and cumulative output later."""
    if not isinstance(raw, dict):
        return previous
    fields = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    inputs = [raw[name] for name in fields if isinstance(raw.get(name), int)]
    output = raw.get("output_tokens")
    return Usage(
        sum(inputs) if inputs else previous.input_tokens,
        output if isinstance(output, int) else previous.output_tokens,
    )
