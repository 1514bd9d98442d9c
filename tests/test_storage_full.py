"""A full data folder, said out loud: ``pinclaw run`` on a real, small tmpfs that the test fills.

The daemon runs in its own user and mount namespace (``unshare``, as root and
unprivileged alike) with a tmpfs of ``FOLDER_SIZE`` mounted on its data folder;
the test reaches that folder through ``/proc/PID/root`` to fill it and to free
it again. While it is full, ``/healthz`` is 503 with the reason, the metrics and
``pinclaw status`` show it, the owner is told once, and the message waits with
Telegram; once there is space it is answered exactly once and health is back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.daemon.storage import full_reason
from tests.cli_helpers import PINCLAW, run
from tests.daemon_harness import DaemonProcess, telegram_run_config, wait_until
from tests.fake_llm import FakeLLM, Say
from tests.fake_telegram import FakeTelegram
from tests.test_web import free_port

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
FOLDER_SIZE = "8m"
NOTICE = "I cannot save anything: my data folder"
MOUNT = 'mount -t tmpfs -o size={size},mode=0700 pinclaw-test "$0" && exec "$@"'


def in_namespace(folder: Path) -> list[str]:
    """A command prefix: a private tmpfs of ``FOLDER_SIZE`` on ``folder``, then the command."""
    script = MOUNT.format(size=FOLDER_SIZE)
    unshare = ["unshare", "--user", "--map-root-user", "--mount", "--"]
    return [*unshare, "sh", "-c", script, str(folder)]


@pytest.fixture(scope="module")
def namespaces() -> None:
    """Skip (saying why) when this kernel or container refuses the namespaces."""
    if shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is not installed")
    probe = subprocess.run(
        [*in_namespace(Path("/tmp")), "true"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        pytest.skip(f"the kernel refuses a user and mount namespace: {probe.stderr.strip()}")


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until the file system says it is full; the file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as file:
        for block in (1 << 16, 1 << 12, 1 << 9):
            with contextlib.suppress(OSError):
                while True:
                    file.write(b"\0" * block)
    with pytest.raises(OSError) as refused:
        (folder / "one more").write_bytes(b"\0" * 4096)
    assert refused.value.errno == errno.ENOSPC
    return filler


def inbox_inside(process: DaemonProcess) -> subprocess.CompletedProcess[str]:
    """``pinclaw inbox`` in the daemon's namespaces, where its data folder is the tmpfs."""
    assert process.proc is not None
    enter = ["nsenter", "-t", str(process.proc.pid), "-U", "-m", "--preserve-credentials", "--"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PINCLAW_", "OPENAI_"))}
    environ.update({"HOME": str(process.home), "TZ": "UTC"})
    return subprocess.run(
        [*enter, str(PINCLAW), "inbox"],
        check=False,
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def health(url: str) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(f"{url}/healthz", timeout=5)
    return answer.status_code, answer.json()


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    [value] = [line.split()[1] for line in text.splitlines() if line.split(" ")[0] == name]
    return float(value)


def texts(telegram: FakeTelegram) -> list[str]:
    return [sent.text for sent in telegram.sent(OWNER)]


@pytest.fixture
def daemon(
    namespaces: None, home: Path, tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> Iterator[tuple[DaemonProcess, Path, str]]:
    """``pinclaw run`` on a tmpfs data folder; its folder as the daemon sees it, and its URL."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    config = telegram_run_config(llm, telegram, owner=OWNER) + (
        f'\n[general]\ndata_dir = "{data}"\n\n[web]\nlisten = "127.0.0.1:{port}"\n'
    )
    process = DaemonProcess(home, config, wrap=in_namespace(data)).start()
    try:
        process.wait_log("telegram connected")
        process.wait_log("status endpoint on")
        assert process.proc is not None
        inside = Path(f"/proc/{process.proc.pid}/root") / data.relative_to("/")
        assert (inside / "pinclaw.db").exists() and not (data / "pinclaw.db").exists()
        yield process, inside, f"http://127.0.0.1:{port}"
    finally:
        assert process.terminate() == 0, process.log()
        assert "Traceback" not in process.log()


def test_a_full_data_folder_is_said_out_loud_and_the_message_waits(
    daemon: tuple[DaemonProcess, Path, str],
    home: Path,
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
) -> None:
    process, inside, url = daemon
    data = tmp_path / "data"
    assert health(url)[0] == 200
    assert metric(url, "pinclaw_storage_writable") == 1
    filler = fill(inside)

    llm.queue(Say("Here I am."))
    update = telegram.user_sends(OWNER, ADA, "are you there?")
    wait_until(lambda: health(url)[0] == 503, timeout=20)
    body = health(url)[1]
    assert body["ok"] is False
    assert body["storage"]["detail"] == f"data folder full: {data} (database or disk is full)"
    [notice] = telegram.wait_until(lambda: [t for t in texts(telegram) if NOTICE in t] or None)
    assert f"{NOTICE} {data} is full (database or disk is full)" in notice
    assert metric(url, "pinclaw_storage_full_total") == 1
    assert metric(url, "pinclaw_storage_writable") == 0
    status = run(home, "status")
    assert status.returncode == 1
    assert f"Storage: data folder full: {data} (database or disk is full) since " in status.stdout
    # Not stored, so not confirmed: Telegram keeps the message; the channel stays up.
    assert [u["update_id"] for u in telegram.pending_updates()] == [update["update_id"]]
    assert body["channels"]["telegram"]["restarts"] == 0
    assert body["channels"]["telegram"]["state"] == "connected"
    assert llm.requests == []

    filler.unlink()
    telegram.wait_until(lambda: "Here I am." in texts(telegram) or None, timeout=20)
    wait_until(lambda: health(url)[0] == 200, timeout=20)
    assert health(url)[1]["storage"] == {"ok": True, "detail": "", "since": None}
    assert metric(url, "pinclaw_storage_writable") == 1
    telegram.wait_confirmed(update)
    process.wait_log(f"writes to {data} work again")
    assert texts(telegram).count("Here I am.") == 1
    assert len([t for t in texts(telegram) if NOTICE in t]) == 1  # once, not once per write
    assert len(llm.requests) == 1
    assert "telegram stopped" not in process.log()
    inbox = inbox_inside(process)
    assert (inbox.returncode, inbox.stderr) == (0, "")
    assert inbox.stdout.startswith("No unread messages")


def test_a_notice_no_chat_takes_waits_in_the_owners_inbox(
    daemon: tuple[DaemonProcess, Path, str],
    home: Path,
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
) -> None:
    process, inside, url = daemon
    data = tmp_path / "data"
    filler = fill(inside)
    telegram.fail("sendMessage", 403, "Forbidden: bot was blocked by the user", times=10_000)
    llm.queue(Say("Back again."))
    update = telegram.user_sends(OWNER, ADA, "still there?")
    process.wait_log("did not take the full-disk notice")
    assert health(url)[0] == 503

    filler.unlink()
    process.wait_log("it is in the owner's inbox")
    telegram.clear_faults()
    telegram.wait_until(lambda: "Back again." in texts(telegram) or None, timeout=20)
    telegram.wait_confirmed(update)
    assert health(url)[0] == 200
    assert not [t for t in texts(telegram) if NOTICE in t]
    inbox = inbox_inside(process)
    assert inbox.returncode == 0, inbox.stderr
    assert f"{NOTICE} {data} is full (database or disk is full)" in inbox.stdout
    assert "(No chat could take this notice then; there is space again now.)" in inbox.stdout
    assert len(llm.requests) == 1


def test_writes_refused_for_lack_of_space_are_told_apart(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "small.db")) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.execute("PRAGMA max_page_count = 2")
        with pytest.raises(sqlite3.OperationalError) as full:
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 20_000,))
    assert full_reason(full.value) == "database or disk is full"
    quota = OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "audit.jsonl")
    assert full_reason(quota) == os.strerror(errno.EDQUOT).lower()
    try:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            raise RuntimeError("the audit log could not be written") from exc
    except RuntimeError as wrapped:
        assert full_reason(wrapped) == "no space left on device"
    assert full_reason(sqlite3.OperationalError("database is locked")) is None
    assert full_reason(OSError(errno.EACCES, "Permission denied")) is None


def test_stopping_while_the_folder_is_full_leaves_the_message_with_telegram(
    daemon: tuple[DaemonProcess, Path, str], llm: FakeLLM, telegram: FakeTelegram
) -> None:
    process, inside, url = daemon
    fill(inside)
    update = telegram.user_sends(OWNER, ADA, "anyone home?")
    wait_until(lambda: health(url)[0] == 503, timeout=20)
    assert process.terminate() == 0
    # Never stored, so never confirmed: Telegram sends it again to the next start.
    assert [u["update_id"] for u in telegram.pending_updates()] == [update["update_id"]]
    assert llm.requests == []
