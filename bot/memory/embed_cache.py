"""A cache of embeddings in PinClaw's SQLite file, in front of any ``Embedder``.

A vector is stored under ``sha256(model + "\\0" + text)``, so a new model never
gets an old model's vector. Each call looks all its texts up in one query and
sends only the misses, each once, to the inner embedder in one call. Rows past
``max_entries`` are evicted least recently used first, in SQL. A model may keep
its name and change its vector size (a server swapped under the same name): a
cached vector whose size differs from what the model now returns is dropped and
embedded again, so one result never mixes sizes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from bot.memory.embeddings import EmbeddingError
from bot.memory.models import Embedder
from bot.store.db import Database

MIGRATIONS = (
    """
    CREATE TABLE embedding_cache (
        hash TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,
        used_at REAL NOT NULL
    );
    CREATE INDEX embedding_cache_used_at ON embedding_cache (used_at);
    """,
)

Vector = npt.NDArray[np.float32]
_STORED = np.dtype("<f4")  # float32, little-endian, whatever the machine


def cache_key(model: str, text: str) -> str:
    """The row key of ``text`` embedded by ``model``."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


class CachedEmbedder:
    """An ``Embedder`` that asks ``inner`` only for texts it has not seen with that model.

    ``hits`` counts distinct texts served from the cache, ``misses`` texts the inner
    embedder was asked for (a stale vector embedded again counts as a miss).
    """

    def __init__(self, inner: Embedder, db: Database, *, max_entries: int = 10000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._inner = inner
        self._db = db
        self._max_entries = max_entries
        self._last_used = 0.0
        self.hits = 0
        self.misses = 0

    async def setup(self) -> None:
        """Create the cache table if this database does not have it yet."""
        await self._db.migrate("embedding_cache", MIGRATIONS)

    @property
    def model(self) -> str:
        """The inner embedder's model."""
        return self._inner.model

    async def embed(self, texts: list[str]) -> Vector:
        """One float32 row per text, in order, embedding only what the cache lacks."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._inner.model
        keys = [cache_key(model, text) for text in texts]
        text_of = dict(zip(keys, texts, strict=True))  # distinct texts, first-seen order
        cached = await self._lookup(model, list(text_of))
        missing = [key for key in text_of if key not in cached]
        fresh = await self._embed_keys(missing, text_of) if missing else {}
        stale = _stale(cached, fresh)
        if stale:
            for key in stale:
                del cached[key]
            again = await self._embed_keys(stale, text_of)
            if fresh and _width(again) != _width(fresh):
                raise EmbeddingError(
                    f"the embedding model {model} changed its vector size during one request "
                    f"(from {_width(fresh)} to {_width(again)}); please try again"
                )
            fresh.update(again)
        self.hits += len(cached)
        self.misses += len(fresh)
        await self._store(model, fresh, cached)
        vectors = cached | fresh
        return np.stack([vectors[key] for key in keys])

    async def _lookup(self, model: str, keys: list[str]) -> dict[str, Vector]:
        """The cached vectors of ``keys``, in one query (a JSON list sidesteps SQLite's
        limit on the number of ``?`` parameters)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT hash, dims, vector FROM embedding_cache "
            "WHERE model = ? AND hash IN (SELECT value FROM json_each(?))",
            (model, json.dumps(keys)),
        )
        found: dict[str, Vector] = {}
        for key, dims, blob in rows:
            if dims > 0 and len(blob) == dims * _STORED.itemsize:  # else: a damaged row, a miss
                found[key] = np.frombuffer(blob, dtype=_STORED).astype(np.float32)
        return found

    async def _embed_keys(self, keys: list[str], text_of: dict[str, str]) -> dict[str, Vector]:
        """Embed the texts of ``keys`` in one call to the inner embedder."""
        matrix = await self._inner.embed([text_of[key] for key in keys])
        if matrix.ndim != 2 or matrix.shape[0] != len(keys):
            raise ValueError(
                f"{type(self._inner).__name__} returned shape {matrix.shape} for {len(keys)} texts"
            )
        rows = np.asarray(matrix, dtype=np.float32)
        return {key: rows[i] for i, key in enumerate(keys)}

    async def _store(self, model: str, fresh: dict[str, Vector], hits: Iterable[str]) -> None:
        """Save new vectors, mark hits as just used, and evict past ``max_entries``."""
        hit_keys = list(hits)
        # Strictly increasing within this process, so two quick calls never tie.
        now = max(time.time(), self._last_used + 1e-6)
        self._last_used = now
        async with self._db.write() as conn:
            if hit_keys:
                await conn.execute(
                    "UPDATE embedding_cache SET used_at = ? "
                    "WHERE hash IN (SELECT value FROM json_each(?))",
                    (now, json.dumps(hit_keys)),
                )
            if not fresh:
                return
            await conn.executemany(
                "INSERT INTO embedding_cache (hash, model, dims, vector, used_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(hash) DO UPDATE SET "
                "dims = excluded.dims, vector = excluded.vector, used_at = excluded.used_at",
                [
                    (key, model, int(vector.shape[0]), vector.astype(_STORED).tobytes(), now)
                    for key, vector in fresh.items()
                ],
            )
            rows = list(await conn.execute_fetchall("SELECT COUNT(*) FROM embedding_cache"))
            excess = int(rows[0][0]) - self._max_entries
            if excess > 0:
                await conn.execute(
                    "DELETE FROM embedding_cache WHERE hash IN "
                    "(SELECT hash FROM embedding_cache ORDER BY used_at, rowid LIMIT ?)",
                    (excess,),
                )


def _width(vectors: dict[str, Vector]) -> int:
    return int(next(iter(vectors.values())).shape[0])


def _stale(cached: dict[str, Vector], fresh: dict[str, Vector]) -> list[str]:
    """Cached keys whose vectors cannot share a matrix with this call's other vectors.

    Fresh vectors show the model's current size. Without any, cached vectors of
    mixed sizes cannot tell which size is current, so all of them are embedded again.
    """
    if fresh:
        width = _width(fresh)
        return [key for key, vector in cached.items() if vector.shape[0] != width]
    widths = {vector.shape[0] for vector in cached.values()}
    return list(cached) if len(widths) > 1 else []
