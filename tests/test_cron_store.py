"""The job store's housekeeping: run history stays bounded per job."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from bot.cron.store import MIGRATIONS, CronJob, CronStore, Target
from bot.store.db import Database


def job(name: str) -> CronJob:
    return CronJob(
        id=0, name=name, schedule_kind="every", schedule_expr="3600", timezone="UTC",
        anchor=time.time(), action="agent", payload="hi", session_mode="isolated",
        target=Target("none"), creator_id="owner", creator_name="owner",
        created_at=time.time(), misfire="skip",
    )  # fmt: skip


async def test_only_the_newest_runs_of_each_job_are_kept(tmp_path: Path) -> None:
    db = Database(tmp_path / "c.db")
    await db.open()
    try:
        store = CronStore(db)
        await store.setup()
        busy, quiet = await store.add(job("busy")), await store.add(job("quiet"))
        for n in range(7):
            await store.note_run(busy.id, None, "ok", f"run {n}")
        await store.note_run(quiet.id, None, "ok", "only run")
        assert await store.prune_runs(keep=3) == 4
        kept = [r.summary for r in await store.history(busy.id)]
        assert kept == ["run 6", "run 5", "run 4"]
        assert [r.summary for r in await store.history(quiet.id)] == ["only run"]
    finally:
        await db.close()


async def test_a_database_from_before_targets_without_a_chat_upgrades(tmp_path: Path) -> None:
    db = Database(tmp_path / "c.db")
    await db.open()
    try:
        await db.migrate("cron", MIGRATIONS[:1])  # the tables as PinClaw 0.1 made them
        async with db.write() as conn:
            await conn.execute(
                "INSERT INTO cron_jobs (name, schedule_kind, schedule_expr, timezone, action, "
                "payload, session_mode, target_kind, target_channel, target_chat, creator_id, "
                "creator_name, created_at, misfire) VALUES ('old', 'every', '3600', 'UTC', "
                "'agent', 'hi', 'isolated', 'chat', 'telegram', '7001', '7001', 'Ada', 0, 'skip')"
            )
            await conn.execute(
                "INSERT INTO cron_runs (job_id, started_at, ended_at, status, summary) "
                "VALUES (1, 1, 2, 'ok', 'sent')"
            )
        store = CronStore(db)
        await store.setup()
        old = await store.get(1)
        [ran] = await store.history(1)
        new = await store.add(_to_file(job("notes")))
        run_id = await store.start_run(new.id, None)
        await store.finish_run(run_id, "ok", "written", "file:notes/log.md")
        [written] = await store.history(new.id)
        assert await store.get(new.id) == new
    finally:
        await db.close()
    assert old is not None and old.target == Target("chat", "telegram", "7001", None, True, "")
    assert (ran.summary, ran.delivered_to) == ("sent", "")
    assert new.target == Target("file", path="notes/log.md")
    assert (written.summary, written.delivered_to) == ("written", "file:notes/log.md")


def _to_file(made: CronJob) -> CronJob:
    return replace(made, target=Target("file", path="notes/log.md"))
