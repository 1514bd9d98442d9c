"""The job store's housekeeping: run history stays bounded per job."""

from __future__ import annotations

import time
from pathlib import Path

from bot.cron.store import CronJob, CronStore, Target
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
