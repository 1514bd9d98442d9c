"""Memories in SQLite: one row per (scope, key), a full-text index, stored embeddings.

The full-text index is an FTS5 table over the rows' key, content and category
(external content: the text is stored once, in ``memories``), kept in step by
triggers. Embeddings live in a table of their own, as float32 bytes with the
name of the model that made them: a model change shows as entries to embed
again, and 1.5 kB vectors kept out of ``memories`` keep its scans (the substring
fallback, lists) about three times faster at 100,000 entries. A change of
content drops the entry's embedding, by trigger. This module never imports
numpy: PinClaw without an embedding provider must not load it.
"""

from __future__ import annotations

import builtins
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import aiosqlite

from bot.memory.keywords import fts_query, like_terms
from bot.memory.models import CONVERSATION, SHARED, Memory, NewMemory
from bot.store.db import Database, on_thread
from bot.store.people import PeopleStore
from bot.store.people_rows import claim_identity, person_behind_chat, person_scope, rescope
from bot.store.schema import Step


async def _to_people(conn: aiosqlite.Connection) -> None:
    """Version 2: memories belong to people, no longer to chats (see ``people_rows``)."""
    rows = await conn.execute_fetchall(
        "SELECT DISTINCT scope FROM memories WHERE scope != ? AND scope NOT LIKE 'person:%'",
        (SHARED,),
    )
    for (scope,) in rows:
        person = await person_behind_chat(conn, str(scope))
        await rescope(conn, str(scope), person_scope(person), tag=str(scope))


MIGRATIONS: list[Step] = [
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        content TEXT NOT NULL,
        category TEXT NOT NULL,
        scope TEXT NOT NULL,
        session TEXT NOT NULL DEFAULT '',
        created_at REAL,
        updated_at REAL,
        -- The scope as one opaque word, so the full-text index can keep to the
        -- caller's scopes itself instead of looking up every hit's row (see _fts).
        scope_token TEXT GENERATED ALWAYS AS ('s' || hex(scope)) VIRTUAL,
        UNIQUE (scope, key)
    );
    -- UNIQUE (scope, key) already gives an index that starts with scope.
    CREATE INDEX memories_by_category ON memories (category, updated_at);
    CREATE TABLE memory_embeddings (
        id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        embedding BLOB NOT NULL
    );
    CREATE INDEX memory_embeddings_by_model ON memory_embeddings (model);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        key, content, category, scope_token,
        content='memories', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, key, content, category, scope_token)
        VALUES (new.id, new.key, new.content, new.category, new.scope_token);
    END;
    CREATE TRIGGER memories_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, key, content, category, scope_token)
        VALUES ('delete', old.id, old.key, old.content, old.category, old.scope_token);
        DELETE FROM memory_embeddings WHERE id = old.id;
    END;
    CREATE TRIGGER memories_update AFTER UPDATE OF key, content, category, scope
    ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, key, content, category, scope_token)
        VALUES ('delete', old.id, old.key, old.content, old.category, old.scope_token);
        INSERT INTO memories_fts (rowid, key, content, category, scope_token)
        VALUES (new.id, new.key, new.content, new.category, new.scope_token);
    END;
    -- A vector of the old text would find the entry for the wrong questions.
    CREATE TRIGGER memories_content_changed AFTER UPDATE OF content ON memories
    WHEN old.content IS NOT new.content BEGIN
        DELETE FROM memory_embeddings WHERE id = new.id;
    END;
    """,
    _to_people,
]

_COLUMNS = "id, key, content, category, scope, session, created_at, updated_at"
_M_COLUMNS = ", ".join(f"m.{name.strip()}" for name in _COLUMNS.split(","))
_UPSERT = """
    INSERT INTO memories (key, content, category, scope, session, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (scope, key) DO UPDATE SET
        content = excluded.content,
        category = excluded.category,
        session = excluded.session,
        updated_at = excluded.updated_at
"""
# A keyword hit found only by substring: a fixed, modest score below most FTS hits.
LIKE_SCORE = 0.5


def _memory(row: Sequence[Any]) -> Memory:
    # Column order of _COLUMNS; SQLite gives REAL columns back as floats.
    return Memory(*row[:8])


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _row(item: NewMemory, now: float) -> tuple[object, ...]:
    return (item.key, item.content, item.category, item.scope, item.session, now, now)


class MemoryStore:
    """Reads and writes memories; every search is limited to the scopes given."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.people = PeopleStore(db)

    async def setup(self) -> None:
        """Create or upgrade the tables (after the people whose memories they hold)."""
        await self.people.setup()
        await self._db.migrate("memory", MIGRATIONS)

    async def store(self, item: NewMemory, now: float | None = None) -> Memory:
        """Store an entry, replacing the one with the same scope and key; return it."""
        values = _row(item, _now(now))
        row = await self._db.transaction(lambda conn: _upsert(conn, values))
        return _memory(row)

    async def store_said(
        self, identity: str, label: str, item: NewMemory, now: float | None = None
    ) -> Memory:
        """Store what the person behind ``identity`` said (made on first sight, named
        ``label``), in their scope whatever ``item`` says; person and entry in one trip."""
        stamp = _now(now)

        def upsert(conn: sqlite3.Connection) -> Any:
            scope = person_scope(claim_identity(conn, identity, label, "seen"))
            return _upsert(conn, _row(replace(item, scope=scope), stamp))

        row = await self._db.transaction(upsert)
        return _memory(row)

    async def store_many(self, items: Sequence[NewMemory], now: float | None = None) -> int:
        """Store many entries in one transaction; return how many were given."""
        stamp = _now(now)
        async with self._db.write() as conn:
            await conn.executemany(_UPSERT, [_row(item, stamp) for item in items])
        return len(items)

    async def get(self, key: str, scopes: Sequence[str]) -> Memory | None:
        """The entry with this key in the first of ``scopes`` that has one."""
        if not scopes:
            return None
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memories WHERE key = ? AND scope IN ({_marks(scopes)})",
            (key, *scopes),
        )
        found = {str(row[4]): _memory(row) for row in rows}
        return next((found[scope] for scope in scopes if scope in found), None)

    async def get_by_id(self, memory_id: int) -> Memory | None:
        """The entry with this id, if it still exists."""
        return (await self.get_many([memory_id])).get(memory_id)

    async def get_many(self, ids: Iterable[int]) -> dict[int, Memory]:
        """The entries with these ids that still exist, by id (one query)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memories WHERE id IN ({_marks(wanted)})", wanted
        )
        return {int(row[0]): _memory(row) for row in rows}

    async def count(self, category: str | None = None, scopes: Sequence[str] | None = None) -> int:
        """How many entries there are, in one category or in all (and in ``scopes``)."""
        where, params = _filters(category, scopes)
        return await self._scalar(f"SELECT count(*) FROM memories {where}", params)

    async def count_by_scope(self) -> dict[str, int]:
        """How many entries each scope holds."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT scope, count(*) FROM memories GROUP BY scope"
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def forget(self, key: str, scopes: Sequence[str]) -> bool:
        """Delete the entry with this key in the first of ``scopes`` that has one."""
        found = await self.get(key, scopes)
        return found is not None and await self.forget_id(found.id)

    async def forget_id(self, memory_id: int) -> bool:
        """Delete the entry with this id; False if there was none."""
        async with self._db.write() as conn:
            cur = await conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            return cur.rowcount > 0

    async def prune(self, category: str, older_than: float) -> int:
        """Delete the entries of a category not updated since ``older_than``; return how many."""
        async with self._db.write() as conn:
            cur = await conn.execute(
                "DELETE FROM memories WHERE category = ? AND updated_at < ?", (category, older_than)
            )
            return cur.rowcount

    async def keyword(
        self, query: str, scopes: Sequence[str], limit: int
    ) -> list[tuple[Memory, float]]:
        """Entries matching the words of ``query``, best first, scored in (0, 1].

        Scores are BM25 relative to the best hit of its kind in this search
        (``bm25 / best_bm25``: the best scores 1.0, a hit half as relevant 0.5), the
        kinds being what people said (``conversation``) and everything else; they
        rank hits within one search but do not compare across searches. When the
        full-text index finds nothing, a substring search on the longest words
        scores each hit ``LIKE_SCORE``.
        """
        if not scopes or limit <= 0:
            return []
        match, terms = fts_query(query), like_terms(query)
        # Both searches in one trip to the database.
        return await on_thread(
            self._db.conn, lambda conn: _search(conn, match, terms, scopes, limit)
        )

    async def keyword_of(
        self, identity: str, label: str, query: str, limit: int
    ) -> tuple[str, list[tuple[Memory, float]]]:
        """The scope of the person behind ``identity`` (made on first sight, named
        ``label``) and ``keyword`` of ``query`` in it and the shared scope: one trip."""
        match, terms = fts_query(query), like_terms(query)

        def search(conn: sqlite3.Connection) -> tuple[str, list[tuple[Memory, float]]]:
            scope = person_scope(claim_identity(conn, identity, label, "seen"))
            return scope, _search(conn, match, terms, [scope, SHARED], limit)

        return await self._db.transaction(search)

    async def set_embeddings(self, rows: Sequence[tuple[int, bytes]], model: str) -> None:
        """Store the embeddings (memory id, float32 bytes) made by ``model``, in one transaction."""
        async with self._db.write() as conn:
            # Through SELECT: an entry forgotten while it was being embedded gets no row.
            await conn.executemany(
                "INSERT OR REPLACE INTO memory_embeddings (id, model, embedding) "
                "SELECT id, ?, ? FROM memories WHERE id = ?",
                [(model, blob, memory_id) for memory_id, blob in rows],
            )

    async def unembedded(self, model: str, limit: int) -> list[tuple[int, str]]:
        """(id, content) of entries without an embedding from ``model``, oldest first."""
        # NOT IN builds the set of embedded ids once: half the time of a join per row.
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, content FROM memories WHERE id NOT IN "
            "(SELECT id FROM memory_embeddings WHERE model = ?) ORDER BY id LIMIT ?",
            (model, limit),
        )
        return [(int(row[0]), str(row[1])) for row in rows]

    async def embeddings(
        self, model: str, after_id: int = 0, limit: int = -1
    ) -> list[tuple[int, str, bytes]]:
        """(id, scope, float32 bytes) of the entries embedded by ``model``, in id order."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT e.id, m.scope, e.embedding FROM memory_embeddings AS e "
            "JOIN memories AS m ON m.id = e.id "
            "WHERE e.model = ? AND e.id > ? ORDER BY e.id LIMIT ?",
            (model, after_id, limit),
        )
        return [(int(row[0]), str(row[1]), bytes(row[2])) for row in rows]

    async def count_embedded(self, model: str) -> int:
        """How many entries hold an embedding from ``model``."""
        return await self._scalar(
            "SELECT count(*) FROM memory_embeddings WHERE model = ?", (model,)
        )

    async def embedded_ids(self, ids: Iterable[int], model: str) -> set[int]:
        """Which of ``ids`` still hold an embedding from ``model``."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        rows = await self._db.conn.execute_fetchall(
            f"SELECT id FROM memory_embeddings WHERE model = ? AND id IN ({_marks(wanted)})",
            (model, *wanted),
        )
        return {int(row[0]) for row in rows}

    async def health(self) -> dict[str, object]:
        """Counts and checks: is the full-text index in step with the entries?"""
        # One statement, so the counts come from one snapshot: a turn that stores
        # what someone said between two reads would look like a broken index. The
        # FTS table itself reads through to ``memories``; its docsize table holds
        # one row per indexed entry.
        rows = await self._db.conn.execute_fetchall(
            "SELECT (SELECT count(*) FROM memories), "
            "(SELECT count(*) FROM memories_fts_docsize), "
            "(SELECT count(*) FROM memory_embeddings)"
        )
        entries, indexed, embedded = (int(value) for value in next(iter(rows)))
        problems: list[str] = []
        try:
            # rank = 1 also compares the index with the content table.
            async with self._db.write() as write_conn:
                await write_conn.execute(
                    "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)"
                )
        except sqlite3.DatabaseError as exc:
            problems.append(f"the full-text index does not match the entries ({exc})")
        checked = await self._db.conn.execute_fetchall("PRAGMA quick_check")
        problems += [str(row[0]) for row in checked if str(row[0]) != "ok"]
        if indexed != entries and not problems:
            problems.append(f"the full-text index holds {indexed} entries, not {entries}")
        return {
            "ok": not problems,
            "entries": entries,
            "fts_entries": indexed,
            "embedded": embedded,
            "integrity": "; ".join(problems) or "ok",
        }

    async def _scalar(self, sql: str, params: Sequence[object] = ()) -> int:
        rows = await self._db.conn.execute_fetchall(sql, params)
        return int(next(iter(rows))[0])

    async def list(
        self,
        category: str | None = None,
        scopes: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """Entries, most recently updated first; ``scopes`` None means every scope."""
        where, params = _filters(category, scopes)
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memories {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [_memory(row) for row in rows]


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def _relative(score: float, best: float) -> float:
    if best >= 0.0:
        return 1.0  # only possible with no relevant terms at all: nothing to tell apart
    return min(1.0, max(0.0, score / best))


def _scope_token(scope: str) -> str:
    # Must equal the scope_token column: "s" and the UTF-8 bytes in hex (case is folded).
    return "s" + scope.encode().hex()


def _upsert(conn: sqlite3.Connection, values: Sequence[object]) -> Any:
    """Store one entry's row (``_row``); its row as stored (an upsert always returns it)."""
    (row,) = conn.execute(f"{_UPSERT} RETURNING {_COLUMNS}", values).fetchall()
    return row


def _search(
    conn: sqlite3.Connection, match: str, terms: Sequence[str], scopes: Sequence[str], limit: int
) -> list[tuple[Memory, float]]:
    """The full-text hits of ``match``, or if there are none the substring hits of ``terms``."""
    hits = _fts(conn, match, scopes, limit) if match else []
    return hits or _like(conn, terms, scopes, limit)


def _fts(
    conn: sqlite3.Connection, match: str, scopes: Sequence[str], limit: int
) -> list[tuple[Memory, float]]:
    # The scope words narrow the matches inside the index, before any BM25
    # (their column weighs 0); the outer query still checks each winner's scope.
    # Ranking ids alone first keeps the text out of the sort.
    in_scopes = " OR ".join(f'"{_scope_token(scope)}"' for scope in scopes)
    rows = conn.execute(
        f"SELECT {_M_COLUMNS}, ranked.score FROM ("
        "  SELECT rowid AS id, bm25(memories_fts, 1, 1, 1, 0) AS score FROM memories_fts"
        "  WHERE memories_fts MATCH ? ORDER BY score LIMIT ?"
        ") AS ranked JOIN memories AS m ON m.id = ranked.id "
        f"WHERE m.scope IN ({_marks(scopes)}) ORDER BY ranked.score, m.id",
        (f"({match}) AND {{scope_token}} : ({in_scopes})", limit, *scopes),
    ).fetchall()
    if not rows:
        return []
    # bm25() is negative, lower is better. Each kind is scored against its own
    # best: a past question that repeats the query word for word must not push
    # the fact that answers it below the relevance threshold.
    best: dict[bool, float] = {}
    for row in rows:
        best.setdefault(row[3] == CONVERSATION, float(row[-1]))
    return [(_memory(row), _relative(float(row[-1]), best[row[3] == CONVERSATION])) for row in rows]


def _like(
    conn: sqlite3.Connection, terms: Sequence[str], scopes: Sequence[str], limit: int
) -> list[tuple[Memory, float]]:
    if not terms:
        return []
    patterns = [_like_pattern(term) for term in terms]
    any_term = " OR ".join("content LIKE ? ESCAPE '\\'" for _ in patterns)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE ({any_term}) "
        f"AND scope IN ({_marks(scopes)}) ORDER BY updated_at DESC, id DESC LIMIT ?",
        (*patterns, *scopes, limit),
    ).fetchall()
    return [(_memory(row), LIKE_SCORE) for row in rows]


def _like_pattern(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _filters(category: str | None, scopes: Sequence[str] | None) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if category is not None:
        clauses.append("category = ?")
        params.append(category)
    if scopes is not None:
        clauses.append(f"scope IN ({_marks(scopes)})" if scopes else "0")
        params.extend(scopes)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params
