"""How tool calls travel between PinClaw and a model: natively, or as XML in the text.

``native`` sends tool specs through the provider's own tool-calling API. ``xml``
teaches the model a ``<tool_call>`` syntax in the system prompt and parses its
text, for models without native tool calling. ``auto`` starts native and
switches to XML for good when the server refuses a request because of tools.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from bot.core.conversation import ChatMessage, Completion, CompletionRequest, TextSink, ToolSpec
from bot.core.errors import ProviderRequestError
from bot.providers.base import Provider

log = logging.getLogger(__name__)

DispatchMode = Literal["auto", "native", "xml"]


class ToolDispatch:
    """Sends one model request in the current mode and returns calls in neutral form."""

    def __init__(self, mode: DispatchMode = "auto") -> None:
        self.mode: DispatchMode = mode

    async def complete(
        self,
        provider: Provider,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        *,
        max_tokens: int,
        temperature: float | None,
        on_text: TextSink | None = None,
    ) -> Completion:
        """One model round; in XML mode the reply text is parsed for tool calls."""
        if self.mode != "xml":
            request = CompletionRequest(
                system, tuple(messages), tuple(tools), max_tokens, temperature
            )
            try:
                return await provider.complete(request, on_text)
            except ProviderRequestError as exc:
                if not (self.mode == "auto" and tools and refuses_tools(exc)):
                    raise
                log.warning(
                    "%s does not accept native tool calls (%s); using XML tool calls from now on",
                    provider.label,
                    exc,
                )
                self.mode = "xml"
        from bot.agent.xml_tools import parse_tool_calls, to_xml_messages, xml_instructions

        instructions = xml_instructions(tools) if tools else ""
        request = CompletionRequest(
            "\n\n".join(s for s in (system, instructions) if s),
            to_xml_messages(messages),
            (),
            max_tokens,
            temperature,
        )
        completion = await provider.complete(request, None)
        parsed = parse_tool_calls(completion.text, id_prefix=f"x{secrets.token_hex(3)}")
        return replace(completion, text=parsed.text, tool_calls=parsed.calls)


def refuses_tools(exc: ProviderRequestError) -> bool:
    """True when a 4xx looks like "this model or server does not support tools"."""
    return exc.status in (400, 404, 422, 501) and "tool" in str(exc).lower()
