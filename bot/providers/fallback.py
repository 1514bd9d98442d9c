"""A provider that tries a list of providers in order until one answers."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.core.conversation import Completion, CompletionRequest, TextSink
from bot.core.errors import ProviderError
from bot.providers.base import Provider

log = logging.getLogger(__name__)


class FallbackProvider:
    """Tries each provider in turn; raises the last error when all of them fail."""

    def __init__(self, providers: Sequence[Provider]) -> None:
        if not providers:
            raise ValueError("FallbackProvider needs at least one provider")
        self._providers = list(providers)

    @property
    def label(self) -> str:
        return self._providers[0].label

    @property
    def providers(self) -> list[Provider]:
        """The chain, first choice first."""
        return list(self._providers)

    async def complete(
        self, request: CompletionRequest, on_text: TextSink | None = None
    ) -> Completion:
        last: ProviderError | None = None
        for index, provider in enumerate(self._providers):
            try:
                return await provider.complete(request, on_text)
            except ProviderError as exc:
                last = exc
                if index + 1 < len(self._providers):
                    log.warning(
                        "%s failed (%s); falling back to %s",
                        provider.label,
                        exc,
                        self._providers[index + 1].label,
                    )
        assert last is not None
        raise last
