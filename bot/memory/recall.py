"""Recall: how a question becomes a safe keyword search, and how keyword and vector hits merge.

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

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.memory.models import Recalled

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from bot.memory.store import MemoryStore
    from bot.memory.vectors import VectorCache

# Candidates fetched from each side per result wanted: a memory can rank low on
# one side and still win on the sum.
CANDIDATES = 3
_FTS_TERMS = 16
_LIKE_TERMS = 3
# Words too common to say what a question is about.
_STOP_TEXT = """
a about am an and any are as at be been but by can could did do does for from had has have he
her him his how i if in is it its me my no not of on or our she so that the their them then there
these they this to us was we were what when where which who why will with would you your
"""
_STOP_WORDS = frozenset(_STOP_TEXT.split())
# Runs of letters and digits, as the unicode61 tokenizer splits text ("_" separates too).
_WORD = re.compile(r"[^\W_]+")


def _words(query: str) -> list[str]:
    """The query's distinct words worth searching for, longest first."""
    words: dict[str, str] = {}
    for word in _WORD.findall(query):
        folded = word.casefold()
        # One letter says little, except in scripts where one character is a word.
        short = len(folded) < 2 and folded.isascii()
        if not short and folded not in _STOP_WORDS:
            words.setdefault(folded, word)
    return sorted(words.values(), key=len, reverse=True)


def fts_query(query: str) -> str:
    """An FTS5 query matching any word of ``query`` in key or content; "" if none.

    Every word becomes a quoted string, so no user text can be read as FTS5
    syntax (operators, column filters, NEAR, quotes). Words of four letters or
    more also match as prefixes ("coffee" finds "coffees"). Only the longest 16
    words are kept, so a pasted page cannot make one search scan the whole index.
    """
    terms = []
    for word in _words(query)[:_FTS_TERMS]:
        quoted = '"' + word.replace('"', '""') + '"'
        terms.append(quoted + "*" if len(word) >= 4 else quoted)
    # The category column is there for filtering, not for matching what people say.
    return "{key content} : (" + " OR ".join(terms) + ")" if terms else ""


def like_terms(query: str) -> list[str]:
    """What a substring search looks for: the longest words, or the bare text if it has none."""
    words = _words(query)[:_LIKE_TERMS]
    if words:
        return words
    text = query.strip()[:100]
    # Text without letters or digits (emoji, say) is looked for as it is; punctuation is not.
    return [text] if text and not text.isascii() and not _WORD.search(text) else []


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
    ) -> list[Recalled]:
        """The memories among ``scopes`` that best match ``query``, best first."""
        if limit <= 0 or not scopes:
            return []
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
