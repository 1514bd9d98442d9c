"""Memory as the rest of PinClaw uses it: remember, recall, forget, and the turn's context.

Without an embedding provider, recall is keyword search (FTS5, BM25) and numpy is
never loaded. With one, every entry also gets a vector (through the embedding
cache), kept in an in-memory matrix, and recall merges both scores. Entries made
before a provider (or model) change are embedded lazily in the background; until
then they are found by keywords only, so vectors of two models never meet.
Problems with the embedding endpoint never break a turn: recall falls back to
keywords and the failure is logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.config.memory import MemoryConfig
from bot.core.errors import UserError, log_bug
from bot.memory import snapshot
from bot.memory.models import CONVERSATION, CORE, SHARED, Embedder, Memory, NewMemory, Recalled
from bot.memory.recall import CANDIDATES, HybridRecall
from bot.memory.store import MemoryStore
from bot.store.people import Person
from bot.store.people_rows import identity_of, scope_person

if TYPE_CHECKING:
    from bot.core.messages import InboundMessage
    from bot.memory.vectors import VectorCache

log = logging.getLogger(__name__)

_EMBED_BATCH = 256
_LINE_CHARS = 300


class MemoryService:
    """The store, the optional embedder and vector cache, and recall, together."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        settings: MemoryConfig,
        embedder: Embedder | None = None,
        cache: VectorCache | None = None,
    ) -> None:
        self.store = store
        self.people = store.people
        self._settings = settings
        self._embedder = embedder
        self._cache = cache
        self._recall = HybridRecall(
            store,
            cache,
            vector_weight=settings.vector_weight,
            keyword_weight=settings.keyword_weight,
        )
        self._backfill: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the vectors of the current model and embed what lacks one, in the background."""
        if self._cache is None or self._embedder is None:
            return
        await self._cache.load(self.store)
        log.info(
            "memory: %d vectors of %s in the cache (%.1f MiB)",
            len(self._cache),
            self._embedder.model,
            self._cache.nbytes / 2**20,
        )
        self._backfill = asyncio.create_task(self._embed_missing(), name="memory backfill")

    async def stop(self) -> None:
        """Stop background embedding."""
        if self._backfill is not None:
            self._backfill.cancel()
            await asyncio.gather(self._backfill, return_exceptions=True)
            self._backfill = None

    async def remember(self, item: NewMemory, now: float | None = None) -> Memory:
        """Store (or replace) an entry, and embed it when vectors are on."""
        memory = await self.store.store(item, now)
        await self._embed([memory])
        return memory

    async def recall(self, query: str, scopes: Sequence[str], limit: int) -> list[Recalled]:
        """The entries that best match ``query`` among ``scopes``, best first."""
        vector = await self._query_vector(query)
        return await self._recall.recall(query, scopes, limit, query_vector=vector)

    async def forget(self, key: str, scopes: Sequence[str]) -> Memory | None:
        """Remove the entry with ``key`` (first match in ``scopes``); the removed entry or None."""
        memory = await self.store.get(key, scopes)
        if memory is None or not await self.store.forget_id(memory.id):
            return None
        if self._cache is not None:
            self._cache.remove(memory.id)
        return memory

    async def forget_id(self, memory_id: int) -> bool:
        """Remove an entry by id (the command line's way)."""
        if not await self.store.forget_id(memory_id):
            return False
        if self._cache is not None:
            self._cache.remove(memory_id)
        return True

    async def speaker(
        self, channel: str, sender_id: str, name: str = "", origin: str = "chat"
    ) -> Person | None:
        """Whose memories a turn uses (see ``PeopleStore.speaker``)."""
        return await self.people.speaker(channel, sender_id, name, origin)

    async def scopes_for(
        self, channel: str, sender_id: str, name: str = "", origin: str = "chat"
    ) -> list[str]:
        """The scopes a turn may read: its person's own, and the shared ones."""
        person = await self.speaker(channel, sender_id, name, origin)
        return [person.scope, SHARED] if person is not None else [SHARED]

    async def rescoped(self) -> None:
        """Entries changed their person (two people became one): reload the vectors."""
        if self._cache is not None:
            await self._cache.load(self.store)

    async def context_for(
        self, message: InboundMessage, session: Awaitable[int], origin: str = "chat"
    ) -> str:
        """The prompt section of what is remembered for this message's person ("" if nothing).

        Only the speaker's own memories and the shared ones: in a group chat,
        never another member's. ``session`` gives the turn's session id (what is
        said in it is not repeated); it is awaited after the search.
        """
        settings = self._settings
        if not settings.recall_limit or not settings.prompt_budget_chars:
            return ""
        try:
            if origin == "chat":
                found = await self._sender_recall(message, settings.recall_limit + 5)
            else:
                scopes = await self.scopes_for(
                    message.channel, message.sender_id, message.sender_name, origin
                )
                found = await self.recall(message.text, scopes, settings.recall_limit + 5)
        except Exception as exc:
            log_bug(log, "recalling memories failed", exc)
            return ""
        session_id = await session
        lines: list[str] = []
        used = 0
        for hit in found:
            memory = hit.memory
            if hit.score < settings.min_relevance:
                continue
            if memory.category == CONVERSATION and memory.session == str(session_id):
                continue  # still in the conversation the model sees
            line = _line(memory)
            full = len(lines) >= settings.recall_limit
            if full or used + len(line) > settings.prompt_budget_chars:
                break
            lines.append(line)
            used += len(line)
        if not lines:
            return ""
        return (
            "## What you remember\n"
            "Entries from long-term memory that may be relevant (they may be out of date; "
            "the newest wins):\n" + "\n".join(lines)
        )

    async def _sender_recall(self, message: InboundMessage, limit: int) -> list[Recalled]:
        """``recall`` for the sender of a chat message among their own memories and the
        shared ones: the sender's person (made on first sight, as ``speaker`` does for a
        chat) and the keyword search come in one trip to the database."""
        identity = identity_of(message.channel, message.sender_id)
        scope, hits = await self.store.keyword_of(
            identity, message.sender_name, message.text, limit * CANDIDATES
        )
        vector = await self._query_vector(message.text)
        return await self._recall.recall(
            message.text, [scope, SHARED], limit, query_vector=vector, keyword_hits=hits
        )

    async def observe(self, message: InboundMessage, session_id: int) -> None:
        """Keep what a person said as a conversation entry of theirs."""
        if not self._settings.store_conversation or not message.text.strip():
            return
        stamp = message.message_id or f"{message.received_at:.6f}"
        # An opaque key: words in it would make every message match a search for them.
        digest = hashlib.sha256(f"{message.channel}\0{message.chat_id}\0{stamp}".encode())
        item = NewMemory(
            key=f"msg-{digest.hexdigest()[:16]}",
            content=message.text.strip(),
            category=CONVERSATION,
            scope="",  # the speaker's, found (or made) as it is stored
            session=str(session_id),
        )
        try:
            identity = identity_of(message.channel, message.sender_id)
            memory = await self.store.store_said(identity, message.sender_name, item)
            await self._embed([memory])
        except Exception as exc:
            log_bug(log, "storing a message in memory failed", exc)

    async def prune_conversation(self, now: float | None = None) -> int:
        """Forget conversation entries older than the retention period."""
        cutoff = (now or time.time()) - self._settings.conversation_retention_days * 86400
        removed = await self.store.prune(CONVERSATION, cutoff)
        if removed and self._cache is not None:
            await self._cache.load(self.store)  # simplest exact way to drop them all
        return removed

    async def hygiene(self, snapshot_path: Path) -> str:
        """The daily clean-up: old conversation entries go, core entries are exported."""
        removed = await self.prune_conversation()
        exported = await self.export_snapshot(snapshot_path)
        health = await self.store.health()
        if not health.get("ok", True):
            log.error("memory: the health check failed: %s", health)
        outcome = (
            f"removed {removed} conversation entries older than "
            f"{self._settings.conversation_retention_days:g} days; "
            f"exported {exported} core entries to {snapshot_path.name}"
        )
        log.info("memory hygiene: %s", outcome)
        return outcome

    async def export_snapshot(self, path: Path) -> int:
        """Write the core entries to ``path`` (MEMORY_SNAPSHOT.md); how many were written."""
        core, portable = await self._snapshot_entries()
        await asyncio.to_thread(snapshot.write, path, core, portable)
        return len(core)

    async def snapshot_text(self) -> str:
        """The snapshot as text (what ``export_snapshot`` writes)."""
        return snapshot.render(*await self._snapshot_entries())

    async def _snapshot_entries(self) -> tuple[list[Memory], dict[str, str]]:
        core = await self.store.list(CORE, None, limit=100_000)
        return core, {scope: await self._portable(scope) for scope in {m.scope for m in core}}

    async def restore_snapshot(self, path: Path) -> int:
        """Store the entries of a snapshot (after the database was lost); how many."""
        try:
            entries = snapshot.parse(await asyncio.to_thread(path.read_text, encoding="utf-8"))
        except OSError as exc:
            log.error("memory: cannot read %s: %s", path, exc.strerror)
            return 0
        for item, updated in entries:
            scope = await self._local(item.scope)
            await self.remember(replace(item, scope=scope), now=updated)
        if entries:
            log.warning("memory: restored %d entries from %s", len(entries), path.name)
        return len(entries)

    async def _portable(self, scope: str) -> str:
        """A scope as the snapshot writes it: people by an account, not by a row id."""
        person_id = scope_person(scope)
        person = await self.people.get(person_id) if person_id is not None else None
        if person is None:
            return scope
        if person.is_owner:
            return snapshot.OWNER
        return f"{snapshot.ACCOUNT}{person.identities[0].identity}" if person.identities else scope

    async def _local(self, scope: str) -> str:
        """A snapshot's scope in this database (people made again from their accounts)."""
        if scope == SHARED:
            return SHARED
        if scope.startswith(snapshot.ACCOUNT):
            channel, _, user = scope.removeprefix(snapshot.ACCOUNT).partition(":")
            return (await self.people.person_for(channel, user)).scope
        # A chat scope from before people: with the database lost, nobody can tell
        # whose chat it was; the owner keeps it (``pinclaw memory`` shows it).
        return (await self.people.owner()).scope

    async def _embed(self, memories: Sequence[Memory]) -> None:
        if self._embedder is None or self._cache is None or not memories:
            return
        from bot.memory.vectors import to_blob

        try:
            vectors = await self._embedder.embed([m.content for m in memories])
        except UserError as exc:
            log.warning("memory: not embedded now (%s); keyword search still finds it", exc)
            return
        if self._cache.dims is not None and vectors.shape[1] != self._cache.dims:
            log.warning(
                "memory: %s now gives %d-dimension vectors instead of %d; re-embedding all",
                self._embedder.model,
                vectors.shape[1],
                self._cache.dims,
            )
            return
        rows = [(m.id, to_blob(v)) for m, v in zip(memories, vectors, strict=True)]
        await self.store.set_embeddings(rows, self._embedder.model)
        for memory, vector in zip(memories, vectors, strict=True):
            self._cache.upsert(memory.id, memory.scope, vector)

    async def _embed_missing(self) -> None:
        assert self._embedder is not None
        model = self._embedder.model
        done = 0
        while batch := await self.store.unembedded(model, _EMBED_BATCH):
            found = await self.store.get_many([memory_id for memory_id, _ in batch])
            memories = list(found.values())
            before = len(self._cache or ())
            await self._embed(memories)
            if len(self._cache or ()) == before:
                return  # the endpoint failed; try again at the next start
            done += len(memories)
        if done:
            log.info("memory: embedded %d earlier entries with %s", done, model)

    async def _query_vector(self, query: str) -> Any:
        if self._embedder is None or self._cache is None or not len(self._cache):
            return None
        try:
            vectors = await self._embedder.embed([query])
        except UserError as exc:
            log.warning("memory: searching by keywords only (%s)", exc)
            return None
        return vectors[0]


def _line(memory: Memory) -> str:
    day = datetime.fromtimestamp(memory.updated_at, UTC).strftime("%Y-%m-%d")
    text = " ".join(memory.content.split())
    if len(text) > _LINE_CHARS:
        text = text[: _LINE_CHARS - 1] + "…"
    if memory.category == CONVERSATION:
        return f"- {day}, they said: {text}"
    return f"- [{memory.category}] {memory.key}: {text} ({day})"
