"""The daemon's log: the file and its rotation, JSON lines, libraries' chatter, secrets,
and retries of an unreachable model (in the log, and as a short line in ``pinclaw chat``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.cli.logs import CHATTY, setup_daemon_logging
from bot.config import LoadedConfig, parse_config
from bot.daemon.app import redacted_logs
from bot.security.redact import MARK, Redactor
from tests.cli_helpers import local_config, one_line, run, write_config
from tests.daemon_harness import DaemonProcess, telegram_run_config, wait_until
from tests.fake_llm import Fail, FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.provider_cases import closed_port

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
SECRET = "sk-test-0123456789abcdefSECRET"

log = logging.getLogger("tests.logging")


@pytest.fixture
def clean_logging() -> Iterator[None]:
    """Put the root logger and the libraries' levels back as they were."""
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


def loaded_with(tmp_path: Path, **daemon: Any) -> LoadedConfig:
    """A config with these ``[daemon]`` keys and its data under ``tmp_path/state``."""
    raw = {"provider": {"kind": "ollama", "model": "m"}, "daemon": daemon}
    return LoadedConfig(parse_config(raw, {}), tmp_path / "config.toml", tmp_path / "state")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_log_file_rotates_at_max_bytes_and_keeps_only_the_backups(
    tmp_path: Path, clean_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = loaded_with(tmp_path, log_file="logs/pinclaw.log", log_max_bytes=1024, log_backups=2)
    path = setup_daemon_logging(loaded, "info")
    folder = tmp_path / "state" / "logs"
    assert path == folder / "pinclaw.log"
    assert capsys.readouterr().err == (
        f"pinclaw: logging to {path}; warnings and errors show here too\n"
    )
    for number in range(100):
        log.info("line %03d %s", number, "x" * 50)
    log.warning("the last line")
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["pinclaw.log", "pinclaw.log.1", "pinclaw.log.2"]
    files = [folder / name for name in names]
    assert all(f.stat().st_size <= 1024 for f in files)
    assert [mode(f) for f in files] == [0o600] * 3
    assert mode(folder) == 0o700
    text = "".join(f.read_text() for f in files)
    assert "line 099" in text and "line 000" not in text  # the oldest lines rotated away
    last = files[0].read_text().splitlines()[-1]
    assert last.endswith(" WARNING tests.logging: the last line")
    assert capsys.readouterr().err.endswith("WARNING tests.logging: the last line\n")


def test_json_lines_carry_time_level_logger_message_exception_and_extras(
    tmp_path: Path, clean_logging: None
) -> None:
    path = setup_daemon_logging(loaded_with(tmp_path, log_file="pinclaw.log", log_format="json"))
    assert path is not None
    log.info("turn done in %d ms", 42, extra={"chat": "telegram:7", "tokens": 12, "obj": object()})
    try:
        1 / 0  # noqa: B018 - raise something to log
    except ZeroDivisionError:
        log.exception("the heartbeat failed")
    first, second = [json.loads(line) for line in path.read_text().splitlines()]
    assert {k: first[k] for k in ("level", "logger", "message", "chat", "tokens")} == {
        "level": "INFO",
        "logger": "tests.logging",
        "message": "turn done in 42 ms",
        "chat": "telegram:7",
        "tokens": 12,
    }
    assert "obj" not in first and "exception" not in first
    when = datetime.fromisoformat(first["time"])
    assert when.utcoffset() == timedelta(0)
    assert abs((datetime.now(UTC) - when).total_seconds()) < 60
    assert second["level"] == "ERROR" and second["message"] == "the heartbeat failed"
    assert (
        second["exception"].startswith("Traceback") and "ZeroDivisionError" in second["exception"]
    )


@pytest.mark.parametrize("level", ["info", "debug"])
def test_scheduler_chatter_shows_only_at_debug(
    tmp_path: Path, clean_logging: None, level: str
) -> None:
    path = setup_daemon_logging(loaded_with(tmp_path, log_file="pinclaw.log"), level)
    assert path is not None

    async def schedule() -> None:
        scheduler = AsyncIOScheduler(timezone=UTC)
        scheduler.start()
        scheduler.add_job(print, "interval", hours=1, id="tick")
        scheduler.remove_job("tick")
        log.info("jobs scheduled")
        scheduler.shutdown(wait=False)

    asyncio.run(schedule())
    text = path.read_text()
    assert "INFO tests.logging: jobs scheduled" in text
    assert ("Added job" in text, "Removed job" in text) == (level == "debug",) * 2


def test_secrets_stay_out_of_messages_tracebacks_and_extras(
    tmp_path: Path, clean_logging: None
) -> None:
    loaded = loaded_with(tmp_path, log_file="pinclaw.log", log_format="json")
    path = setup_daemon_logging(loaded)
    assert path is not None
    with redacted_logs(Redactor([SECRET])):
        log.warning("the key %s was refused", SECRET, extra={"url": f"https://x/?key={SECRET}"})
        try:
            raise RuntimeError(f"GET https://x/?key={SECRET} failed")
        except RuntimeError:
            log.exception("a request failed")
    text = path.read_text()
    assert SECRET not in text
    first, second = [json.loads(line) for line in text.splitlines()]
    assert first["message"] == f"the key {MARK} was refused"
    assert first["url"] == f"https://x/?key={MARK}"
    assert f"GET https://x/?key={MARK} failed" in second["exception"]


def test_the_daemon_logs_each_retry_once_to_its_file_without_secrets(
    home: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_run_config(llm, telegram, OWNER).replace(
        "max_retries = 0\n", f'max_retries = 2\napi_key = "{SECRET}"\n'
    )
    config = config.replace(
        "[daemon]\n", '[daemon]\nlog_file = "logs/pinclaw.log"\nlog_format = "json"\n'
    )
    llm.queue(
        Fail(503, f"overloaded; key {SECRET} is fine", retry_after=0),
        Fail(503, f"overloaded; key {SECRET} is fine", retry_after=0),
        Say("Back again."),
    )
    path = home / ".pinclaw" / "logs" / "pinclaw.log"
    daemon = DaemonProcess(home, config).start()
    try:
        wait_until(lambda: path.exists() and "telegram connected" in path.read_text(), 30)
        telegram.user_sends(OWNER, ADA, "are you there?")
        telegram.wait_until(lambda: telegram.sent(OWNER) or None, timeout=30)
    finally:
        assert daemon.terminate() == 0
    assert [m.text for m in telegram.sent(OWNER)] == ["Back again."]
    text = path.read_text()
    assert SECRET not in text and SECRET not in daemon.log()
    records = [json.loads(line) for line in text.splitlines()]
    retries = [r for r in records if r["logger"] == "bot.providers.http"]
    assert [(r["level"], r["attempt"], r["max_retries"], r["delay_s"]) for r in retries] == [
        ("WARNING", 1, 2, 0),
        ("WARNING", 2, 2, 0),
    ]
    assert retries[0]["message"] == (
        f"openai:fake failed (openai:fake failed with a server error (HTTP 503): "
        f"overloaded; key {MARK} is fine); retry 1 of 2 in 0.0 s"
    )
    assert not any("Added job" in r["message"] for r in records)  # the heartbeat's job
    assert any(r["message"].startswith("heartbeat every") for r in records)
    assert mode(path) == 0o600
    stderr = daemon.log()
    assert f"pinclaw: logging to {path}; warnings and errors show here too" in stderr
    assert stderr.count("retry 1 of 2") == 1 and "telegram connected" not in stderr


def test_chat_says_model_unreachable_while_it_retries(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, "max_retries = 2\n"))
    llm.queue(Fail(503, "overloaded", retry_after=0), Fail(502, retry_after=0), Say("Back."))
    done = run(home, "chat", stdin="hello\n")
    assert (done.returncode, done.stdout) == (0, "Back.\n")
    assert done.stderr.splitlines() == [
        "model unreachable, retrying (1/2)…",
        "model unreachable, retrying (2/2)…",
    ]


def test_chat_retries_a_refused_connection_then_says_why_it_cannot_answer(home: Path) -> None:
    port = closed_port()
    write_config(home, local_config(f"http://127.0.0.1:{port}", "max_retries = 1\n"))
    done = run(home, "chat", stdin="hello\n")
    assert done.returncode == 0
    assert one_line(done.stderr) == "model unreachable, retrying (1/1)…"
    assert done.stdout.startswith(
        f"Sorry, I could not answer: cannot reach openai:local-model at http://127.0.0.1:{port}"
    )


def test_a_log_file_that_cannot_be_written_stops_the_start(home: Path) -> None:
    write_config(
        home, local_config("http://127.0.0.1:9", '[daemon]\nlog_file = "/proc/pinclaw/x.log"\n')
    )
    done = run(home, "run")
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        "pinclaw: daemon.log_file: cannot write the log to /proc/pinclaw/x.log: "
        "No such file or directory"
    )


def test_a_log_file_that_is_a_folder_is_a_config_error(home: Path) -> None:
    write_config(home, local_config("http://127.0.0.1:9", '[daemon]\nlog_file = "logs"\n'))
    (home / ".pinclaw" / "logs").mkdir()
    for command in (["run"], ["config", "check"]):
        done = run(home, *command)
        assert done.returncode == 2
        assert one_line(done.stderr) == (
            f"pinclaw: daemon.log_file: {home / '.pinclaw' / 'logs'} is a folder, not a file"
        )


def test_a_full_disk_under_the_log_file_is_said_once_not_per_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """/dev/full refuses every write with ENOSPC, as a full disk does: one notice on
    stderr (the journal, under systemd), no "--- Logging error ---" block per line."""
    from bot.cli.log_file import PrivateRotatingFileHandler

    handler = PrivateRotatingFileHandler("/dev/full", maxBytes=1 << 20, backupCount=1)
    logger = logging.getLogger("tests.logging.full")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for number in range(5):
            logger.warning("line %d", number)
    finally:
        logger.removeHandler(handler)
        with contextlib.suppress(OSError):  # its buffer holds what /dev/full refused
            handler.close()
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    assert err.count("cannot be written (no space left on its disk)") == 1, err
