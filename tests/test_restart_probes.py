"""Probes of "no message lost, none sent twice" across stops, restarts and crashes.

Each test stops, kills or restarts the real daemon (in-process through ``Daemon.open``,
or ``pinclaw run`` when a signal matters) while something is on its way out: a reply,
a job's or the heartbeat's message, an approval and the tap on it, a streamed draft,
the answer to a button press. After the stop no task of that daemon may still run
(``leftover_tasks``), and after the restart the person has each answer exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from aiohttp import web

from bot.config.schedule import CronConfig
from bot.cron.jobs import JobRequest, build_job
from bot.cron.service import CronService
from bot.cron.store import CronJob, Target
from bot.daemon.main import Daemon
from tests.channel_tables import discord_table, slack_table, telegram_table
from tests.daemon_harness import DaemonProcess, running_daemon, telegram_run_config, wait_until
from tests.fake_discord import FakeDiscord
from tests.fake_llm import CallTools, FakeLLM, Hold, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.telegram_taps import button, request_in, tap
from tests.trigger_harness import OWNER, texts, until

ANSWER = "Here is your answer."
BEN = 7002


@dataclass
class Chat:
    """One platform on its fake: how the person writes, what the bot said there, an outage."""

    name: str
    table: dict[str, Any]
    send: Callable[[str], object]
    replies: Callable[[], list[str]]
    outage: Callable[[bool], None]


@pytest.fixture(params=["telegram", "discord", "slack"])
def chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    """Each chat platform whose fake can be made unreachable."""
    name = request.param
    if name == "telegram":
        with FakeTelegram.running() as telegram:
            yield Chat(
                name,
                telegram_table(telegram),
                lambda text: telegram.user_sends(OWNER, telegram.user(OWNER), text),
                lambda: [m.text for m in telegram.sent(OWNER)],
                telegram.unreachable,
            )
    elif name == "discord":
        with FakeDiscord.running(heartbeat_interval=1.0) as discord:
            dm = discord.dm_channel(discord.owner)["id"]
            yield Chat(
                name,
                discord_table(discord),
                lambda text: discord.user_sends(dm, discord.owner, text),
                lambda: [m["content"] for m in discord.sent(dm)],
                discord.unreachable,
            )
    else:
        with FakeSlack.running() as slack:
            yield Chat(
                name,
                slack_table(slack),
                lambda text: slack.user_sends(ALICE_DM, ALICE, text),
                lambda: [m["text"] for m in slack.sent(ALICE_DM)],
                slack.unreachable,
            )


def leftover_tasks() -> list[str]:
    """The tasks still alive besides this test's own (discord.py's ready wait and queue
    reads are the library's)."""
    current = asyncio.current_task()
    left = []
    for task in asyncio.all_tasks():
        if task is current or task.done():
            continue
        text = repr(task.get_coro())
        if "_delay_ready" in text or "Queue.get" in text:
            continue
        left.append(f"{task.get_name()}: {text}")
    return left


def jobs(daemon: Daemon) -> CronService:
    """The daemon's scheduled-job service."""
    assert daemon.scheduling is not None and daemon.scheduling.service is not None
    return daemon.scheduling.service


def daemon_knows(daemon: Daemon, ref: str) -> bool:
    """Whether the approval request posted as ``ref`` is recorded (a press before that is
    refused as misrouted)."""
    with closing(sqlite3.connect(daemon.app.db.path)) as db:
        found = db.execute("SELECT 1 FROM approvals WHERE message_ref = ?", (ref,))
        return found.fetchone() is not None


def logged(caplog: pytest.LogCaptureFixture, needle: str) -> Callable[[], bool]:
    """A condition for ``until``: a log line holding ``needle`` has been written."""
    return lambda: any(needle in record.getMessage() for record in caplog.records)


async def send_fails_once(
    llm: FakeLLM,
    gate: threading.Event,
    outage: Callable[[bool], object],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the model is asked: the chat goes down, the model answers (``gate``), and the
    first send fails, so it waits to retry when the daemon stops."""
    await asyncio.to_thread(llm.wait_requests, 1)
    outage(True)
    gate.set()
    await until(logged(caplog, "; retry 1 in"))


def reminder() -> CronJob:
    """A one-off agent job for Ada's Telegram chat, due in a second."""
    request = JobRequest(
        "oven", "after", "1s", "agent", "Remind me of the oven.",
        Target("chat", "telegram", str(OWNER), None, True),
    )  # fmt: skip
    zone = ZoneInfo("UTC")
    return build_job(
        request, creator_id=str(OWNER), creator_name="Ada", settings=CronConfig(), zone=zone
    )


MKDIR = CallTools([("shell", {"command": "mkdir build"})])


def showing(telegram: FakeTelegram) -> list[str]:
    """What Ada's chat shows of the bot now (deleted messages gone)."""
    return [m.text for m in telegram.sent(OWNER) if not m.deleted]


async def closed(telegram: FakeTelegram, request: SentMessage) -> SentMessage:
    """The request once it is edited into a record without buttons (waited for)."""

    def record() -> SentMessage | None:
        now = next(m for m in telegram.sent(OWNER) if m.message_id == request.message_id)
        return now if now.edits and not now.buttons else None

    return await telegram.await_until(record)


def inbound_statuses(home: Path) -> list[str]:
    """The status of each stored inbound message of ``pinclaw run`` in ``home``."""
    with closing(sqlite3.connect(home / ".pinclaw" / "pinclaw.db")) as db:
        return [row[0] for row in db.execute("SELECT status FROM inbound ORDER BY id")]


class LateAnswers(FakeTelegram):
    """The fake Telegram, whose answers to sendMessage wait for ``release`` while ``hold``
    is on: the message is delivered at once, the bot hears so only later."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.release = threading.Event()

    async def _api(self, request: web.Request, token: str, method: str) -> web.StreamResponse:
        answer = await super()._api(request, token, method)
        if self.hold and method.lower() == "sendmessage":
            await asyncio.to_thread(self.release.wait, 10)
        return answer


async def test_a_chat_reply_retrying_at_the_stop_arrives_once_after_the_restart(
    tmp_path: Path, llm: FakeLLM, chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply whose send keeps failing (chat unreachable) when the daemon stops."""
    caplog.set_level(logging.INFO)
    gate = threading.Event()
    llm.queue(Hold(gate, Say("never delivered")), Say(ANSWER))
    channels = {chat.name: chat.table}
    async with running_daemon(tmp_path, llm, channels) as daemon:
        assert await daemon.channels[chat.name].status.wait_connected(30)
        chat.send("what is the answer?")
        await send_fails_once(llm, gate, chat.outage, caplog)
    assert leftover_tasks() == []
    assert chat.replies() == []
    chat.outage(False)
    async with running_daemon(tmp_path, llm, channels) as daemon:
        await until(chat.replies, 20)
        await daemon.router.drain()
        await asyncio.sleep(0.5)
    assert chat.replies() == [ANSWER]


async def test_a_job_whose_delivery_retries_at_the_stop_arrives_once_after_the_restart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """A cron job's message waiting to retry (chat unreachable) when the daemon stops."""
    caplog.set_level(logging.INFO)
    gate = threading.Event()
    llm.queue(Hold(gate, Say("never delivered")), Say("⏰ The oven!"))
    channels = {"telegram": telegram_table(telegram)}
    tables = {"heartbeat": {"interval": "0"}}
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        cron = jobs(daemon)
        await cron.store.add(reminder())
        await cron.sync()
        await send_fails_once(llm, gate, telegram.unreachable, caplog)
    assert leftover_tasks() == []
    assert texts(telegram) == []
    telegram.unreachable(False)
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        await until(lambda: texts(telegram), 20)
        await jobs(daemon).drain()
        await asyncio.sleep(0.5)
        runs = await jobs(daemon).store.history(1)
        job = await jobs(daemon).store.get(1)
    assert texts(telegram) == ["⏰ The oven!"]
    assert [r.status for r in reversed(runs)] == ["interrupted", "ok"]
    assert job is not None and job.state == "done"


async def test_a_heartbeat_message_retrying_at_the_stop_is_never_sent_twice(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat's finding waiting to retry (chat unreachable) when the daemon stops."""
    caplog.set_level(logging.INFO)
    workspace = tmp_path / "state" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "HEARTBEAT.md").write_text("- Check the greenhouse.\n")
    gate = threading.Event()
    llm.queue(Hold(gate, Say("The greenhouse is cold.")))
    channels = {"telegram": telegram_table(telegram)}
    beat = {"interval": "1s", "target": f"telegram:{OWNER}"}
    async with running_daemon(tmp_path, llm, channels, tables={"heartbeat": beat}) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        await send_fails_once(llm, gate, telegram.unreachable, caplog)
    assert leftover_tasks() == []
    assert texts(telegram) == []
    telegram.unreachable(False)
    (workspace / "HEARTBEAT.md").write_text("# Heartbeat\n")  # nothing more to check
    await asyncio.sleep(2.5)  # a send of the first daemon would have come by now
    assert texts(telegram) == []


async def test_a_tap_after_the_stop_cut_its_turn_runs_nothing_and_is_not_asked_again(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """An approval tapped while the daemon stops, after the turn that asked was cut."""
    ada = telegram.user(OWNER)
    llm.queue(MKDIR, Say("Done."))
    channels = {"telegram": telegram_table(telegram)}
    async with running_daemon(tmp_path, llm, channels) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, ada, "make a build folder")
        request = await request_in(telegram, OWNER)
        await daemon.router.shutdown(0.1)  # stopping: the turn is cut, the channel still up
        late = await tap(telegram, OWNER, ada, button(request, "once"), request.message_id)
        record = await closed(telegram, request)
    assert leftover_tasks() == []
    async with running_daemon(tmp_path, llm, channels) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        again = await tap(telegram, OWNER, ada, button(request, "once"), request.message_id)
        await daemon.router.drain()
    assert "nothing ran" in late["text"] and "Allowed" not in late["text"]
    assert "Expired" in record.text and "its turn was stopped" in record.text
    assert again["text"] == "Already decided: expired."
    assert [m.message_id for m in telegram.sent(OWNER)] == [request.message_id]  # asked once
    assert len(llm.requests) == 1  # the cut turn was not run again
    assert not (tmp_path / "state" / "workspace" / "build").exists()


async def test_a_stop_while_a_slow_model_streams_is_prompt_and_the_answer_comes_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """A stop while the model writes its reply slowly into a streamed draft."""
    slow = Say("one two three four five six seven eight nine ten", pieces=10, pause_s=0.5)
    llm.queue(slow, Say(ANSWER))
    channels = {"telegram": telegram_table(telegram)}
    tables = {"agent": {"stream": True}}
    grace_s = 1.0
    loop = asyncio.get_running_loop()
    async with running_daemon(
        tmp_path, llm, channels, tables=tables, shutdown_grace_s=grace_s
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, telegram.user(OWNER), "count to ten, slowly")
        [draft] = await until(lambda: telegram.sent(OWNER), 10)  # the first words show
        stopping = loop.time()
    took = loop.time() - stopping
    assert took <= grace_s + 2.0, f"the stop took {took:.1f} s"
    assert leftover_tasks() == []
    assert showing(telegram) == []  # the half-written draft was taken back
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        await until(lambda: showing(telegram), 20)
        await daemon.router.drain()
    assert showing(telegram) == [ANSWER]
    assert [m.message_id for m in telegram.sent(OWNER) if m.deleted] == [draft.message_id]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_signal_while_the_reply_retries_leaves_it_for_one_answer_after_the_restart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, signum: signal.Signals
) -> None:
    """SIGTERM, or SIGKILL, to ``pinclaw run`` while its reply's sendMessage is retrying."""
    grace_s = 1.0
    gate = threading.Event()
    llm.queue(Hold(gate, Say("never delivered")), Say(ANSWER))
    home = tmp_path / "home"
    config = (
        telegram_run_config(llm, telegram, OWNER).replace(
            "shutdown_grace_s = 0.5", f"shutdown_grace_s = {grace_s}"
        )
        + "\n[agent]\nstream = false\n"
    )
    first = DaemonProcess(home, config).start()
    try:
        first.wait_log("telegram connected as")
        update = telegram.user_sends(OWNER, telegram.user(OWNER), "what is the answer?")
        llm.wait_requests(1)
        telegram.wait_confirmed(update)
        telegram.unreachable(True)
        gate.set()
        first.wait_log("; retry 1 in")
        assert first.proc is not None
        started = time.monotonic()
        first.proc.send_signal(signum)
        code = first.proc.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        first.kill()
    if signum == signal.SIGTERM:
        assert code == 0, first.log()
        assert took <= grace_s + 2.0, f"stopped in {took:.1f} s\n{first.log()}"
    assert inbound_statuses(home) == ["pending"]
    assert texts(telegram) == []
    telegram.unreachable(False)
    second = DaemonProcess(home, config).start()
    try:
        wait_until(lambda: inbound_statuses(home) == ["answered"], timeout=20)
        assert second.terminate() == 0, second.log()
    finally:
        second.kill()
    assert texts(telegram) == [ANSWER]
    assert "left unanswered before the restart" in second.log()


async def test_a_slack_press_answer_retrying_at_the_stop_does_not_outlive_it(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A Slack approval tap whose answer to the presser is retrying when the daemon stops."""
    caplog.set_level(logging.INFO)
    llm.queue(MKDIR, Say("Done."))
    with FakeSlack.running() as slack:
        async with running_daemon(tmp_path, llm, {"slack": slack_table(slack)}) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(30)
            slack.user_sends(ALICE_DM, ALICE, "make a build folder")
            await slack.await_until(lambda: any(m.get("blocks") for m in slack.sent(ALICE_DM)))
            request = slack.sent(ALICE_DM)[0]
            once = next(
                e["action_id"]
                for b in request["blocks"] if b["type"] == "actions"
                for e in b["elements"] if e["action_id"].endswith(":once")
            )  # fmt: skip
            await until(lambda: daemon_knows(daemon, request["ts"]))
            slack.unreachable(True)  # the socket stays up: the press comes, answers cannot go
            slack.user_presses(ALICE, once, channel=ALICE_DM)
            await until(logged(caplog, "button press failed"))
        assert leftover_tasks() == []
        slack.unreachable(False)
        await asyncio.sleep(1.5)  # a press left running would answer now
        assert slack.ephemerals() == []


async def test_a_discord_press_answer_retrying_at_the_stop_does_not_outlive_it(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A Discord approval tap whose answer to the tapper is retrying when the daemon stops."""
    caplog.set_level(logging.INFO)
    llm.queue(MKDIR, Say("Done."))
    with FakeDiscord.running(heartbeat_interval=1.0) as discord:
        dm = discord.dm_channel(discord.owner)["id"]
        async with running_daemon(tmp_path, llm, {"discord": discord_table(discord)}) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(30)
            discord.user_sends(dm, discord.owner, "make a build folder")
            await discord.await_until(lambda: any(m["components"] for m in discord.sent(dm)))
            request = next(m for m in discord.sent(dm) if m["components"])
            await until(lambda: daemon_knows(daemon, request["id"]))
            once = next(
                b["custom_id"]
                for b in request["components"][0]["components"]
                if b["custom_id"].endswith(":once")
            )
            discord.fail("POST", r"^/webhooks/", 500, times=None)  # the answers cannot go
            discord.user_presses(once, request, discord.owner)
            await discord.await_call("POST", r"^/webhooks/")  # refused; discord.py retries
        assert leftover_tasks() == []
        discord.clear_faults()
        await asyncio.sleep(1.5)  # a press left running would answer now
        with discord.world.lock:
            answers = [m for m in discord.world.messages.values() if m.get("interaction_metadata")]
        assert answers == []


async def test_a_reply_under_way_when_the_grace_ends_is_finished_not_sent_again(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply delivered just as the stop's grace ends, its answer from Telegram still due."""
    caplog.set_level(logging.INFO)
    llm.queue(Say(ANSWER))
    with LateAnswers.running() as telegram:
        channels = {"telegram": telegram_table(telegram)}

        async def answer_once_cut() -> None:
            await until(logged(caplog, "turn(s) did not finish"))
            telegram.release.set()

        async with running_daemon(tmp_path, llm, channels) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            telegram.hold = True
            telegram.user_sends(OWNER, telegram.user(OWNER), "what is the answer?")
            await until(lambda: texts(telegram), 10)  # delivered; Telegram's answer waits
            releasing = asyncio.create_task(answer_once_cut())
        await releasing
        assert leftover_tasks() == []
        telegram.hold = False
        async with running_daemon(tmp_path, llm, channels) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            await daemon.router.drain()
            await asyncio.sleep(0.5)
        assert texts(telegram) == [ANSWER]


async def test_a_tap_while_the_card_is_still_being_posted_runs_the_call_once(
    tmp_path: Path, llm: FakeLLM
) -> None:
    """An approval tapped before Telegram has told the bot its card went out."""
    llm.queue(MKDIR, Say("Done."))
    with LateAnswers.running() as telegram:
        ada = telegram.user(OWNER)
        channels = {"telegram": telegram_table(telegram)}
        security = {"approval_timeout_s": 30}
        async with running_daemon(tmp_path, llm, channels, security=security) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            telegram.hold = True
            telegram.user_sends(OWNER, ada, "make a build folder")
            request = await request_in(telegram, OWNER)  # shown; the bot does not know yet
            allowed = await tap(telegram, OWNER, ada, button(request, "once"), request.message_id)
            telegram.release.set()
            await until(lambda: "Done." in showing(telegram), 10)
            record = await closed(telegram, request)
            await daemon.router.drain()
        assert allowed["text"] == "Allowed once."
        assert "Allowed once by" in record.text
        assert (tmp_path / "state" / "workspace" / "build").is_dir()


async def test_a_job_message_under_way_when_the_grace_ends_is_not_sent_again(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A cron job's message delivered just as the stop's grace ends, Telegram's answer due."""
    caplog.set_level(logging.INFO)
    gate = threading.Event()  # Ben's turn runs through the stop, to mark the grace's end
    llm.queue(Hold(gate, Say("never delivered")), Say("⏰ The oven!"))
    tables = {"heartbeat": {"interval": "0"}}
    with LateAnswers.running() as telegram:
        channels = {"telegram": telegram_table(telegram, allowed_users=[OWNER, BEN])}

        async def answer_once_cut() -> None:
            await until(logged(caplog, "turn(s) did not finish"))
            telegram.release.set()

        async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            telegram.user_sends(BEN, telegram.user(BEN, "Ben"), "think hard")
            await asyncio.to_thread(llm.wait_requests, 1)
            telegram.hold = True
            await jobs(daemon).store.add(reminder())
            await jobs(daemon).sync()
            await until(lambda: texts(telegram), 10)  # delivered; Telegram's answer waits
            releasing = asyncio.create_task(answer_once_cut())
        await releasing
        gate.set()
        assert leftover_tasks() == []
        telegram.hold = False
        async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            await until(lambda: telegram.sent(BEN), 10)  # Ben's turn, after the start
            await jobs(daemon).drain()
            await daemon.router.drain()
            await asyncio.sleep(0.5)
            runs = await jobs(daemon).store.history(1)
        assert texts(telegram) == ["⏰ The oven!"]
        assert [r.status for r in runs] == ["ok"]
