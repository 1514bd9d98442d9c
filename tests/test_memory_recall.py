"""The vector cache against a brute-force reference, the merge of scores, and hybrid recall."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from bot.memory.keywords import fts_query
from bot.memory.models import SHARED, NewMemory
from bot.memory.recall import HybridRecall, merge
from bot.memory.store import MemoryStore
from bot.memory.vectors import VectorCache, from_blob, to_blob
from bot.store.db import Database

ALICE = "telegram:1"
BOB = "telegram:2"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    db = Database(tmp_path / "m.db")
    await db.open()
    memory = MemoryStore(db)
    await memory.setup()
    yield memory
    await db.close()


def unit(*values: float) -> npt.NDArray[np.float32]:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_search_ranks_by_cosine_within_the_scopes_given() -> None:
    cache = VectorCache("m")
    cache.upsert(1, SHARED, [1, 0, 0])
    cache.upsert(2, SHARED, [3, 3, 0])  # length does not matter, direction does
    cache.upsert(3, SHARED, [0, 0, 1])
    cache.upsert(4, ALICE, [1, 0.01, 0])

    hits = cache.search([2, 0, 0], [SHARED], 3)
    assert [i for i, _ in hits] == [1, 2, 3]
    assert [round(s, 4) for _, s in hits] == [1.0, round(float(np.sqrt(0.5)), 4), 0.0]
    assert [i for i, _ in cache.search([1, 0, 0], [SHARED, ALICE], 2)] == [1, 4]
    assert [i for i, _ in cache.search([1, 0, 0], [BOB], 5)] == []
    assert [i for i, _ in cache.search([1, 0, 0], [ALICE], 5)] == [4]
    assert len(cache.search([1, 0, 0], [SHARED, ALICE], 99)) == 4
    assert cache.search([0, 0, 0], [SHARED], 3) == []
    assert cache.search([1, 0, 0], [SHARED], 0) == []
    assert (len(cache), cache.dims, 2 in cache, 9 in cache) == (4, 3, True, False)


def test_vectors_of_another_size_are_refused() -> None:
    cache = VectorCache("m", dims=3)
    with pytest.raises(ValueError, match="dimension"):
        cache.upsert(1, SHARED, [1, 0])
    cache.upsert(1, SHARED, [1, 0, 0])
    with pytest.raises(ValueError, match="dimension"):
        cache.search([1, 0, 0, 0], [SHARED], 1)
    assert len(cache) == 1


def test_upsert_replaces_and_remove_moves_the_last_row() -> None:
    cache = VectorCache("m")
    for memory_id in range(1, 6):
        cache.upsert(memory_id, SHARED, [memory_id, 1.0])
    cache.upsert(2, ALICE, [0, 1])
    assert cache.remove(1)
    assert not cache.remove(1)
    assert len(cache) == 4
    assert cache.search([0, 1], [ALICE], 5)[0][0] == 2
    assert {i for i, _ in cache.search([1, 0], [SHARED], 9)} == {3, 4, 5}
    assert cache.search([1, 0], [SHARED], 1)[0][0] == 5


def test_blobs_are_little_endian_float32() -> None:
    vector = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    blob = to_blob(vector)
    assert blob == np.array([1.5, -2.0, 0.25], dtype="<f4").tobytes()
    assert from_blob(blob, 3).tolist() == [1.5, -2.0, 0.25]
    with pytest.raises(ValueError):
        from_blob(blob, 4)


def test_ten_thousand_inserts_and_removals_match_brute_force() -> None:
    rng = np.random.default_rng(7)
    dims = 16
    scopes = [SHARED, ALICE, BOB, "slack:C1"]
    cache = VectorCache("m", dims)
    reference: dict[int, tuple[str, npt.NDArray[np.float32]]] = {}
    for memory_id in range(10_000):
        scope = scopes[int(rng.integers(len(scopes)))]
        vector = rng.standard_normal(dims).astype(np.float32)
        cache.upsert(memory_id, scope, vector)
        reference[memory_id] = (scope, vector / np.linalg.norm(vector))
        if rng.random() < 0.2:  # some removals and replacements along the way
            gone = int(rng.integers(memory_id + 1))
            assert cache.remove(gone) == (gone in reference)
            reference.pop(gone, None)
        if rng.random() < 0.1:
            again = int(rng.integers(memory_id + 1))
            if again in reference:
                vector = rng.standard_normal(dims).astype(np.float32)
                cache.upsert(again, reference[again][0], vector)
                reference[again] = (reference[again][0], vector / np.linalg.norm(vector))
    assert len(cache) == len(reference)
    assert cache.nbytes >= len(cache) * (dims * 4 + 8 + 4)

    ids = np.array(list(reference))
    matrix = np.stack([v for _, v in reference.values()])
    owners = np.array([s for s, _ in reference.values()])
    for _ in range(20):
        query = rng.standard_normal(dims).astype(np.float32)
        allowed = [SHARED, scopes[int(rng.integers(1, len(scopes)))]]
        scores = matrix @ (query / np.linalg.norm(query))
        scores[~np.isin(owners, allowed)] = -np.inf
        expected = ids[np.argsort(-scores, kind="stable")[:10]]
        hits = cache.search(query, allowed, 10)
        assert [i for i, _ in hits] == expected.tolist()
        assert np.allclose([s for _, s in hits], scores[np.argsort(-scores)[:10]], atol=1e-5)


async def test_load_equals_incremental_updates(store: MemoryStore) -> None:
    rng = np.random.default_rng(3)
    live = VectorCache("m1")
    rows = []
    for n in range(50):
        memory = await store.store(NewMemory(f"k{n}", f"fact {n}", scope=[SHARED, ALICE][n % 2]))
        vector = rng.standard_normal(8).astype(np.float32)
        rows.append((memory.id, to_blob(vector)))
        live.upsert(memory.id, memory.scope, vector)
    await store.set_embeddings(rows, "m1")
    await store.set_embeddings([(rows[0][0], to_blob(np.ones(8)))], "m2")  # another model
    for memory_id, _ in rows[::7]:
        await store.forget_id(memory_id)
        live.remove(memory_id)

    loaded = VectorCache("m1")
    assert await loaded.load(store) == len(live) == 50 - len(rows[::7])
    for _ in range(5):
        query = rng.standard_normal(8).astype(np.float32)
        for scopes in ([SHARED], [ALICE, SHARED]):
            expected = live.search(query, scopes, 10)
            got = loaded.search(query, scopes, 10)
            assert [i for i, _ in got] == [i for i, _ in expected]
            assert np.allclose([s for _, s in got], [s for _, s in expected])


async def test_load_refuses_vectors_of_mixed_sizes(store: MemoryStore) -> None:
    a = await store.store(NewMemory("a", "one"))
    b = await store.store(NewMemory("b", "two"))
    await store.set_embeddings([(a.id, to_blob([1, 0])), (b.id, to_blob([1, 0, 0]))], "m")
    with pytest.raises(ValueError, match="differ"):
        await VectorCache("m").load(store)


def test_merge_weighs_clips_and_deduplicates() -> None:
    merged = merge(
        [(1, 0.9), (2, 1.7), (3, -0.4), (1, 0.5)],
        [(1, 1.0), (4, 0.5), (4, 0.2)],
        vector_weight=0.6,
        keyword_weight=0.4,
        limit=10,
    )
    assert [(i, round(s, 6), v, k) for i, s, v, k in merged] == [
        (1, 0.94, 0.9, 1.0),
        (2, 0.6, 1.0, None),
        (4, 0.2, None, 0.5),
        (3, 0.0, 0.0, None),
    ]
    assert [hit[0] for hit in merge([(1, 0.5)], [(2, 1.0)], limit=1)] == [1]
    assert merge([(1, 0.5)], [], limit=0) == []


def test_the_fts_query_quotes_every_word() -> None:
    assert fts_query('how do I like my "coffee"? NEAR( a:b') == (
        '{key content} : ("coffee"* OR "like"* OR "NEAR"*)'
    )
    assert fts_query("the a of 😀 * ()") == ""


async def test_keyword_only_recall_keeps_the_keyword_score(store: MemoryStore) -> None:
    await store.store(NewMemory("coffee", "I take my coffee without sugar"))
    await store.store(NewMemory("tea", "tea in the afternoon, coffee after lunch, coffee again"))
    recall = HybridRecall(store, None)

    found = await recall.recall("coffee", [SHARED], 5)
    keyword = await store.keyword("coffee", [SHARED], 5)
    assert [(r.memory, r.score, r.keyword_score) for r in found] == [(m, s, s) for m, s in keyword]
    assert found[0].score == 1.0
    assert all(r.vector_score is None for r in found)
    assert await recall.recall("coffee", [SHARED], 0) == []
    assert len(await recall.recall("coffee", [SHARED], 1)) == 1


async def test_hybrid_recall_finds_what_only_the_vectors_match(store: MemoryStore) -> None:
    words = await store.store(NewMemory("words", "espresso every morning"))
    meaning = await store.store(NewMemory("meaning", "a strong dark drink to wake up"))
    other = await store.store(NewMemory("other", "the bike needs new tyres"))
    secret = await store.store(NewMemory("secret", "an alarm clock drink", scope=ALICE))
    vectors = {
        words: unit(0.2, 1, 0),
        meaning: unit(1, 0.1, 0),
        other: unit(0, 0, 1),
        secret: unit(1, 0, 0),
    }
    await store.set_embeddings([(m.id, to_blob(v)) for m, v in vectors.items()], "m")
    cache = VectorCache("m")
    await cache.load(store)
    recall = HybridRecall(store, cache, vector_weight=0.5, keyword_weight=0.5)

    keyword_only = await recall.recall("espresso", [BOB, SHARED], 5)
    assert [r.memory.key for r in keyword_only] == ["words"]

    found = await recall.recall("espresso", [BOB, SHARED], 5, query_vector=unit(1, 0, 0))
    by_key = {r.memory.key: r for r in found}
    assert [r.memory.key for r in found][:2] == ["words", "meaning"]
    assert by_key["meaning"].keyword_score is None
    assert by_key["meaning"].vector_score == pytest.approx(unit(1, 0.1, 0)[0], abs=1e-6)
    assert by_key["words"].score == pytest.approx(0.5 * unit(0.2, 1, 0)[0] + 0.5 * 1.0)
    assert by_key["other"].score == 0.0
    assert "secret" not in by_key


async def test_recall_drops_vectors_the_store_no_longer_backs(store: MemoryStore) -> None:
    kept = await store.store(NewMemory("kept", "sunny days"))
    gone = await store.store(NewMemory("gone", "rainy days"))
    changed = await store.store(NewMemory("changed", "foggy days"))
    cache = VectorCache("m")
    for memory in (kept, gone, changed):
        cache.upsert(memory.id, SHARED, [1.0, 0.0])
    await store.set_embeddings([(m.id, to_blob([1.0, 0.0])) for m in (kept, gone, changed)], "m")
    # Another process forgets one entry and rewrites another (its vector is now stale).
    await store.forget_id(gone.id)
    await store.store(NewMemory("changed", "snowy nights"))

    found = await HybridRecall(store, cache).recall("xyz", [SHARED], 5, query_vector=unit(1, 0))
    assert [r.memory.key for r in found] == ["kept"]
    assert (gone.id in cache, changed.id in cache, kept.id in cache) == (False, False, True)


async def test_without_vectors_in_the_callers_scopes_keyword_scores_stand(
    store: MemoryStore,
) -> None:
    mine = await store.store(NewMemory("plants", "water the ferns on Monday", scope=BOB))
    elsewhere = await store.store(NewMemory("bike", "oil the chain", scope=ALICE))
    await store.set_embeddings([(elsewhere.id, to_blob([1.0, 0.0]))], "m")
    cache = VectorCache("m")
    await cache.load(store)

    found = await HybridRecall(store, cache).recall("ferns", [BOB], 5, query_vector=unit(1, 0))
    assert [(r.memory, r.score, r.vector_score) for r in found] == [(mine, 1.0, None)]
