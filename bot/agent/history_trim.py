"""Fitting a conversation into the model's history budget, oldest first.

History is cut in whole units, never between an assistant's tool calls and
their results, and the kept part starts at a user message, which every provider
accepts. The current turn's messages are never cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.core.conversation import ChatMessage

# What a picture costs, roughly: OpenAI ~770 tokens and Anthropic ~1,600 for 1280x960.
IMAGE_TOKENS = 1000


def estimate_tokens(message: ChatMessage) -> int:
    """A cheap token estimate (about four characters per token, plus framing and pictures)."""
    size = len(message.content)
    for call in message.tool_calls:
        size += len(call.name) + len(json.dumps(dict(call.arguments), ensure_ascii=False))
    return size // 4 + 4 + IMAGE_TOKENS * len(message.images)


def trim_history(
    messages: Sequence[ChatMessage], budget_tokens: int, protected: int = 1
) -> list[ChatMessage]:
    """Drop the oldest units until the estimate fits ``budget_tokens``.

    The last ``protected`` messages (the turn in progress) are always kept.
    """
    protected = min(protected, len(messages))
    older, current = (
        list(messages[: len(messages) - protected]),
        list(messages[-protected:] if protected else []),
    )
    units = _units(older)
    total = sum(estimate_tokens(m) for m in messages)
    while units and total > budget_tokens:
        total -= sum(estimate_tokens(m) for m in units.pop(0))
    while units and units[0][0].role != "user":
        units.pop(0)
    return [m for unit in units for m in unit] + current


def _units(messages: list[ChatMessage]) -> list[list[ChatMessage]]:
    """Group messages so an assistant's tool calls stay with their results."""
    units: list[list[ChatMessage]] = []
    for message in messages:
        if message.role == "tool" and units and _open_calls(units[-1]):
            units[-1].append(message)
        else:
            units.append([message])
    return units


def _open_calls(unit: list[ChatMessage]) -> bool:
    head = unit[0]
    return head.role == "assistant" and bool(head.tool_calls)


def repair_history(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Give every tool call a result, so an interrupted turn cannot break the next request.

    A turn stopped between asking for tools and storing their results leaves calls
    without answers, which providers reject; each one gets a result saying so.
    """
    repaired: list[ChatMessage] = []
    pending: list[tuple[str, str]] = []
    for message in messages:
        if message.role == "tool":
            pending = [p for p in pending if p[0] != message.tool_call_id]
        elif pending:
            repaired.extend(_interrupted(call_id, name) for call_id, name in pending)
            pending = []
        repaired.append(message)
        if message.role == "assistant":
            pending = [(c.id, c.name) for c in message.tool_calls]
    repaired.extend(_interrupted(call_id, name) for call_id, name in pending)
    return repaired


def _interrupted(call_id: str, name: str) -> ChatMessage:
    return ChatMessage(
        role="tool",
        content="Error: this call was not run because the turn was interrupted",
        tool_call_id=call_id,
        tool_name=name,
        is_error=True,
    )
