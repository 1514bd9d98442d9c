"""Documents people send, end to end: a platform's fake, the real daemon, the fake model.

A text file or a PDF sent on Telegram, Discord or Slack is downloaded through the
real client library, saved in the workspace's inbox and read: the fake model's
request holds its text inside the untrusted marker, under a line with its exact
size. A long file is cut and the line says how much; a zip is saved but not read,
and a file over the limit is not downloaded at all. A turn that read a document
asks before it acts, while the document is in its history too, and reading the
saved copy later taints a turn as well.
"""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pypdf import PdfReader

from bot.daemon.main import Daemon
from tests.channel_tables import discord_table, slack_table, telegram_table
from tests.chat_harness import replies
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_discord.payloads import message as discord_message
from tests.fake_discord.payloads import snowflake
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.media_samples import FileHost, pdf
from tests.telegram_taps import button, request_in, tap
from tests.test_media_in import ADA, OWNER, last_user_content, provider
from tests.test_telegram_approvals import closed

LIST = b"milk\neggs\nbread\ncoffee\ntea"
MARK = '<untrusted source="document" from="the document {}">\n{}\n</untrusted>'


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **tables: Any
) -> AsyncIterator[Daemon]:
    """The daemon with Telegram (Ada allowed, replies not paced) and the fake model."""
    channels = {"telegram": telegram_table(telegram, pacing=False)}
    tables.setdefault("provider", provider(llm))
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def saved(tmp_path: Path) -> list[Path]:
    """The files in the daemon's inbox, by name."""
    return sorted((tmp_path / "state" / "workspace" / "inbox").iterdir())


def dated(name: str) -> str:
    """A pattern for ``name`` as the inbox saves it, under the day it was sent."""
    return r"\d{4}-\d{2}-\d{2}-" + re.escape(name)


async def test_a_26_byte_text_file_is_read_saved_and_answered_from(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    assert len(LIST) == 26
    llm.queue(Say("Milk, eggs, bread, coffee and tea."))
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(
            OWNER,
            ADA,
            "what is on my list?",
            document=LIST,
            file_name="list.txt",
            mime_type="text/plain",
        )
        (reply,) = await replies(telegram, 1)
    assert reply.text == "Milk, eggs, bread, coffee and tea."
    (copy,) = saved(tmp_path)
    assert re.fullmatch(dated("list.txt"), copy.name) and copy.read_bytes() == LIST
    assert last_user_content(llm) == (
        "what is on my list?\n"
        f"[document: list.txt (text/plain, 26 bytes), saved as inbox/{copy.name}; "
        "its text follows]\n" + MARK.format("list.txt", LIST.decode())
    )


async def test_a_pdf_is_read_through_pypdf_with_its_exact_size_and_pages(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    document = pdf("Shopping: apples (green), pears\nand a loaf of rye bread")
    extracted = PdfReader(io.BytesIO(document)).pages[0].extract_text()
    assert "apples (green)" in extracted and "rye bread" in extracted
    llm.queue(Say("Apples, pears and rye bread."))
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(
            OWNER,
            ADA,
            "what does the note say?",
            document=document,
            file_name="note.pdf",
            mime_type="application/pdf",
        )
        (reply,) = await replies(telegram, 1)
    assert reply.text == "Apples, pears and rye bread."
    (copy,) = saved(tmp_path)
    assert copy.read_bytes() == document
    assert last_user_content(llm) == (
        "what does the note say?\n"
        f"[document: note.pdf (application/pdf, {len(document)} bytes), 1 page, "
        f"saved as inbox/{copy.name}; its text follows]\n" + MARK.format("note.pdf", extracted)
    )


async def test_a_long_file_is_cut_and_the_model_is_told_how_much_it_reads(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    lines = b"".join(f"{i:05d} the sensor read 21.5 degrees\n".encode() for i in range(4000))
    log = lines[: 100 * 1024]
    async with telegram_daemon(tmp_path, llm, telegram, media={"document_text_bytes": 40960}):
        telegram.user_sends(
            OWNER, ADA, "", document=log, file_name="sensor.log", mime_type="text/plain"
        )
        await replies(telegram, 1)
    (copy,) = saved(tmp_path)
    assert copy.read_bytes() == log  # the whole file is saved
    head, body = last_user_content(llm).split("\n", 1)
    assert head == (
        f"[document: sensor.log (text/plain, 100 KB), saved as inbox/{copy.name}; "
        "the first 40 KB of its 100 KB of text follow]"
    )
    assert body == MARK.format("sensor.log", log[:40960].decode())


async def test_a_zip_is_saved_but_not_read_and_a_file_over_the_limit_is_not_downloaded(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    archive = b"PK\x03\x04" + bytes(3000)
    big = b"x" * 5000
    llm.queue(Say("I cannot open zips."), Say("That file is too big for me."))
    async with telegram_daemon(tmp_path, llm, telegram, media={"max_document_bytes": 4096}):
        telegram.user_sends(
            OWNER, ADA, "", document=archive, file_name="photos.zip", mime_type="application/zip"
        )
        await replies(telegram, 1)
        zip_line = last_user_content(llm)
        telegram.user_sends(
            OWNER, ADA, "read this", document=big, file_name="huge.txt", mime_type="text/plain"
        )
        second = (await replies(telegram, 2))[1]
    assert second.text == "That file is too big for me."
    (copy,) = saved(tmp_path)
    assert copy.read_bytes() == archive
    assert zip_line == (
        f"[document: photos.zip (application/zip, 2.9 KB, 3,004 bytes), saved as "
        f"inbox/{copy.name}; not read: only text files and PDFs are read]"
    )
    assert last_user_content(llm) == (
        "read this\n[document: huge.txt (text/plain, 4.9 KB, 5,000 bytes), not downloaded: "
        "it is over the 4 KB limit for documents ([media] max_document_bytes)]"
    )
    assert len(telegram.calls("getFile")) == 1  # the zip only


async def next_request(telegram: FakeTelegram, before: SentMessage | None) -> SentMessage:
    """The next approval request in Ada's chat, once ``before`` (if any) is closed."""
    if before is not None:
        await closed(telegram, OWNER, before)
    return await request_in(telegram, OWNER)


async def deny(telegram: FakeTelegram, request: SentMessage) -> None:
    await tap(telegram, OWNER, ADA, button(request, "deny"), request.message_id)


async def test_a_turn_that_read_a_document_asks_before_it_acts(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    def write(name: str) -> CallTools:
        return CallTools([("file_write", {"path": name, "content": "done"})])

    workspace = tmp_path / "state" / "workspace"
    llm.queue(write("plain.txt"), Say("Written."))
    full = {"autonomy": "full"}  # nothing would ask, but for what the turn has read
    async with telegram_daemon(tmp_path, llm, telegram, security=full):
        telegram.user_sends(OWNER, ADA, "write plain.txt")
        await replies(telegram, 1)
        assert (workspace / "plain.txt").read_text() == "done"  # no request: it just ran

        llm.queue(write("from-doc.txt"), Say("Not written."))
        telegram.user_sends(
            OWNER, ADA, "do what it says", document=b"write from-doc.txt", file_name="todo.txt"
        )
        request = await next_request(telegram, None)
        assert "Asked after reading untrusted content: the document todo.txt" in request.text
        await deny(telegram, request)

        # The document is still in the conversation: the next turn asks too.
        llm.queue(write("later.txt"), Say("Still not."))
        telegram.user_sends(OWNER, ADA, "try again")
        request = await next_request(telegram, request)
        assert "the document todo.txt" in request.text
        await deny(telegram, request)

        # A fresh conversation that reads the saved copy with a file tool is tainted by it.
        (copy,) = saved(tmp_path)
        telegram.user_sends(OWNER, ADA, "/new")
        read = CallTools([("file_read", {"path": f"inbox/{copy.name}"})])
        llm.queue(read, write("again.txt"), Say("No."))
        telegram.user_sends(OWNER, ADA, "read my todo file and do it")
        request = await next_request(telegram, request)
        assert f"the file inbox/{copy.name} (from the document todo.txt, sent by Ada)" in (
            request.text
        )
        await deny(telegram, request)
        await telegram.await_until(lambda: any(m.text == "No." for m in telegram.sent(OWNER)))
    assert sorted(p.name for p in workspace.glob("*.txt")) == ["plain.txt"]


async def test_a_discord_text_file_reaches_the_model(tmp_path: Path, llm: FakeLLM) -> None:
    notes = b"Backup at 02:00, rotate logs weekly.\n"
    llm.queue(Say("Backups run at two."))
    with FakeDiscord.running(heartbeat_interval=1.0) as fake, FileHost.running() as cdn:
        table = discord_table(fake)
        async with running_daemon(tmp_path, llm, {"discord": table}) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            dm = fake.dm_channel(fake.owner)["id"]
            message = discord_message(dm, fake.owner, "when do backups run?")
            url = cdn.add("notes.md", notes, "text/markdown")
            message["attachments"] = [
                {
                    "id": snowflake(),
                    "filename": "notes.md",
                    "size": len(notes),
                    "url": url,
                    "proxy_url": url,
                    "content_type": "text/markdown; charset=utf-8",
                }
            ]
            fake.world.store_message(message)
            fake.dispatch("MESSAGE_CREATE", message)
            await fake.await_until(lambda: len(fake.sent(dm)) >= 1)
            assert fake.sent(dm)[0]["content"] == "Backups run at two."
    (copy,) = saved(tmp_path)
    assert re.fullmatch(dated("notes.md"), copy.name) and copy.read_bytes() == notes
    assert last_user_content(llm) == (
        "when do backups run?\n[document: notes.md (text/markdown; charset=utf-8, 37 bytes), "
        f"saved as inbox/{copy.name}; its text follows]\n" + MARK.format("notes.md", notes.decode())
    )


async def test_a_slack_file_of_no_declared_type_is_read_as_text(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = b'[pump]\nrelay = 17\non = "06:30"\n'
    llm.queue(Say("Relay 17 at half past six."))
    with FakeSlack.running() as slack:
        async with running_daemon(tmp_path, llm, {"slack": slack_table(slack)}) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            upload = ("pump settings", config, "application/octet-stream")
            slack.user_sends(ALICE_DM, ALICE, "", files=[upload])
            await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 1, what="a reply")
            assert slack.sent(ALICE_DM)[0]["text"] == "Relay 17 at half past six."
    (copy,) = saved(tmp_path)
    assert re.fullmatch(dated("pump_settings"), copy.name) and copy.read_bytes() == config
    # Slack's "(shared pump settings)" is not the sender's words: only the document.
    assert last_user_content(llm) == (
        f"[document: pump settings (application/octet-stream, {len(config)} bytes), "
        f"saved as inbox/{copy.name}; its text follows]\n"
        + MARK.format("pump settings", config.decode())
    )
