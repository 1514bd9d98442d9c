"""A daemon without chat channels, the targets that need none, and ``pinclaw inbox``.

``pinclaw run`` with only a provider and ``[cron]`` runs the scheduler and the
heartbeat. Results go to the owner's inbox (``terminal:owner``, or ``owner``
when no chat can take them), the daemon's log, or a file in the workspace;
``pinclaw inbox`` shows them and ``pinclaw cron history`` says where each went.
The subprocess tests run the installed ``pinclaw``; the others open the same
``Daemon`` in-process with no channel table at all.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.core.conversation import ToolCall
from bot.core.errors import ConfigError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.cron.service import CronService
from bot.cron.store import CronJob, JobRun, Target
from bot.daemon.main import Daemon
from bot.store.db import Database
from bot.store.owner_inbox import InboxMessage, OwnerInbox
from tests.cli_helpers import one_line, run, write_config
from tests.daemon_harness import DaemonProcess, running_daemon
from tests.fake_llm import FakeLLM, Say
from tests.test_systemd import NotifySocket, count

REMINDER = "💧 Time to water the plants!"


def cron_only(llm: FakeLLM) -> str:
    """A config with the fake model as provider and [cron], and nothing else."""
    return (
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        "max_retries = 0\n\n[cron]\nmin_interval_s = 1\n"
    )


def test_pinclaw_run_with_only_cron_delivers_a_reminder_to_pinclaw_inbox(
    tmp_path: Path, llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    receiver = NotifySocket(str(tmp_path / "notify"))
    llm.queue(Say(REMINDER))
    daemon = DaemonProcess(home, cron_only(llm), {"NOTIFY_SOCKET": str(tmp_path / "notify")})
    daemon.start()
    try:
        daemon.wait_log("running without chat channels: scheduler and heartbeat only")
        # Ready at once: there is no channel to wait for (the wait would be 60 s).
        receiver.wait_for(lambda m: count(m, "READY=1") == 1)
        added = run(
            home, "cron", "add", "water plants", "--after", "1s",
            "--prompt", "Remind me to water the plants.", "--to", "terminal:owner",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        daemon.wait_log("job #1 'water plants' finished: ok, to terminal:owner")
        inbox = run(home, "inbox")
        again = run(home, "inbox")
        history = run(home, "cron", "history", "1")
    finally:
        code = daemon.terminate()
        receiver.sock.close()
    assert code == 0, daemon.log()
    assert "running with no chat channels" in daemon.log()
    assert inbox.returncode == 0, inbox.stderr
    heading, text = inbox.stdout.splitlines()
    assert heading.endswith("  cron:water plants") and text == f"  {REMINDER}"
    assert again.stdout == (
        "No unread messages (`pinclaw inbox --all` shows the ones already read).\n"
    )
    assert " job #1 ok " in history.stdout and f", to terminal:owner: {REMINDER}" in history.stdout
    [request] = llm.requests
    assert "Remind me to water the plants." in request.view.last_text
    assert "kept for the owner to read in the terminal" in request.view.system


# -- the daemon in-process, with no chat channel ------------------------------------------


def service(daemon: Daemon) -> CronService:
    assert daemon.scheduling is not None and daemon.scheduling.service is not None
    return daemon.scheduling.service


def job(name: str, target: Target, payload: str = "Remind me to water the plants.") -> CronJob:
    """An hourly job (its next run an hour away: the tests run it on request)."""
    now = time.time()
    return CronJob(
        id=0, name=name, schedule_kind="every", schedule_expr="3600", timezone="UTC",
        anchor=now, action="shell" if payload.startswith("$ ") else "agent",
        payload=payload.removeprefix("$ "), session_mode="isolated", target=target,
        creator_id="owner", creator_name="the owner", created_at=now, misfire="skip",
        next_run=now + 3600,
    )  # fmt: skip


async def run_once(daemon: Daemon, new: CronJob) -> JobRun:
    """Store ``new``, run it now, and return its finished run."""
    stored = await service(daemon).store.add(new)
    assert await service(daemon).run_now(stored.id)
    await service(daemon).drain()
    [ran] = await service(daemon).store.history(stored.id)
    return ran


async def unread(daemon: Daemon) -> list[InboxMessage]:
    return await OwnerInbox(daemon.app.db).unread()


async def test_the_owner_target_without_a_channel_falls_back_to_the_inbox(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="bot.cron.outbox")
    llm.queue(Say(REMINDER))
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        assert d.channels == {}
        ran = await run_once(d, job("water plants", Target("owner")))
        [kept] = await unread(d)
    assert (ran.status, ran.summary) == ("ok", REMINDER)
    assert ran.delivered_to == "terminal:owner (no chat channel)"
    assert (kept.source, kept.text) == ("cron:water plants", REMINDER)
    said = [r.getMessage() for r in caplog.records]
    assert (
        "cron:water plants: no chat channel, so the message is in the owner's inbox "
        "(pinclaw inbox)" in said
    )


async def test_the_heartbeat_without_a_channel_reports_to_the_inbox(
    tmp_path: Path, llm: FakeLLM
) -> None:
    workspace = tmp_path / "state" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "HEARTBEAT.md").write_text("- Check the greenhouse.\n")
    llm.queue(Say("The greenhouse is at 3 °C."), *[Say("HEARTBEAT_OK")] * 20)
    tables = {"heartbeat": {"interval": "1s"}}
    async with running_daemon(tmp_path, llm, {}, tables=tables) as daemon:
        for _ in range(1000):
            if found := await unread(daemon):
                break
            await asyncio.sleep(0.02)
    assert [(m.source, m.text) for m in found] == [("heartbeat", "The greenhouse is at 3 °C.")]
    assert "- Check the greenhouse." in llm.requests[0].view.last_text


async def test_the_log_target_writes_the_result_to_the_daemon_log(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="bot.cron.outbox")
    llm.queue(Say("Disk 41% full."))
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        ran = await run_once(d, job("disk", Target("log"), "How full is the disk?"))
        kept = await unread(d)
    assert (ran.status, ran.delivered_to) == ("ok", "log")
    [line] = [r for r in caplog.records if r.getMessage() == "cron:disk: Disk 41% full."]
    assert line.levelname == "INFO"
    assert kept == []
    assert "written to PinClaw's log" in llm.requests[0].view.system


async def test_the_file_target_appends_each_result_inside_the_workspace(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Water the ferns."), Say("Water the cactus."))
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        stored = await service(d).store.add(job("plants", Target("file", path="notes/plants.md")))
        for _ in range(2):
            assert await service(d).run_now(stored.id)
            await service(d).drain()
        runs = await service(d).store.history(stored.id)
    text = (tmp_path / "state" / "workspace" / "notes" / "plants.md").read_text()
    entries = text.split("## ")[1:]
    assert [e.split("\n", 1)[0].endswith(" UTC · cron:plants") for e in entries] == [True, True]
    assert ["Water the ferns." in entries[0], "Water the cactus." in entries[1]] == [True, True]
    assert [r.delivered_to for r in runs] == ["file:notes/plants.md"] * 2


async def test_a_file_target_outside_the_workspace_fails_the_run_and_writes_nothing(
    tmp_path: Path, llm: FakeLLM
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "state" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "escape").symlink_to(outside)
    llm.queue(*[Say("A result.")] * 3)
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        runs = [
            await run_once(d, job(name, Target("file", path=path)))
            for name, path in (
                ("up", "../../outside/x.md"),
                ("absolute", str(outside / "x.md")),
                ("link", "escape/x.md"),
            )
        ]
    assert [r.status for r in runs] == ["failed"] * 3
    assert all("cannot receive results" in r.summary for r in runs), runs
    assert all("outside the workspace" in r.summary for r in runs), runs
    assert list(outside.iterdir()) == []


async def test_a_job_call_that_needs_approval_is_refused_when_nobody_can_approve(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        ran = await run_once(d, job("build", Target("terminal"), "$ mkdir build"))
        kept = await unread(d)
    assert ran.status == "failed"
    assert "needs a person's approval" in ran.summary
    assert "nobody can approve it here" in ran.summary
    assert kept == [] and not (tmp_path / "state" / "workspace" / "build").exists()


# -- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("../../x.md", "is outside the workspace"),
        ("~/x.md", "is outside the workspace"),
        ("{tmp}/x.md", "is outside the workspace"),
        ("../x.md", "is in a forbidden location"),  # ~/.pinclaw holds the database
        ("~/.pinclaw/config.toml", "is in a forbidden location"),
    ],
)
def test_cron_add_refuses_a_file_target_outside_the_workspace(
    llm: FakeLLM, home: Path, where: str, why: str
) -> None:
    write_config(home, cron_only(llm))
    where = where.replace("{tmp}", str(home.parent))
    done = run(home, "cron", "add", "x", "--after", "1h", "--prompt", "hi", "--to", f"file:{where}")
    assert done.returncode == 2
    assert one_line(done.stderr) == f"pinclaw: file:{where} cannot receive results: '{where}' {why}"
    listed = run(home, "cron", "list")
    assert listed.stdout.startswith("No scheduled jobs.")


def test_cron_add_takes_the_targets_that_need_no_chat(llm: FakeLLM, home: Path) -> None:
    write_config(home, cron_only(llm))
    for to in ("terminal:owner", "log", "file:notes/plants.md"):
        added = run(home, "cron", "add", "x", "--after", "1h", "--prompt", "hi", "--to", to)
        assert added.returncode == 0, added.stderr
        assert added.stdout.rstrip().endswith(f"asks the agent, to {to}.")


async def seed(home: Path, *messages: tuple[str, str]) -> None:
    """Put messages in the owner's inbox of the config in ``home``."""
    db = Database(home / ".pinclaw" / "pinclaw.db")  # the default data folder under HOME
    await db.open()
    try:
        inbox = OwnerInbox(db)
        await inbox.setup()
        for source, text in messages:
            await inbox.add(source, text)
    finally:
        await db.close()


async def test_pinclaw_inbox_shows_unread_oldest_first_then_marks_them_read(
    llm: FakeLLM, home: Path
) -> None:
    write_config(home, cron_only(llm))
    await seed(home, ("cron:water plants", "Water them.\nAll of them."), ("heartbeat", "Cold."))
    shown = await asyncio.to_thread(run, home, "inbox")
    empty = await asyncio.to_thread(run, home, "inbox")
    await seed(home, ("alert", "A job was paused."))
    everything = await asyncio.to_thread(run, home, "inbox", "--all", "--json")
    latest = await asyncio.to_thread(run, home, "inbox", "--all", "-n", "1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [lines[0][16:], lines[1:3], lines[3], lines[4][16:], lines[5]] == [
        "  cron:water plants",
        ["  Water them.", "  All of them."],
        "",
        "  heartbeat",
        "  Cold.",
    ]
    assert empty.stdout.startswith("No unread messages")
    records = json.loads(everything.stdout)
    assert [(r["source"], r["text"], r["read"]) for r in records] == [
        ("cron:water plants", "Water them.\nAll of them.", True),
        ("heartbeat", "Cold.", True),
        ("alert", "A job was paused.", False),
    ]
    assert all(r["time"].endswith("+00:00") for r in records)
    assert latest.stdout.splitlines()[0].endswith("  alert  (read)")


async def test_pinclaw_inbox_clear_and_the_hint_in_pinclaw_chat(llm: FakeLLM, home: Path) -> None:
    write_config(home, cron_only(llm))
    await seed(home, ("alert", "One."), ("alert", "Two."))
    llm.queue(Say("Hello."))
    chat = await asyncio.to_thread(run, home, "chat", stdin="hi\n")
    cleared = await asyncio.to_thread(run, home, "inbox", "clear")
    after = await asyncio.to_thread(run, home, "inbox", "--all")
    quiet = await asyncio.to_thread(run, home, "chat", stdin="")
    assert chat.stdout.splitlines() == [
        "You have 2 unread messages in your inbox: pinclaw inbox",
        "Hello.",
    ]
    assert cleared.stdout == "Removed 2 messages from the inbox.\n"
    assert after.stdout == "The inbox is empty.\n"
    assert quiet.stdout == ""


async def test_the_cron_add_tool_offers_the_targets_without_a_chat(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with running_daemon(tmp_path, llm, {}, tables={"heartbeat": {"interval": "0"}}) as d:
        add = d.app.tools.get("cron_add")
        assert add is not None  # called through the policy gate, as the agent calls it
        ctx = ToolContext(SessionKey("telegram", "7001"), d.app.loaded.workspace, ZoneInfo("UTC"))
        base = {"name": "plants", "schedule_kind": "after", "schedule": "1h", "prompt": "Hi."}
        made = [
            await d.app.gate.execute(ToolCall("c", "cron_add", {**base, **to}), ctx)
            for to in (
                {"deliver_to": "terminal"},
                {"deliver_to": "log"},
                {"deliver_to": "file", "file_path": "notes/plants.md"},
                {"deliver_to": "file", "file_path": "../../outside.md"},
                {"deliver_to": "file"},
            )
        ]
        jobs = await service(d).store.jobs()
    assert [r.ok for r in made] == [True, True, True, False, False]
    refused = [r.error or "" for r in made[3:]]
    assert "cannot receive results: '../../outside.md' is outside the workspace" in refused[0]
    assert "deliver_to=file needs file_path" in refused[1]
    assert [str(j.target) for j in jobs] == ["terminal:owner", "log", "file:notes/plants.md"]
    schema = json.dumps(add.spec().parameters)
    assert "pinclaw inbox" in schema and "file_path" in schema


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("file:../../x.md", "heartbeat.target: file:../../x.md cannot receive results: "),
        ("terminal:bob", "heartbeat.target: 'terminal:bob' is not a delivery target"),
    ],
)
async def test_a_heartbeat_target_that_cannot_work_stops_the_start(
    tmp_path: Path, llm: FakeLLM, target: str, said: str
) -> None:
    tables = {"heartbeat": {"interval": "30m", "target": target}}
    with pytest.raises(ConfigError) as refused:
        async with running_daemon(tmp_path, llm, {}, tables=tables):
            pass
    assert str(refused.value).startswith(said)
