"""Backing up the database while PinClaw runs, and saving what can be read from a damaged one.

``backup`` uses SQLite's online backup API: a consistent copy even while the
daemon writes. ``recover`` builds a new database from a damaged one, with
SQLite's own ``.recover`` (the ``sqlite3`` program, package ``sqlite3``) when
it is installed, else by copying every table row by row and skipping what
cannot be read; then the damaged file is moved aside (never deleted) and the
new one takes its place. Both block: call them in a thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

RECOVER_TIMEOUT_S = 600
BATCH = 200
MAX_GUESS = 1_000_000  # row ids searched past the readable edge of a damaged table
_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass
class Recovery:
    """What ``recover`` did: where things are now, and how much came back."""

    method: str
    aside: Path
    rows: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)


def backup(source: Path, target: Path) -> int:
    """Copy ``source`` to ``target`` (a new file) while it may be in use; the pages copied."""
    with (
        contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)
        pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
        verdict = dst.execute("PRAGMA quick_check").fetchone()[0]
    if verdict != "ok":
        raise sqlite3.DatabaseError(f"the copy does not pass SQLite's quick check: {verdict}")
    os.chmod(target, 0o600)
    return pages


def recover(path: Path, *, sqlite_program: str | None = None) -> Recovery:
    """Replace the damaged ``path`` by what can be read from it; the damaged one stays aside."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = path.with_name(f"{path.name}.recovering")
    _remove(fresh)
    program = sqlite_program if sqlite_program is not None else shutil.which("sqlite3")
    recovery = Recovery("", path.with_name(f"{path.name}.damaged-{stamp}"))
    if program and _with_sqlite_program(program, path, fresh):
        recovery.method = "SQLite's .recover"
    else:
        _remove(fresh)
        recovery.method = "a row-by-row copy"
        _copy_readable(path, fresh, recovery)
    with contextlib.closing(sqlite3.connect(fresh)) as conn:
        recovery.rows = _row_counts(conn)
    os.chmod(fresh, 0o600)
    for suffix in ("", *_SIDE_FILES):
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.replace(Path(f"{recovery.aside}{suffix}"))
    fresh.replace(path)
    return recovery


def _with_sqlite_program(program: str, path: Path, fresh: Path) -> bool:
    """Run ``sqlite3 DAMAGED .recover`` into ``fresh``; False when that did not work."""
    try:
        dump = subprocess.run(
            [program, f"file:{path}?mode=ro", ".recover"],
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=RECOVER_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if dump.returncode != 0 or "CREATE TABLE" not in dump.stdout:
        return False
    try:
        with contextlib.closing(sqlite3.connect(fresh)) as conn:
            conn.executescript(dump.stdout)
    except (sqlite3.Error, UnicodeEncodeError):
        return False
    return True


def _copy_readable(path: Path, fresh: Path, recovery: Recovery) -> None:
    """Create every table again and copy the rows that can be read, table by table."""
    with (
        contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as src,
        contextlib.closing(sqlite3.connect(fresh)) as dst,
    ):
        try:
            schema = src.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
            ).fetchall()
        except sqlite3.DatabaseError:
            recovery.lost.append("the list of tables (nothing could be read)")
            return
        virtual = [name for kind, name, sql in schema if sql.upper().startswith("CREATE VIRTUAL")]
        for kind, name, sql in schema:
            shadow = any(name.startswith(f"{v}_") for v in virtual)
            if kind == "table" and not shadow and name not in virtual:
                with contextlib.suppress(sqlite3.Error):
                    dst.execute(sql)
                    _copy_rows(src, dst, name, recovery)
        for kind, name, sql in schema:  # indexes, searches rebuilt from the rows, triggers
            if kind in ("index", "view", "trigger") or name in virtual:
                try:
                    dst.execute(sql)
                    if name in virtual:
                        dst.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'rebuild\')')
                except sqlite3.Error:
                    if kind != "trigger":
                        recovery.lost.append(f"{kind} {name}")
        dst.commit()


def _copy_rows(
    src: sqlite3.Connection, dst: sqlite3.Connection, table: str, recovery: Recovery
) -> None:
    """Copy rows in row id order; where a stretch cannot be read, row by row through it."""
    quoted = table.replace('"', '""')
    select = f'SELECT rowid, * FROM "{quoted}" WHERE '
    low, high = _bounds(src, quoted)
    if high is None:
        recovery.lost.append(f"table {table}")
        return
    after, skipped = low - 1, 0
    while after < high:
        try:
            rows = src.execute(
                f"{select}rowid > ? AND rowid <= ? ORDER BY rowid LIMIT {BATCH}", (after, high)
            ).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            for rowid in range(after + 1, min(after + BATCH, high) + 1):
                try:
                    found = src.execute(f"{select}rowid = ?", (rowid,)).fetchall()
                except sqlite3.DatabaseError:
                    found = []
                rows += found
                skipped += not found
            after = min(after + BATCH, high)
        else:
            if not rows:
                break
            after = rows[-1][0]
        for row in rows:
            marks = ", ".join("?" * (len(row) - 1))
            with contextlib.suppress(sqlite3.Error):
                dst.execute(f'INSERT INTO "{quoted}" VALUES ({marks})', row[1:])
    if skipped:
        recovery.lost.append(f"up to {skipped} rows of table {table}")
    dst.commit()


def _bounds(src: sqlite3.Connection, quoted: str) -> tuple[int, int | None]:
    """The smallest and largest row id as far as they can be read (``high`` None: neither
    edge could be read; an empty table gives ``(0, -1)``)."""
    edges: list[int | None] = []
    failed = 0
    for query in (f'SELECT min(rowid) FROM "{quoted}"', f'SELECT max(rowid) FROM "{quoted}"'):
        try:
            value = src.execute(query).fetchone()[0]
        except sqlite3.DatabaseError:
            value, failed = None, failed + 1
        edges.append(None if value is None else int(value))
    low, high = edges
    if failed == 2:
        return 0, None
    if low is None and high is None:
        return 0, -1  # empty
    if low is None:  # the first rows are damaged: search up to the last one
        return 0, high
    return low, high if high is not None else low + MAX_GUESS


def _row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    counts: dict[str, int] = {}
    for name in names:
        with contextlib.suppress(sqlite3.Error):
            quoted = name.replace('"', '""')
            counts[name] = int(conn.execute(f'SELECT count(*) FROM "{quoted}"').fetchone()[0])
    return counts


def _remove(path: Path) -> None:
    for suffix in ("", *_SIDE_FILES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
