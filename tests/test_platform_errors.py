"""A platform's error page in the log: one short line per failure, never the page or a traceback.

The fake Telegram answers getUpdates with ``502 Bad Gateway`` and an nginx HTML page,
as a proxy in front of the Bot API does in an outage. ``pinclaw run`` (the real
process, logging at info level as a service does) must write one line per failed
poll naming the status, keep the page and every traceback out of the log, and
answer messages again once Telegram is back: after a short outage by polling
again, after a longer one by starting the channel afresh. What other client
libraries log about such a failure (discord.py's reconnects) is one line too,
and whole only at debug level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.logs import CHATTY, setup_logging
from tests.channel_tables import TELEGRAM_OWNER
from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_llm import FakeLLM, Say
from tests.fake_telegram import FakeTelegram

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


def assert_quiet(log: str) -> None:
    """No page, no traceback, no long line anywhere in the log."""
    assert "Traceback" not in log and "nginx" not in log and "<" not in log, log
    assert all(len(line) < 250 for line in log.splitlines()), log


def answered(telegram: FakeTelegram, text: str, count: int) -> None:
    telegram.user_sends(TELEGRAM_OWNER, telegram.user(TELEGRAM_OWNER), text)
    telegram.wait_until(lambda: len(telegram.sent(TELEGRAM_OWNER)) >= count or None, timeout=30)


def test_a_502_error_page_is_one_log_line_per_failure_and_telegram_recovers(
    home: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("Back again."), Say("Still here."))
    daemon = DaemonProcess(home, telegram_run_config(llm, telegram, TELEGRAM_OWNER)).start()
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


@pytest.fixture
def service_logging() -> Iterator[None]:
    """The root logger and the libraries' levels put back as they were after the test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in CHATTY}
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


def reconnect_failure() -> None:
    """What discord.py does when the gateway answers its reconnect with an error page."""
    try:
        raise ConnectionError(f"502 Bad Gateway (error code: 0): {PAGE}")
    except ConnectionError:
        logging.getLogger("discord.client").exception("Attempting a reconnect in %.2fs", 1.0)


@pytest.mark.usefixtures("service_logging")
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
