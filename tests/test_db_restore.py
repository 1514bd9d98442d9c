"""``pinclaw db restore FILE`` puts a backup back; ``pinclaw --version``, ``status`` and
``doctor`` say which PinClaw this is, read from the package metadata only when asked for."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

from bot.cli.status import describe
from bot.core.version import pinclaw_version
from bot.daemon.run_lock import data_dir_lock
from bot.store.schema import COMPONENTS
from tests.cli_helpers import one_line, run
from tests.test_upgrade import FIXTURES, data_home, dump, sql, versions


async def test_restore_brings_the_copy_from_before_the_upgrade_back(tmp_path: Path) -> None:
    home, database = data_home(tmp_path, FIXTURES / "release-0.1.0.db")
    released = dump(database)
    upgraded = await asyncio.to_thread(run, home, "people", "rename", "2", "Benjamin")
    assert upgraded.returncode == 0, upgraded.stderr
    backup = database.parent / "backups" / f"pre-{pinclaw_version()}.db"
    assert backup.exists() and dump(database) != released

    done = await asyncio.to_thread(run, home, "db", "restore", str(backup))
    assert done.returncode == 0, done.stderr
    line = one_line(done.stdout)
    aside = next(database.parent.glob("pinclaw.db.replaced-*"))
    assert line == (
        f"Restored {backup} as the database {database} ({backup.stat().st_size // 4096} pages); "
        f"the database it replaced is kept as {aside}; PinClaw {pinclaw_version()} will "
        "upgrade it again when it next opens it."
    )
    assert dump(database) == released  # the release's own rows and versions, as they were
    assert sql(aside, "SELECT name FROM people WHERE id = 2") == [("Benjamin",)]
    assert backup.exists()  # restoring does not use the copy up


async def test_restore_refuses_what_it_cannot_put_back(tmp_path: Path) -> None:
    home, database = data_home(tmp_path, FIXTURES / f"release-{pinclaw_version()}.db")
    before = dump(database)

    def refused(*args: str) -> str:
        done = run(home, "db", "restore", *args)
        assert done.returncode == 1 and done.stdout == ""
        return one_line(done.stderr)

    newer = tmp_path / "newer.db"
    shutil.copyfile(database, newer)
    sql(newer, "UPDATE schema_versions SET version = version + 1 WHERE component = 'people'")
    said = await asyncio.to_thread(refused, str(newer))
    assert said == (
        f"pinclaw: {newer} was written by a newer PinClaw than this one ({pinclaw_version()}): "
        "this version does not know its people tables; install that version to restore it, "
        "or choose an older backup"
    )
    garbled = tmp_path / "garbled.db"
    garbled.write_bytes(database.read_bytes()[:4096] + b"\x13" * 8192)
    said = await asyncio.to_thread(refused, str(garbled))
    assert said.startswith(f"pinclaw: {garbled} cannot be restored: ")
    other = tmp_path / "other.db"
    sql(other, "CREATE TABLE t (x)")
    said = await asyncio.to_thread(refused, str(other))
    assert said == f"pinclaw: {other} is an SQLite database, but not one of PinClaw's"
    said = await asyncio.to_thread(refused, str(tmp_path / "absent.db"))
    assert said == f"pinclaw: there is no file {tmp_path / 'absent.db'}"

    good = tmp_path / "good.db"
    shutil.copyfile(FIXTURES / "release-0.1.0.db", good)
    with data_dir_lock(database.parent):  # as a running daemon holds it
        said = await asyncio.to_thread(refused, str(good))
    assert said.startswith("pinclaw: cannot restore the database: a PinClaw daemon (pid ")
    assert dump(database) == before
    assert versions(database) == {c.name: c.version for c in COMPONENTS}
    assert not list(database.parent.glob("pinclaw.db.*"))  # nothing set aside, nothing left


def test_the_version_comes_from_the_package_metadata_when_asked() -> None:
    from importlib.metadata import version

    assert pinclaw_version() == version("pinclaw")
    shown = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (shown.returncode, shown.stdout, shown.stderr) == (
        0,
        f"pinclaw {version('pinclaw')}\n",
        "",
    )
    helped = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot.cli.main", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert helped.returncode == 0
    assert "importlib.metadata" not in helped.stderr  # the cold start does not pay for it

    import bot

    assert bot.__version__ == version("pinclaw")


def test_status_says_when_the_daemon_runs_another_version_than_the_installed_one() -> None:
    report = {"ok": True, "version": "0.1.0", "uptime_s": 5, "pid": 7}
    lines = describe(report).splitlines()
    assert lines[:2] == [
        "PinClaw 0.1.0 running for 5s (pid 7)",
        f"Installed: PinClaw {pinclaw_version()}; restart the daemon to run it",
    ]
    current = describe({**report, "version": pinclaw_version()}).splitlines()
    assert not any(line.startswith("Installed:") for line in current)


async def test_doctor_says_when_the_daemon_runs_an_older_version() -> None:
    from aiohttp import web

    from bot.cli.doctor.remote import daemon
    from bot.config.web import WebConfig

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "version": "0.1.0", "channels": {}})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        found = await daemon(WebConfig(listen=f"127.0.0.1:{port}"))
    finally:
        await runner.cleanup()
    assert (found.status, found.text, found.fix) == (
        "warn",
        f"daemon: PinClaw 0.1.0 running, healthy (at http://127.0.0.1:{port})",
        f"restart it to run the installed {pinclaw_version()}",
    )
