"""The shared database: write transactions take turns, and a failure undoes only itself."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.store.db import Database


async def test_a_failed_write_rolls_back_alone_and_releases_the_file(tmp_path: Path) -> None:
    db = Database(tmp_path / "state" / "pinclaw.db")
    await db.open()
    await db.migrate("t", ["CREATE TABLE items (name TEXT PRIMARY KEY);"])
    started = asyncio.Event()

    async def good() -> None:
        async with db.write() as conn:
            await conn.execute("INSERT INTO items VALUES ('kept')")
            started.set()
            await asyncio.sleep(0.05)  # the failing writer is ready to run meanwhile

    async def bad() -> None:
        await started.wait()
        async with db.write() as conn:
            await conn.execute("INSERT INTO items VALUES ('undone')")
            await conn.execute("INSERT INTO items VALUES ('undone')")  # primary key clash

    results = await asyncio.gather(good(), bad(), return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], sqlite3.IntegrityError)
    async with db.conn.execute("SELECT name FROM items") as cursor:
        assert [r[0] for r in await cursor.fetchall()] == ["kept"]
    # Another process (e.g. `pinclaw pairing approve`) can write at once: no lock is held.
    other = sqlite3.connect(db.path, timeout=0.1)
    other.execute("INSERT INTO items VALUES ('from another process')")
    other.commit()
    other.close()
    await db.close()


async def test_the_database_is_private(tmp_path: Path) -> None:
    db = Database(tmp_path / "new" / "pinclaw.db")
    await db.open()
    await db.close()
    assert stat.S_IMODE(db.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.path.parent.stat().st_mode) == 0o700


async def test_migrations_run_once_in_order(tmp_path: Path) -> None:
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    steps = ["CREATE TABLE a (x INTEGER);", "ALTER TABLE a ADD COLUMN y INTEGER;"]
    await db.migrate("demo", steps[:1])
    await db.migrate("demo", steps)
    await db.migrate("demo", steps)
    async with db.conn.execute("SELECT version FROM schema_versions WHERE component = 'demo'") as c:
        assert await c.fetchone() == (2,)
    with pytest.raises(sqlite3.OperationalError):
        await db.migrate("broken", ["CREATE TABLE b (x INTEGER); NOT SQL;"])
    async with db.conn.execute("SELECT name FROM sqlite_master WHERE name = 'b'") as c:
        assert await c.fetchone() is None
    await db.close()


async def test_a_transaction_is_one_unit_and_never_joins_an_open_write(tmp_path: Path) -> None:
    db = Database(tmp_path / "pinclaw.db")
    await db.open()
    await db.migrate("t", ["CREATE TABLE items (name TEXT PRIMARY KEY);"])

    def add(*names: str) -> Callable[[sqlite3.Connection], int]:
        def work(conn: sqlite3.Connection) -> int:
            for name in names:
                conn.execute("INSERT INTO items VALUES (?)", (name,))
            return len(names)

        return work

    assert await db.transaction(add("a", "b")) == 2
    with pytest.raises(sqlite3.IntegrityError):
        await db.transaction(add("c", "a"))  # "c" is undone with it
    opened = asyncio.Event()

    async def failing_write() -> None:
        async with db.write() as conn:
            await conn.execute("INSERT INTO items VALUES ('half-done')")
            opened.set()
            await asyncio.sleep(0.05)
            raise RuntimeError("the writer fails after the transaction was asked for")

    async def transaction_meanwhile() -> int:
        await opened.wait()
        return await db.transaction(add("d"))

    results = await asyncio.gather(failing_write(), transaction_meanwhile(), return_exceptions=True)
    assert isinstance(results[0], RuntimeError) and results[1] == 1
    rows = await db.conn.execute_fetchall("SELECT name FROM items ORDER BY name")
    assert [r[0] for r in rows] == ["a", "b", "d"]  # the open write's row was not committed
    await db.close()
