"""Quiet pipes: every command that prints, its reader gone, stops without a word on stderr.

The commands come from the real argparse parser, so a new one is covered (or, when
it needs arguments, fails here until ``ARGS`` gives it some). Each runs twice in a
copy of one prepared home folder (a config, a database with a session, tool calls,
a job, a memory, a pairing code, a rule, an inbox message, a backup): once with its
output read, which shows it prints and what its own exit code is; once with stdout
a pipe whose reader has already closed. Exit code 141 (the shell's code for a
command ended by SIGPIPE), or the command's own failure code when it had finished
before the broken pipe was noticed. Runs use buffered output, as in a person's shell
(``PYTHONUNBUFFERED`` unset).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.approvals.store import ApprovalStore
from bot.cli.logs import setup_logging
from bot.cli.main import READER_GONE, build_parser
from bot.store.db import Database
from bot.store.owner_inbox import OwnerInbox
from bot.store.pairing import PairingStore
from tests.cli_helpers import PINCLAW, local_config, write_config
from tests.fake_llm import FakeLLM
from tests.test_logging import clean_logging

__all__ = ["clean_logging"]  # a fixture of test_logging, used here

SKIP: dict[tuple[str, ...], str] = {
    ("run",): "the daemon: runs until stopped, and logs on stderr, not stdout",
    ("sandbox-exec",): "serves one sandboxed command on the socket systemd hands it as fd 0",
}
"""Commands this test cannot run offline and unattended, with the reason."""

ARGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("agent",): ("-m", "what time is it?"),
    ("onboard",): ("--config", "{home}/other.toml", "--non-interactive", "--kind", "ollama",
                   "--skip-check"),
    ("pairing", "approve"): ("{code}",),
    ("pairing", "revoke"): ("telegram", "4242"),
    ("approvals", "revoke"): ("{rule}",),
    ("cron", "add"): ("tea", "--every", "2h", "--prompt", "make tea"),
    ("cron", "remove"): ("1",),
    ("cron", "run"): ("1",),
    ("cron", "pause"): ("1",),
    ("cron", "resume"): ("1",),
    ("triggers", "add"): ("parcel", "--on", "webhook", "--say", "A parcel: {{body}}"),
    ("triggers", "remove"): ("bell",),
    ("triggers", "test"): ("bell",),
    ("memory", "search"): ("tea",),
    ("memory", "add"): ("I like green tea",),
    ("memory", "forget"): ("tea",),
    ("memory", "export"): ("{home}/memory.md",),
    ("people", "unlink"): ("telegram:4242",),
    ("people", "rename"): ("#1", "Ada"),
    ("sessions", "show"): ("work",),
    ("sessions", "clear"): ("work",),
    ("db", "backup"): ("{home}/copy.db",),
    ("db", "restore"): ("{home}/backup.db",),
    ("service", "install"): ("--user", "--dry-run"),
    ("service", "uninstall"): ("--user", "--unit-dir", "{home}/units"),
    ("service", "status"): ("--user", "--unit-dir", "{home}/units"),
    ("completion",): ("bash",),
    ("config", "explain"): ("security",),
}  # fmt: skip
"""Arguments for the commands that need some; the others run bare."""

STDIN: dict[tuple[str, ...], str] = {("chat",): "/help\n"}
NOISE = ("Traceback", "BrokenPipeError", "Exception ignored", "--- Logging error ---")


def printing_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command line the parser accepts: each leaf, and each command whose action
    is optional (``pinclaw inbox``)."""
    found: list[tuple[str, ...]] = []
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers or not all(s.required for s in subparsers):
        found.append(path)
    for action in subparsers:
        for name, child in action.choices.items():
            found += printing_commands(child, (*path, name))
    return found


COMMANDS = [
    (),  # --help
    ("--version",),
    *(c for c in printing_commands(build_parser()) if c and c not in SKIP),
]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A home folder to copy for each run, and what it holds."""

    home: Path
    code: str
    rule: int


@pytest.fixture(scope="module")
def model() -> Iterator[FakeLLM]:
    with FakeLLM.running() as server:
        yield server


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, model: FakeLLM) -> Prepared:
    home = tmp_path_factory.mktemp("template") / "home"
    home.mkdir()
    write_config(home, local_config(model.url))
    for argv in (
        ("agent", "-m", "what time is it?"),
        ("agent", "-m", "what is 6*7?", "--session", "work"),
        ("cron", "add", "water", "--every", "1h", "--prompt", "water the plants"),
        ("triggers", "add", "bell", "--on", "webhook", "--say", "Ding: {body}"),
        ("memory", "add", "I like tea", "--key", "tea"),
        ("people", "link"),
        ("cron", "run", "1"),
        ("db", "backup", str(home / "backup.db")),
    ):
        done = cli(home, argv)
        assert done.returncode == 0, (argv, done.stderr)
    paired, code, rule = asyncio.run(_records(home / ".pinclaw" / "pinclaw.db"))
    done = cli(home, ("pairing", "approve", paired))
    assert done.returncode == 0, done.stderr
    return Prepared(home, code, rule)


async def _records(path: Path) -> tuple[str, str, int]:
    """Two pairing codes, an always-allow rule and an unread inbox message."""
    db = Database(path)
    await db.open()
    try:
        pairing, rules, inbox = PairingStore(db), ApprovalStore(db), OwnerInbox(db)
        for store in (pairing, rules, inbox):
            await store.setup()
        first = await pairing.request("telegram", "4242", "Eve", "4242")
        outcome = await pairing.request("telegram", "4343", "Bo", "4343")
        rule = await rules.add_rule("shell", "ls", "ls -l", "ada")
        await inbox.add("cron", "The plants are watered.")
    finally:
        await db.close()
    assert first.request is not None and outcome.request is not None
    return first.request.code, outcome.request.code, rule


def cli(
    home: Path, argv: tuple[str, ...], stdout: int = subprocess.PIPE, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``pinclaw ARGV`` with ``home`` as HOME and output buffered, as in a person's shell."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PINCLAW_", "OPENAI_")) and k != "PYTHONUNBUFFERED"
    }
    environ.update(HOME=str(home), TZ="UTC", XDG_CONFIG_HOME=str(home / ".config"))
    return subprocess.run(
        [str(PINCLAW), *argv],
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )


def fresh_copy(prepared: Prepared, where: Path) -> Path:
    home = where / "home"
    shutil.copytree(prepared.home, home, symlinks=True)
    return home


def argv_for(command: tuple[str, ...], prepared: Prepared, home: Path) -> tuple[str, ...]:
    values = {"home": str(home), "code": prepared.code, "rule": str(prepared.rule)}
    extra = ARGS.get(command, ("--help",) if not command else ())
    return (*command, *(word.format(**values) for word in extra))


def closed_reader() -> int:
    """The write end of a pipe whose read end is already closed."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "--help")
def test_a_reader_that_went_away_ends_the_command_quietly(
    command: tuple[str, ...], prepared: Prepared, tmp_path: Path
) -> None:
    stdin = STDIN.get(command, "")
    read_home = fresh_copy(prepared, tmp_path / "read")
    gone_home = fresh_copy(prepared, tmp_path / "gone")
    write = closed_reader()
    try:
        with ThreadPoolExecutor(2) as both:  # side by side: the two runs share nothing
            reading = both.submit(
                cli, read_home, argv_for(command, prepared, read_home), stdin=stdin
            )
            going = both.submit(
                cli, gone_home, argv_for(command, prepared, gone_home), write, stdin
            )
            read, gone = reading.result(), going.result()
    finally:
        os.close(write)
    assert read.stdout.strip(), f"`pinclaw {' '.join(command)}` printed nothing: {read.stderr}"
    assert not any(word in read.stderr for word in NOISE), read.stderr
    assert not any(word in gone.stderr for word in NOISE), gone.stderr
    own = read.returncode
    assert gone.returncode == READER_GONE or (own != 0 and gone.returncode == own), (
        gone.returncode,
        own,
        gone.stderr,
    )


def test_the_commands_come_from_the_parser() -> None:
    names = {" ".join(c) for c in COMMANDS}
    assert {"doctor", "status", "usage", "audit show", "inbox", "inbox clear"} <= names
    assert all(c in COMMANDS or c in SKIP for c in printing_commands(build_parser()) if c)


@pytest.mark.parametrize("command", [("doctor",), ("audit", "show"), ("usage",), ("status",)])
def test_piped_into_head(command: tuple[str, ...], prepared: Prepared, tmp_path: Path) -> None:
    home = fresh_copy(prepared, tmp_path)
    own = cli(home, command).returncode
    line = f"{PINCLAW} {' '.join(command)} | head -c 1; exit ${{PIPESTATUS[0]}}"
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    environ.update(HOME=str(home), TZ="UTC")
    done = subprocess.run(
        ["bash", "-c", line], check=False, capture_output=True, text=True, env=environ, timeout=120
    )
    assert len(done.stdout) == 1
    assert not any(word in done.stderr for word in NOISE), done.stderr
    assert done.returncode in {own, READER_GONE}, (done.returncode, own, done.stderr)


def test_a_reader_that_goes_away_mid_command_gets_141(prepared: Prepared, tmp_path: Path) -> None:
    """``doctor`` writes each line as its check ends: the pipe breaks while it runs, so
    whatever the checks would have said, the code is the pipe's."""
    home = fresh_copy(prepared, tmp_path)
    write = closed_reader()
    try:
        gone = cli(home, ("doctor",), stdout=write)
    finally:
        os.close(write)
    assert (gone.returncode, gone.stderr) == (READER_GONE, "")


def test_a_finished_failure_keeps_its_own_code(prepared: Prepared, tmp_path: Path) -> None:
    """``status`` with no daemon has said so and chosen 3 before the last flush fails."""
    home = fresh_copy(prepared, tmp_path)
    write = closed_reader()
    try:
        gone = cli(home, ("status",), stdout=write)
    finally:
        os.close(write)
    assert (gone.returncode, gone.stderr) == (3, "")


def test_log_lines_for_a_closed_stderr_are_dropped_quietly(
    prepared: Prepared, tmp_path: Path
) -> None:
    home = fresh_copy(prepared, tmp_path)
    write = closed_reader()
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    environ.update(HOME=str(home), TZ="UTC")
    logged = cli(home, ("--log-level", "debug", "usage"))
    assert logged.returncode == 0 and logged.stderr  # there is something to log
    try:
        done = subprocess.run(
            [str(PINCLAW), "--log-level", "debug", "usage"],
            stdout=subprocess.PIPE,
            stderr=write,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 0
    assert done.stdout.strip() and "Logging error" not in done.stdout


def test_the_stderr_handler_drops_a_line_its_reader_cannot_take(
    clean_logging: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = closed_reader()
    with open(write, "w", buffering=1, encoding="utf-8") as gone:
        monkeypatch.setattr(sys, "stderr", gone)
        setup_logging("info")
        seen = io.StringIO()
        monkeypatch.setattr(sys, "stderr", seen)  # where logging reports its own errors
        logging.getLogger("tests.pipes").warning("nobody reads this")
        assert seen.getvalue() == ""
        logging.getLogger("tests.pipes").warning("%d", "not a number")  # a real logging bug
        assert "--- Logging error ---" in seen.getvalue()
        with contextlib.suppress(BrokenPipeError):
            gone.close()
