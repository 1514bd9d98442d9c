"""Small request and answer rules every provider's wire format applies the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from bot.config.provider import ProviderSpec
from bot.core.conversation import (
    BLIND_NOTE,
    MAX_TOKENS,
    TOOL_USE,
    ChatMessage,
    CompletionRequest,
    StopReason,
)


def for_vision(spec: ProviderSpec, request: CompletionRequest) -> CompletionRequest:
    """``request`` as this model can take it: without vision, each message's pictures
    become one line of text saying a picture was left out (a fallback model may be blind
    where the main one sees)."""
    if spec.sees_images or not any(m.images for m in request.messages):
        return request
    return dataclasses.replace(request, messages=tuple(_blind(m) for m in request.messages))


def _blind(message: ChatMessage) -> ChatMessage:
    if not message.images:
        return message
    content = f"{message.content}\n{BLIND_NOTE}" if message.content else BLIND_NOTE
    return dataclasses.replace(message, content=content, images=())


def token_limit(spec: ProviderSpec, request: CompletionRequest) -> int:
    """The request's token budget, capped by the provider's configured ``max_tokens``."""
    return min(request.max_tokens, spec.max_tokens)


def pick_temperature(spec: ProviderSpec, request: CompletionRequest) -> float | None:
    """The request's temperature, else the configured one, else None (server default)."""
    return request.temperature if request.temperature is not None else spec.temperature


def system_prompt(request: CompletionRequest) -> str | None:
    """The system prompt to send, or None when it is blank and should be left out."""
    return request.system if request.system.strip() else None


def neutral_stop_reason(raw: object, known: Mapping[str, StopReason], *, has_calls: bool) -> str:
    """``Completion.stop_reason`` for a provider's own value, translated through ``known``.

    A cut-off wins over tool calls (their arguments may be incomplete); otherwise any
    tool call means ``tool_use``, because some wires report a plain stop beside calls.
    A value missing from ``known`` passes through unchanged; no value at all gives "".
    """
    mapped = known.get(raw) if isinstance(raw, str) else None
    if mapped == MAX_TOKENS:
        return MAX_TOKENS
    if has_calls:
        return TOOL_USE
    if mapped is not None:
        return mapped
    return raw if isinstance(raw, str) else ""
