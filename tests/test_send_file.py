"""The ``send_file`` tool end to end: the real daemon, the fake model asking for the tool,
and the fake Telegram, Discord and Slack receiving the files over real sockets.

Each test writes files into the daemon's workspace, has the model call ``send_file``
and reads what the platform received (the bytes, the name, the caption) and what the
tool told the model (``FakeLLM.tool_results``).
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.daemon.main import Daemon
from tests.channel_tables import slack_table, telegram_table
from tests.cli_helpers import local_config, run, write_config
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, GENERAL, FakeSlack
from tests.fake_telegram import Call, FakeTelegram, Upload

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG image: grey pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n" + bytes(range(256)) * 4 + b"\n%%EOF\n"


def sends(*calls: dict[str, Any]) -> list[Any]:
    """The model's script: one response calling ``send_file`` for each call, then a reply."""
    return [CallTools([("send_file", arguments) for arguments in calls]), Say("Done.")]


def workspace(daemon: Daemon) -> Path:
    """The daemon's workspace folder."""
    return daemon.app.loaded.workspace


def upload_of(call: Call) -> Upload:
    """The one file a Telegram send call carried."""
    (upload,) = call.files.values()
    return upload


# -- Telegram ------------------------------------------------------------------------------


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **options: Any
) -> AsyncIterator[Daemon]:
    """The daemon with the Telegram channel pointing at the fake, once connected."""
    table = telegram_table(telegram)
    async with running_daemon(tmp_path, llm, {"telegram": table}, **options) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def test_telegram_gets_a_picture_and_documents_with_their_bytes_names_and_captions(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    chart = png()
    llm.queue(
        *sends(
            {"path": "chart.png", "caption": "Today's **temperatures**"},
            {"path": "reports/march.pdf", "caption": "The report"},
            {"path": "not-really.png", "as_photo": True},
        )
    )
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        (workspace(daemon) / "chart.png").write_bytes(chart)
        (workspace(daemon) / "reports").mkdir()
        (workspace(daemon) / "reports" / "march.pdf").write_bytes(PDF)
        (workspace(daemon) / "not-really.png").write_bytes(b"just some text\n")
        telegram.user_sends(OWNER, ADA, "send me the chart and the report")
        reply = await telegram.await_call("sendMessage")
    (photo,) = telegram.calls("sendPhoto")
    assert (upload_of(photo).filename, upload_of(photo).data) == ("chart.png", chart)
    assert photo.params["chat_id"] == OWNER
    assert (photo.params["caption"], photo.params["parse_mode"]) == (
        "Today's <b>temperatures</b>",
        "HTML",
    )
    documents = {upload_of(c).filename: c for c in telegram.calls("sendDocument")}
    assert sorted(documents) == ["march.pdf", "not-really.png"]
    assert upload_of(documents["march.pdf"]).data == PDF
    assert documents["march.pdf"].params["caption"] == "The report"
    assert upload_of(documents["not-really.png"]).data == b"just some text\n"
    assert "caption" not in documents["not-really.png"].params
    assert max(c.at for c in [photo, *documents.values()]) <= reply.at
    shown = {m.kind: m.text for m in telegram.sent(OWNER)}
    assert shown["photo"] == "Today's temperatures" and shown["text"] == "Done."
    results = sorted(llm.tool_results())
    assert results[0].startswith("sent 'chart.png' (") and results[0].endswith("as a picture")
    assert "'not-really.png'" in results[1] and "only PNG, JPEG and WebP" in results[1]
    assert results[2].startswith("sent 'reports/march.pdf' (1.0 KB, application/pdf)")


async def test_flood_control_on_an_upload_is_waited_out_and_the_file_sent_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(*sends({"path": "notes.txt"}))
    telegram.fail("sendDocument", 429, retry_after=1)
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        (workspace(daemon) / "notes.txt").write_text("remember the milk\n")
        telegram.user_sends(OWNER, ADA, "send my notes")
        await telegram.await_call("sendMessage")
    refused, accepted = telegram.calls("sendDocument")
    assert not refused.ok and accepted.ok
    assert accepted.at - refused.at >= 1.0
    assert [m.kind for m in telegram.sent(OWNER)] == ["document", "text"]
    assert llm.tool_results()[0].startswith("sent 'notes.txt' (18 bytes, text/plain)")


async def test_a_picture_telegram_cannot_take_as_a_photo_goes_as_a_document(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    banner = png(4000, 20)
    llm.queue(*sends({"path": "banner.png", "caption": "The banner"}))
    telegram.fail("sendPhoto", 400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        (workspace(daemon) / "banner.png").write_bytes(banner)
        telegram.user_sends(OWNER, ADA, "send the banner")
        await telegram.await_call("sendMessage")
    (refused,) = telegram.calls("sendPhoto")
    (document,) = telegram.calls("sendDocument")
    assert not refused.ok and document.ok
    assert (upload_of(document).filename, upload_of(document).data) == ("banner.png", banner)
    assert document.params["caption"] == "The banner"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the daemon's state folder, and one in a folder the file tools may read."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "plan.txt").write_text("shared plan\n")
    secret = tmp_path / "outside.txt"
    secret.write_text("not for the chat\n")
    return secret


async def test_paths_outside_the_workspace_and_pinclaw_s_own_files_are_refused_unsent(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, outside: Path
) -> None:
    (tmp_path / "config.toml").write_text("# the config file\n")
    llm.queue(
        *sends(
            {"path": "../../outside.txt"},
            {"path": str(outside)},
            {"path": "escape.txt"},
            {"path": "../../config.toml"},
            {"path": "../pinclaw.db"},
            {"path": str(tmp_path / "shared" / "plan.txt")},
        )
    )
    shared = {"extra_roots": [str(tmp_path / "shared")]}
    async with telegram_daemon(tmp_path, llm, telegram, security=shared) as daemon:
        os.symlink(outside, workspace(daemon) / "escape.txt")
        assert daemon.app.loaded.database.exists()
        telegram.user_sends(OWNER, ADA, "send me those files")
        await telegram.await_call("sendMessage")
    assert telegram.calls("sendDocument") == [] and telegram.calls("sendPhoto") == []
    assert sorted(llm.tool_results()) == sorted(
        [
            "Error: refused: '../../outside.txt' is outside the workspace",
            f"Error: refused: '{outside}' is outside the workspace",
            "Error: refused: 'escape.txt' points outside the workspace",
            "Error: refused: '../../config.toml' is in a forbidden location",
            "Error: refused: '../pinclaw.db' is in a forbidden location",
            f"Error: refused: '{tmp_path / 'shared' / 'plan.txt'}' is outside the workspace",
        ]
    )


async def test_a_file_over_the_size_cap_is_refused_with_a_clear_result(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(*sends({"path": "big.bin"}, {"path": "empty.txt"}, {"path": "reports"}))
    cap = {"tools": {"max_send_bytes": 4096}}
    async with telegram_daemon(tmp_path, llm, telegram, tables=cap) as daemon:
        (workspace(daemon) / "big.bin").write_bytes(b"\x01" * 5000)
        (workspace(daemon) / "empty.txt").write_bytes(b"")
        (workspace(daemon) / "reports").mkdir()
        telegram.user_sends(OWNER, ADA, "send the big one")
        await telegram.await_call("sendMessage")
    assert telegram.calls("sendDocument") == []
    assert sorted(llm.tool_results()) == [
        "Error: 'big.bin' is 4.9 KB, more than the 4.0 KB a file sent to a chat may have; "
        "make it smaller, or tell the user where it is",
        "Error: 'empty.txt' is empty; there is nothing to send",
        "Error: 'reports' is a folder; only single files can be sent (pack it first)",
    ]


# -- Discord -------------------------------------------------------------------------------


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    """A fake Discord with a quick heartbeat."""
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


async def test_discord_gets_the_file_with_its_caption_as_the_message_text(
    tmp_path: Path, llm: FakeLLM, discord: FakeDiscord
) -> None:
    data = b"day,low,high\nmon,2,9\ntue,3,11\n"
    big = 12 * 1024 * 1024
    llm.queue(
        *sends(
            {"path": "data/week.csv", "caption": "The **week** so far"},
            {"path": "video.bin"},
        )
    )
    table = {
        "token": discord.token,
        "api_base_url": discord.api_base,
        "gateway_url": discord.gateway_url,
        "allowed_users": [discord.owner["id"]],
    }
    cap = {"tools": {"max_send_bytes": 2 * big}}
    async with running_daemon(tmp_path, llm, {"discord": table}, tables=cap) as daemon:
        assert await daemon.channels["discord"].status.wait_connected(10)
        (workspace(daemon) / "data").mkdir()
        (workspace(daemon) / "data" / "week.csv").write_bytes(data)
        (workspace(daemon) / "video.bin").write_bytes(b"\0" * big)
        dm = discord.dm_channel(discord.owner)["id"]
        discord.user_sends(dm, discord.owner, "send me the week's data")
        await discord.await_until(lambda: any(m["content"] == "Done." for m in discord.sent(dm)))
    with_files = [m for m in discord.sent(dm) if m["attachments"]]
    assert [m["content"] for m in with_files] == ["The **week** so far"]
    (attachment,) = with_files[0]["attachments"]
    assert (attachment["filename"], attachment["size"]) == ("week.csv", len(data))
    assert discord.uploaded(attachment) == data
    assert sorted(llm.tool_results()) == [
        "Error: 'video.bin' was not delivered: video.bin is 12.0 MB; Discord takes files of "
        "up to 10 MB from bots",
        f"sent 'data/week.csv' ({len(data)} bytes, text/csv) to this chat as a file",
    ]


# -- Slack ---------------------------------------------------------------------------------


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack."""
    with FakeSlack.running() as fake:
        yield fake


async def test_slack_gets_the_file_through_the_upload_flow_in_the_thread(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    chart = png(8, 8)
    llm.queue(
        *sends({"path": "chart.png", "caption": "Humidity, **last hour**"}),
        *sends({"path": "log.txt"}),
    )
    async with running_daemon(tmp_path, llm, {"slack": slack_table(slack)}) as daemon:
        assert await daemon.channels["slack"].status.wait_connected(10)
        (workspace(daemon) / "chart.png").write_bytes(chart)
        (workspace(daemon) / "log.txt").write_text("all quiet\n")
        asked = slack.user_sends(GENERAL, ALICE, "show me the humidity", mention_bot=True)
        await slack.await_until(lambda: len(slack.sent(GENERAL)) >= 2, what="file and reply")
        slack.user_sends(ALICE_DM, ALICE, "and the log, please")
        await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 2, what="file and reply")
    shared, reply = slack.sent(GENERAL)
    assert shared["text"] == "Humidity, *last hour*" and reply["text"] == "Done."
    assert shared["thread_ts"] == asked.ts == reply["thread_ts"]
    (chart_file,) = shared["files"]
    assert chart_file["name"] == "chart.png"
    assert slack.workspace.files[chart_file["id"]].content == chart
    in_dm, _ = slack.sent(ALICE_DM)
    (log_file,) = in_dm["files"]
    assert "thread_ts" not in in_dm and in_dm["text"] == ""
    assert slack.workspace.files[log_file["id"]].content == b"all quiet\n"
    methods = [c.method for c in slack.calls() if "upload" in c.method.lower()]
    assert methods == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"] * 2


# -- scheduled turns, and where no chat can take a file -------------------------------------


def reminder(name: str, deliver_to: str) -> CallTools:
    """The model scheduling a job that runs in a second."""
    arguments = {
        "name": name,
        "schedule_kind": "after",
        "schedule": "1s",
        "prompt": "Send the user the report.",
        "deliver_to": deliver_to,
    }
    return CallTools([("cron_add", arguments)])


async def test_a_job_sends_files_to_its_chat_but_not_when_its_reply_goes_to_the_log(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(reminder("report", "this_chat"), Say("Will do."))
    send_report = CallTools([("send_file", {"path": "report.pdf"})])
    llm.queue(send_report, Say("Here is the report."))
    llm.queue(reminder("quietly", "log"), Say("It will go to the log."))
    llm.queue(send_report, Say("Report is ready."))
    quiet = {"heartbeat": {"interval": "0"}}
    async with telegram_daemon(tmp_path, llm, telegram, tables=quiet) as daemon:
        (workspace(daemon) / "report.pdf").write_bytes(PDF)
        telegram.user_sends(OWNER, ADA, "send me the report in a second")
        await telegram.await_until(
            lambda: [m for m in telegram.sent(OWNER) if m.text == "Here is the report."] or None
        )
        telegram.user_sends(OWNER, ADA, "and once more, but only into the log")
        await asyncio.to_thread(llm.wait_requests, 8)
    (document,) = telegram.calls("sendDocument")
    assert upload_of(document).data == PDF and document.params["chat_id"] == OWNER
    assert [m.kind for m in telegram.sent(OWNER)] == ["text", "document", "text", "text"]
    results = llm.tool_results()
    assert results[1].startswith("sent 'report.pdf' (")
    assert results[3] == (
        "Error: this scheduled turn's reply does not go to a chat, so no file can be sent "
        "from it; mention the file 'report.pdf' (in the workspace) in your reply instead"
    )


def test_pinclaw_agent_explains_that_it_cannot_send_files_and_says_where_the_file_is(
    llm: FakeLLM, home: Path
) -> None:
    write_config(home, local_config(llm.url))
    report = home / ".pinclaw" / "workspace" / "report.txt"
    report.parent.mkdir(parents=True)
    report.write_text("the report\n")
    llm.queue(*sends({"path": "report.txt"}))
    done = run(home, "agent", "-m", "send me the report")
    assert (done.returncode, done.stdout, done.stderr) == (0, "Done.\n", "")
    assert llm.tool_results() == [
        "Error: files cannot be sent from here: this conversation is not in a chat that can "
        f"receive files. The file is at {report} on this machine; tell the user that path"
    ]


def test_pinclaw_chat_shows_where_the_file_is(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    report = home / ".pinclaw" / "workspace" / "report.txt"
    report.parent.mkdir(parents=True)
    report.write_text("the report\n")
    llm.queue(*sends({"path": "report.txt", "caption": "Your **report**"}))
    done = run(home, "chat", stdin="send me the report\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Your report",
        f"[file] report.txt (11 bytes): {report}",
        "Done.",
    ]
    assert llm.tool_results()[0].startswith("sent 'report.txt' (11 bytes, text/plain)")
