"""The scheduler: PinClaw's job rows, registered with APScheduler in the daemon's loop.

At start, runs left "running" by a stop are marked interrupted, and every job
whose next run passed while PinClaw was down is settled by its misfire policy:
one catch-up run (spread out, after the channels connect) or a skip, either
way written to the history. Then each active job gets an APScheduler job. The
rows stay the truth: a poll notices changes made by ``pinclaw cron`` or the
tools and brings the scheduler in line. A failing job is retried with growing
pauses; after ``max_failures`` in a row it is paused and the owner told once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger

from bot.config.schedule import CronConfig
from bot.core.delivery import SEND_GRACE_S, finish_or_cut
from bot.core.errors import UserError, log_bug
from bot.cron.jobs import schedule_of
from bot.cron.outbox import Outbox
from bot.cron.runs import JobRunner, RunOutcome
from bot.cron.schedule import make_trigger, misfire_decision, next_run, runs_between
from bot.cron.store import CronJob, CronStore, RunStatus

log = logging.getLogger(__name__)

POLL_S = 2.0
MAX_RETRY_S = 3600.0


class CronService:
    """Keeps APScheduler in step with the stored jobs and runs them."""

    def __init__(
        self,
        *,
        store: CronStore,
        runner: JobRunner,
        outbox: Outbox,
        settings: CronConfig,
        scheduler: AsyncIOScheduler,
        poll_s: float = POLL_S,
    ) -> None:
        self._store = store
        self._runner = runner
        self._outbox = outbox
        self._settings = settings
        self._scheduler = scheduler
        self._poll_s = poll_s
        self._registered: dict[int, tuple[object, ...]] = {}
        self._running: set[int] = set()
        self._catching_up: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._version = -1
        self._started = False

    @property
    def store(self) -> CronStore:
        """The job store this service runs."""
        return self._store

    async def start(self) -> None:
        """Settle missed runs, register every active job, and start watching for changes."""
        if self._started:
            return
        self._started = True
        interrupted = await self._store.interrupt_running()
        if interrupted:
            log.warning("%d job run(s) were interrupted by the last stop", interrupted)
        await self._store.prune_runs()
        await self._catch_up()
        await self.sync()
        self._spawn(self._watch(), "cron watch")
        log.info("scheduler started with %d active job(s)", len(self._registered))

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop firing jobs; give runs in progress ``grace_s`` to deliver, then cancel them."""
        if not self._started:
            return
        self._started = False
        for job_id in list(self._registered):
            self._unregister(job_id)
        runs = [t for t in self._tasks if t.get_name().startswith("cron job")]
        if runs and grace_s > 0:
            await asyncio.wait(runs, timeout=grace_s)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def sync(self) -> None:
        """Bring APScheduler in line with the stored jobs (added, removed, paused, run now)."""
        self._version = await self._store.version()
        jobs = {job.id: job for job in await self._store.jobs()}
        for job_id in list(self._registered):
            job = jobs.get(job_id)
            if (
                job is None
                or job.state != "active"
                or _fingerprint(job) != self._registered[job_id]
            ):
                self._unregister(job_id)
        for job in jobs.values():
            if job.run_requested:
                await self._store.update(job.id, run_requested=0)
                self._spawn(self._run(job, None, "run on request"), f"cron job {job.id}")
            if job.state == "active" and job.id not in self._registered:
                self._register(job)
        self._version = await self._store.version()

    async def run_now(self, job_id: int) -> bool:
        """Run a job at once (outside its schedule); False if there is no such job."""
        job = await self._store.get(job_id)
        if job is None:
            return False
        self._spawn(self._run(job, None, "run on request"), f"cron job {job.id}")
        return True

    async def drain(self) -> None:
        """Wait for the runs in progress (tests, shutdown)."""
        while runs := [t for t in self._tasks if t.get_name().startswith("cron job")]:
            await asyncio.gather(*runs, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                if await self._store.version() != self._version:
                    await self.sync()
            except Exception as exc:
                log_bug(log, "checking for changed jobs failed", exc)

    async def _catch_up(self) -> None:
        now = datetime.now(UTC)
        grace = timedelta(seconds=self._settings.misfire_grace_s)
        catch_ups = 0
        for job in await self._store.jobs():
            if job.state != "active" or job.next_run is None or job.next_run > now.timestamp():
                continue
            schedule = schedule_of(job)
            first = datetime.fromtimestamp(job.next_run, UTC)
            missed = [first, *runs_between(schedule, first, now)]
            latest = missed[-1]
            upcoming = next_run(schedule, now)
            decision = misfire_decision(job.misfire, latest, now, grace)
            skipped = len(missed) - (1 if decision == "run" else 0)
            if skipped:
                why = "PinClaw was not running" + (
                    f"; more than {self._settings.misfire_grace_s / 60:.0f} min ago"
                    if job.misfire == "run_once"
                    else ""
                )
                await self._store.note_run(
                    job.id, latest.timestamp(), "skipped",
                    f"{skipped} run(s) missed: {why} (misfire policy {job.misfire})",
                )  # fmt: skip
            if upcoming is None and decision == "skip":
                await self._store.update(job.id, state="done", next_run=None)
                continue
            if upcoming is not None:
                await self._store.update(job.id, next_run=upcoming.timestamp())
            if decision == "run":
                self._catching_up.add(job.id)
                delay = catch_ups * self._settings.catchup_spacing_s
                catch_ups += 1
                log.info("job #%d %r missed a run while down; catching up", job.id, job.name)
                self._spawn(
                    self._later(delay, job, latest.timestamp(), "catch-up"), f"cron job {job.id}"
                )

    async def _later(self, delay: float, job: CronJob, scheduled_for: float, why: str) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            fresh = await self._store.get(job.id)
            if fresh is not None and fresh.state == "active":
                await self._run(fresh, scheduled_for, why)
        finally:
            self._catching_up.discard(job.id)

    def _register(self, job: CronJob) -> None:
        if job.next_run is None:
            return
        if job.id in self._catching_up:
            return  # its catch-up run is on the way
        # A one-off job fires at its stored time (a retry may have moved it); one that
        # is already due (added while its time passed) fires at once.
        when = datetime.fromtimestamp(job.next_run, UTC)
        one_off = job.schedule_kind == "at"
        self._scheduler.add_job(
            self._fire,
            trigger=DateTrigger(when) if one_off else make_trigger(schedule_of(job)),
            args=(job.id,),
            id=str(job.id),
            name=job.name,
            next_run_time=when,
            misfire_grace_time=None,
            coalesce=True,
            max_instances=1,
            replace_existing=True,
        )
        self._registered[job.id] = _fingerprint(job)

    def _unregister(self, job_id: int) -> None:
        self._registered.pop(job_id, None)
        for aps_id in (str(job_id), f"{job_id}:retry"):
            if self._scheduler.get_job(aps_id) is not None:
                self._scheduler.remove_job(aps_id)

    async def _fire(self, job_id: int) -> None:
        """Called by APScheduler: start the run and return (runs are tracked here)."""
        job = await self._store.get(job_id)
        if job is None or job.state != "active":
            return
        self._spawn(self._run(job, job.next_run, "schedule"), f"cron job {job_id}")

    async def _run(self, job: CronJob, scheduled_for: float | None, why: str) -> None:
        if job.id in self._running:
            await self._store.note_run(
                job.id, scheduled_for, "skipped", "the previous run was still going"
            )
            return
        self._running.add(job.id)
        run_id = await self._store.start_run(job.id, scheduled_for)
        log.info("job #%d %r runs (%s)", job.id, job.name, why)
        outcome = RunOutcome("failed", "")
        delivering: asyncio.Future[RunOutcome] | None = None
        extra = scheduled_for is None and why != "catch-up"
        try:
            prepared = await self._runner.prepare(job)
            delivering = asyncio.ensure_future(self._runner.deliver(job, prepared))
            outcome = await asyncio.shield(delivering)
        except asyncio.CancelledError:
            # Stopping: a message under way gets a moment to go out and its run to be
            # recorded as done, so the catch-up after the start does not send it again.
            if delivering is not None:
                await finish_or_cut(delivering, SEND_GRACE_S)
            if delivering is not None and _delivered(delivering):
                await asyncio.shield(self._record(job, run_id, delivering.result(), extra))
            else:
                await asyncio.shield(
                    self._store.finish_run(run_id, "interrupted", "stopped before it finished")
                )
            raise
        except UserError as exc:
            outcome = RunOutcome("failed", str(exc))
        except Exception as exc:
            error_id = log_bug(log, f"job #{job.id}", exc)
            outcome = RunOutcome("failed", f"something went wrong (error id {error_id})")
        finally:
            self._running.discard(job.id)
        await self._record(job, run_id, outcome, extra)

    async def _record(self, job: CronJob, run_id: int, outcome: RunOutcome, extra: bool) -> None:
        """Write how a run went to its history and advance the job."""
        status, summary, delivered_to = outcome.status, outcome.summary, outcome.delivered_to
        await self._store.finish_run(run_id, status, summary, delivered_to)
        if status != "failed":  # failures are logged with their reason below
            to = f", to {delivered_to}" if delivered_to else ""
            log.info("job #%d %r finished: %s%s", job.id, job.name, status, to)
        await self._after(job, status, summary, extra)

    async def _after(self, job: CronJob, status: RunStatus, summary: str, extra: bool) -> None:
        """Advance the job after a run: next time, done, retry, or paused."""
        fresh = await self._store.get(job.id)
        if fresh is None:
            return  # removed while it ran
        aps = self._scheduler.get_job(str(job.id))
        upcoming = aps.next_run_time.timestamp() if aps is not None else None
        if status != "failed":
            if fresh.schedule_kind == "at" and not extra:
                await self._store.update(job.id, state="done", next_run=None, failures=0,
                                         last_run=time.time())  # fmt: skip
            else:
                await self._store.update(job.id, failures=0, last_run=time.time(),
                                         next_run=upcoming or fresh.next_run)  # fmt: skip
            return
        failures = fresh.failures + 1
        log.warning("job #%d %r failed (%d in a row): %s", job.id, job.name, failures, summary)
        if failures >= self._settings.max_failures:
            await self._store.update(job.id, failures=failures, state="paused")
            self._unregister(job.id)
            await self._outbox.alert_owner(
                f"⚠️ The scheduled job #{job.id} '{job.name}' failed {failures} times in a row, "
                f"so I paused it. Last problem: {summary}\n"
                f"Resume it with `pinclaw cron resume {job.id}` once that is fixed."
            )
            return
        pause = min(self._settings.retry_after_s * 2 ** (failures - 1), MAX_RETRY_S)
        retry_at = time.time() + pause
        log.info("job #%d will be retried in %.0f s", job.id, pause)
        if fresh.schedule_kind == "at":
            await self._store.update(job.id, failures=failures, next_run=retry_at)
            self._unregister(job.id)
            self._register(replace(fresh, failures=failures, next_run=retry_at))
            return
        await self._store.update(job.id, failures=failures, last_run=time.time())
        if upcoming is not None and upcoming <= retry_at:
            return  # the next regular run comes first
        self._scheduler.add_job(
            self._fire,
            trigger=DateTrigger(datetime.fromtimestamp(retry_at, UTC)),
            args=(job.id,),
            id=f"{job.id}:retry",
            replace_existing=True,
            misfire_grace_time=None,
        )

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _delivered(delivering: asyncio.Future[RunOutcome]) -> bool:
    """Whether a run's delivery ended with its message delivered (or nothing to send)."""
    return delivering.done() and not delivering.cancelled() and delivering.exception() is None


def _fingerprint(job: CronJob) -> tuple[object, ...]:
    """What, when changed, means the APScheduler job must be replaced."""
    return (job.schedule_kind, job.schedule_expr, job.timezone, job.anchor, job.state)
