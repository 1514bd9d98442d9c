"""The ``Provider`` port: anything that can complete a conversation with tool specs."""

from __future__ import annotations

from typing import Protocol

from bot.core.conversation import Completion, CompletionRequest, TextSink


class Provider(Protocol):
    """A model provider. ``label`` names it in logs and errors, e.g. ``openai:gpt-4o-mini``."""

    @property
    def label(self) -> str: ...

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        """Complete ``request``; stream text pieces to ``on_text`` when it is given.

        Raises a ``bot.core.errors.ProviderError`` subclass when the provider fails.
        """
        ...
