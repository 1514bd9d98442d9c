"""The provider-neutral conversation: what the agent says to and hears from a model.

Every provider translates these frozen records to and from its own wire format,
so history in SQLite and the agent loop never depend on which model answers.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Role = Literal["user", "assistant", "tool"]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "content_filter"]
"""Why a model stopped, in the same words for every provider (see ``Completion``)."""

END_TURN: Final = "end_turn"
TOOL_USE: Final = "tool_use"
MAX_TOKENS: Final = "max_tokens"
CONTENT_FILTER: Final = "content_filter"

TextSink = Callable[[str], None]
"""Receives pieces of reply text as a streaming provider produces them."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool.

    ``error`` is set when the model's call could not be read (arguments that are
    not valid JSON, a malformed XML call); the agent reports it back instead of
    running anything.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


BLIND_NOTE = "[The person sent a picture; this model cannot see images]"
"""What a model without vision reads in place of the pictures of a message."""


@dataclass(frozen=True, slots=True)
class ImagePart:
    """A picture sent to the model with a user message.

    ``mime_type`` is what the bytes were found to be (JPEG, PNG, GIF or WebP),
    never what the sender claimed; ``label`` names it for people and logs
    (``photo.jpg, 1280x960``).
    """

    mime_type: str
    data: bytes = field(repr=False)
    label: str = ""

    def base64(self) -> str:
        """The bytes in base64, as every wire format carries them."""
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """The picture as a ``data:`` URL."""
        return f"data:{self.mime_type};base64,{self.base64()}"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation.

    ``role="tool"`` carries a tool's result: ``tool_call_id`` and ``tool_name``
    say which call it answers and ``is_error`` whether the tool failed. A user
    message may carry ``images`` for the model to see; they live only for the
    turn in progress (history keeps the text, which names each picture).
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool: ``parameters`` is a JSON schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as reported by the provider (0 when it reports none)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One request to a model: a system prompt, the conversation, the tools it may call."""

    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer: text, tool calls, or both.

    ``stop_reason`` is one of the ``StopReason`` values whichever provider answered:
    ``end_turn`` (the model finished, including at a stop sequence), ``tool_use`` (it
    wants tools run), ``max_tokens`` (cut off by the token limit) or ``content_filter``
    (the provider's safety filter or a refusal stopped it). A value the provider sends
    that has no neutral equivalent passes through unchanged, and it is ``""`` when the
    provider gave no reason.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: str = ""
    provider: str = ""
