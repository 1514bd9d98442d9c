"""The OpenAI-compatible provider: ``POST {base_url}/chat/completions``, plain or streamed.

It speaks to api.openai.com and to the many servers that copy its wire (vLLM,
llama.cpp, LM Studio, OpenRouter, Ollama's ``/v1``), so it reads answers leniently
(missing ids, tool-call fragments without an ``index``) and writes requests in the
plainest shape those servers accept. The tool and call helpers here are shared
with the Ollama provider, whose tools use the same shape.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
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
from bot.core.errors import ProviderResponseError
from bot.providers.http import ProviderHttp, error_detail, iter_sse
from bot.providers.schema import SchemaStrategy, clean_schema
from bot.providers.tool_args import decode_arguments
from bot.providers.wire_common import (
    for_vision,
    neutral_stop_reason,
    pick_temperature,
    system_prompt,
    token_limit,
)

OPENAI_HOST = "api.openai.com"

# ``finish_reason`` (and Ollama's ``done_reason``) in the neutral vocabulary.
FINISH_REASONS: dict[str, StopReason] = {
    "stop": END_TURN,
    "tool_calls": TOOL_USE,
    "function_call": TOOL_USE,
    "length": MAX_TOKENS,
    "content_filter": CONTENT_FILTER,
}


class OpenAIProvider:
    """Completes conversations over the OpenAI chat-completions wire."""

    def __init__(self, spec: ProviderSpec, http: ProviderHttp) -> None:
        self._spec = spec
        self._http = http
        self._url = f"{spec.url}/chat/completions"
        self._official = httpx.URL(spec.url).host == OPENAI_HOST
        self.schema_strategy: SchemaStrategy = "openai" if self._official else "conservative"
        self._tools_shown: tuple[Sequence[ToolSpec], str, list[dict[str, Any]]] | None = None

    @property
    def label(self) -> str:
        """How logs and errors name this provider, e.g. ``openai:gpt-4o-mini``."""
        return self._spec.label

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        """Complete ``request``; stream text pieces to ``on_text`` when it is given."""
        body = self.request_body(request, stream=on_text is not None)
        headers = request_headers(self._spec)
        if on_text is None:
            return self._parse(await self._http.post_json(self._url, body, headers))
        state = _StreamState(self.label)
        async with self._http.stream(self._url, body, headers) as response:
            async for _event, data in iter_sse(response):
                # Read to the end rather than break, so the stream closes in order.
                if data.strip() == "[DONE]":
                    state.done = True
                elif not state.done:
                    state.feed(_json(data, self.label), on_text)
        return state.completion()

    def request_body(self, request: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        messages = openai_messages(for_vision(self._spec, request))
        body: dict[str, Any] = {"model": self._spec.model, "messages": messages}
        # api.openai.com deprecated max_tokens (reasoning models reject it); most
        # compatible servers only know max_tokens.
        body["max_completion_tokens" if self._official else "max_tokens"] = token_limit(
            self._spec, request
        )
        temperature = pick_temperature(self._spec, request)
        if temperature is not None:
            body["temperature"] = temperature
        if request.tools:
            body["tools"] = self._wire_tools(request.tools)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _wire_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """``openai_tools`` of ``tools``, cleaned once while the same specs come back
        (every request of every turn sends them all; the list is never changed)."""
        shown, strategy = self._tools_shown, self.schema_strategy
        if (
            shown is None
            or shown[1] != strategy
            or len(shown[0]) != len(tools)
            or any(a is not b for a, b in zip(shown[0], tools, strict=True))
        ):
            shown = (tuple(tools), strategy, openai_tools(tools, strategy))
            self._tools_shown = shown
        return shown[2]

    def _parse(self, data: Any) -> Completion:
        if not isinstance(data, dict):
            raise malformed(self.label, "the answer is not a JSON object")
        if data.get("error") and "choices" not in data:
            detail = error_detail(json.dumps(data).encode())
            raise ProviderResponseError(
                f"{self.label} answered with an error: {detail}", provider=self.label
            )
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise malformed(self.label, "the answer has no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise malformed(self.label, "the answer's first choice has no message")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise malformed(self.label, "the message content is not text")
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise malformed(self.label, "tool_calls is not a list")
        calls: list[ToolCall] = []
        for index, item in enumerate(raw_calls):
            function = item.get("function") if isinstance(item, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise malformed(self.label, "a tool call has no function name")
            calls.append(
                make_call(item.get("id"), function["name"], function.get("arguments"), index)
            )
        return Completion(
            text=content or "",
            tool_calls=tuple(calls),
            usage=read_usage(data.get("usage"), "prompt_tokens", "completion_tokens"),
            stop_reason=stop_reason(choices[0].get("finish_reason"), bool(calls)),
            provider=self.label,
        )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    whole: Mapping[str, Any] | None = None


class _StreamState:
    """Assembles streamed chunks: text deltas, tool-call fragments, usage, finish reason."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.usage = Usage()
        self.finish: str | None = None
        self.done = False

    def feed(self, chunk: Any, on_text: TextSink) -> None:
        if not isinstance(chunk, dict):
            raise malformed(self.label, "a streamed event is not a JSON object")
        if chunk.get("error"):
            detail = error_detail(json.dumps(chunk).encode())
            raise ProviderResponseError(
                f"{self.label} reported an error mid-answer: {detail}", provider=self.label
            )
        if isinstance(chunk.get("usage"), dict):
            self.usage = read_usage(chunk["usage"], "prompt_tokens", "completion_tokens")
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise malformed(self.label, "a streamed event has no list of choices")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                self.text.append(content)
                on_text(content)
            fragments = delta.get("tool_calls") if isinstance(delta, dict) else None
            for fragment in fragments if isinstance(fragments, list) else []:
                if isinstance(fragment, dict):
                    self._add_fragment(fragment)
            if isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        raw_id, function = fragment.get("id"), fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id = raw_id if isinstance(raw_id, str) else ""
        name = function["name"] if isinstance(function.get("name"), str) else ""
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some compatible servers omit the index: match by id, else a named
            # fragment starts a new call and a nameless one continues the last.
            known = [i for i, c in self.calls.items() if call_id and c.id == call_id]
            last = max(self.calls, default=-1)
            index = known[0] if known else (last + 1 if name or last < 0 else last)
        slot = self.calls.setdefault(index, _PartialCall())
        slot.id = slot.id or call_id
        slot.name = slot.name or name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.arguments.append(arguments)
        elif isinstance(arguments, dict):
            slot.whole = arguments

    def completion(self) -> Completion:
        if not self.done and self.finish is None:
            raise ProviderResponseError(
                f"{self.label} stopped streaming before the answer was complete",
                provider=self.label,
            )
        calls = []
        for position, index in enumerate(sorted(self.calls)):
            slot = self.calls[index]
            raw = slot.whole if slot.whole is not None else "".join(slot.arguments)
            calls.append(make_call(slot.id, slot.name, raw, position))
        return Completion(
            text="".join(self.text),
            tool_calls=tuple(calls),
            usage=self.usage,
            stop_reason=stop_reason(self.finish, bool(calls)),
            provider=self.label,
        )


def openai_messages(request: CompletionRequest) -> list[dict[str, Any]]:
    """The conversation in chat-completions shape, system prompt first."""
    system = system_prompt(request)
    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    out += [_openai_message(message) for message in request.messages]
    return out


def _openai_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # The API wants null, not "", beside tool calls when there is no text.
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in message.tool_calls
            ],
        }
    if message.images:
        # Pictures first, then the words about them (as the API's own examples order them).
        parts: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": image.data_url()}}
            for image in message.images
        ]
        if message.content:
            parts.append({"type": "text", "text": message.content})
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


def openai_tools(tools: Sequence[ToolSpec], strategy: SchemaStrategy) -> list[dict[str, Any]]:
    """Tool specs in the ``{"type": "function", "function": {...}}`` shape."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": clean_schema(tool.parameters, strategy),
            },
        }
        for tool in tools
    ]


def request_headers(spec: ProviderSpec) -> dict[str, str]:
    """``Authorization: Bearer`` when a key is set, plus the configured extra headers."""
    headers = {"Authorization": f"Bearer {spec.key()}"} if spec.key() else {}
    headers.update(spec.headers)
    return headers


def make_call(call_id: Any, name: str, raw_arguments: Any, index: int) -> ToolCall:
    """A ``ToolCall`` from wire parts; unreadable arguments set ``error`` instead of raising."""
    arguments, error = decode_arguments(raw_arguments)
    if not name:
        error = error or "the tool call names no tool"
    if not isinstance(call_id, str) or not call_id:
        call_id = stable_call_id("", index, name, raw_arguments)
    return ToolCall(id=call_id, name=name, arguments=arguments, error=error)


def stable_call_id(seed: str, index: int, name: str, raw_arguments: Any) -> str:
    """A deterministic id for a tool call the server sent without one."""
    text = json.dumps([seed, index, name, raw_arguments], sort_keys=True, default=str)
    return "call_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def read_usage(raw: Any, input_key: str, output_key: str) -> Usage:
    """Token counts from ``raw[input_key]`` / ``raw[output_key]``; 0 for anything missing."""
    if not isinstance(raw, Mapping):
        return Usage()

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(count(input_key), count(output_key))


def stop_reason(raw: Any, has_calls: bool) -> str:
    """The neutral stop reason for an OpenAI-style ``finish_reason``."""
    return neutral_stop_reason(raw, FINISH_REASONS, has_calls=has_calls)


def malformed(label: str, what: str) -> ProviderResponseError:
    """The error for an answer that does not have the expected shape."""
    return ProviderResponseError(
        f"{label} sent an answer PinClaw cannot read: {what}", provider=label
    )


def _json(data: str, label: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise malformed(label, "a streamed event is not JSON") from None
