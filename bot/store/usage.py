"""Every answered model request, with its tokens and cost, for ``pinclaw usage`` and budgets.

One row per request (each round of a turn, sub-agents' rounds included), kept
apart from ``turns`` so a report never depends on how a turn ended. The cost
is worked out when the call is made, from the prices configured then, and is
NULL when the price table did not know the model. Days and months are
calendar days and months in the configured timezone.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from bot.store.db import Database

MIGRATIONS = [
    """
    CREATE TABLE model_calls (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost REAL,
        chat TEXT NOT NULL,
        sender TEXT NOT NULL,
        origin TEXT NOT NULL,
        turn_id INTEGER
    );
    CREATE INDEX model_calls_by_time ON model_calls (at);
    """,
]

GroupBy = Literal["model", "chat", "day"]

# Days are grouped in Python over 15-minute buckets summed by SQLite: every UTC
# offset in use is a whole number of quarter hours, so no bucket straddles a
# local midnight, and SQLite needs no timezone rules.
_QUARTER_HOUR = 900


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One answered model request."""

    provider: str  # the kind: openai, anthropic, gemini, ollama
    model: str
    input_tokens: int
    output_tokens: int
    cost: float | None  # None: no price configured for the model
    chat: str  # the session key of the chat it served
    sender: str
    origin: str  # chat, cron:NAME, heartbeat
    turn_id: int | None = None
    at: float = 0.0  # 0: now


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Model calls added up for one model, chat or day (or all of them)."""

    key: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None  # the priced calls' cost; None when none was priced
    unpriced: int  # calls whose cost is unknown

    @property
    def tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


class UsageStore:
    """Records model calls and adds them up."""

    def __init__(self, db: Database, timezone: ZoneInfo | None = None) -> None:
        self._db = db
        self.timezone = timezone or ZoneInfo("UTC")

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("usage", MIGRATIONS)

    async def record(self, call: ModelCall) -> None:
        """Store one model call durably."""
        row = (
            call.at or time.time(),
            call.provider,
            call.model,
            max(0, call.input_tokens),
            max(0, call.output_tokens),
            call.cost,
            call.chat,
            call.sender,
            call.origin,
            call.turn_id,
        )

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO model_calls (at, provider, model, input_tokens, output_tokens, "
                "cost, chat, sender, origin, turn_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._db.transaction(insert)

    async def tokens_since(self, since: float) -> int:
        """Model tokens (in and out) of every call since ``since`` (seconds since the epoch)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM model_calls WHERE at >= ?",
            (since,),
        )
        return next((int(row[0]) for row in rows), 0)

    async def tokens_today(self, now: float | None = None) -> int:
        """Model tokens since midnight, in the store's timezone."""
        return await self.tokens_since(day_start(_now(now), self.timezone))

    async def tokens_this_month(self, now: float | None = None) -> int:
        """Model tokens since the first of the month, in the store's timezone."""
        return await self.tokens_since(month_start(_now(now), self.timezone))

    async def totals(self, since: float, by: GroupBy) -> list[UsageTotal]:
        """Calls since ``since`` added up per model (``kind:model``), chat or local day.

        Models and chats come most tokens first; days in order.
        """
        if by == "day":
            return await self._by_day(since)
        column = "provider || ':' || model" if by == "model" else "chat"
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {column} AS k, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
            "SUM(cost), COUNT(*) - COUNT(cost) FROM model_calls WHERE at >= ? "
            "GROUP BY k ORDER BY SUM(input_tokens + output_tokens) DESC, k",
            (since,),
        )
        return [_total(str(row[0]), row[1:]) for row in rows]

    async def turn_total(self, turn_id: int) -> UsageTotal:
        """The calls of one turn added up (its key is the turn id)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost), "
            "COUNT(*) - COUNT(cost) FROM model_calls WHERE turn_id = ?",
            (turn_id,),
        )
        return _total(str(turn_id), next(iter(rows)))

    async def _by_day(self, since: float) -> list[UsageTotal]:
        rows = await self._db.conn.execute_fetchall(
            f"SELECT CAST(at / {_QUARTER_HOUR} AS INTEGER) AS q, COUNT(*), SUM(input_tokens), "
            "SUM(output_tokens), SUM(cost), COUNT(*) - COUNT(cost) FROM model_calls "
            "WHERE at >= ? GROUP BY q ORDER BY q",
            (since,),
        )
        days: dict[str, list[UsageTotal]] = {}
        for row in rows:
            start = datetime.fromtimestamp(int(row[0]) * _QUARTER_HOUR, self.timezone)
            day = start.date().isoformat()
            days.setdefault(day, []).append(_total(day, row[1:]))
        return [combined(parts, day) for day, parts in days.items()]


def combined(totals: Sequence[UsageTotal], key: str) -> UsageTotal:
    """Totals added up into one, named ``key``."""
    costs = [t.cost for t in totals if t.cost is not None]
    return UsageTotal(
        key=key,
        calls=sum(t.calls for t in totals),
        input_tokens=sum(t.input_tokens for t in totals),
        output_tokens=sum(t.output_tokens for t in totals),
        cost=sum(costs) if costs else None,
        unpriced=sum(t.unpriced for t in totals),
    )


def money(cost: float) -> str:
    """A cost with the digits that matter: 12.35, 0.4210, 0.000549."""
    if cost >= 10:
        return f"{cost:,.2f}"
    return f"{cost:.4f}" if cost >= 0.01 or cost == 0 else f"{cost:.6f}"


def day_start(now: float, zone: ZoneInfo) -> float:
    """When the local day that contains ``now`` began."""
    local = datetime.fromtimestamp(now, zone)
    return _midnight(local.year, local.month, local.day, zone)


def next_day_start(now: float, zone: ZoneInfo) -> float:
    """When the next local day begins."""
    local = datetime.fromtimestamp(now, zone).date() + timedelta(days=1)
    return _midnight(local.year, local.month, local.day, zone)


def month_start(now: float, zone: ZoneInfo) -> float:
    """When the local month that contains ``now`` began."""
    local = datetime.fromtimestamp(now, zone)
    return _midnight(local.year, local.month, 1, zone)


def next_month_start(now: float, zone: ZoneInfo) -> float:
    """When the next local month begins."""
    local = datetime.fromtimestamp(now, zone)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    return _midnight(year, month, 1, zone)


def _midnight(year: int, month: int, day: int, zone: ZoneInfo) -> float:
    # A zone that skips midnight for DST starts that day at the first real instant.
    return datetime(year, month, day, tzinfo=zone).timestamp()


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def _total(key: str, row: Sequence[Any]) -> UsageTotal:
    calls, tokens_in, tokens_out, cost, unpriced = row
    return UsageTotal(
        key=key,
        calls=int(calls),
        input_tokens=int(tokens_in or 0),
        output_tokens=int(tokens_out or 0),
        cost=None if cost is None else float(cost),
        unpriced=int(unpriced),
    )
