"""The memory store on a real SQLite file: identity, lists, full-text search, embeddings, health."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.memory.models import CONVERSATION, CORE, DAILY, SHARED, NewMemory
from bot.memory.store import LIKE_SCORE, MemoryStore
from bot.store.db import Database

ALICE = "telegram:1"
BOB = "telegram:2"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "m.db")
    await database.open()
    yield database
    await database.close()


@pytest.fixture
async def store(db: Database) -> MemoryStore:
    memory = MemoryStore(db)
    await memory.setup()
    await memory.setup()  # idempotent
    return memory


async def keys(store: MemoryStore, query: str, scopes: list[str], limit: int = 10) -> list[str]:
    return [m.key for m, _ in await store.keyword(query, scopes, limit)]


async def test_the_same_scope_and_key_replaces_and_another_scope_is_separate(
    store: MemoryStore,
) -> None:
    first = await store.store(NewMemory("drink", "tea", scope=ALICE), now=100.0)
    again = await store.store(NewMemory("drink", "coffee", CORE, ALICE, "s1"), now=200.0)
    other = await store.store(NewMemory("drink", "water", scope=BOB), now=300.0)

    assert again.id == first.id
    assert (again.content, again.session, again.created_at, again.updated_at) == (
        "coffee",
        "s1",
        100.0,
        200.0,
    )
    assert other.id != first.id
    assert await store.count() == 2
    assert (await store.get("drink", [ALICE])) == again
    assert (await store.get_by_id(other.id)) == other


async def test_get_and_forget_take_the_first_scope_in_the_order_given(store: MemoryStore) -> None:
    mine = await store.store(NewMemory("name", "Alice", scope=ALICE))
    shared = await store.store(NewMemory("name", "the household", scope=SHARED))

    assert await store.get("name", [SHARED, ALICE]) == shared
    assert await store.get("name", [ALICE, SHARED]) == mine
    assert await store.get("name", [BOB]) is None
    assert await store.get("name", []) is None

    assert await store.forget("name", [ALICE, SHARED])
    assert await store.get_by_id(mine.id) is None
    assert await store.get_by_id(shared.id) == shared
    assert not await store.forget("name", [BOB])
    assert await store.forget_id(shared.id)
    assert not await store.forget_id(shared.id)
    assert await store.count() == 0


async def test_list_count_and_prune_by_category(store: MemoryStore) -> None:
    await store.store(NewMemory("a", "alpha", CORE), now=10.0)
    await store.store(NewMemory("b", "beta", DAILY), now=20.0)
    await store.store(NewMemory("c", "gamma", DAILY, ALICE), now=30.0)
    await store.store(NewMemory("d", "delta", CONVERSATION, BOB), now=40.0)

    assert [m.key for m in await store.list()] == ["d", "c", "b", "a"]
    assert [m.key for m in await store.list(DAILY)] == ["c", "b"]
    assert [m.key for m in await store.list(scopes=[SHARED])] == ["b", "a"]
    assert [m.key for m in await store.list(DAILY, [ALICE])] == ["c"]
    assert await store.list(scopes=[]) == []
    assert [m.key for m in await store.list(limit=2, offset=1)] == ["c", "b"]
    assert (await store.count(), await store.count(DAILY), await store.count("none")) == (4, 2, 0)

    assert await store.prune(DAILY, older_than=25.0) == 1
    assert [m.key for m in await store.list(DAILY)] == ["c"]
    assert await store.prune(DAILY, older_than=25.0) == 0
    assert await store.count() == 3


async def test_store_many_is_one_fast_batch(store: MemoryStore) -> None:
    items = [NewMemory(f"k{i}", f"fact number {i} about gardening") for i in range(10_000)]
    items.append(NewMemory("k0", "replaced in the same batch"))

    began = time.perf_counter()
    assert await store.store_many(items, now=5.0) == 10_001
    assert time.perf_counter() - began < 5.0

    assert await store.count() == 10_000
    replaced = await store.get("k0", [SHARED])
    assert replaced is not None
    assert replaced.content == "replaced in the same batch"
    assert await keys(store, "replaced", [SHARED]) == ["k0"]
    assert (await store.health())["ok"] is True


async def test_the_index_follows_inserts_updates_and_deletes(store: MemoryStore) -> None:
    memory = await store.store(NewMemory("pet", "a cat called Miso"))
    assert await keys(store, "miso", [SHARED]) == ["pet"]

    await store.store(NewMemory("pet", "a dog called Biscuit"))
    assert await keys(store, "miso", [SHARED]) == []
    assert await keys(store, "biscuit", [SHARED]) == ["pet"]
    assert await keys(store, "pet", [SHARED]) == ["pet"]  # the key is indexed too

    await store.forget_id(memory.id)
    assert await keys(store, "biscuit", [SHARED]) == []
    assert (await store.health())["ok"] is True


async def test_health_reports_counts_and_a_desynced_index(db: Database, store: MemoryStore) -> None:
    await store.store(NewMemory("a", "one"))
    await store.store(NewMemory("b", "two"))
    health = await store.health()
    assert health == {"ok": True, "entries": 2, "fts_entries": 2, "embedded": 0, "integrity": "ok"}

    # Rows removed behind the index's back (as a hand edit or a bad migration could).
    async with db.write() as conn:
        await conn.execute("DROP TRIGGER memories_delete")
        await conn.execute("DELETE FROM memories WHERE key = 'a'")
    health = await store.health()
    assert health["ok"] is False
    assert (health["entries"], health["fts_entries"]) == (1, 2)
    assert health["integrity"] != "ok"


HOSTILE = [
    "",
    " ",
    '"',
    "'",
    "*",
    "NEAR(",
    "NEAR(a b, 2)",
    "AND OR NOT",
    "a AND",
    "col:val",
    "content:secret",
    "{key content}: x",
    "^",
    "^start",
    "-",
    "-minus",
    "()",
    "(((",
    '"unterminated',
    "tea' OR 1=1 --",
    "%_\\",
    "\x00",
    "naïve café",
    "Ärger über Öl",
    "日本語のテキスト",
    "😀🎉",
    "coffee 😀 *",
    "x" * 10_000,
    "tea " * 3_000,
]


@pytest.mark.parametrize("query", HOSTILE)
async def test_no_query_breaks_the_search(store: MemoryStore, query: str) -> None:
    await store.store(NewMemory("tea", "green tea, not coffee"))
    hits = await store.keyword(query, [SHARED], 5)
    assert all(0.0 < score <= 1.0 for _, score in hits)


async def test_stop_words_are_ignored(store: MemoryStore) -> None:
    await store.store(NewMemory("coffee", "I take my coffee without sugar"))
    await store.store(NewMemory("weather", "what a day: how do you do"))

    assert await keys(store, "how do I like my coffee?", [SHARED]) == ["coffee"]
    assert await keys(store, "how do I ... what?", [SHARED]) == []


async def test_scores_are_relative_to_the_best_hit(store: MemoryStore) -> None:
    await store.store(NewMemory("a", "coffee coffee coffee beans"))
    await store.store(NewMemory("b", "tea and a little coffee in a long sentence about drinks"))
    hits = await store.keyword("coffee", [SHARED], 5)

    assert [m.key for m, _ in hits] == ["a", "b"]
    assert hits[0][1] == 1.0
    assert 0.0 < hits[1][1] < 1.0
    assert [score for _, score in await store.keyword("beans", [SHARED], 5)] == [1.0]


async def test_words_match_as_prefixes_and_without_diacritics(store: MemoryStore) -> None:
    await store.store(NewMemory("place", "Lunch at the Café Müller on Fridays"))
    assert await keys(store, "cafe", [SHARED]) == ["place"]
    assert await keys(store, "MULLER", [SHARED]) == ["place"]
    assert await keys(store, "friday", [SHARED]) == ["place"]


async def test_substrings_fall_back_to_like(store: MemoryStore) -> None:
    await store.store(NewMemory("coffee", "I take my coffee without sugar"))
    await store.store(NewMemory("mood", "a happy face 🙂 all day"))
    await store.store(NewMemory("ja", "私は毎朝コーヒーを飲みます"), now=1.0)

    hits = await store.keyword("offee", [SHARED], 5)
    assert [(m.key, score) for m, score in hits] == [("coffee", LIKE_SCORE)]
    assert await keys(store, "🙂", [SHARED]) == ["mood"]
    assert await keys(store, "コーヒー", [SHARED]) == ["ja"]
    # LIKE wildcards in the question are literal characters.
    assert await keys(store, "%🙂", [SHARED]) == []
    assert await keys(store, "🙂_", [SHARED]) == []


async def test_a_chat_never_sees_another_chats_memories(store: MemoryStore) -> None:
    await store.store(NewMemory("secret", "my bank pin is 4321", scope=ALICE))
    await store.store(NewMemory("bank", "the bank closes at five", scope=SHARED))

    for query in ("bank pin", "ank pi", "4321", "secret"):
        for _, score in await store.keyword(query, [BOB, SHARED], 10):
            assert score > 0
        found = await keys(store, query, [BOB, SHARED])
        assert "secret" not in found
    assert await keys(store, "bank", [BOB, SHARED]) == ["bank"]
    assert set(await keys(store, "bank", [ALICE, SHARED])) == {"secret", "bank"}
    assert await keys(store, "bank", []) == []
    assert await store.get("secret", [BOB, SHARED]) is None


async def test_scopes_that_look_alike_stay_apart(store: MemoryStore) -> None:
    await store.store(NewMemory("a", "tulips", scope="telegram:1:2"))
    await store.store(NewMemory("b", "tulips", scope="telegram:12"))
    await store.store(NewMemory("c", "tulips", scope="discord:café"))
    assert await keys(store, "tulips", ["telegram:1"]) == []
    assert await keys(store, "tulips", ["telegram:1:2"]) == ["a"]
    assert await keys(store, "tulips", ["discord:café"]) == ["c"]
    assert await keys(store, "tulips", ["discord:cafe"]) == []
    assert await keys(store, "tulips", ['x" OR "y']) == []


async def test_a_content_change_clears_the_embedding(store: MemoryStore) -> None:
    memory = await store.store(NewMemory("drink", "tea"))
    await store.set_embeddings([(memory.id, b"\x00" * 8)], "m1")
    assert await store.embeddings("m1") == [(memory.id, SHARED, b"\x00" * 8)]

    await store.store(NewMemory("drink", "tea", DAILY))  # same text: the vector still fits
    assert await store.count_embedded("m1") == 1
    await store.store(NewMemory("drink", "coffee"))
    assert await store.embeddings("m1") == []
    assert await store.unembedded("m1", 10) == [(memory.id, "coffee")]

    # Forgetting takes the vector along; a vector for a forgotten entry is not kept.
    await store.set_embeddings([(memory.id, b"\x01" * 8)], "m1")
    await store.forget_id(memory.id)
    await store.set_embeddings([(memory.id, b"\x02" * 8)], "m1")
    assert (await store.count_embedded("m1"), (await store.health())["embedded"]) == (0, 0)


async def test_a_model_change_shows_as_entries_to_embed_again(store: MemoryStore) -> None:
    ids = [(await store.store(NewMemory(f"k{i}", f"fact {i}"))).id for i in range(5)]
    assert await store.unembedded("m1", 3) == [
        (ids[0], "fact 0"),
        (ids[1], "fact 1"),
        (ids[2], "fact 2"),
    ]

    await store.set_embeddings([(i, bytes([n]) * 4) for n, i in enumerate(ids)], "m1")
    assert await store.unembedded("m1", 10) == []
    assert [row[0] for row in await store.unembedded("m2", 10)] == ids
    await store.set_embeddings([(ids[3], b"\x01" * 8)], "m2")
    assert [row[0] for row in await store.unembedded("m2", 10)] == [*ids[:3], ids[4]]
    assert [row[0] for row in await store.embeddings("m2")] == [ids[3]]
    assert [row[0] for row in await store.embeddings("m1", after_id=ids[1], limit=2)] == [
        ids[2],
        ids[4],
    ]
    assert await store.embedded_ids([*ids, 999], "m1") == set(ids) - {ids[3]}
    # Storing vectors leaves the full-text index as it was.
    assert await keys(store, "fact", [SHARED]) != []
    health = await store.health()
    assert (health["ok"], health["embedded"]) == (True, 5)


async def test_get_many_reads_rows_in_one_call(store: MemoryStore) -> None:
    a = await store.store(NewMemory("a", "one"))
    b = await store.store(NewMemory("b", "two"))
    assert await store.get_many([b.id, a.id, b.id, 999]) == {a.id: a, b.id: b}
    assert await store.get_many([]) == {}


def test_the_store_and_recall_do_not_load_numpy() -> None:
    code = "import sys, bot.memory.store, bot.memory.recall; sys.exit('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
