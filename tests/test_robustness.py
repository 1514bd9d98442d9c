"""Bad state and bad input, met the way a person meets them: through the real ``pinclaw``.

A damaged database (garbage, or pages overwritten as a power cut on an SD card
leaves them), a second daemon on the same data folder, a config that names a
file as its data folder or nests too deep, Ctrl-C while a reply is coming,
a too-long or broken message, and the exit codes: every one ends in one line
on stderr and a prompt exit, never a traceback or a hang.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_helpers import PINCLAW, local_config, one_line, run, write_config
from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_llm import FakeLLM, Say, Stall
from tests.fake_telegram import FakeTelegram

PAGE = 4096


@dataclass
class Timed:
    """A finished command: its exit code, output, and how long it lived after its last word."""

    code: int
    stdout: str
    stderr: str
    lingered_s: float


def run_timed(home: Path, *args: str, env: dict[str, str] | None = None) -> Timed:
    """Run ``pinclaw ARGS``; measure from its last output to its exit."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PINCLAW_", "OPENAI_"))}
    environ.update({"HOME": str(home), "TZ": "UTC", **(env or {})})
    proc = subprocess.Popen(
        [str(PINCLAW), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
    )
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    last = [time.monotonic()]

    def follow(name: str, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            chunks[name].append(line)
            last[0] = time.monotonic()

    readers = [
        threading.Thread(target=follow, args=("out", proc.stdout)),
        threading.Thread(target=follow, args=("err", proc.stderr)),
    ]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    exited = time.monotonic()
    for reader in readers:
        reader.join()
    return Timed(
        code,
        b"".join(chunks["out"]).decode(errors="replace"),
        b"".join(chunks["err"]).decode(errors="replace"),
        exited - last[0],
    )


@pytest.fixture
def configured(home: Path) -> Path:
    return write_config(home, local_config("http://127.0.0.1:9"))


def fill_database(home: Path, llm: FakeLLM) -> Path:
    """A real database from a real turn, plus a table big enough to damage in the middle."""
    write_config(home, local_config(llm.url))
    llm.queue(Say("Hello."))
    assert run(home, "agent", "-m", "hi").returncode == 0
    path = home / ".pinclaw" / "pinclaw.db"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany(
            "INSERT INTO notes (body) VALUES (?)", [(f"note {i} " * 12,) for i in range(3000)]
        )
    return path


def damage_pages(path: Path, *pages: int) -> None:
    """Overwrite the middle of some pages, as a write cut short leaves them."""
    data = bytearray(path.read_bytes())
    for page in pages:
        data[page * PAGE + 100 : (page + 1) * PAGE - 100] = b"Z" * (PAGE - 200)
    path.write_bytes(bytes(data))


DAMAGED = "is damaged ("
RECOVER = "run `pinclaw db recover` to save what can be read into a new file"


@pytest.mark.parametrize(
    "args",
    [
        ("cron", "list"),
        ("memory", "list"),
        ("approvals", "list"),
        ("pairing", "list"),
        ("agent", "-m", "hello"),
        ("db", "check"),
    ],
)
def test_a_database_that_is_not_one_gets_one_line_and_a_prompt_exit(
    home: Path, configured: Path, args: tuple[str, ...]
) -> None:
    database = home / ".pinclaw" / "pinclaw.db"
    database.parent.mkdir(parents=True, exist_ok=True)
    database.write_bytes(os.urandom(20_000))
    done = run_timed(home, *args)
    assert done.code == 1, done.stderr
    line = one_line(done.stderr)
    assert line.startswith(
        f"pinclaw: the database {database} {DAMAGED}it is not an SQLite database)"
    )
    assert RECOVER in line
    assert done.lingered_s < 5


def test_the_daemon_checks_the_database_and_recover_saves_what_can_be_read(
    home: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    database = fill_database(home, llm)
    with contextlib.closing(sqlite3.connect(database)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'notes'").fetchone()
    # Three of the notes table's leaf pages (page numbers count from 1, offsets from 0):
    # where they are does not depend on how many tables PinClaw made before it.
    damage_pages(database, root + 10, root + 11, root + 40)
    config = telegram_run_config(llm, telegram, owner=7001)
    daemon = DaemonProcess(home, config).start()
    code = daemon.proc.wait(timeout=30) if daemon.proc else None
    assert code == 1
    errors = [line for line in daemon.lines if line.startswith("pinclaw:")]
    assert len(errors) == 1 and "Traceback" not in daemon.log()
    assert f"the database {database} {DAMAGED}SQLite's check found: " in errors[0]
    checked = run(home, "db", "check")
    assert checked.returncode == 1 and DAMAGED in one_line(checked.stderr)

    recovered = run(home, "db", "recover")
    assert recovered.returncode == 0, recovered.stderr
    aside = next(database.parent.glob("pinclaw.db.damaged-*[0-9]"))
    assert f"The damaged file is kept as {aside}." in recovered.stdout
    with sqlite3.connect(database) as conn:
        kept = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert 2500 < kept < 3000  # most rows, not the ones on the damaged pages
    assert run(home, "db", "check").returncode == 0
    llm.queue(Say("Still here."))
    again = run(home, "agent", "-m", "are you there?")
    assert (again.returncode, again.stdout) == (0, "Still here.\n")


def test_a_backup_is_a_sound_copy_and_never_overwrites_by_accident(
    home: Path, llm: FakeLLM, tmp_path: Path
) -> None:
    fill_database(home, llm)
    target = tmp_path / "backup.db"
    done = run(home, "db", "backup", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Backed up {home / '.pinclaw' / 'pinclaw.db'} to {target} (")
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 3000
    again = run(home, "db", "backup", str(target))
    assert again.returncode == 1
    assert one_line(again.stderr) == (
        f"pinclaw: {target} exists; choose another name or add --force to replace it"
    )
    assert run(home, "db", "backup", str(target), "--force").returncode == 0


def test_a_second_daemon_on_the_same_data_folder_refuses_to_start(
    home: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_run_config(llm, telegram, owner=7001)
    first = DaemonProcess(home, config).start()
    try:
        first.wait_log("telegram connected")
        second = run_timed(home, "run")
        assert second.code == 1
        assert one_line(second.stderr) == (
            f"pinclaw: cannot start: a PinClaw daemon (pid {first.proc.pid if first.proc else 0}) "
            f"is already running with {home / '.pinclaw'}; stop it first "
            "(systemctl --user stop pinclaw, or Ctrl-C where it runs)"
        )
        assert second.lingered_s < 5
        listed = run(home, "cron", "list")  # reading still works beside it
        assert listed.returncode == 0, listed.stderr
        recover = run(home, "db", "recover")
        assert recover.returncode == 1 and "cannot recover the database" in recover.stderr
    finally:
        assert first.terminate() == 0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[general]\ndata_dir = "{file}"\n', "general.data_dir: {file} is a file, not a folder"),
        (
            '[general]\ndata_dir = "{file}/state"\n',
            "general.data_dir: {file}/state cannot be created: {file} is a file, not a folder",
        ),
        (
            '[security]\naudit_log = "workspace"\n',
            "security.audit_log: {data}/workspace is PinClaw's own workspace folder",
        ),
        (
            "[general]\nx = " + "[" * 3000 + "]" * 3000 + "\n",
            "{config}: values are nested too deeply to read",
        ),
        (
            "[tools]\nx = " + "[" * 40 + "]" * 40 + "\n",
            "{config}: tools.x[0][0][0][0][0][0][0][0][0][0][0]…: nested more than 32 levels deep",
        ),
    ],
    ids=[
        "data-dir-is-a-file",
        "data-dir-under-a-file",
        "audit-log-is-a-folder",
        "too-deep-to-read",
        "too-deep",
    ],
)
def test_a_config_that_cannot_work_stops_every_command_with_one_line(
    home: Path, tmp_path: Path, body: str, expected: str
) -> None:
    file = tmp_path / "just-a-file"
    file.write_text("x")
    config = write_config(home, local_config("http://127.0.0.1:9") + body.format(file=file))
    message = expected.format(file=file, data=home / ".pinclaw", config=config)
    for args in (("config", "check"), ("cron", "list"), ("agent", "-m", "hi")):
        done = run_timed(home, *args)
        assert (done.code, one_line(done.stderr)) == (2, f"pinclaw: {message}"), args
        assert done.lingered_s < 5


def test_a_config_file_too_large_to_be_one_is_refused(home: Path) -> None:
    config = write_config(
        home, local_config("http://127.0.0.1:9") + "# " + "x" * (1024 * 1024) + "\n"
    )
    done = run(home, "config", "check")
    assert done.returncode == 2
    assert one_line(done.stderr).endswith("a config file is at most 1,048,576")
    assert one_line(done.stderr).startswith(f"pinclaw: {config}: the file is ")


@pytest.mark.parametrize("command", [("chat",), ("agent", "-m", "tell me a long story")])
def test_ctrl_c_while_a_reply_is_coming_cancels_cleanly(
    home: Path, llm: FakeLLM, command: tuple[str, ...]
) -> None:
    write_config(home, local_config(llm.url))
    llm.queue(Stall(30))
    environ = {**os.environ, "HOME": str(home), "TZ": "UTC"}
    proc = subprocess.Popen(
        [str(PINCLAW), *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    assert proc.stdin is not None
    if command == ("chat",):
        proc.stdin.write("tell me a long story\n")
        proc.stdin.flush()
    deadline = time.monotonic() + 20
    while not llm.requests and time.monotonic() < deadline:  # the turn is under way
        time.sleep(0.02)
    assert llm.requests
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert err == "pinclaw: cancelled\n"
    assert "Traceback" not in out and "went wrong" not in out


def test_a_message_with_a_broken_character_is_answered(home: Path, llm: FakeLLM) -> None:
    write_config(home, local_config(llm.url))
    llm.queue(Say("Answered."))
    environ = {**os.environ, "HOME": str(home), "TZ": "UTC"}
    # A byte that is not UTF-8 reaches Python as a lone surrogate (surrogateescape).
    done = subprocess.run(
        [os.fsencode(PINCLAW), b"agent", b"-m", b"caf\xe9 ?"],
        capture_output=True,
        env=environ,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"Answered.\n", b"")
    said = llm.requests[-1].body["messages"][-1]["content"]
    assert "caf\ufffd ?" in said


def test_a_message_over_the_limit_is_refused_before_the_model_sees_it(
    home: Path, llm: FakeLLM
) -> None:
    write_config(home, local_config(llm.url, "[daemon]\nmax_message_bytes = 1000\n"))
    done = run(home, "agent", "-m", "x" * 5000)
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        "pinclaw: That message is too long for me: 4.9 KiB, and I read at most 1.0 KiB at "
        "once. Please send a shorter one, or split it up. ([daemon] max_message_bytes)"
    )
    assert llm.requests == []


def test_exit_codes_mean_the_same_everywhere(home: Path, configured: Path) -> None:
    bare = run(home)
    assert bare.returncode == 0 and "usage: pinclaw" in bare.stdout and bare.stderr == ""
    for schedule in (("--cron", "61 * * * *"), ("--every", "soon"), ("--at", "yesterday")):
        bad = run_timed(home, "cron", "add", "water", *schedule, "--prompt", "water the plants")
        assert bad.code == 2, (schedule, bad.stderr)
        assert one_line(bad.stderr).startswith("pinclaw: ")
    fresh = run(home, "audit", "verify")
    assert fresh.returncode == 0
    assert fresh.stdout.endswith("no audit log yet (no tool has been called), nothing to verify\n")
    assert run(home, "audit", "show").returncode == 0
    missing = run(home, "audit", "verify", str(home / "nope.jsonl"))
    assert (missing.returncode, one_line(missing.stderr)) == (
        2,
        f"pinclaw: there is no file {home / 'nope.jsonl'}",
    )
    unknown = run(home, "no-such-command")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_no_failing_command_outlives_its_error_by_more_than_5_seconds(
    home: Path, tmp_path: Path
) -> None:
    """Each way to fail, timed from the error line to the exit."""
    database = home / ".pinclaw" / "pinclaw.db"
    write_config(home, local_config("http://127.0.0.1:9"))
    database.write_bytes(b"SQLite format 3\x00" + os.urandom(20_000))
    cases = [
        ("cron", "list"),
        ("agent", "-m", "hi"),
        ("memory", "search", "x"),
        ("db", "backup", str(tmp_path / "b.db")),
        ("run",),
        ("chat",),
        ("config", "check", str(tmp_path / "missing.toml")),
    ]
    for args in cases:
        done = run_timed(home, *args)
        assert done.code != 0, args
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.lingered_s < 5, (args, done.lingered_s)
