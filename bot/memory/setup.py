"""Building memory from the config: the store, and the embedder and vectors if configured."""

from __future__ import annotations

import logging

import httpx

from bot.config import LoadedConfig
from bot.memory.service import MemoryService
from bot.memory.store import MemoryStore
from bot.store.db import Database

log = logging.getLogger(__name__)


async def open_memory(
    db: Database, loaded: LoadedConfig, client: httpx.AsyncClient, *, fresh: bool
) -> MemoryService | None:
    """The memory service (None when ``[memory] enabled = false``), started.

    ``fresh`` says the database file was just created: then the snapshot, if
    there is one, is restored.
    """
    settings = loaded.config.memory
    if not settings.enabled:
        return None
    store = MemoryStore(db)
    await store.setup()
    service = MemoryService(store=store, settings=settings)
    if settings.embedding_provider == "openai":
        from bot.memory.embed_cache import CachedEmbedder
        from bot.memory.embeddings import OpenAIEmbeddings
        from bot.memory.vectors import VectorCache

        key = settings.embedding_api_key
        inner = OpenAIEmbeddings(
            client,
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            api_key=key.get_secret_value() if key else None,
            batch_size=settings.embedding_batch_size,
        )
        embedder = CachedEmbedder(inner, db, max_entries=settings.embedding_cache_entries)
        await embedder.setup()
        cache = VectorCache(settings.embedding_model)
        service = MemoryService(store=store, settings=settings, embedder=embedder, cache=cache)
    snapshot = loaded.workspace / settings.snapshot_file
    if fresh and snapshot.is_file():
        await service.restore_snapshot(snapshot)
    await service.start()
    return service
