"""Scheduled jobs and their run history, stored in SQLite so they survive restarts.

Every change bumps a version number, which the running daemon polls: a job added,
removed or paused with ``pinclaw cron`` while the daemon runs is picked up within
seconds, without a restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Literal

import aiosqlite

from bot.core.metrics import count_cron_run
from bot.store.db import Database

Action = Literal["agent", "shell"]
SessionMode = Literal["chat", "isolated"]
State = Literal["active", "paused", "done"]
Misfire = Literal["skip", "run_once"]
RunStatus = Literal["running", "ok", "quiet", "failed", "skipped", "interrupted"]
TargetKind = Literal["chat", "owner", "none", "log", "file", "terminal"]

MIGRATIONS = [
    """
    CREATE TABLE cron_jobs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        schedule_kind TEXT NOT NULL,
        schedule_expr TEXT NOT NULL,
        timezone TEXT NOT NULL,
        anchor REAL NOT NULL DEFAULT 0,
        action TEXT NOT NULL,
        payload TEXT NOT NULL,
        session_mode TEXT NOT NULL,
        target_kind TEXT NOT NULL,
        target_channel TEXT NOT NULL DEFAULT '',
        target_chat TEXT NOT NULL DEFAULT '',
        target_thread TEXT,
        target_direct INTEGER NOT NULL DEFAULT 1,
        creator_id TEXT NOT NULL,
        creator_name TEXT NOT NULL,
        created_at REAL NOT NULL,
        misfire TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'active',
        next_run REAL,
        last_run REAL,
        failures INTEGER NOT NULL DEFAULT 0,
        run_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE cron_runs (
        id INTEGER PRIMARY KEY,
        job_id INTEGER NOT NULL,
        scheduled_for REAL,
        started_at REAL NOT NULL,
        ended_at REAL,
        status TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX cron_runs_by_job ON cron_runs (job_id, id);
    CREATE TABLE cron_meta (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
    INSERT INTO cron_meta (id, version) VALUES (1, 0);
    """,
    # Targets without a chat (a file in the workspace), and where each run's result went.
    """
    ALTER TABLE cron_jobs ADD COLUMN target_path TEXT NOT NULL DEFAULT '';
    ALTER TABLE cron_runs ADD COLUMN delivered_to TEXT NOT NULL DEFAULT '';
    """,
]

_JOB_COLUMNS = (
    "id, name, schedule_kind, schedule_expr, timezone, anchor, action, payload, session_mode, "
    "target_kind, target_channel, target_chat, target_thread, target_direct, creator_id, "
    "creator_name, "
    "created_at, misfire, state, next_run, last_run, failures, run_requested, target_path"
)
_RUN_COLUMNS = "id, job_id, scheduled_for, started_at, ended_at, status, summary, delivered_to"
_SUMMARY_CHARS = 500
RUNS_KEPT = 100  # per job: enough history to see a pattern, never an ever-growing table


@dataclass(frozen=True, slots=True)
class Target:
    """Where a job's output goes: a chat, the owner (their private chat, else their
    inbox), the owner's inbox in the terminal, the daemon's log, a file in the
    workspace, or nowhere."""

    kind: TargetKind
    channel: str = ""
    chat_id: str = ""
    thread_id: str | None = None
    is_direct: bool = True
    path: str = ""

    def __str__(self) -> str:
        if self.kind == "terminal":
            return "terminal:owner"
        if self.kind == "file":
            return f"file:{self.path}"
        if self.kind != "chat":
            return self.kind
        thread = f":{self.thread_id}" if self.thread_id else ""
        return f"{self.channel}:{self.chat_id}{thread}"


@dataclass(frozen=True, slots=True)
class CronJob:
    """One scheduled job as stored."""

    id: int
    name: str
    schedule_kind: str
    schedule_expr: str
    timezone: str
    anchor: float
    action: Action
    payload: str
    session_mode: SessionMode
    target: Target
    creator_id: str
    creator_name: str
    created_at: float
    misfire: Misfire
    state: State = "active"
    next_run: float | None = None
    last_run: float | None = None
    failures: int = 0
    run_requested: bool = False


@dataclass(frozen=True, slots=True)
class JobRun:
    """One run of a job, or one run that was skipped."""

    id: int
    job_id: int
    scheduled_for: float | None
    started_at: float
    ended_at: float | None
    status: RunStatus
    summary: str
    delivered_to: str = ""


class CronStore:
    """Reads and writes jobs and runs; used by the daemon, the tools and ``pinclaw cron``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables."""
        await self._db.migrate("cron", MIGRATIONS)

    async def version(self) -> int:
        """A number that changes whenever any job changes."""
        rows = await self._db.conn.execute_fetchall("SELECT version FROM cron_meta")
        return int(next(iter(rows))[0])

    async def add(self, job: CronJob) -> CronJob:
        """Store a new job (its ``id`` is assigned here) and return it."""
        values = _job_row(job)[1:]
        async with self._db.write() as conn:
            marks = ", ".join("?" * len(values))
            cursor = await conn.execute(
                f"INSERT INTO cron_jobs ({_JOB_COLUMNS.partition(', ')[2]}) VALUES ({marks})",
                values,
            )
            await _bump(conn)
        return replace(job, id=int(cursor.lastrowid or 0))

    async def get(self, job_id: int) -> CronJob | None:
        """One job by id."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_JOB_COLUMNS} FROM cron_jobs WHERE id = ?", (job_id,)
        )
        return next((_job(row) for row in rows), None)

    async def jobs(self) -> list[CronJob]:
        """Every job, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_JOB_COLUMNS} FROM cron_jobs ORDER BY id"
        )
        return [_job(row) for row in rows]

    async def remove(self, job_id: int) -> bool:
        """Delete a job and its history; True if it existed."""
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,))
            await conn.execute("DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
            await _bump(conn)
        return cursor.rowcount > 0

    async def update(self, job_id: int, **fields: object) -> bool:
        """Change some of a job's columns (next_run, state, failures, last_run, ...)."""
        allowed = {"next_run", "state", "failures", "last_run", "run_requested", "misfire"}
        if not fields or not set(fields) <= allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)}")
        sets = ", ".join(f"{name} = ?" for name in fields)
        async with self._db.write() as conn:
            cursor = await conn.execute(
                f"UPDATE cron_jobs SET {sets} WHERE id = ?", (*fields.values(), job_id)
            )
            await _bump(conn)
        return cursor.rowcount > 0

    async def start_run(self, job_id: int, scheduled_for: float | None) -> int:
        """Record that a run began; returns the run's id."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "INSERT INTO cron_runs (job_id, scheduled_for, started_at, status) "
                "VALUES (?, ?, ?, 'running')",
                (job_id, scheduled_for, time.time()),
            )
        return int(cursor.lastrowid or 0)

    async def finish_run(
        self, run_id: int, status: RunStatus, summary: str, delivered_to: str = ""
    ) -> None:
        """Record how a run ended and where its result went (and count it for ``/metrics``)."""
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE cron_runs SET ended_at = ?, status = ?, summary = ?, delivered_to = ? "
                "WHERE id = ?",
                (time.time(), status, _short(summary), delivered_to, run_id),
            )
        count_cron_run(status)

    async def note_run(
        self, job_id: int, scheduled_for: float | None, status: RunStatus, summary: str
    ) -> None:
        """Record a run that did not happen (skipped) or ended at once."""
        now = time.time()
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO cron_runs (job_id, scheduled_for, started_at, ended_at, status, "
                "summary) VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, scheduled_for, now, now, status, _short(summary)),
            )
        count_cron_run(status)

    async def interrupt_running(self) -> int:
        """Mark runs left "running" by a stop or crash as interrupted; returns how many."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "UPDATE cron_runs SET status = 'interrupted', ended_at = ?, "
                "summary = 'PinClaw stopped during this run' WHERE status = 'running'",
                (time.time(),),
            )
        return cursor.rowcount

    async def prune_runs(self, keep: int = RUNS_KEPT) -> int:
        """Keep only the newest ``keep`` runs of each job; returns how many went."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "DELETE FROM cron_runs WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() "
                "OVER (PARTITION BY job_id ORDER BY id DESC) AS newest FROM cron_runs) "
                "WHERE newest > ?)",
                (keep,),
            )
        return cursor.rowcount

    async def history(self, job_id: int | None = None, limit: int = 20) -> list[JobRun]:
        """The latest runs, newest first: of one job, or of all."""
        where, args = ("WHERE job_id = ?", (job_id, limit)) if job_id else ("", (limit,))
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_RUN_COLUMNS} FROM cron_runs {where} ORDER BY id DESC LIMIT ?", args
        )
        return [JobRun(*row) for row in rows]


async def _bump(conn: aiosqlite.Connection) -> None:
    await conn.execute("UPDATE cron_meta SET version = version + 1")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def _job_row(job: CronJob) -> tuple[object, ...]:
    t = job.target
    return (
        job.id, job.name, job.schedule_kind, job.schedule_expr, job.timezone, job.anchor,
        job.action, job.payload, job.session_mode, t.kind, t.channel, t.chat_id, t.thread_id,
        int(t.is_direct),
        job.creator_id, job.creator_name, job.created_at, job.misfire, job.state,
        job.next_run, job.last_run, job.failures, int(job.run_requested), t.path,
    )  # fmt: skip


def _job(row: Any) -> CronJob:
    return CronJob(
        id=row[0], name=row[1], schedule_kind=row[2], schedule_expr=row[3], timezone=row[4],
        anchor=row[5], action=row[6], payload=row[7], session_mode=row[8],
        target=Target(row[9], row[10], row[11], row[12], bool(row[13]), row[23]),
        creator_id=row[14], creator_name=row[15], created_at=row[16], misfire=row[17],
        state=row[18], next_run=row[19], last_run=row[20], failures=row[21],
        run_requested=bool(row[22]),
    )  # fmt: skip
