"""``[memory]``: what the agent remembers, how it searches, and for how long."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.base import Section, check_url, empty_is_none


class MemoryConfig(Section):
    """Long-term memory in the SQLite file: keyword search, plus vectors when an
    embedding provider is configured."""

    enabled: bool = True
    embedding_provider: Literal["none", "openai"] = "none"
    embedding_base_url: str = ""
    embedding_model: str = ""
    embedding_api_key: SecretStr | None = None
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    embedding_cache_entries: int = Field(default=10000, ge=0)
    vector_weight: float = Field(default=0.7, ge=0, le=1)
    keyword_weight: float = Field(default=0.3, ge=0, le=1)
    min_relevance: float = Field(default=0.4, ge=0, le=1)
    recall_limit: int = Field(default=5, ge=0, le=50)
    prompt_budget_chars: int = Field(default=1500, ge=0)
    store_conversation: bool = True
    conversation_retention_days: float = Field(default=30.0, gt=0)
    snapshot_file: str = "MEMORY_SNAPSHOT.md"

    _empty_key_is_none = field_validator("embedding_api_key", mode="before")(empty_is_none)
    _check_url = field_validator("embedding_base_url")(check_url)

    @model_validator(mode="after")
    def _provider_needs_endpoint(self) -> MemoryConfig:
        if self.embedding_provider == "openai":
            if not self.embedding_model:
                raise ValueError(
                    "embedding_model: required when embedding_provider = 'openai' "
                    "(e.g. 'text-embedding-3-small' or 'nomic-embed-text')"
                )
            if not self.embedding_base_url:
                raise ValueError(
                    "embedding_base_url: required when embedding_provider = 'openai' "
                    "(e.g. 'https://api.openai.com/v1' or 'http://localhost:11434/v1')"
                )
        return self
