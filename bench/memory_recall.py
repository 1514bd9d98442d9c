"""Benchmark: hybrid memory recall at 100,000 memories, and storing 10,000 in one batch.

Run from the repository root, with PinClaw installed:

    python bench/memory_recall.py [--memories 100000] [--queries 200]

It fills a throw-away database with synthetic memories (short sentences from a
small vocabulary, spread over 50 people's scopes and the shared scope), gives each a
random 384-dimension unit vector (seeded), loads the vector cache, then times
``HybridRecall.recall`` end to end (FTS5 search, vector search, merge, rows
fetched) for varied questions with query vectors. Separately it times
``store_many`` of 10,000 memories into a fresh database (no embedding). Figures
go to stdout as a Markdown table (percentiles nearest-rank; p99 only from 100
calls up); the last line is ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchkit import NAN, final_line, percentile, shown

from bot.memory.models import CORE, DAILY, SHARED, NewMemory
from bot.memory.recall import HybridRecall
from bot.memory.store import LIKE_SCORE, MemoryStore
from bot.memory.vectors import VectorCache, to_blob
from bot.store.db import Database

DIMS = 384
MODEL = "bench-384"
CHATS = 50
BATCH = 10_000
SEED = 20261121

PEOPLE = "My sister|My brother|Anna|Ben|Carla|Dmitri|Emma|My boss|The neighbours|The owner"
VERBS = "likes loves hates prefers needs wants visits cooks drinks reads buys avoids misses plans"
THINGS = (
    "coffee tea sushi pasta pizza chocolate jazz football chess hiking cycling swimming "
    "Berlin Lisbon Tokyo Paris trains dentist birthday anniversary garden tomatoes roses "
    "guitar piano novels podcasts mornings evenings weekends rain snow spicy food "
    "oat milk sugar lactose peanuts cats dogs parrots bread cheese wine beer running yoga "
    "meetings deadlines invoices taxes passport vacation museum concert opera theatre"
)
TAILS = (
    "on Sundays|every morning|after work|when it rains|in summer|since last year|"
    "without sugar|with friends|at the weekend|before bed|twice a week|on holiday"
)
QUESTIONS = (
    "how do I like my {t}?|what does {p} think about {t}|who {v} {t}|"
    "remind me about {t} and {u}|does {p} like {t} {tail}|{t}|anything about {t} or {u}"
)


def pick(rng: random.Random, choices: str, sep: str = " ") -> str:
    """One item of a separated list."""
    return rng.choice(choices.split(sep))


def sentence(rng: random.Random) -> str:
    """One synthetic memory, e.g. "Anna prefers coffee on Sundays"."""
    return (
        f"{pick(rng, PEOPLE, '|')} {pick(rng, VERBS)} {pick(rng, THINGS)} {pick(rng, TAILS, '|')}"
    )


def question(rng: random.Random) -> str:
    """One synthetic question in the words people use."""
    return pick(rng, QUESTIONS, "|").format(
        p=pick(rng, PEOPLE, "|").lower(),
        v=pick(rng, VERBS),
        t=pick(rng, THINGS),
        u=pick(rng, THINGS),
        tail=pick(rng, TAILS, "|"),
    )


def memories(count: int, rng: random.Random, prefix: str) -> list[NewMemory]:
    """``count`` entries: a third shared, the rest in people's scopes."""
    items = []
    for i in range(count):
        scope = SHARED if rng.random() < 0.3 else f"person:{rng.randrange(CHATS)}"
        category = DAILY if i % 5 == 0 else CORE
        items.append(NewMemory(f"{prefix}{i}", sentence(rng), category, scope))
    return items


def unit_vectors(rng: np.random.Generator, count: int) -> npt.NDArray[np.float32]:
    """Random unit vectors, float32."""
    vectors = rng.standard_normal((count, DIMS), dtype=np.float32)
    unit: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def database_size(path: Path) -> int:
    """Bytes of the database file and its write-ahead log."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def rss_mib() -> float:
    """Current resident set size of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def fill(store: MemoryStore, count: int, rng: random.Random) -> tuple[float, float]:
    """Store ``count`` memories and their vectors; (seconds storing, seconds embedding)."""
    vectors_rng = np.random.default_rng(SEED)
    storing = embedding = 0.0
    for start in range(0, count, BATCH):
        batch = memories(min(BATCH, count - start), rng, f"m{start}-")
        began = time.perf_counter()
        await store.store_many(batch)
        storing += time.perf_counter() - began
        # The freshly stored rows are the highest ids; embed them in id order.
        todo = await store.unembedded(MODEL, len(batch))
        vectors = unit_vectors(vectors_rng, len(todo))
        began = time.perf_counter()
        await store.set_embeddings(
            [(memory_id, to_blob(v)) for (memory_id, _), v in zip(todo, vectors, strict=True)],
            MODEL,
        )
        embedding += time.perf_counter() - began
    return storing, embedding


async def time_recalls(
    recall: HybridRecall,
    rng: random.Random,
    count: int,
    *,
    with_vectors: bool = False,
    cut: bool = False,
) -> list[float]:
    """Milliseconds of ``count`` recalls of 10 entries, for a random person and the shared scope."""
    vectors = np.random.default_rng(rng.randrange(2**32))
    walls = []
    for _ in range(count):
        text = question(rng)
        if cut:
            text = " ".join(word.rstrip("?")[1:-1] for word in text.split())
        scopes = [f"person:{rng.randrange(CHATS)}", SHARED]
        vector = unit_vectors(vectors, 1)[0] if with_vectors else None
        began = time.perf_counter()
        hits = await recall.recall(text, scopes, 10, query_vector=vector)
        walls.append((time.perf_counter() - began) * 1000)
        if not hits:
            raise SystemExit(f"nothing recalled for {text!r}")
        if cut and any(hit.keyword_score not in (None, LIKE_SCORE) for hit in hits):
            raise SystemExit(f"{text!r} was found through the index, not by substring")
    return walls


def summary(name: str, ms: list[float]) -> dict[str, str]:
    """Median, p90, p99 and max of one series of timings."""
    return {
        f"{name} ({len(ms)} calls), median": f"{statistics.median(ms):.1f} ms",
        f"{name}, p90": shown(percentile(ms, 90), " ms", 1, 90, len(ms)),
        f"{name}, p99": shown(percentile(ms, 99), " ms", 1, 99, len(ms)),
        f"{name}, max": f"{max(ms):.1f} ms",
    }


def key_figures(prefix: str, ms: list[float]) -> dict[str, float | int]:
    """Median, p90 and p99 of one series for the final line."""
    return {
        f"{prefix}_median_ms": statistics.median(ms),
        f"{prefix}_p90_ms": percentile(ms, 90),
        f"{prefix}_p99_ms": percentile(ms, 99),
    }


async def bench_recall(
    path: Path, count: int, queries: int, figures: dict[str, float | int]
) -> dict[str, str]:
    """Fill a database, load the cache, and time ``queries`` recalls (``figures`` gets the
    final line's numbers)."""
    rng = random.Random(SEED)
    db = Database(path)
    await db.open()
    try:
        store = MemoryStore(db)
        await store.setup()
        storing, embedding = await fill(store, count, rng)
        cache = VectorCache(MODEL, DIMS)
        began = time.perf_counter()
        await cache.load(store)
        loading = time.perf_counter() - began
        recall = HybridRecall(store, cache)
        hybrid = await time_recalls(recall, rng, queries, with_vectors=True)
        keyword_only = await time_recalls(HybridRecall(store, None), rng, queries)
        # Words cut at both ends ("offe") find nothing in the index: the substring fallback.
        fallback = await time_recalls(recall, rng, queries // 4, with_vectors=True, cut=True)
        size = database_size(path)
    finally:
        await db.close()
    figures |= {
        "memories": count,
        "vector_cache_load_s": loading,
        "vector_cache_mib": cache.nbytes / 2**20,
        **key_figures("hybrid", hybrid),
        **key_figures("keyword", keyword_only),
        **key_figures("fallback", fallback),
        "database_mib": size / 2**20,
        "rss_mib": rss_mib(),
    }
    return {
        "memories stored (batches of 10,000)": f"{count:,} in {storing:.1f} s",
        "embeddings stored (set_embeddings)": f"{embedding:.1f} s",
        "vector cache load": f"{loading:.2f} s, {len(cache):,} vectors",
        "vector cache size (nbytes)": f"{cache.nbytes / 2**20:.1f} MiB",
        **summary("hybrid recall", hybrid),
        **summary("keyword-only recall", keyword_only),
        **summary("hybrid recall, substring fallback", fallback),
        "database file + WAL": f"{size / 2**20:.0f} MiB",
        "process RSS after recall": f"{rss_mib():.0f} MiB",
    }


async def bench_batch(path: Path, figures: dict[str, float | int]) -> dict[str, str]:
    """Time one ``store_many`` of 10,000 memories into a fresh database."""
    db = Database(path)
    await db.open()
    try:
        store = MemoryStore(db)
        await store.setup()
        batch = memories(BATCH, random.Random(SEED + 2), "batch-")
        began = time.perf_counter()
        await store.store_many(batch)
        wall = time.perf_counter() - began
    finally:
        await db.close()
    figures["store_many_10k_s"] = wall
    return {"store_many of 10,000 into a fresh database": f"{wall:.2f} s"}


async def main() -> None:
    """Run both benchmarks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    numbers: dict[str, float | int] = {"store_many_10k_s": NAN}
    with tempfile.TemporaryDirectory() as folder:
        figures = await bench_batch(Path(folder) / "batch.db", numbers)
        figures |= await bench_recall(
            Path(folder) / "recall.db", args.memories, args.queries, numbers
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures["peak RSS of the benchmark"] = f"{peak:.0f} MiB"
    numbers["peak_rss_mib"] = peak
    print(
        f"Python {sys.version.split()[0]}, numpy {np.__version__}, SQLite {sqlite3.sqlite_version}"
    )
    print("\n| measure | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    print()
    print(final_line(numbers))


if __name__ == "__main__":
    asyncio.run(main())
