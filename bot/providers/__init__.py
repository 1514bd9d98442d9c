"""Model providers over httpx, built from the ``[provider]`` config by name."""

from __future__ import annotations

import importlib

import httpx

from bot.config.provider import ProviderConfig, ProviderSpec
from bot.providers.base import Provider
from bot.providers.fallback import FallbackProvider
from bot.providers.http import ProviderHttp, RetryPolicy

_CLASSES: dict[str, tuple[str, str]] = {
    "openai": ("bot.providers.openai", "OpenAIProvider"),
    "anthropic": ("bot.providers.anthropic", "AnthropicProvider"),
    "gemini": ("bot.providers.gemini", "GeminiProvider"),
    "ollama": ("bot.providers.ollama", "OllamaProvider"),
}


def build_provider(spec: ProviderSpec, client: httpx.AsyncClient) -> Provider:
    """One provider for ``spec``, sending through the shared ``client``."""
    module_name, class_name = _CLASSES[spec.kind]
    cls = getattr(importlib.import_module(module_name), class_name)
    http = ProviderHttp(
        client,
        spec.label,
        policy=RetryPolicy(max_retries=spec.max_retries),
        timeout_s=spec.timeout_s,
    )
    provider: Provider = cls(spec, http)
    return provider


def build_provider_chain(config: ProviderConfig, client: httpx.AsyncClient) -> Provider:
    """The main provider, wrapped with its fallbacks when any are configured."""
    primary = build_provider(config, client)
    if not config.fallbacks:
        return primary
    return FallbackProvider([primary, *(build_provider(s, client) for s in config.fallbacks)])


__all__ = ["Provider", "build_provider", "build_provider_chain"]
