"""Triggers made from a chat or the command line, and every firing, in SQLite.

``triggers`` holds the triggers that are not in the config file. ``trigger_firings``
holds one row per event a trigger took, written before anything is sent: a
firing is ``pending`` until its message is delivered (``sent``), given up
(``failed``), or was held back (``skipped``, with the reason in ``outcome``).
A restart delivers what is still pending, once; an idempotency key stored with
the row makes a retried webhook delivery fire once. ``trigger_meta.version``
changes with every change made here, so the daemon notices what
``pinclaw triggers`` did from another process.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal

from bot.store.db import Database
from bot.triggers.spec import Event, Outcome, Trigger

MIGRATIONS = [
    """
    CREATE TABLE triggers (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        spec TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE trigger_firings (
        id INTEGER PRIMARY KEY,
        trigger TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'event',
        at REAL NOT NULL,
        event TEXT NOT NULL,
        idem_key TEXT NOT NULL DEFAULT '',
        outcome TEXT NOT NULL,
        status TEXT NOT NULL,
        text TEXT NOT NULL DEFAULT '',
        delivered_to TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT '',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at REAL NOT NULL DEFAULT 0,
        done_at REAL
    );
    CREATE UNIQUE INDEX trigger_firings_idem ON trigger_firings (trigger, idem_key)
        WHERE idem_key != '';
    CREATE INDEX trigger_firings_pending ON trigger_firings (status, next_at)
        WHERE status IN ('pending', 'asking');
    CREATE INDEX trigger_firings_by_trigger ON trigger_firings (trigger, at);
    CREATE TABLE trigger_meta (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
    INSERT INTO trigger_meta (id, version) VALUES (1, 0);
    """,
]
FiringStatus = Literal["pending", "asking", "sent", "failed", "skipped"]
FiringKind = Literal["event", "summary", "test"]
KEPT_DAYS = 30.0
_STORED = ("to", "say", "ask", "when", "for_s", "cooldown_s", "quiet_hours", "active_hours",
           "rate_limit", "enabled", "secret", "signature_header", "max_bytes", "hysteresis",
           "every_s", "pattern", "made_by", "creator_id", "creator_name")  # fmt: skip
_FIRING_COLUMNS = (
    "id, trigger, kind, at, event, idem_key, outcome, status, text, delivered_to, error, "
    "attempts, next_at, done_at"
)


@dataclass(frozen=True, slots=True)
class Firing:
    """One event a trigger took, as stored."""

    id: int
    trigger: str
    kind: FiringKind
    at: float
    event: Event
    outcome: Outcome
    status: FiringStatus
    text: str = ""
    delivered_to: str = ""
    error: str = ""
    attempts: int = 0
    next_at: float = 0.0
    done_at: float | None = None


class TriggerStore:
    """Stored triggers and the firings of every trigger."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables."""
        await self._db.migrate("triggers", MIGRATIONS)

    async def version(self) -> int:
        """A number that changes whenever a stored trigger or a queued test changes."""
        rows = await self._db.conn.execute_fetchall("SELECT version FROM trigger_meta")
        return int(next(iter(rows))[0])

    async def triggers(self) -> list[Trigger]:
        """The stored triggers, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, name, spec FROM triggers ORDER BY id"
        )
        return [_trigger(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def add(self, trigger: Trigger) -> Trigger:
        """Store a new trigger (``UNIQUE`` on its name) and return it with its id."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "INSERT INTO triggers (name, spec, created_at) VALUES (?, ?, ?)",
                (trigger.name, _spec_json(trigger), time.time()),
            )
            await conn.execute("UPDATE trigger_meta SET version = version + 1")
        return replace(trigger, id=int(cursor.lastrowid or 0))

    async def remove(self, name: str) -> bool:
        """Delete a stored trigger; False if there is none by that name."""
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM triggers WHERE name = ?", (name,))
            await conn.execute("UPDATE trigger_meta SET version = version + 1")
        return cursor.rowcount > 0

    async def record(
        self,
        trigger: str,
        event: Event,
        outcome: Outcome,
        *,
        kind: FiringKind = "event",
        text: str = "",
        notify: bool = False,
    ) -> Firing | None:
        """Store a firing (``pending`` if it fired, else ``skipped``); None when its
        idempotency key was seen before. ``notify`` bumps the version (another process)."""
        status: FiringStatus = "pending" if outcome == "fired" else "skipped"
        now = time.time()
        row = (trigger, kind, event.at, event.to_json(), event.key, outcome, status, text,
               None if status == "pending" else now)  # fmt: skip

        def insert(conn: sqlite3.Connection) -> int | None:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO trigger_firings (trigger, kind, at, event, idem_key, "
                "outcome, status, text, done_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            if cursor.rowcount == 0:
                return None
            if notify:
                conn.execute("UPDATE trigger_meta SET version = version + 1")
            return int(cursor.lastrowid or 0)

        row_id = await self._db.transaction(insert)  # one trip to the database's thread
        if row_id is None:
            return None
        return Firing(row_id, trigger, kind, event.at, event, outcome, status,
                      text, done_at=None if status == "pending" else now)  # fmt: skip

    async def seen(self, trigger: str, key: str) -> bool:
        """Whether a firing of ``trigger`` with idempotency ``key`` is stored."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT 1 FROM trigger_firings WHERE trigger = ? AND idem_key = ?", (trigger, key)
        )
        return bool(list(rows))

    async def pending(self) -> list[Firing]:
        """The firings still to deliver (``asking`` ones too: their turn was cut), oldest first."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_FIRING_COLUMNS} FROM trigger_firings "
            "WHERE status IN ('pending', 'asking') ORDER BY id"
        )
        return [_firing(row) for row in rows]

    async def update(self, firing_id: int, **values: object) -> None:
        """Change columns of one firing (status, text, delivered_to, error, attempts...)."""
        names = ", ".join(f"{name} = ?" for name in values)
        sql = f"UPDATE trigger_firings SET {names} WHERE id = ?"
        args = (*values.values(), firing_id)
        await self._db.transaction(lambda conn: conn.execute(sql, args))  # one trip

    async def history(self, trigger: str | None = None, limit: int = 20) -> list[Firing]:
        """The latest firings, newest first (of one trigger, or of all)."""
        where, args = ("WHERE trigger = ?", (trigger,)) if trigger else ("", ())
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_FIRING_COLUMNS} FROM trigger_firings {where} ORDER BY id DESC LIMIT ?",
            (*args, limit),
        )
        return [_firing(row) for row in rows]

    async def last_sent(self, trigger: str) -> float | None:
        """When ``trigger`` last fired for real (a message made, not held back)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT max(at) FROM trigger_firings WHERE trigger = ? AND outcome = 'fired' "
            "AND kind = 'event'",
            (trigger,),
        )
        value = next(iter(rows))[0]
        return None if value is None else float(value)

    async def fired_since(self, trigger: str, since: float) -> list[float]:
        """When ``trigger`` fired for real from ``since`` on (for its rate limit)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT at FROM trigger_firings WHERE trigger = ? AND outcome = 'fired' "
            "AND kind = 'event' AND at >= ? ORDER BY at",
            (trigger, since),
        )
        return [float(row[0]) for row in rows]

    async def prune(self, days: float = KEPT_DAYS) -> int:
        """Delete finished firings older than ``days``; how many went."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "DELETE FROM trigger_firings WHERE status IN ('sent', 'failed', 'skipped') "
                "AND at < ?",
                (time.time() - days * 86400,),
            )
        return cursor.rowcount


def _spec_json(trigger: Trigger) -> str:
    import json

    return json.dumps({"on": trigger.on, **{name: getattr(trigger, name) for name in _STORED}})


def _trigger(row_id: int, name: str, spec: str) -> Trigger:
    import json

    data = json.loads(spec)
    known = {f.name for f in fields(Trigger)}
    values = {key: value for key, value in data.items() if key in known}
    return Trigger(name=name, id=row_id, **values)


def _firing(row: Sequence[object]) -> Firing:
    (row_id, trigger, kind, at, event, _key, outcome, status, text, delivered_to, error,
     attempts, next_at, done_at) = row  # fmt: skip
    return Firing(
        int(row_id),  # type: ignore[call-overload]
        str(trigger),
        kind,  # type: ignore[arg-type]
        float(at),  # type: ignore[arg-type]
        Event.from_json(str(event)),
        outcome,  # type: ignore[arg-type]
        status,  # type: ignore[arg-type]
        str(text),
        str(delivered_to),
        str(error),
        int(attempts),  # type: ignore[call-overload]
        float(next_at),  # type: ignore[arg-type]
        None if done_at is None else float(done_at),  # type: ignore[arg-type]
    )
