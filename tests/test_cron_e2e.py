"""Scheduled jobs end to end: the real daemon, APScheduler, PTB and the fake Telegram.

Ada (7001) is the owner and talks to the bot in private. Each test drives what a
person would (a reminder asked for in the chat, a restart, a job added with
``pinclaw cron`` while the daemon runs) and checks what arrives in the chat, how
often, what the model was asked, and what the run history says.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.config import load_config
from bot.cron.service import CronService
from bot.cron.store import CronJob, JobRun, Target
from bot.daemon.main import Daemon
from tests.cli_helpers import run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, Fail, FakeLLM, Say, Stall
from tests.fake_telegram import FakeTelegram

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")


def telegram_table(telegram: FakeTelegram) -> dict[str, Any]:
    return {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [OWNER],
        "poll_timeout_s": 1,
    }


@asynccontextmanager
async def daemon_on(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **tables: Any
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Telegram (heartbeat off unless asked), once connected."""
    tables = {"heartbeat": {"interval": "0"}, **tables}
    async with running_daemon(
        tmp_path, llm, {"telegram": telegram_table(telegram)}, tables=tables
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def service(daemon: Daemon) -> CronService:
    assert daemon.scheduling is not None and daemon.scheduling.service is not None
    return daemon.scheduling.service


async def said(telegram: FakeTelegram, text: str) -> None:
    """Wait until the bot has said ``text`` to Ada."""
    await telegram.await_until(lambda: any(m.text == text for m in telegram.sent(OWNER)) or None)


async def runs_of(daemon: Daemon, job_id: int, count: int) -> list[JobRun]:
    """The job's finished runs, oldest first, once there are ``count`` of them."""
    store = service(daemon).store

    async def finished() -> list[JobRun]:
        return [r for r in reversed(await store.history(job_id)) if r.status != "running"]

    for _ in range(1500):
        found = await finished()
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"job #{job_id} has {await finished()} runs, wanted {count}")


def texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.sent(OWNER)]


def add_reminder(after: str = "1s", name: str = "oven") -> CallTools:
    return CallTools(
        [
            (
                "cron_add",
                {
                    "name": name,
                    "schedule_kind": "after",
                    "schedule": after,
                    "prompt": "Remind the user to check the oven.",
                },
            )
        ]
    )


async def test_a_reminder_made_in_the_chat_arrives_there_once_and_is_remembered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(
        add_reminder(),
        Say("I will remind you."),
        Say("⏰ Time to check the oven!"),
        Say("I reminded you to check the oven."),
    )
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "remind me in a second to check the oven")
        await said(telegram, "⏰ Time to check the oven!")
        [ran] = await runs_of(daemon, 1, 1)
        telegram.user_sends(OWNER, ADA, "what did you remind me about?")
        await said(telegram, "I reminded you to check the oven.")
        job = await service(daemon).store.get(1)
    assert texts(telegram) == [
        "I will remind you.",
        "⏰ Time to check the oven!",
        "I reminded you to check the oven.",
    ]
    assert "Scheduled #1 oven: once at " in llm.tool_results()[0]
    reminder = llm.requests[2].view
    assert "Remind the user to check the oven." in reminder.last_text
    assert "scheduled job 'oven'" in reminder.system and "NO_REPLY" in reminder.system
    assert "⏰ Time to check the oven!" in str(llm.requests[3].body["messages"])
    assert (ran.status, ran.summary) == ("ok", "⏰ Time to check the oven!")
    assert job is not None and (job.state, job.next_run) == ("done", None)
    assert job.target == Target("chat", "telegram", str(OWNER), None, True)


async def test_a_reminder_due_during_a_restart_arrives_once_after_it(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(add_reminder("2s"), Say("I will remind you."))
    async with daemon_on(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "remind me in 2 seconds to check the oven")
        await said(telegram, "I will remind you.")
    await asyncio.sleep(2.5)  # the daemon is down when the reminder is due
    llm.queue(Say("⏰ Oven!"))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        await said(telegram, "⏰ Oven!")
        runs = await runs_of(daemon, 1, 1)
        await service(daemon).drain()
        job = await service(daemon).store.get(1)
    assert texts(telegram) == ["I will remind you.", "⏰ Oven!"]
    assert [r.status for r in runs] == ["ok"]
    assert runs[0].scheduled_for is not None and runs[0].scheduled_for < runs[0].started_at
    assert job is not None and job.state == "done"


async def test_missed_runs_follow_each_jobs_misfire_policy(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        store = service(daemon).store
        now = time.time()
        for name, misfire, missed_at in (
            ("recent", "run_once", now - 300),  # within the 1 h grace: one catch-up
            ("stale", "run_once", now - 3 * 3600 - 600),  # beyond the grace: skipped
            ("strict", "skip", now - 300),  # never caught up
        ):
            job = await store.add(hourly(name, misfire, anchor=missed_at))
            await store.update(job.id, next_run=missed_at)
    llm.queue(Say("Caught up."))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        await said(telegram, "Caught up.")
        recent, stale, strict = [await runs_of(daemon, i, 1) for i in (1, 2, 3)]
        jobs = await service(daemon).store.jobs()
    assert [r.status for r in recent] == ["ok"]
    assert [(r.status, r.summary) for r in stale] == [
        ("skipped", "3 run(s) missed: PinClaw was not running; more than 60 min ago "
         "(misfire policy run_once)")
    ]  # fmt: skip
    assert [r.status for r in strict] == ["skipped"] and "policy skip" in strict[0].summary
    assert len(llm.requests) == 1 and texts(telegram) == ["Caught up."]
    assert all(j.next_run is not None and j.next_run > time.time() for j in jobs)


def hourly(name: str, misfire: str, anchor: float) -> CronJob:
    """A job that asks the agent something every hour from ``anchor``, for Ada's chat."""
    return CronJob(
        id=0,
        name=name,
        schedule_kind="every",
        schedule_expr="3600",
        timezone="UTC",
        anchor=anchor,
        action="agent",
        payload="Say hello.",
        session_mode="isolated",
        target=Target("chat", "telegram", str(OWNER)),
        creator_id=str(OWNER),
        creator_name="Ada",
        created_at=time.time(),
        misfire=misfire,  # type: ignore[arg-type]
    )


async def test_no_reply_is_not_delivered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(add_reminder(), Say("Set."), Say("NO_REPLY"))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "check the oven in a second, tell me only if needed")
        [ran] = await runs_of(daemon, 1, 1)
    assert ran.status == "quiet" and texts(telegram) == ["Set."]


async def test_a_job_turn_cannot_make_jobs(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(add_reminder(), Say("Set."), add_reminder(name="again"), Say("Reminder!"))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "remind me")
        await said(telegram, "Reminder!")
        jobs = await service(daemon).store.jobs()
    assert "a scheduled job or heartbeat cannot create jobs" in llm.tool_results()[-1]
    assert [j.name for j in jobs] == ["oven"]


async def test_a_failing_job_backs_off_then_pauses_and_alerts_the_owner_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(add_reminder(), Say("Set."), Fail(500), Fail(500))
    cron = {"max_failures": 2, "retry_after_s": 0.2}
    async with daemon_on(tmp_path, llm, telegram, cron=cron) as daemon:
        telegram.user_sends(OWNER, ADA, "remind me")
        runs = await runs_of(daemon, 1, 2)
        await telegram.await_until(lambda: len(telegram.sent(OWNER)) == 2 or None)
        await asyncio.sleep(0.5)  # a third run would have started by now
        job = await service(daemon).store.get(1)
    assert [r.status for r in runs] == ["failed", "failed"]
    assert len(llm.requests) == 4
    alert = texts(telegram)[1]
    assert "job #1 'oven' failed 2 times in a row, so I paused it" in alert
    assert "pinclaw cron resume 1" in alert and "Traceback" not in alert
    assert job is not None and (job.state, job.failures) == ("paused", 2)


async def test_the_cli_adds_a_shell_job_the_running_daemon_picks_up(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = write_config(
        home,
        f'[general]\ndata_dir = "{home / "state"}"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        f'[heartbeat]\ninterval = "0"\n'
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"allowed_users = [{OWNER}]\npoll_timeout_s = 1\n",
    )
    async with Daemon.open(load_config(config)) as daemon:
        await daemon.start()
        assert await daemon.channels["telegram"].status.wait_connected(30)
        added = await asyncio.to_thread(
            run, home, "cron", "add", "greet", "--after", "1s",
            "--command", "echo hello from cron", "--to", f"telegram:{OWNER}",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        await telegram.await_until(lambda: telegram.sent(OWNER) or None)
        [ran] = await runs_of(daemon, 1, 1)
    listed = await asyncio.to_thread(run, home, "cron", "list")
    history = await asyncio.to_thread(run, home, "cron", "history", "1")
    assert added.stdout.startswith("Added #1 greet: once at ")
    [sent] = texts(telegram)
    assert "greet" in sent and "hello from cron" in sent and "<untrusted" not in sent
    assert ran.status == "ok" and not llm.requests
    assert listed.stdout.startswith("#1 greet [done]: once at ")
    assert " job #1 ok " in history.stdout
    removed = await asyncio.to_thread(run, home, "cron", "remove", "1")
    assert removed.stdout == "Removed job #1 'greet'.\n"
    missing = await asyncio.to_thread(run, home, "cron", "run", "1")
    assert missing.returncode == 1 and "there is no job #1" in missing.stderr


async def test_the_heartbeat_is_quiet_when_all_is_well_and_speaks_when_not(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    workspace = tmp_path / "state" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "HEARTBEAT.md").write_text("# Heartbeat\n- Check the greenhouse.\n")
    llm.queue(Say("HEARTBEAT_OK"), Say("All fine. HEARTBEAT_OK"), Say("The greenhouse is at 3 °C."))
    async with daemon_on(tmp_path, llm, telegram, heartbeat={"interval": "1s"}):
        await said(telegram, "The greenhouse is at 3 °C.")
    assert texts(telegram) == ["The greenhouse is at 3 °C."]
    assert "- Check the greenhouse." in llm.requests[0].view.last_text
    assert "HEARTBEAT_OK" in llm.requests[0].view.system


async def test_a_heartbeat_with_no_tasks_makes_no_model_call(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="bot.cron.heartbeat")
    async with daemon_on(tmp_path, llm, telegram, heartbeat={"interval": "1s"}):
        for _ in range(500):
            skipped = [r for r in caplog.records if "no tasks in HEARTBEAT.md" in r.getMessage()]
            if len(skipped) >= 2:
                break
            await asyncio.sleep(0.02)
    assert len(skipped) >= 2
    assert not llm.requests and not telegram.sent(OWNER)
    assert "With no tasks here" in (tmp_path / "state" / "workspace" / "HEARTBEAT.md").read_text()


async def test_a_heartbeat_skips_while_the_chat_is_busy(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="bot.cron.heartbeat")
    llm.queue(Stall(2.5, Say("Long answer.")), Say("Greenhouse is cold."))
    async with daemon_on(tmp_path, llm, telegram, heartbeat={"interval": "1s"}):
        telegram.user_sends(OWNER, ADA, "think hard")
        await asyncio.to_thread(llm.wait_requests, 1)  # Ada's turn is running
        (tmp_path / "state" / "workspace" / "HEARTBEAT.md").write_text("- Check the greenhouse.\n")
        await said(telegram, "Greenhouse is cold.")
    busy = [r for r in caplog.records if "the chat is busy" in r.getMessage()]
    assert busy and texts(telegram) == ["Long answer.", "Greenhouse is cold."]


async def test_a_job_command_that_needs_approval_asks_in_the_jobs_chat(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    add = CallTools(
        [("cron_add", {"name": "build", "schedule_kind": "after", "schedule": "1s",
                       "command": "mkdir build"})]
    )  # fmt: skip
    llm.queue(add, Say("Scheduled."))
    async with daemon_on(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "make a build folder in a second")
        made = await telegram.await_until(lambda: next(iter(telegram.sent(OWNER)), None))
        assert made.buttons  # making the job asked first: mkdir changes files
        once = next(b["callback_data"] for b in made.buttons if b["callback_data"].endswith("once"))
        telegram.user_presses(OWNER, ADA, made.message_id, once)
        await said(telegram, "Scheduled.")
        asked = await telegram.await_until(
            lambda: next((m for m in telegram.sent(OWNER)[2:] if m.buttons), None)
        )
        once = next(
            b["callback_data"] for b in asked.buttons if b["callback_data"].endswith("once")
        )
        telegram.user_presses(OWNER, ADA, asked.message_id, once)
        [ran] = await runs_of(daemon, 1, 1)
    assert "Approval needed for cron_add" in made.text and "mkdir build" in made.text
    assert "Approval needed for shell" in asked.text
    assert "Asked by the scheduled job build" in asked.text
    assert ran.status == "ok" and (tmp_path / "state" / "workspace" / "build").is_dir()
    assert "exit code 0" in texts(telegram)[-1]
