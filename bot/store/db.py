"""The one SQLite file that holds PinClaw's state, opened through aiosqlite in WAL mode.

Each component (history, and later pairing, cron, memory) owns its tables and
brings its own ordered list of migrations; ``migrate`` applies the ones a
database has not seen yet, so components stay independent modules.

A damaged file (a power cut on an SD card is the usual cause) is found on
opening: always by its header, and by SQLite's ``quick_check`` when the daemon
starts. It is reported as ``DatabaseDamaged``, one line saying what to do, and
the connection (whose worker thread would keep the process alive) is closed.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

import aiosqlite

from bot.core.errors import UserError
from bot.store.schema import Step, behind

Check = Literal["header", "quick"]
HEADER = b"SQLite format 3\x00"
T = TypeVar("T")


class DatabaseDamaged(UserError):
    """The database file cannot be read as a whole; the message says what to do."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(damaged_message(path, reason))
        self.path = path


def damaged_message(path: Path | None, reason: str) -> str:
    """One line: which file, what is wrong, and the two ways out."""
    where = f"the database {path}" if path else "the database"
    return (
        f"{where} is damaged ({reason}); run `pinclaw db recover` to save what can be read "
        "into a new file (the damaged one is kept aside), or restore a backup"
    )


def header_problem(path: Path) -> str:
    """Why ``path`` is not an SQLite database by its first 100 bytes ("" if it may be one)."""
    try:
        with open(path, "rb") as file:
            head = file.read(100)
    except FileNotFoundError:
        return ""
    if not head:
        return ""  # an empty file becomes a new database
    if len(head) < 100 or not head.startswith(HEADER):
        return "it is not an SQLite database"
    size = int.from_bytes(head[16:18], "big")
    size = 65536 if size == 1 else size
    if size < 512 or size & (size - 1):
        return "its header names an impossible page size"
    return ""


class Database:
    """Owns the connection: ``open`` and ``close`` are idempotent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._versions: dict[str, int] = {}  # each component's version when opened

    @property
    def conn(self) -> aiosqlite.Connection:
        """The open connection."""
        if self._conn is None:
            raise RuntimeError("the database is not open")
        return self._conn

    async def open(self, check: Check = "header") -> None:
        """Open (creating the file and its folder if needed) and set the pragmas.

        ``check="quick"`` also runs SQLite's ``quick_check`` (the daemon at start).
        Raises ``DatabaseDamaged`` for a damaged file, leaving nothing open. A
        database an older PinClaw left is upgraded here, every component at once
        (see ``_upgrade``); ``BackupFailed`` or ``MigrationFailed`` if that fails.
        """
        if self._conn is not None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Conversations are private: create the file for its owner only (SQLite
        # gives its -wal and -shm files the same mode).
        os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = await aiosqlite.connect(self.path)
        try:
            await self._prepare(conn, check)
            self._conn = conn
            if behind(self._versions):
                await self._upgrade()
        except BaseException as exc:
            self._conn = None
            with suppress(Exception):
                await conn.close()  # its worker thread would keep the process alive
            if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
                raise DatabaseDamaged(self.path, str(exc)) from None
            raise

    async def _prepare(self, conn: aiosqlite.Connection, check: Check) -> None:
        """The header, the pragmas, the check and every component's version, in one trip to
        the connection's thread; the header is read before SQLite reads anything."""

        def prepare(raw: sqlite3.Connection) -> str:
            if problem := header_problem(self.path):
                return problem
            raw.execute("PRAGMA busy_timeout=5000")
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=NORMAL")
            raw.execute("PRAGMA foreign_keys=ON")
            if check == "quick":
                found = [str(row[0]) for row in raw.execute("PRAGMA quick_check")]
                if found != ["ok"]:
                    return check_findings(found)
            raw.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            raw.commit()
            rows = raw.execute("SELECT component, version FROM schema_versions").fetchall()
            self._versions = {str(name): int(version) for name, version in rows}
            return ""

        if problem := await on_thread(conn, prepare):
            raise DatabaseDamaged(self.path, problem)

    async def close(self) -> None:
        """Close the connection if it is open."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction: committed at the end, rolled back on any error.

        Every component shares the one connection, and coroutines interleave at
        each await; writers therefore take turns here, so one component's
        failure can never roll back, or hold open, another's half-done write.
        """
        async with self._write_lock:
            conn = self.conn
            try:
                yield conn
            except BaseException:
                await asyncio.shield(conn.rollback())
                raise
            await conn.commit()

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` as one write transaction, in one trip to the connection's thread.

        ``work`` gets the plain ``sqlite3`` connection and runs on aiosqlite's
        thread: committed when it returns, rolled back if it raises. Each awaited
        statement of ``write`` is a round trip between threads; the few writes of
        every message go this way instead, all at once. Nothing else runs on the
        connection meanwhile, and a caller cancelled while it runs does not stop
        it: it commits, as a write whose commit was already sent does.

        The thread runs what is queued in order, one call at a time, so ``work``
        needs the write lock only while a ``write`` block is open (its statements
        go one by one); otherwise it is queued at once, and transactions of
        concurrent turns go to the thread together instead of taking turns here.
        """

        def run(raw: sqlite3.Connection) -> T:
            try:
                result = work(raw)
            except BaseException:
                raw.rollback()
                raise
            raw.commit()
            return result

        if not self._write_lock.locked():
            return await on_thread(self.conn, run)
        async with self._write_lock:
            return await on_thread(self.conn, run)

    async def migrate(self, component: str, steps: Sequence[Step]) -> None:
        """Apply the migrations of ``component`` that this database has not run yet.

        They run as one transaction with the new version number: a failed step
        leaves the database as it was. When the component already holds data,
        the database is copied first (``bot.store.upgrade``), and a failure is
        a ``MigrationFailed`` naming the copy.
        """
        if self._versions.get(component, 0) >= len(steps):
            return  # current when the file was opened (or since); versions only ever go up
        async with self._write_lock:
            await self._apply([(component, steps)])

    async def _upgrade(self) -> None:
        """Bring every component of a database an older PinClaw left up to date at once.

        One transaction for all of them: a step that fails undoes the steps of
        every component before it too, so the database stays as the older
        version left it (and works with it), whichever component failed.
        """
        from bot.store.schema import COMPONENTS

        await self._apply([(component.name, component.steps()) for component in COMPONENTS])

    async def _apply(self, plan: Sequence[tuple[str, Sequence[Step]]]) -> None:
        """Run each component's pending steps in ``plan`` order, all in one transaction."""
        from bot.store.upgrade import run_script

        conn = self.conn
        if not (todo := await self._pending(plan)):
            return
        # Tables that hold data are about to change: copy the file first (outside the
        # transaction, which would keep the copy waiting). Creating a component's
        # first tables changes nothing there is, and needs no copy.
        backup = await self._backup() if any(self._versions.get(n, 0) for n, _ in todo) else None
        where = "starting the upgrade"
        try:
            await conn.execute("BEGIN IMMEDIATE")
            todo = await self._pending(plan)  # another process may have upgraded meanwhile
            for name, steps in todo:
                done = self._versions.get(name, 0)
                for number, step in enumerate(steps[done:], start=done + 1):
                    where = f"step {number} of {name}"
                    if isinstance(step, str):
                        await on_thread(conn, partial(run_script, step))  # one trip
                    else:
                        await step(conn)
                await conn.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
                    "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                    (name, len(steps)),
                )
            await conn.commit()
        except BaseException as exc:
            await asyncio.shield(conn.rollback())
            if backup is None or not isinstance(exc, Exception):
                raise
            from bot.core.version import pinclaw_version
            from bot.store.upgrade import migration_failed

            raise migration_failed(self.path, pinclaw_version(), where, exc, backup) from exc
        self._versions.update((name, len(steps)) for name, steps in todo)

    async def _pending(
        self, plan: Sequence[tuple[str, Sequence[Step]]]
    ) -> list[tuple[str, Sequence[Step]]]:
        """The components of ``plan`` behind their steps, by the versions the file holds now."""
        rows = await self.conn.execute_fetchall("SELECT component, version FROM schema_versions")
        self._versions = {str(name): int(version) for name, version in rows}
        return [(name, steps) for name, steps in plan if self._versions.get(name, 0) < len(steps)]

    async def _backup(self) -> Path:
        """The copy of the database before this PinClaw's upgrade (made once; see upgrade.py)."""
        from bot.core.version import pinclaw_version
        from bot.store.upgrade import backup_before_upgrade

        version = pinclaw_version()
        return await on_thread(
            self.conn, lambda raw: backup_before_upgrade(raw, self.path, version)
        )


async def on_thread(conn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` with ``conn``'s plain ``sqlite3`` connection on aiosqlite's thread:
    however many statements, one trip, inside whatever transaction ``conn`` has open."""
    # aiosqlite has no public call for this: ``_execute`` queues a function for its
    # thread and ``_conn`` is its sqlite3 connection (aiosqlite is pinned below 0.23).
    return await conn._execute(work, conn._conn)  # type: ignore[no-untyped-call,no-any-return]


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether an SQLite error means a damaged file (not a busy or missing one)."""
    if type(exc) is sqlite3.DatabaseError:
        return True  # "database disk image is malformed", "file is not a database"
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def check_findings(found: list[str]) -> str:
    """SQLite's integrity check output as a short phrase: the first problem and a count."""
    lines = [line for row in found for line in row.splitlines() if not line.startswith("***")]
    more = f" and {len(lines) - 1} more problems" if len(lines) > 1 else ""
    return f"SQLite's check found: {lines[0] if lines else 'problems'}{more}"
