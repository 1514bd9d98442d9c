"""Safe upgrades: every released database comes up to date, and a failed upgrade changes nothing.

``fixtures/release-<version>.db`` is a database as each release left it. 0.1.0's
was written with that release's own code by ``fixtures/make_release_db.py``;
from 0.2.0 on, ``fixtures/make_current_release_db.py`` writes one through the
current stores, at each release after the version bump (and ``pip install -e
.``)::

    python tests/fixtures/make_current_release_db.py

The tests over released schemas are driven by the files: the next release
only adds its file. A schema change after a release therefore needs a new
version (and its fixture): ``test_the_installed_release_opens_as_it_is`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.agent.history import HistoryStore
from bot.approvals.store import ApprovalStore
from bot.core.version import pinclaw_version
from bot.cron.store import CronStore
from bot.memory.store import MemoryStore
from bot.store.db import Database
from bot.store.owner_inbox import OwnerInbox
from bot.store.pairing import PairingStore
from bot.store.schema import COMPONENTS, behind
from bot.store.upgrade import MigrationFailed, statements
from bot.store.usage import UsageStore
from tests.cli_helpers import PINCLAW, run, write_config

FIXTURES = Path(__file__).parent / "fixtures"
RELEASES = sorted(FIXTURES.glob("release-*.db"))
ROOT = Path(__file__).parent.parent
CONFIG = '[provider]\nkind = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
Reader = Callable[[Database], Awaitable[int]]


def sql(path: Path, *statements: str) -> list[tuple[object, ...]]:
    """Run ``statements`` on ``path`` in autocommit and close it; the last one's rows."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        rows: list[tuple[object, ...]] = []
        for statement in statements:
            rows = conn.execute(statement).fetchall()
        return rows


def versions(path: Path) -> dict[str, int]:
    return {
        str(c): int(str(v)) for c, v in sql(path, "SELECT component, version FROM schema_versions")
    }


def dump(path: Path) -> list[str]:
    """Every table's definition and rows, as SQL text (the content, whatever the file's pages)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump())


def counts(path: Path) -> dict[str, int]:
    """Rows per plain table (the full-text indexes' own tables left out)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND name NOT LIKE '%fts%'"
            )
        ]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def data_home(tmp_path: Path, fixture: Path) -> tuple[Path, Path]:
    """A HOME with a config and ``fixture`` as its database; (home, database)."""
    home = tmp_path / "home"
    write_config(home, CONFIG)
    database = home / ".pinclaw" / "pinclaw.db"
    shutil.copyfile(fixture, database)
    sql(database, "PRAGMA journal_mode=WAL")  # as the release left it after running
    return home, database


async def _sessions(db: Database) -> int:
    history = HistoryStore(db)
    return len(await history.list_sessions())


async def _messages(db: Database) -> int:
    history = HistoryStore(db)
    return sum([len(await history.transcript(s.id)) for s in await history.list_sessions()])


async def _memories(db: Database) -> int:
    return await MemoryStore(db).count()


async def _people(db: Database) -> int:
    return len(await MemoryStore(db).people.all())


async def _paired(db: Database) -> int:
    return len(await PairingStore(db).paired())


async def _rules(db: Database) -> int:
    return len(await ApprovalStore(db).rules())


async def _jobs(db: Database) -> int:
    return len(await CronStore(db).jobs())


async def _runs(db: Database) -> int:
    return len(await CronStore(db).history(limit=1000))


async def _inbox(db: Database) -> int:
    return len(await OwnerInbox(db).latest(1000))


async def _tokens(db: Database) -> int:
    return await UsageStore(db).tokens_since(0)


READERS: dict[str, tuple[Reader, str]] = {
    "sessions": (_sessions, "SELECT count(*) FROM sessions"),
    "messages": (_messages, "SELECT count(*) FROM messages"),
    "memories": (_memories, "SELECT count(*) FROM memories"),
    "people": (_people, "SELECT count(*) FROM people"),
    "paired_users": (_paired, "SELECT count(*) FROM paired_users"),
    "approval_rules": (_rules, "SELECT count(*) FROM approval_rules"),
    "cron_jobs": (_jobs, "SELECT count(*) FROM cron_jobs"),
    "cron_runs": (_runs, "SELECT count(*) FROM cron_runs"),
    "owner_inbox": (_inbox, "SELECT count(*) FROM owner_inbox"),
    "model_calls": (_tokens, "SELECT SUM(input_tokens + output_tokens) FROM model_calls"),
}
"""How the current stores read each table, and what the file holds for it."""


def test_the_component_table_counts_every_migration() -> None:
    for component in COMPONENTS:
        assert len(component.steps()) == component.version, (
            f"{component.module} has {len(component.steps())} migrations: "
            f"raise {component.name}'s count in bot/store/schema.py"
        )
    migrated = set()
    for folder in ("bot", "channels", "tools"):
        for source in (ROOT / folder).rglob("*.py"):
            migrated |= set(re.findall(r'\.migrate\(\s*"(\w+)"', source.read_text()))
    assert migrated == {c.name for c in COMPONENTS}


def test_statements_end_where_sqlite_says() -> None:
    script = """
    CREATE TABLE a (x TEXT DEFAULT ';', y TEXT); -- a comment; with a semicolon
    CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE a SET y = 'x;y'; END;
    INSERT INTO a (x) VALUES ('it''s; fine')
    """
    found = statements(script)
    assert len(found) == 3  # the comment rides with the trigger; the last needs no ";"
    conn = sqlite3.connect(":memory:")
    for statement in found:
        conn.execute(statement)
    assert conn.execute("SELECT x, y FROM a").fetchall() == [("it's; fine", "x;y")]


@pytest.mark.parametrize("fixture", RELEASES, ids=lambda path: path.stem)
async def test_a_released_database_comes_up_to_date_with_every_row(
    tmp_path: Path, fixture: Path
) -> None:
    database = tmp_path / "data" / "pinclaw.db"
    database.parent.mkdir()
    shutil.copyfile(fixture, database)
    before, rows = dump(database), counts(database)
    was_behind = bool(behind(versions(fixture)))

    db = Database(database)
    await db.open("quick")
    try:
        now, current = versions(database), {c.name: c.version for c in COMPONENTS}
        # Every component the release had is current; one added since (a new store, no
        # table of an older one changed) is created when first used, like on a new install.
        assert {name: current[name] for name in now} == now
        assert set(versions(fixture)) <= set(now)
        if was_behind:
            assert now == current
        after = counts(database)
        del rows["schema_versions"]
        assert {t: after[t] for t in rows} == rows  # nothing lost, nothing made up
        for table, (read, sql) in READERS.items():
            if after.get(table):
                held = next(iter(await db.conn.execute_fetchall(sql)))[0]
                assert await read(db) == held, f"the stores read {table} wrongly"
        memory = MemoryStore(db)
        for key, scope, content in await db.conn.execute_fetchall(
            "SELECT key, scope, content FROM memories"
        ):
            found = await memory.get(str(key), [str(scope)])
            assert found is not None and found.content == content
    finally:
        await db.close()

    backup = database.parent / "backups" / f"pre-{pinclaw_version()}.db"
    if was_behind:
        assert dump(backup) == before  # the copy is the database as the release left it
    else:
        assert not backup.parent.exists()


async def test_the_installed_release_opens_as_it_is(tmp_path: Path) -> None:
    fixture = FIXTURES / f"release-{pinclaw_version()}.db"
    assert fixture.exists(), (
        f"no fixture for {pinclaw_version()}: run tests/fixtures/make_current_release_db.py"
    )
    assert versions(fixture) == {c.name: c.version for c in COMPONENTS}, (
        f"the schema changed after {pinclaw_version()}: raise the version in pyproject.toml, "
        "reinstall, and add its fixture with tests/fixtures/make_current_release_db.py"
    )
    database = tmp_path / "pinclaw.db"
    shutil.copyfile(fixture, database)
    before = dump(database)
    db = Database(database)
    await db.open("quick")
    try:
        for component in COMPONENTS:  # every store's setup, as the daemon's start does
            await db.migrate(component.name, component.steps())
    finally:
        await db.close()
    assert dump(database) == before
    assert not (tmp_path / "backups").exists()


async def test_first_tables_need_no_copy_and_a_half_done_step_changes_nothing(
    tmp_path: Path,
) -> None:
    database = tmp_path / "data" / "pinclaw.db"
    first = "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);"
    db = Database(database)
    await db.open()
    await db.migrate("notes", [first])  # a brand-new database: nothing to copy
    await db.conn.executemany("INSERT INTO notes (title) VALUES (?)", [("a",), ("b",), ("a",)])
    await db.conn.commit()
    await db.close()
    assert not (database.parent / "backups").exists()
    before, old = dump(database), sha(database)

    # Version 2 adds a column, fills it, then an index the rows violate: it fails half-way.
    second = """
    ALTER TABLE notes ADD COLUMN tag TEXT NOT NULL DEFAULT '';
    UPDATE notes SET tag = 'seen';
    CREATE UNIQUE INDEX notes_by_title ON notes (title);
    """
    db = Database(database)
    await db.open()
    with pytest.raises(MigrationFailed) as failed:
        await db.migrate("notes", [first, second])
    await db.close()

    backup = database.parent / "backups" / f"pre-{pinclaw_version()}.db"
    assert failed.value.backup == backup
    message = str(failed.value)
    assert "\n" not in message and str(backup) in message
    assert "step 2 of notes failed (UNIQUE constraint failed: notes.title)" in message
    assert sha(database) == old and dump(database) == before
    assert versions(database) == {"notes": 1}
    assert dump(backup) == before


async def test_a_failed_upgrade_undoes_every_component_and_names_the_copy(
    tmp_path: Path,
) -> None:
    home, database = data_home(tmp_path, FIXTURES / "release-0.1.0.db")
    # Left over by hand: the approvals upgrade (run after people and memory) needs the name.
    sql(database, "CREATE TABLE approval_rules_new (id INTEGER)")
    before, old, old_versions = dump(database), sha(database), versions(database)

    failed = await asyncio.to_thread(run, home, "people", "list")
    backup = database.parent / "backups" / f"pre-{pinclaw_version()}.db"
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr == (
        f"pinclaw: the database {database} could not be upgraded for PinClaw "
        f"{pinclaw_version()}: step 2 of approvals failed (table approval_rules_new already "
        "exists); nothing was changed, so the version used before still works with it, "
        f"and its copy from before the upgrade is {backup}\n"
    )
    assert sha(database) == old and dump(database) == before  # people and memory undone too
    assert versions(database) == old_versions
    assert dump(backup) == before

    sql(database, "DROP TABLE approval_rules_new")  # the owner clears the way, starts again
    again = await asyncio.to_thread(run, home, "people", "list")
    assert again.returncode == 0, again.stderr
    assert versions(database) == {c.name: c.version for c in COMPONENTS}
    assert dump(backup) == before  # the first copy is kept, not replaced


def test_no_upgrade_when_its_copy_cannot_be_made(tmp_path: Path) -> None:
    """A backups folder on a real, tiny tmpfs (its own user and mount namespace): full."""
    home, database = data_home(tmp_path, FIXTURES / "release-0.1.0.db")
    backups = database.parent / "backups"
    backups.mkdir()
    mount = 'mount -t tmpfs -o size=16k,mode=0700 pinclaw-test "$0" && exec "$@"'
    prefix = ["unshare", "--user", "--map-root-user", "--mount", "--", "sh", "-c", mount]
    if shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is not installed")
    probe = subprocess.run([*prefix, str(backups), "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"the kernel refuses a user and mount namespace: {probe.stderr!r}")
    old, old_versions = sha(database), versions(database)

    done = subprocess.run(
        [*prefix, str(backups), str(PINCLAW), "people", "list"],
        capture_output=True,
        text=True,
        env={"HOME": str(home), "TZ": "UTC", "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"pinclaw: the database {database} needs an upgrade for PinClaw {pinclaw_version()}, "
        "but the copy taken before it failed (database or disk is full); nothing was changed: "
        f"free some space on the disk of {backups} and start PinClaw again\n"
    )
    assert sha(database) == old and versions(database) == old_versions
    assert list(backups.iterdir()) == []  # under the tmpfs, as it was
