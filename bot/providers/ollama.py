"""The Ollama provider: ``POST {base_url}/api/chat``, one JSON answer or an NDJSON stream.

Ollama's native wire differs from OpenAI's in the details that matter here: tool-call
arguments are objects, tool calls carry no ids (we derive stable ones), tool results
name the tool instead of a call id, and limits go under ``options``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from bot.config.provider import ProviderSpec
from bot.core.conversation import ChatMessage, Completion, CompletionRequest, TextSink, ToolCall
from bot.core.errors import ProviderResponseError
from bot.providers.http import ProviderHttp, iter_ndjson
from bot.providers.openai import (
    make_call,
    malformed,
    openai_tools,
    read_usage,
    request_headers,
    stable_call_id,
    stop_reason,
)
from bot.providers.schema import SchemaStrategy
from bot.providers.wire_common import for_vision, pick_temperature, system_prompt, token_limit


class OllamaProvider:
    """Completes conversations over Ollama's native chat API."""

    schema_strategy: SchemaStrategy = "conservative"

    def __init__(self, spec: ProviderSpec, http: ProviderHttp) -> None:
        self._spec = spec
        self._http = http
        self._url = f"{spec.url}/api/chat"

    @property
    def label(self) -> str:
        """How logs and errors name this provider, e.g. ``ollama:llama3.2``."""
        return self._spec.label

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        """Complete ``request``; stream text pieces to ``on_text`` when it is given."""
        body = self.request_body(request, stream=on_text is not None)
        headers = request_headers(self._spec)
        if on_text is None:
            data = await self._http.post_json(self._url, body, headers)
            if not isinstance(data, dict):
                raise malformed(self.label, "the answer is not a JSON object")
            answer = _Answer(self.label)
            answer.add(data, None)
            return answer.completion()
        answer = _Answer(self.label)
        async with self._http.stream(self._url, body, headers) as response:
            async for item in _objects(response, self.label):
                # Read to the end rather than break, so the stream closes in order.
                if answer.final is None:
                    answer.add(item, on_text)
        return answer.completion()

    def request_body(self, request: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        options: dict[str, Any] = {"num_predict": token_limit(self._spec, request)}
        temperature = pick_temperature(self._spec, request)
        if temperature is not None:
            options["temperature"] = temperature
        body: dict[str, Any] = {
            "model": self._spec.model,
            "messages": ollama_messages(for_vision(self._spec, request)),
            "stream": stream,
            "options": options,
        }
        if request.tools:
            body["tools"] = openai_tools(request.tools, self.schema_strategy)
        return body


class _Answer:
    """Collects one answer from a single object or from streamed lines."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.final: dict[str, Any] | None = None

    def add(self, item: Any, on_text: TextSink | None) -> None:
        if not isinstance(item, dict):
            raise malformed(self.label, "a streamed line is not a JSON object")
        if item.get("error"):
            raise ProviderResponseError(
                f"{self.label} reported an error: {item['error']}", provider=self.label
            )
        message = item.get("message")
        if message is None and not item.get("done"):
            raise malformed(self.label, "the answer has no message")
        if message is not None:
            self._add_message(message, str(item.get("created_at", "")), on_text)
        if item.get("done"):
            self.final = item

    def _add_message(self, message: Any, seed: str, on_text: TextSink | None) -> None:
        if not isinstance(message, dict):
            raise malformed(self.label, "the message is not a JSON object")
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise malformed(self.label, "the message content is not text")
        if content:
            self.text.append(content)
            if on_text is not None:
                on_text(content)
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise malformed(self.label, "tool_calls is not a list")
        for item in raw_calls:
            function = item.get("function") if isinstance(item, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise malformed(self.label, "a tool call has no function name")
            index = len(self.calls)
            name, arguments = function["name"], function.get("arguments")
            # Ollama sends no call ids; derive one that is the same for the same
            # answer (created_at differs between answers) and unique within it.
            call_id = item.get("id") or stable_call_id(seed, index, name, arguments)
            self.calls.append(make_call(call_id, name, arguments, index))

    def completion(self) -> Completion:
        if self.final is None:
            raise ProviderResponseError(
                f"{self.label} stopped before the answer was complete", provider=self.label
            )
        return Completion(
            text="".join(self.text),
            tool_calls=tuple(self.calls),
            usage=read_usage(self.final, "prompt_eval_count", "eval_count"),
            stop_reason=stop_reason(self.final.get("done_reason"), bool(self.calls)),
            provider=self.label,
        )


def ollama_messages(request: CompletionRequest) -> list[dict[str, Any]]:
    """The conversation in Ollama's shape, system prompt first."""
    out: list[dict[str, Any]] = []
    system = system_prompt(request)
    if system is not None:
        out.append({"role": "system", "content": system})
    names: dict[str, str] = {}
    for message in request.messages:
        names.update({call.id: call.name for call in message.tool_calls})
        out.append(_ollama_message(message, names))
    return out


def _ollama_message(message: ChatMessage, names: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:
        entry["images"] = [image.base64() for image in message.images]
    if message.role == "tool":
        entry["tool_name"] = message.tool_name or names.get(message.tool_call_id or "", "")
    if message.tool_calls:
        entry["tool_calls"] = [
            {"function": {"name": call.name, "arguments": dict(call.arguments)}}
            for call in message.tool_calls
        ]
    return entry


async def _objects(response: httpx.Response, label: str) -> AsyncIterator[Any]:
    """The stream's JSON lines; a line that is not JSON becomes a ``ProviderResponseError``."""
    try:
        async for item in iter_ndjson(response):
            yield item
    except ValueError:
        raise malformed(label, "a streamed line is not JSON") from None
