"""Embeddings over real sockets: the OpenAI-compatible client against the fake server,
the SQLite cache in front of it, and the fake's concept model itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pytest

from bot.memory.embed_cache import CachedEmbedder, cache_key
from bot.memory.embeddings import EmbeddingError, OpenAIEmbeddings
from bot.store.db import Database
from tests.fake_embeddings import FakeEmbeddings, Raw, Reply, Tamper, concept_vector, cosine
from tests.fake_embeddings.concepts import GROUPS
from tests.provider_cases import Naps, closed_port


@dataclass
class Rig:
    """The fake server, the real httpx client and a real database, wired together."""

    server: FakeEmbeddings
    http: httpx.AsyncClient
    db: Database
    naps: Naps = field(default_factory=Naps)

    def client(
        self, model: str = "mini", *, api_key: str | None = None, batch_size: int = 64
    ) -> OpenAIEmbeddings:
        """An embedder on the fake server that records its retry waits instead of sleeping."""
        return OpenAIEmbeddings(
            self.http,
            base_url=f"{self.server.url}/v1/",
            model=model,
            api_key=api_key,
            batch_size=batch_size,
            sleep=self.naps,
        )

    async def cache(
        self, model: str = "mini", *, max_entries: int = 10000, db: Database | None = None
    ) -> CachedEmbedder:
        """A set-up cache in front of ``client(model)``."""
        cache = CachedEmbedder(self.client(model), db or self.db, max_entries=max_entries)
        await cache.setup()
        return cache


@pytest.fixture
async def rig(
    embedder_server: FakeEmbeddings, http_client: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[Rig]:
    """The pieces every test here uses; the database is a real file in ``tmp_path``."""
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    yield Rig(embedder_server, http_client, db)
    await db.close()


# The client


async def test_batches_in_order(rig: Rig) -> None:
    texts = [f"note number {i} about coffee" for i in range(150)]
    matrix = await rig.client().embed(texts)
    requests = rig.server.requests
    assert [len(r.inputs) for r in requests] == [64, 64, 22]
    assert {r.path for r in requests} == {"/v1/embeddings"}
    assert requests[0].body["model"] == "mini"
    assert rig.server.inputs() == texts
    assert matrix.dtype == np.float32 and matrix.shape == (150, 384)
    assert np.allclose(matrix, [concept_vector(t, 384) for t in texts], atol=1e-6)


async def test_orders_items_by_index(rig: Rig) -> None:
    rig.server.queue(Tamper(reverse=True))
    texts = ["coffee", "a dog", "tea"]
    matrix = await rig.client().embed(texts)
    assert np.allclose(matrix, [concept_vector(t, 384) for t in texts], atol=1e-6)


async def test_bearer_auth_only_with_a_key(rig: Rig) -> None:
    await rig.client(api_key="sk-test").embed(["hi"])
    await rig.client().embed(["hi"])
    first, second = rig.server.requests
    assert first.headers["authorization"] == "Bearer sk-test"
    assert "authorization" not in second.headers


async def test_empty_input_makes_no_request(rig: Rig) -> None:
    matrix = await rig.client().embed([])
    assert matrix.shape == (0, 0) and matrix.dtype == np.float32
    assert rig.server.requests == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Raw("not json {"), "answered with something that is not JSON (not json {)"),
        (Raw('{"object": "list"}'), "answered with JSON without a 'data' list of vectors"),
        (Tamper(drop=1), "answered with 2 vectors for 3 texts"),
        (Tamper(ragged=True), "answered with vectors of different lengths (383, 384)"),
        (
            Raw('{"data": [{"index": 0, "embedding": ["0.1"]}]}'),
            "answered with an embedding that is not a list of numbers (index 0)",
        ),
    ],
)
async def test_unusable_answers(rig: Rig, reply: Reply, expected: str) -> None:
    rig.server.queue(reply)
    texts = ["one"] if isinstance(reply, Raw) else ["one", "two", "three"]
    with pytest.raises(EmbeddingError) as caught:
        await rig.client().embed(texts)
    url = f"{rig.server.url}/v1/embeddings"
    assert str(caught.value) == f"the embeddings endpoint {url} {expected}"
    assert len(rig.server.requests) == 1  # a bad answer is not retried


async def test_dims_differ_between_batches(rig: Rig) -> None:
    rig.server.queue(Tamper(), Tamper(dims=8))
    embedder = rig.client(batch_size=2)
    with pytest.raises(EmbeddingError, match=r"vectors of different lengths \(8, 384\) for one"):
        await embedder.embed(["a", "b", "c"])


async def test_unknown_model_is_a_404_with_the_servers_words(rig: Rig) -> None:
    rig.server.models = {"mini"}
    with pytest.raises(EmbeddingError) as caught:
        await rig.client("x").embed(["hello"])
    assert len(rig.server.requests) == 1  # a 404 is not worth a retry
    assert str(caught.value) == (
        f"the embeddings endpoint {rig.server.url}/v1/embeddings refused the request "
        "(HTTP 404): model 'x' not found"
    )
    assert caught.value.status == 404 and not caught.value.retryable


async def test_server_errors_give_up_after_the_retries(rig: Rig) -> None:
    rig.server.fail_next(3, 500, "the GPU caught fire")
    with pytest.raises(EmbeddingError) as caught:
        await rig.client().embed(["hello"])  # two retries by default
    assert len(rig.server.requests) == 3 and len(rig.naps.delays) == 2
    assert str(caught.value) == (
        f"the embeddings endpoint {rig.server.url}/v1/embeddings failed with a server error "
        "(HTTP 500): the GPU caught fire"
    )
    assert caught.value.retryable


async def test_rate_limit_is_retried_then_succeeds(rig: Rig) -> None:
    rig.server.fail_next(1, 429, "slow down", retry_after=0)
    matrix = await rig.client().embed(["coffee"])
    assert matrix.shape == (1, 384)
    assert len(rig.server.requests) == 2 and rig.naps.delays == [0.0]


async def test_unreachable_server(http_client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    embedder = OpenAIEmbeddings(http_client, base_url=url, model="m", max_retries=1, sleep=Naps())
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(["hello"])
    message = str(caught.value)
    assert message.startswith(f"cannot reach the embeddings endpoint {url}/embeddings (")
    assert "\n" not in message and message.count("127.0.0.1") == 1


# The cache


async def test_cache_hits_make_no_request(rig: Rig) -> None:
    cache = await rig.cache()
    assert cache.model == "mini"
    first = await cache.embed(["coffee", "tea"])
    second = await cache.embed(["coffee", "tea"])
    assert len(rig.server.requests) == 1
    assert (cache.hits, cache.misses) == (2, 2)
    assert second.dtype == np.float32 and np.array_equal(first, second)
    rows = await rig.db.conn.execute_fetchall("SELECT model, dims, vector FROM embedding_cache")
    assert {(model, dims) for model, dims, _ in rows} == {("mini", 384)}
    stored = {bytes(vector) for _, _, vector in rows}
    assert concept_vector("coffee", 384).astype("<f4").tobytes() in stored


async def test_only_new_texts_are_sent_each_once(rig: Rig) -> None:
    cache = await rig.cache()
    await cache.embed(["coffee", "tea"])
    matrix = await cache.embed(["tea", "my dog", "coffee", "my dog"])
    assert rig.server.requests[-1].inputs == ["my dog"]
    assert (cache.hits, cache.misses) == (2, 3)
    expected = [concept_vector(t, 384) for t in ["tea", "my dog", "coffee", "my dog"]]
    assert np.allclose(matrix, expected, atol=1e-6)


async def test_least_recently_used_rows_are_evicted(rig: Rig) -> None:
    cache = await rig.cache(max_entries=3)
    await cache.embed(["a", "b", "c"])
    await cache.embed(["a"])  # "b" is now the least recently used
    await cache.embed(["d"])
    rows = await rig.db.conn.execute_fetchall("SELECT hash FROM embedding_cache")
    assert {row[0] for row in rows} == {cache_key("mini", t) for t in "acd"}
    sent = len(rig.server.inputs())
    await cache.embed(["a", "c", "d"])
    assert len(rig.server.inputs()) == sent
    await cache.embed(["b"])
    assert rig.server.inputs()[-1] == "b"


async def test_cache_survives_reopening(rig: Rig) -> None:
    before = await (await rig.cache()).embed(["coffee"])
    await rig.db.close()
    reopened = Database(rig.db.path)
    await reopened.open()
    try:
        cache = await rig.cache(db=reopened)
        after = await cache.embed(["coffee"])
    finally:
        await reopened.close()
    assert len(rig.server.requests) == 1 and cache.hits == 1
    assert np.array_equal(before, after)


async def test_a_new_model_misses(rig: Rig) -> None:
    await (await rig.cache(model="old")).embed(["coffee"])
    cache = await rig.cache(model="new")
    await cache.embed(["coffee"])
    assert [r.body["model"] for r in rig.server.requests] == ["old", "new"]
    assert (cache.hits, cache.misses) == (0, 1)


async def test_stale_dims_are_embedded_again(rig: Rig) -> None:
    cache = await rig.cache()
    await cache.embed(["coffee", "tea"])
    rig.server.dims = 64  # same model name, a different model behind it
    matrix = await cache.embed(["coffee", "milk"])
    assert matrix.shape == (2, 64)
    assert [r.inputs for r in rig.server.requests[1:]] == [["milk"], ["coffee"]]
    assert np.allclose(matrix, [concept_vector(t, 64) for t in ["coffee", "milk"]], atol=1e-6)
    # Now "tea" (384) and "milk" (64) are both cached: no fresh vector says which
    # size is current, so both are embedded again.
    matrix = await cache.embed(["tea", "milk"])
    assert matrix.shape == (2, 64)
    assert rig.server.requests[-1].inputs == ["tea", "milk"]
    rows = await rig.db.conn.execute_fetchall("SELECT DISTINCT dims FROM embedding_cache")
    assert [row[0] for row in rows] == [64]


# The fake's concept model


def test_a_paraphrase_ranks_above_unrelated_text() -> None:
    fact = concept_vector("I take my coffee without sugar", 384)
    paraphrase = cosine(fact, concept_vector("how do I like my espresso?", 384))
    unrelated = [
        cosine(fact, concept_vector(text, 384))
        for text in [
            "the dog chewed the garden hose",
            "when is my wife's birthday?",
            "turn off the lights in the kitchen",
            "remind me about the dentist appointment",
        ]
    ]
    assert paraphrase > 0.6
    assert max(unrelated) < 0.2


async def test_a_paraphrase_finds_its_fact_over_the_wire(rig: Rig) -> None:
    facts = [
        "I take my coffee without sugar",
        "The dog is called Biscuit",
        "Water the tomato plants on Sundays",
        "My wife's birthday is on 3 May",
    ]
    cache = await rig.cache()
    stored = await cache.embed(facts)
    questions = ["how do I like my espresso?", "what is my puppy's name?", "when is her bday?"]
    scores = (await cache.embed(questions)) @ stored.T
    assert [facts[i] for i in scores.argmax(axis=1)] == [facts[0], facts[1], facts[3]]


def test_concept_vectors_are_stable_unit_vectors() -> None:
    vector = concept_vector("Latte, no sugar!", 128)
    assert vector.dtype == np.float32 and vector.shape == (128,)
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-6)
    assert np.array_equal(vector, concept_vector("latte no sugar", 128))
    assert np.linalg.norm(concept_vector("", 16)) > 0.99
    words = [word for _, group in GROUPS for word in group.split()]
    assert len(words) == len(set(words)), "a word belongs to two synonym groups"
