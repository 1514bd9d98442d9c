"""Recall: how keyword hits (``bot.memory.keywords``) and vector hits merge into one ranking.

Keyword hits come from the store (FTS5 with BM25, scored relative to the best
hit), vector hits from the in-memory cache (cosine similarity). With both, a
memory's score is ``vector_weight * vector + keyword_weight * keyword``, a part
it lacks counting 0. With keywords alone (no embedding provider, no query
vector, or no vectors yet in the caller's scopes), the score is the keyword score
as it is, not scaled down by its weight: a relevance threshold tuned for one
setup then does not silently drop every hit in the other. numpy is never
imported here: the vector cache brings it, when there is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.memory.models import Memory, Recalled

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from bot.memory.store import MemoryStore
    from bot.memory.vectors import VectorCache

# Candidates fetched from each side per result wanted: a memory can rank low on
# one side and still win on the sum.
CANDIDATES = 3


def merge(
    vector_hits: Sequence[tuple[int, float]],
    keyword_hits: Sequence[tuple[int, float]],
    *,
    vector_weight: float = 0.7,
    keyword_weight: float = 0.3,
    limit: int,
) -> list[tuple[int, float, float | None, float | None]]:
    """Combine hits by memory id: (id, merged score, vector part, keyword part), best first."""
    vectors: dict[int, float] = {}
    keywords: dict[int, float] = {}
    for memory_id, score in vector_hits:
        vectors[memory_id] = max(vectors.get(memory_id, 0.0), _clip(score))
    for memory_id, score in keyword_hits:
        keywords[memory_id] = max(keywords.get(memory_id, 0.0), _clip(score))
    merged = [
        (
            memory_id,
            vector_weight * vectors.get(memory_id, 0.0)
            + keyword_weight * keywords.get(memory_id, 0.0),
            vectors.get(memory_id),
            keywords.get(memory_id),
        )
        for memory_id in vectors.keys() | keywords.keys()
    ]
    merged.sort(key=lambda hit: (-hit[1], hit[0]))
    return merged[: max(limit, 0)]


def _clip(score: float) -> float:
    return min(1.0, max(0.0, score))


class HybridRecall:
    """Keyword search always; vector search too when there is a cache and a query vector."""

    def __init__(
        self,
        store: MemoryStore,
        cache: VectorCache | None,
        *,
        vector_weight: float = 0.7,
        keyword_weight: float = 0.3,
    ) -> None:
        self._store = store
        self._cache = cache
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight

    async def recall(
        self,
        query: str,
        scopes: Sequence[str],
        limit: int,
        query_vector: npt.NDArray[np.float32] | None = None,
        keyword_hits: list[tuple[Memory, float]] | None = None,
    ) -> list[Recalled]:
        """The memories among ``scopes`` that best match ``query``, best first
        (``keyword_hits``: the store's ``keyword`` search, when the caller already ran it
        for ``limit * CANDIDATES``)."""
        if limit <= 0 or not scopes:
            return []
        found = keyword_hits
        if found is None:
            found = await self._store.keyword(query, scopes, limit * CANDIDATES)
        cache = self._cache
        vector_hits: list[tuple[int, float]] = []
        if cache is not None and query_vector is not None and len(cache):
            searched = cache.search(query_vector, scopes, limit * CANDIDATES)
            vector_hits = await self._current(cache, searched)
        if not vector_hits:
            return [Recalled(m, score, None, score) for m, score in found[:limit]]
        merged = merge(
            vector_hits,
            [(m.id, score) for m, score in found],
            vector_weight=self.vector_weight,
            keyword_weight=self.keyword_weight,
            limit=limit,
        )
        memories = {m.id: m for m, _ in found}
        missing = [hit[0] for hit in merged if hit[0] not in memories]
        memories.update(await self._store.get_many(missing))
        return [
            Recalled(memories[memory_id], score, vector, keyword)
            for memory_id, score, vector, keyword in merged
            if memory_id in memories
        ]

    async def _current(
        self, cache: VectorCache, hits: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """The hits whose entry still holds an embedding from the cache's model.

        Another process (``pinclaw memory forget``) may have deleted an entry, or
        a failed re-embedding left a changed entry without a vector; the cache
        cannot hear of either, so its stale rows are dropped here when they surface.
        """
        if not hits:
            return hits
        current = await self._store.embedded_ids([memory_id for memory_id, _ in hits], cache.model)
        for memory_id, _ in hits:
            if memory_id not in current:
                cache.remove(memory_id)
        return [hit for hit in hits if hit[0] in current]
