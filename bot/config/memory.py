"""``[memory]``: what the agent remembers, how it searches, and for how long."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.base import Section, check_url, empty_is_none


class MemoryConfig(Section):
    """Long-term memory in PinClaw's SQLite file: what people said and what the agent chose to
    keep, found by keywords, and by meaning too when an embedding provider is set."""

    enabled: bool = Field(
        default=True,
        description=(
            "Keep long-term memory: before each turn the agent recalls what matches the "
            "message, and it has the `memory_store`, `memory_recall` and `memory_forget` "
            "tools. `false` turns it all off."
        ),
    )
    embedding_provider: Literal["none", "openai"] = Field(
        default="none",
        description=(
            "`none` searches by keywords only (SQLite FTS5); `openai` also gives entries "
            "vectors from any OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama, "
            "llama.cpp, vLLM), so recall finds paraphrases too."
        ),
    )
    embedding_base_url: str = Field(
        default="",
        description=(
            "The embeddings API root, with its `/v1`, like `http://localhost:11434/v1` "
            "(Ollama) or `https://api.openai.com/v1`; required with the `openai` provider."
        ),
    )
    embedding_model: str = Field(
        default="",
        description=(
            "The embedding model as the server names it, like `nomic-embed-text` or "
            "`text-embedding-3-small`; required with the `openai` provider. After a change, "
            "entries are embedded again in the background."
        ),
    )
    embedding_api_key: SecretStr | None = Field(
        default=None,
        description=(
            'The embeddings server\'s API key, like `"${OPENAI_API_KEY}"`. Not set: no key '
            "is sent (a local server may need none)."
        ),
    )
    embedding_batch_size: int = Field(
        default=64,
        ge=1,
        le=2048,
        description="How many texts are sent to the embeddings endpoint in one request.",
    )
    embedding_cache_entries: int = Field(
        default=10000,
        ge=1,
        description=(
            "How many computed vectors are kept, by text, so nothing is embedded twice, even "
            "across restarts; the least recently used go first."
        ),
    )
    vector_weight: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description=(
            "With embeddings: how much the vector (meaning) score counts in an entry's "
            "score, added to the keyword score times `keyword_weight`."
        ),
    )
    keyword_weight: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "With embeddings: how much the keyword score counts in an entry's score. "
            "Without them, the keyword score counts whole."
        ),
    )
    min_relevance: float = Field(
        default=0.4,
        ge=0,
        le=1,
        description="Only entries scoring at least this much (0 to 1) go into the prompt.",
    )
    recall_limit: int = Field(
        default=5,
        ge=0,
        le=50,
        description=(
            "The most remembered entries put into the prompt before a turn; 0 puts none "
            "(the memory tools still work)."
        ),
    )
    prompt_budget_chars: int = Field(
        default=1500,
        ge=0,
        description=("The most characters of remembered entries put into the prompt; 0 puts none."),
    )
    store_conversation: bool = Field(
        default=True,
        description=(
            "Keep what people say as `conversation` entries, so it can be recalled in later "
            "conversations; `false` keeps only what is stored on purpose."
        ),
    )
    conversation_retention_days: float = Field(
        default=30.0,
        gt=0,
        description=(
            "Days `conversation` entries are kept; a daily job removes older ones (core "
            "facts stay)."
        ),
    )
    snapshot_file: str = Field(
        default="MEMORY_SNAPSHOT.md",
        description=(
            "A file in the workspace the core entries are written to every day; if the "
            "database is missing at a start, the memories are restored from it."
        ),
    )

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
