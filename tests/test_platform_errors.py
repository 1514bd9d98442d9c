"""A platform's error page in the log: one short line per failure, never the page or a traceback.

The fake Telegram answers getUpdates with ``502 Bad Gateway`` and an nginx HTML page,
as a proxy in front of the Bot API does in an outage. ``pinclaw run`` (the real
process, logging at info level as a service does) must write one line per failed
poll naming the status, keep the page and every traceback out of the log, and
answer messages again once Telegram is back: after a short outage by polling
again, after a longer one by starting the channel afresh. The fake Discord and
the fake Slack answer posting a reply with such a page the same way: the reply
still arrives once, and each failed try is one short line. What other client
libraries log about such a failure (discord.py's reconnects) is one line too,
and whole only at debug level.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from bot.cli.logs import setup_logging
from tests.channel_tables import TELEGRAM_OWNER, slack_table
from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram
from tests.test_logging import clean_logging

__all__ = ["clean_logging"]  # a fixture of test_logging, used here

PAGE = """<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>nginx/1.18.0 (Ubuntu)</center>
</body>
</html>
<!-- a padding comment some proxies add -->
<!-- a padding comment some proxies add -->
"""
FAILED = "telegram: getUpdates failed: 502 Bad Gateway; retrying in"
PAGE_503 = PAGE.replace("502 Bad Gateway", "503 Service Temporarily Unavailable")
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+ [\w.]+: ")  # a record's start
SEND_FAILED = "WARNING bot.core.delivery: sending "


def assert_quiet(log: str) -> None:
    """No page, no traceback, no long line anywhere in the log; every record one line."""
    assert "Traceback" not in log and "nginx" not in log and "<" not in log, log
    assert all(len(line) < 250 for line in log.splitlines()), log
    assert all(RECORD.match(line) for line in log.splitlines()), log


def answered(telegram: FakeTelegram, text: str, count: int) -> None:
    telegram.user_sends(TELEGRAM_OWNER, telegram.user(TELEGRAM_OWNER), text)
    telegram.wait_until(lambda: len(telegram.sent(TELEGRAM_OWNER)) >= count or None, timeout=30)


def test_a_502_error_page_is_one_log_line_per_failure_and_telegram_recovers(
    home: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("Back again."), Say("Still here."))
    # No status endpoint: another daemon on this machine may hold its port, and that
    # would be an ERROR line of its own in the log this test reads.
    config = telegram_run_config(llm, telegram, TELEGRAM_OWNER) + '\n[web]\nlisten = "off"\n'
    daemon = DaemonProcess(home, config).start()
    try:
        daemon.wait_log("telegram connected")
        telegram.fail("getUpdates", 502, page=PAGE, times=2)  # under the retry limit
        seen = len(daemon.lines)
        daemon.wait_log(FAILED, after=seen)
        second = daemon.wait_log(FAILED, after=len(daemon.lines))
        answered(telegram, "are you there?", 1)
        outage = daemon.lines[seen:]
        assert [line for line in outage if "502" in line] == [
            line for line in outage if FAILED in line
        ]
        assert len([line for line in outage if FAILED in line]) == 2
        assert second.rstrip().endswith("retrying in 1.0 s")

        # A longer outage: the poller gives up, and the channel is started afresh.
        telegram.fail("getUpdates", 502, page=PAGE, times=5)
        restarted = daemon.wait_log("telegram stopped (NetworkError: 502 Bad Gateway)")
        assert "starting it again in" in restarted
        daemon.wait_log("telegram connected", after=daemon.lines.index(restarted))
        answered(telegram, "and now?", 2)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
    assert [m.text for m in telegram.sent(TELEGRAM_OWNER)] == ["Back again.", "Still here."]
    assert len([line for line in daemon.lines if FAILED in line]) == 2 + 4
    assert " ERROR " not in daemon.log()
    assert_quiet(daemon.log())


def run_config(llm: FakeLLM, channel: str, table: dict[str, Any]) -> str:
    """A config file for ``pinclaw run``: the fake LLM and one ``[channels.NAME]`` table
    (flat values; JSON's strings, numbers, booleans and lists are TOML values too)."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    return "\n".join(
        [
            "[provider]",
            'kind = "openai"',
            'model = "fake"',
            f'base_url = "{llm.url}/v1"',
            "max_retries = 0",
            "[daemon]",
            "shutdown_grace_s = 0.5",
            "[agent]",
            "stream = false",
            "[web]",
            'listen = "off"',
            f"[channels.{channel}]",
            *lines,
            "",
        ]
    )


def failed_sends(daemon: DaemonProcess) -> list[str]:
    """The log lines of failed tries at sending a reply (each says which retry follows)."""
    return [line for line in daemon.lines if SEND_FAILED in line and " failed (" in line]


def test_a_502_page_answering_a_discord_reply_is_one_line_per_try_and_it_arrives_once(
    home: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Through the proxy."), Say("And again."))
    with FakeDiscord.running(heartbeat_interval=1.0) as fake:
        table = {
            "token": fake.token,
            "api_base_url": fake.api_base,
            "gateway_url": fake.gateway_url,
            "allowed_users": [fake.owner["id"]],
        }
        daemon = DaemonProcess(home, run_config(llm, "discord", table)).start()
        try:
            daemon.wait_log("discord connected")
            dm = fake.dm_channel(fake.owner)["id"]
            posting = rf"^/channels/{dm}/messages$"
            # A 503 reaches PinClaw: its retries log one line per failed try.
            fake.fail("POST", posting, 503, page=PAGE_503, times=2)
            fake.user_sends(dm, fake.owner, "are you there?")
            fake.wait_until(lambda: len(fake.sent(dm)) >= 1, timeout=30)
            # A 502 discord.py retries by itself (after 1 s, then 3 s), saying nothing.
            fake.fail("POST", posting, 502, page=PAGE, times=2)
            fake.user_sends(dm, fake.owner, "and now?")
            fake.wait_until(lambda: len(fake.sent(dm)) >= 2, timeout=30)
            assert daemon.terminate() == 0
        finally:
            daemon.kill()
        assert [m["content"] for m in fake.sent(dm)] == ["Through the proxy.", "And again."]
        assert [c.status for c in fake.calls("POST", posting)] == [503, 503, 200, 502, 502, 200]
    failed = failed_sends(daemon)
    assert len(failed) == 2, daemon.log()
    reason = "(DiscordServerError: 503 Service Unavailable (error code: 0) (an HTML error page))"
    assert all(reason in line for line in failed), failed
    assert " ERROR " not in daemon.log()
    assert_quiet(daemon.log())


def test_a_502_page_answering_a_slack_reply_is_one_line_per_try_and_it_arrives_once(
    home: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Through the proxy."))
    with FakeSlack.running() as slack:
        config = run_config(llm, "slack", slack_table(slack))
        daemon = DaemonProcess(home, config).start()
        try:
            daemon.wait_log("slack connected")
            slack.fail("chat.postMessage", "bad_gateway", status=502, page=PAGE, times=2)
            slack.user_sends(ALICE_DM, ALICE, "are you there?")
            slack.wait_until(lambda: len(slack.sent(ALICE_DM)) >= 1, timeout=30)
            assert daemon.terminate() == 0
        finally:
            daemon.kill()
        assert [m["text"] for m in slack.sent(ALICE_DM)] == ["Through the proxy."]
        assert [c.status for c in slack.calls("chat.postMessage")] == [502, 502, 200]
    failed = failed_sends(daemon)
    assert len(failed) == 2, daemon.log()
    assert all("(SlackRefused: chat.postMessage: HTTP 502)" in line for line in failed), failed
    assert " ERROR " not in daemon.log()
    assert_quiet(daemon.log())


def test_a_502_page_answering_slacks_connection_open_is_one_line_per_start(
    home: Path, llm: FakeLLM
) -> None:
    llm.queue(Say("Connected at last."))
    with FakeSlack.running() as slack:
        slack.fail("apps.connections.open", "bad_gateway", status=502, page=PAGE, times=2)
        daemon = DaemonProcess(home, run_config(llm, "slack", slack_table(slack))).start()
        try:
            daemon.wait_log("slack connected", timeout=30)
            slack.user_sends(ALICE_DM, ALICE, "are you there?")
            slack.wait_until(lambda: len(slack.sent(ALICE_DM)) >= 1, timeout=30)
            assert daemon.terminate() == 0
        finally:
            daemon.kill()
        assert [m["text"] for m in slack.sent(ALICE_DM)] == ["Connected at last."]
        assert [c.status for c in slack.calls("apps.connections.open")] == [502, 502, 200]
    # Each failed start: the supervisor's line, and slack_sdk's own (made one line).
    stopped = [line for line in daemon.lines if "slack stopped (" in line]
    assert len(stopped) == 2, daemon.log()
    reason = "(SlackRefused: apps.connections.open (app token): HTTP 502); starting it again"
    assert all(reason in line for line in stopped), stopped
    library = [line for line in daemon.lines if "Failed to retrieve WSS URL" in line]
    assert len(library) == 2 and all("status: 502)" in line for line in library), library
    assert len([line for line in daemon.lines if "502" in line]) == 4, daemon.log()
    assert_quiet(daemon.log())


def reconnect_failure() -> None:
    """What discord.py does when the gateway answers its reconnect with an error page."""
    try:
        raise ConnectionError(f"502 Bad Gateway (error code: 0): {PAGE}")
    except ConnectionError:
        logging.getLogger("discord.client").exception("Attempting a reconnect in %.2fs", 1.0)


@pytest.mark.usefixtures("clean_logging")
def test_a_library_traceback_is_one_line_above_debug_and_whole_at_debug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("info")
    reconnect_failure()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "ERROR discord.client: Attempting a reconnect in 1.00s (ConnectionError: 502 Bad "
        "Gateway (error code: 0) (an HTML error page))"
    )
    setup_logging("debug")
    reconnect_failure()
    whole = capsys.readouterr().err
    assert "Traceback (most recent call last)" in whole and "nginx/1.18.0" in whole
