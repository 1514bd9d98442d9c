"""``pinclaw db check | backup PATH | recover | restore FILE``: looking after the one SQLite file.

``check`` runs SQLite's full integrity check; ``backup`` copies the database
while the daemon runs; ``recover`` replaces a damaged database by what can be
read from it; ``restore`` puts a backup back (``backups/pre-<version>.db``, the
copy taken before each upgrade, or one ``backup`` made). ``recover`` and
``restore`` refuse while a daemon holds the data folder, and keep the database
they replace aside. The exit code is 0 when all is well, 1 when the database is
damaged or the work failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
from pathlib import Path

from bot.core.errors import UserError

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_db_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw db`` and its actions."""
    db = sub.add_parser(
        "db", parents=[common], help="check, back up, recover or restore the database"
    )
    actions = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    actions.add_parser("check", parents=[common], help="run SQLite's full integrity check")
    backup = actions.add_parser(
        "backup", parents=[common], help="copy the database to PATH (works while PinClaw runs)"
    )
    backup.add_argument("path", help="the new file")
    backup.add_argument("--force", action="store_true", help="replace PATH if it exists")
    actions.add_parser(
        "recover",
        parents=[common],
        help="replace a damaged database by what can be read from it (the damaged one stays)",
    )
    restore = actions.add_parser(
        "restore",
        parents=[common],
        help="put a backup back in place of the database (the current one stays aside)",
    )
    restore.add_argument("file", help="the backup, e.g. DATA_DIR/backups/pre-0.2.0.db")
    db.set_defaults(handler=run_db)


def run_db(args: argparse.Namespace) -> int:
    """Run ``pinclaw db ACTION``."""
    from bot.config import load_config

    loaded = load_config(getattr(args, "config", None))
    path = loaded.database
    if args.db_command == "restore":
        return _restore(loaded.data_dir, path, Path(args.file).expanduser())
    if not path.exists():
        raise UserError(f"there is no database yet at {path} (PinClaw creates it on first use)")
    if args.db_command == "check":
        return _check(path)
    if args.db_command == "backup":
        return _backup(path, Path(args.path).expanduser(), force=args.force)
    from bot.daemon.run_lock import data_dir_lock

    with data_dir_lock(loaded.data_dir, purpose="recover the database"):
        return _recover(path)


def _check(path: Path) -> int:
    from bot.store.db import damaged_message

    if problem := integrity_problem(path):
        print(f"pinclaw: {damaged_message(path, problem)}", file=sys.stderr)
        return 1
    print(f"{path}: OK (SQLite's integrity check found nothing wrong)")
    return 0


def integrity_problem(path: Path) -> str:
    """What SQLite's full integrity check finds wrong with ``path`` ("" when it is sound).

    It blocks (a large database on an SD card takes a while): ``pinclaw doctor``
    runs it in a thread.
    """
    from bot.store.db import check_findings, header_problem

    if problem := header_problem(path):
        return problem
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        ) as conn:
            found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return "" if found == ["ok"] else check_findings(found)


def _backup(path: Path, target: Path, *, force: bool) -> int:
    from bot.store.recover import backup

    if target.exists() and not force:
        raise UserError(f"{target} exists; choose another name or add --force to replace it")
    if target.resolve() == path.resolve():
        raise UserError("a backup cannot replace the database itself")
    target.unlink(missing_ok=True)
    try:
        pages = asyncio.run(asyncio.to_thread(backup, path, target))
    except sqlite3.Error as exc:
        target.unlink(missing_ok=True)
        raise UserError(f"the backup failed: {exc}") from None
    size = target.stat().st_size
    print(f"Backed up {path} to {target} ({pages} pages, {size / 1024:.0f} KiB).")
    return 0


def _recover(path: Path) -> int:
    from bot.store.recover import recover

    try:
        done = recover(path)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"the recovery failed: {exc}; {path} is unchanged") from None
    rows = sum(done.rows.values())
    print(f"Recovered {rows} rows in {len(done.rows)} tables into {path}, with {done.method}.")
    print(f"The damaged file is kept as {done.aside}.")
    if done.lost:
        print(f"Could not be saved: {', '.join(done.lost)}.")
    return 0


def _restore(data_dir: Path, path: Path, source: Path) -> int:
    from bot.daemon.run_lock import data_dir_lock
    from bot.store.restore import restore

    check_backup(source)
    if source.exists() and path.exists() and source.resolve() == path.resolve():
        raise UserError(f"{source} is the database itself; name a backup to restore")
    with data_dir_lock(data_dir, purpose="restore the database"):
        done = restore(source, path)
    kept = f"; the database it replaced is kept as {done.aside}" if done.aside else ""
    again = ""
    if done.older:
        from bot.core.version import pinclaw_version

        again = f"; PinClaw {pinclaw_version()} will upgrade it again when it next opens it"
    print(f"Restored {source} as the database {path} ({done.pages} pages){kept}{again}.")
    return 0


def check_backup(source: Path) -> None:
    """Refuse, in one line, a file that cannot be restored: missing, not a sound SQLite
    database, not PinClaw's, or written by a newer PinClaw than this one."""
    from bot.core.version import pinclaw_version
    from bot.store.restore import component_versions
    from bot.store.schema import newer

    if not source.is_file():
        raise UserError(f"there is no file {source}")
    if problem := integrity_problem(source):
        raise UserError(f"{source} cannot be restored: {problem}")
    try:
        versions = component_versions(source)
    except sqlite3.Error:
        raise UserError(f"{source} is an SQLite database, but not one of PinClaw's") from None
    if ahead := newer(versions):
        raise UserError(
            f"{source} was written by a newer PinClaw than this one ({pinclaw_version()}): "
            f"this version does not know its {', '.join(ahead)} tables; install that "
            "version to restore it, or choose an older backup"
        )
