"""``[provider]``: which model answers, where, with which key; fallbacks; sub-agents.

``ProviderSpec`` is one provider (also each ``[[provider.fallbacks]]`` and a
sub-agent's own ``provider``); ``ProviderConfig`` adds the fallbacks and the models
a chat may switch to; ``SubAgentConfig`` is an ``[agents.NAME]`` table.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from bot.config.base import Section, check_url, empty_is_none
from bot.config.media import guess_vision

ProviderKind = Literal["openai", "anthropic", "gemini", "ollama"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",
}


class ProviderSpec(Section):
    """One model provider: which API it speaks, which model, at which URL, and with which key."""

    kind: ProviderKind = Field(
        description="Which API the model speaks. `openai` also covers any OpenAI-compatible "
        "server: OpenRouter, Groq, vLLM, llama.cpp's `llama-server`, LM Studio, LocalAI."
    )
    model: str = Field(
        min_length=1,
        description="The model's name as the server knows it, e.g. `gpt-4o-mini` or `llama3.2`.",
    )
    base_url: str | None = Field(
        default=None,
        description="The API's root URL. Not set: the kind's default (`https://api.openai.com/v1`, "
        "`https://api.anthropic.com`, `https://generativelanguage.googleapis.com`, "
        "`http://localhost:11434`). For an OpenAI-compatible server include the `/v1`, "
        "e.g. `http://localhost:8080/v1` for llama.cpp.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description='The API key, best taken from the environment: `"${OPENAI_API_KEY}"`. '
        "Required for `anthropic`, `gemini`, and `openai` at its default URL; a local "
        'server needs none (leave it out or write `""`).',
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds to wait for the server before a request counts as failed "
        "(it is then retried, see `max_retries`).",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Retries after a 429, a 5xx or a connection error, with exponential backoff. "
        "A `Retry-After` header is honoured up to 30 s; a longer wait moves on to the "
        "fallback instead.",
    )
    max_tokens: int = Field(default=4096, ge=1, description="Longest reply, in tokens.")
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Sampling temperature, 0 to 2. Not set: the model's own default.",
    )
    tool_dispatch: Literal["auto", "native", "xml"] = Field(
        default="auto",
        description="How tool calls are exchanged with the model. `auto`: the provider's "
        "native tool calling, switching to `xml` for good if the server answers that the "
        "model does not support tools. `native`: always native. `xml`: tools described in "
        'the system prompt and calls written as `<tool_call>{"name": ..., "arguments": '
        "{...}}</tool_call>`, for models without native tool calling.",
    )
    vision: bool | None = Field(
        default=None,
        description="Whether the model can see pictures people send in chats. Not set: "
        "guessed from the model's name (`gpt-4o*`, `claude-3*`, `gemini-*`, `llava*`, "
        "`qwen*-vl`... can; other names are taken as text-only). A model that cannot see "
        "reads a note that a picture was sent.",
    )
    headers: dict[str, str] = Field(
        default={},  # copied for each table; a factory costs more
        description="Extra HTTP headers sent with every request to this provider, e.g. "
        '`{ "HTTP-Referer" = "https://example.org", "X-Title" = "PinClaw" }` for OpenRouter.',
    )

    _check_url = field_validator("base_url")(check_url)
    _empty_key_is_none = field_validator("api_key", mode="before")(empty_is_none)

    @property
    def url(self) -> str:
        """The base URL in use: the configured one or the kind's default."""
        return self.base_url or DEFAULT_BASE_URLS[self.kind]

    @property
    def label(self) -> str:
        """How logs and errors name this provider."""
        return f"{self.kind}:{self.model}"

    def key(self) -> str:
        """The API key, or an empty string for servers that need none."""
        return self.api_key.get_secret_value() if self.api_key else ""

    @property
    def sees_images(self) -> bool:
        """Whether pictures are sent to this model: ``vision``, else known by its name."""
        return guess_vision(self.model) if self.vision is None else self.vision

    def missing_key(self) -> bool:
        """True when this kind and URL need an API key and none is set."""
        if self.api_key is not None:
            return False
        if self.kind in ("anthropic", "gemini"):
            return True
        return self.kind == "openai" and self.base_url is None


class ProviderConfig(ProviderSpec):
    """The model PinClaw talks to, plus fallback providers tried in order when it fails."""

    fallbacks: list[ProviderSpec] = Field(
        default=[],  # copied for each table, like headers
        description="Providers tried in order when this one fails after its own retries, each a "
        "`[[provider.fallbacks]]` table with the keys of `[provider]` but `fallbacks` and "
        '`choices`, e.g. `kind = "ollama"`, `model = "llama3.2"`.',
    )
    choices: list[str] = Field(
        default=[],
        description="More models of this provider (same kind, URL, key and settings) that a "
        'chat may switch to with `/model NAME`, e.g. `["gpt-4o", "gpt-4.1"]`. The main '
        "model, the fallbacks' and the sub-agents' models are offered too. Only the people "
        "who approve requests on a channel may switch; `/model default` goes back to `model`.",
    )


class SubAgentConfig(Section):
    """A sub-agent the `delegate` tool can hand a task to, with its own prompt, tools and
    optionally its own model; its calls go through the same policy and approvals."""

    description: str = Field(
        min_length=1,
        description="What the sub-agent is for, in one line, e.g. `finds things out on the web "
        "and summarises them`: the main agent reads it to choose whom to hand a task to.",
    )
    system_prompt: str = Field(
        default="",
        description="The sub-agent's own instructions, used instead of `IDENTITY.md`. Empty: "
        "a short prompt made from its name and `description`.",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="The main agent's tools this sub-agent may use, by name, e.g. "
        '`["web_fetch", "http_request"]`. Empty: it has no tools at all.',
    )
    provider: ProviderSpec | None = Field(
        default=None,
        description="The sub-agent's own model: a table with the keys of `[provider]` but "
        '`fallbacks` and `choices`, e.g. `{ kind = "ollama", model = "llama3.2" }`. '
        "Not set: the main `[provider]`, with its fallbacks.",
    )
    timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds the sub-agent has for one task; after that the `delegate` call "
        "fails and the main agent is told so.",
    )
