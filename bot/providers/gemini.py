"""The Gemini API (``generateContent``, and ``streamGenerateContent?alt=sse`` to stream).

The neutral conversation becomes ``user`` / ``model`` contents of parts: assistant
tool calls are ``functionCall`` parts and tool results ``functionResponse`` parts
of a user content. Retries, HTTP errors and timeouts are ``ProviderHttp``'s
business; this module only speaks the format.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.config.provider import ProviderSpec
from bot.core.conversation import (
    CONTENT_FILTER,
    END_TURN,
    MAX_TOKENS,
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
    ProviderRequestError,
    ProviderResponseError,
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

# Ids we make up for calls Gemini sent without one; they are never echoed back.
GENERATED_ID_PREFIX = "pinclaw_fc_"

# Gemini 3 rejects replayed function calls without the thought signature it issued.
# ToolCall has no room for the real one, so replayed calls carry Google's documented
# "skip the validator" value instead (older models ignore it).
REPLAY_SIGNATURE = "skip_thought_signature_validator"

# Finish reasons that still mean "here is an answer", even an empty one.
_ANSWERED = {"", "STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"}

# ``finishReason`` in the neutral vocabulary (Gemini says STOP beside function calls
# too); the rest (OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL, ...) passes through.
_STOP_REASONS: dict[str, StopReason] = {
    "STOP": END_TURN,
    "MAX_TOKENS": MAX_TOKENS,
    "SAFETY": CONTENT_FILTER,
    "RECITATION": CONTENT_FILTER,
    "BLOCKLIST": CONTENT_FILTER,
    "PROHIBITED_CONTENT": CONTENT_FILTER,
    "SPII": CONTENT_FILTER,
    "IMAGE_SAFETY": CONTENT_FILTER,
}


@dataclass
class _Answer:
    """Text, calls, finish reason and usage gathered from one or more chunks."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    finish: str = ""
    usage: Usage = field(default_factory=Usage)
    candidates: bool = False


class GeminiProvider:
    """Completes conversations through the Gemini ``generateContent`` API."""

    schema_strategy: SchemaStrategy = "gemini"

    def __init__(self, spec: ProviderSpec, http: ProviderHttp) -> None:
        self._spec = spec
        self._http = http
        base = spec.url.rstrip("/")
        base = base if base.endswith("/v1beta") else base + "/v1beta"
        self._model_url = f"{base}/models/{spec.model.removeprefix('models/')}"

    @property
    def label(self) -> str:
        """How logs and errors name this provider."""
        return self._spec.label

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        """Send ``request``; stream text to ``on_text`` when it is given."""
        body = self.build_body(request)
        headers = self._headers()
        answer = _Answer()
        try:
            if on_text is None:
                data = await self._http.post_json(
                    f"{self._model_url}:generateContent", body, headers
                )
                self._absorb(answer, data, None)
            else:
                url = f"{self._model_url}:streamGenerateContent?alt=sse"
                async with self._http.stream(url, body, headers) as response:
                    await self._read_stream(answer, response, on_text)
        except ProviderRequestError as exc:
            # Gemini answers a bad key with HTTP 400 INVALID_ARGUMENT, not 401.
            if exc.status == 400 and "API key not valid" in str(exc):
                raise ProviderAuthError(
                    f"{self.label} rejected the API key (HTTP 400)", provider=self.label, status=400
                ) from exc
            raise
        return self._finish(answer)

    def build_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The JSON body of a generateContent request."""
        config: dict[str, Any] = {"maxOutputTokens": token_limit(self._spec, request)}
        temperature = pick_temperature(self._spec, request)
        if temperature is not None:
            config["temperature"] = temperature
        body: dict[str, Any] = {"contents": to_contents(for_vision(self._spec, request).messages)}
        system = system_prompt(request)
        if system is not None:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [self._declare(t) for t in request.tools]}]
        body["generationConfig"] = config
        return body

    def _declare(self, tool: ToolSpec) -> dict[str, Any]:
        declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
        parameters = clean_schema(tool.parameters, self.schema_strategy)
        # Gemini rejects an OBJECT schema without properties: a tool without
        # arguments is declared without parameters instead.
        if parameters.get("properties"):
            declaration["parameters"] = parameters
        return declaration

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self._spec.key():
            headers["x-goog-api-key"] = self._spec.key()
        return {**headers, **self._spec.headers}

    async def _read_stream(
        self, answer: _Answer, response: httpx.Response, on_text: TextSink
    ) -> None:
        async for _event, data in iter_sse(response):
            try:
                chunk = json.loads(data)
            except ValueError:
                raise self._bad("sent a stream chunk that is not JSON") from None
            self._absorb(answer, chunk, on_text)
        if answer.candidates and not answer.finish:
            raise ProviderUnreachable(
                f"the connection to {self.label} closed mid-answer", provider=self.label
            )

    def _absorb(self, answer: _Answer, data: Any, on_text: TextSink | None) -> None:
        """Add one GenerateContentResponse (a whole answer or a stream chunk) to ``answer``."""
        if not isinstance(data, dict):
            raise self._bad("answered with something other than a JSON object")
        if isinstance(data.get("error"), dict):
            message = data["error"].get("message") or "no details given"
            raise self._bad(f"reported an error mid-answer: {message}")
        usage = data.get("usageMetadata")
        if isinstance(usage, dict):
            answer.usage = _usage(usage)
        candidates = data.get("candidates")
        if not candidates:
            feedback = data.get("promptFeedback")
            reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if reason:
                raise self._bad(f"refused to answer this prompt (block reason: {reason})")
            return
        candidate = candidates[0] if isinstance(candidates, list) else None
        if not isinstance(candidate, dict):
            raise self._bad("answered with a candidate that is not a JSON object")
        answer.candidates = True
        if candidate.get("finishReason"):
            answer.finish = str(candidate["finishReason"])
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict) or part.get("thought"):
                continue
            if isinstance(part.get("text"), str):
                answer.texts.append(part["text"])
                if on_text is not None and part["text"]:
                    on_text(part["text"])
            elif isinstance(part.get("functionCall"), dict):
                answer.calls.append(self._call(part["functionCall"]))

    def _finish(self, answer: _Answer) -> Completion:
        if not answer.candidates:
            raise self._bad("answered without any candidates")
        text = "".join(answer.texts)
        if not text and not answer.calls and answer.finish not in _ANSWERED:
            raise self._bad(f"stopped without an answer (finish reason: {answer.finish})")
        stop = neutral_stop_reason(answer.finish, _STOP_REASONS, has_calls=bool(answer.calls))
        return Completion(text, tuple(answer.calls), answer.usage, stop, self.label)

    def _call(self, call: dict[str, Any]) -> ToolCall:
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise self._bad("asked for a tool without naming it")
        arguments, error = decode_arguments(call.get("args"))
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = GENERATED_ID_PREFIX + secrets.token_hex(6)
        return ToolCall(call_id, name, arguments, error)

    def _bad(self, what: str) -> ProviderResponseError:
        return ProviderResponseError(f"{self.label} {what}", provider=self.label)


def to_contents(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as Gemini contents, consecutive same-role contents merged."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    merged: list[dict[str, Any]] = []
    for message in messages:
        role, parts = _parts(message, names)
        if not parts:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["parts"].extend(parts)
        else:
            merged.append({"role": role, "parts": parts})
    return merged


def _parts(message: ChatMessage, names: Mapping[str, str]) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        name = message.tool_name or names.get(call_id) or "unknown_tool"
        key = "error" if message.is_error else "result"
        response: dict[str, Any] = {"name": name, "response": {key: message.content}}
        if _echoable(call_id):
            response["id"] = call_id
        return "user", [{"functionResponse": response}]
    # Pictures before the text about them, as Google's examples order them.
    parts: list[dict[str, Any]] = [
        {"inlineData": {"mimeType": image.mime_type, "data": image.base64()}}
        for image in message.images
    ]
    if message.content.strip():
        parts.append({"text": message.content})
    if message.role == "user":
        return "user", parts
    for index, call in enumerate(message.tool_calls):
        function: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
        if _echoable(call.id):
            function["id"] = call.id
        part: dict[str, Any] = {"functionCall": function}
        if index == 0:
            part["thoughtSignature"] = REPLAY_SIGNATURE
        parts.append(part)
    return "model", parts


def _echoable(call_id: str) -> bool:
    return bool(call_id) and not call_id.startswith(GENERATED_ID_PREFIX)


def _usage(raw: dict[str, Any]) -> Usage:
    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) else 0

    # Thinking tokens are billed as output, so they count as output here.
    return Usage(
        count("promptTokenCount"), count("candidatesTokenCount") + count("thoughtsTokenCount")
    )
